package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/prober"
	"github.com/classic-kubelet/kubelet/pkg/probe"
)

// runHook runs a lifecycle handler: exec in the container, HTTP GET to the
// pod, or a sleep.
func (m *Manager) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID, podIP string, h *v1.LifecycleHandler) error {
	timeout := time.Until(deadlineOr(ctx, time.Now().Add(postStartTimeout)))
	switch {
	case h.Exec != nil:
		code, out, err := m.runtime.Exec(ctx, containerID, h.Exec.Command, timeout)
		if err != nil {
			return err
		}
		if code != 0 {
			return fmt.Errorf("exec %v exited %d: %s", h.Exec.Command, code, probe.Truncate(strings.TrimSpace(string(out))))
		}
		return nil
	case h.HTTPGet != nil:
		u, header, err := prober.HTTPTarget(h.HTTPGet, c, podIP)
		if err != nil {
			return err
		}
		r, out, err := m.hookHTTP.Probe(ctx, u, header, timeout)
		if err != nil {
			return err
		}
		if r == probe.Failure { // a redirect not followed (Warning) is no failure
			return fmt.Errorf("GET %s: %s", u, out)
		}
		return nil
	case h.Sleep != nil:
		select {
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
		case <-ctx.Done():
		}
		return nil
	}
	return errors.New("hook has no action")
}

func deadlineOr(ctx context.Context, def time.Time) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return def
}
