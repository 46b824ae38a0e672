// Package grpc probes with the standard gRPC health service
// (grpc.health.v1.Health/Check): SERVING is success. Every failure is a
// probe failure (never an error), worded as the kubelet's gRPC prober
// words it (pkg/probe/grpc/grpc.go), since its output is what the
// Unhealthy event says.
package grpc

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/classic-kubelet/kubelet/pkg/probe"
)

// Probe asks addr's health service about service within timeout. As the
// kubelet's prober, which dials and waits for the connection: the check
// waits for the connection to be ready, so a server that does not answer
// fails once timeout has passed, as not connected.
func Probe(ctx context.Context, addr, service string, timeout time.Duration) (probe.Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return probe.Failure, fmt.Sprintf("error: failed to connect service at %q: %+v", addr, err), nil
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.WaitForReady(true))
	if err != nil {
		return probe.Failure, failure(err, addr, timeout, conn.GetState() == connectivity.Ready), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return probe.Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus().String()), nil
	}
	return probe.Success, "service healthy", nil
}

// failure is the kubelet's output for a failed check: the health service
// not implemented, the connection not made within the timeout (connected:
// it was), the call not answered within it, or another error.
func failure(err error, addr string, timeout time.Duration, connected bool) string {
	st, _ := status.FromError(err)
	switch {
	case st.Code() == codes.Unimplemented:
		return fmt.Sprintf("error: this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", st.Message())
	case st.Code() == codes.DeadlineExceeded && !connected:
		return fmt.Sprintf("timeout: failed to connect service %q within %v: %+v", addr, timeout, context.DeadlineExceeded)
	case st.Code() == codes.DeadlineExceeded:
		return fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)
	}
	return fmt.Sprintf("error: health rpc probe failed: %+v", err)
}
