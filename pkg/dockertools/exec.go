package dockertools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	"k8s.io/klog/v2"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// maxExecOutput caps what Exec keeps of a command's output.
const maxExecOutput = 64 << 10

// Exec runs cmd in a running container and returns its exit code and output
// (stdout and stderr, capped). Docker cannot kill an exec, so when cmd
// outlives timeout the agent kills its process itself (by the host PID Docker
// reports, when it may) and returns kubecontainer.ErrExecTimeout at the
// timeout either way. A timeout of 0 means none.
func (c *Client) Exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (int, []byte, error) {
	cctx, cancel := short(ctx)
	var ex *docker.Exec
	err := c.learningVersion(func() (err error) {
		ex, err = c.c.CreateExec(docker.CreateExecOptions{
			Container: containerID, Cmd: cmd, AttachStdout: true, AttachStderr: true, Context: cctx,
		})
		return err
	})
	cancel()
	if err != nil {
		return 0, nil, fmt.Errorf("create exec in %s: %w", kubecontainer.ShortID(containerID), translate(err))
	}
	out := &cappedBuffer{max: maxExecOutput}
	// The hijacked start takes no context: Close ends it. A process the
	// agent may not kill (a remote daemon) keeps running in its container,
	// but the caller is never held past its timeout.
	cw, err := c.c.StartExecNonBlocking(ex.ID, docker.StartExecOptions{OutputStream: out, ErrorStream: out})
	if err != nil {
		return 0, nil, fmt.Errorf("run exec in %s: %w", kubecontainer.ShortID(containerID), translate(err))
	}
	done := make(chan error, 1)
	go func() { done <- cw.Wait() }()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	select {
	case err := <-done:
		if err != nil {
			return 0, out.Bytes(), fmt.Errorf("run exec in %s: %w", kubecontainer.ShortID(containerID), translate(err))
		}
	case <-timer:
		c.killExec(containerID, ex.ID, "it timed out")
		_ = cw.Close()
		<-done
		return 0, out.Bytes(), kubecontainer.ErrExecTimeout
	case <-ctx.Done():
		c.killExec(containerID, ex.ID, "its caller went away")
		_ = cw.Close()
		<-done
		return 0, out.Bytes(), ctx.Err()
	}
	insp, err := c.c.InspectExec(ex.ID)
	if err != nil {
		return 0, out.Bytes(), fmt.Errorf("inspect exec in %s: %w", kubecontainer.ShortID(containerID), translate(err))
	}
	return insp.ExitCode, out.Bytes(), nil
}

// killExec kills an exec's process, if it still runs; why it is killed is
// logged when it may not be. go-dockerclient's ExecInspect has no Pid, so
// the exec is inspected through the client's own HTTP transport. The PID Docker reports is in the daemon's PID
// namespace: it is killed only when the daemon is on this host's unix
// socket and the process is in the container's cgroup, so a remote daemon
// (or one in another namespace) never makes the agent kill a host process.
func (c *Client) killExec(containerID, id, why string) {
	u, err := url.Parse(c.c.Endpoint())
	if err != nil || u.Scheme != "unix" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ShortTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.rawURL("/exec/"+id+"/json"), nil)
	if err != nil {
		return
	}
	resp, err := c.c.HTTPClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	var insp struct {
		Running bool
		Pid     int
	}
	if json.NewDecoder(resp.Body).Decode(&insp) != nil || !insp.Running || insp.Pid <= 0 {
		return
	}
	if !inContainerCgroup(insp.Pid, containerID) {
		klog.Errorf("Exec %s in %s: %s; not killing PID %d: it is not in the container's cgroup", kubecontainer.ShortID(id), kubecontainer.ShortID(containerID), why, insp.Pid)
		return
	}
	_ = syscall.Kill(insp.Pid, syscall.SIGKILL)
}

// inContainerCgroup reports whether a host process belongs to a container:
// its cgroup paths name the container's ID (cgroupfs "/docker/<id>" and
// systemd "docker-<id>.scope" alike).
func inContainerCgroup(pid int, containerID string) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	return err == nil && len(containerID) >= 12 && strings.Contains(string(data), containerID)
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
		} else {
			b.buf.Write(p)
		}
	}
	return len(p), nil
}

func (b *cappedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]byte(nil), b.buf.Bytes()...)
}
