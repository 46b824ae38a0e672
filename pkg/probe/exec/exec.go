// Package exec probes by running a command in the container: exit 0 is
// success.
package exec

import (
	"context"
	"errors"
	"fmt"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/probe"
)

// ErrTimeout is what an Execer returns when the command outlived its
// timeout (and was killed): the runtimes' own error.
var ErrTimeout = kubecontainer.ErrExecTimeout

// Execer runs a command in a container, killing it if it outlives timeout.
type Execer interface {
	Exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (exitCode int, output []byte, err error)
}

// Probe runs cmd in the container.
func Probe(ctx context.Context, e Execer, containerID string, cmd []string, timeout time.Duration) (probe.Result, string, error) {
	code, out, err := e.Exec(ctx, containerID, cmd, timeout)
	if errors.Is(err, ErrTimeout) {
		return probe.Failure, fmt.Sprintf("command timed out after %v", timeout), nil
	}
	if err != nil {
		return probe.Failure, "", err
	}
	if code != 0 {
		return probe.Failure, probe.Truncate(string(out)), nil
	}
	return probe.Success, probe.Truncate(string(out)), nil
}
