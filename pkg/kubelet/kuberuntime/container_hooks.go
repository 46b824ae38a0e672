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
// pod, or a sleep. A failure is worded as the kubelet's handler runner
// words it (hookFailure): it becomes a failed postStart hook's
// PostStartHookError message.
func (m *Manager) runHook(ctx context.Context, pod *v1.Pod, c *v1.Container, containerID, podIP string, h *v1.LifecycleHandler) error {
	timeout := time.Until(deadlineOr(ctx, time.Now().Add(postStartTimeout)))
	switch {
	case h.Exec != nil:
		code, out, err := m.runtime.Exec(ctx, containerID, h.Exec.Command, timeout)
		if err == nil && code != 0 {
			err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), code, probe.Truncate(string(out)))
		}
		if err != nil {
			return hookFailure(pod, c, h, err, probe.Truncate(string(out)))
		}
		return nil
	case h.HTTPGet != nil:
		u, header, err := prober.HTTPTarget(h.HTTPGet, c, podIP)
		if err != nil {
			return hookFailure(pod, c, h, err, "")
		}
		r, out, err := m.hookHTTP.Probe(ctx, u, header, timeout)
		if err == nil && r == probe.Failure { // a redirect not followed (Warning) is no failure
			err = fmt.Errorf("GET %s: %s", u, out)
		}
		if err != nil {
			return hookFailure(pod, c, h, err, "")
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

// hookFailure words a failed lifecycle handler as the kubelet's handler
// runner does (pkg/kubelet/lifecycle/handlers.go, Run): the exec hook's
// command, its error and its output; the HTTP hook's path and its error.
// Docker gives an exec's stdout and stderr as one stream: the error holds
// both where the kubelet's holds stderr alone.
func hookFailure(pod *v1.Pod, c *v1.Container, h *v1.LifecycleHandler, err error, output string) error {
	who := fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
	if h.Exec != nil {
		return fmt.Errorf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %w, message: %q", h.Exec.Command, c.Name, who, err, output)
	}
	path := ""
	if h.HTTPGet != nil {
		path = h.HTTPGet.Path
	}
	return fmt.Errorf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %w", path, c.Name, who, err)
}

func deadlineOr(ctx context.Context, def time.Time) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return def
}
