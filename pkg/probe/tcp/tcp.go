// Package tcp probes by opening a TCP connection.
package tcp

import (
	"context"
	"net"
	"time"

	"github.com/classic-kubelet/kubelet/pkg/probe"
)

// Probe connects to addr ("host:port") within timeout.
func Probe(ctx context.Context, addr string, timeout time.Duration) (probe.Result, string, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return probe.Failure, err.Error(), nil
	}
	_ = conn.Close()
	return probe.Success, "", nil
}
