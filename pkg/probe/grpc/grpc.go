// Package grpc probes with the standard gRPC health service
// (grpc.health.v1.Health/Check): SERVING is success.
package grpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/classic-kubelet/kubelet/pkg/probe"
)

// Probe asks addr's health service about service within timeout.
func Probe(ctx context.Context, addr, service string, timeout time.Duration) (probe.Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return probe.Failure, "", fmt.Errorf("grpc client for %s: %w", addr, err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		if s, ok := status.FromError(err); ok && s.Code() == codes.Unimplemented {
			return probe.Failure, "the server does not implement the grpc health protocol", nil
		}
		return probe.Failure, err.Error(), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return probe.Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus()), nil
	}
	return probe.Success, "", nil
}
