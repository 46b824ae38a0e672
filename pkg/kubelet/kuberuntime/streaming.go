package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Logs streams a container's output. The API reaches the runtime only
// through the Manager, so its calls are measured like the agent's own.
// LimitBytes is applied here, as the kubelet applies it over the runtime's
// log files: Docker's logs API has no such bound. The stream ends once the
// bound is reached, following or not.
func (m *Manager) Logs(ctx context.Context, id string, o kubecontainer.LogOptions, w io.Writer) error {
	if o.LimitBytes <= 0 {
		return m.runtime.Logs(ctx, id, o, w)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lw := &limitWriter{w: w, remain: o.LimitBytes, full: cancel}
	err := m.runtime.Logs(ctx, id, o, lw)
	if lw.remain <= 0 {
		return nil // the runtime saw the bound as a failed write or a cancel
	}
	return err
}

// errLogLimit ends a runtime's copy of logs at the bound.
var errLogLimit = errors.New("log byte limit reached")

// limitWriter passes at most remain bytes to w, then calls full and
// fails every write. It is used by one Logs call's copy only.
type limitWriter struct {
	w      io.Writer
	remain int64
	full   func()
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.remain <= 0 {
		return 0, errLogLimit
	}
	cut := p
	if int64(len(cut)) > l.remain {
		cut = cut[:l.remain]
	}
	n, err := l.w.Write(cut)
	l.remain -= int64(n)
	if err != nil {
		return n, err
	}
	if l.remain <= 0 {
		l.full()
		if n < len(p) {
			return n, errLogLimit
		}
	}
	return n, nil
}

// Exec runs a command in a running container (see Runtime.Exec).
func (m *Manager) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error) {
	return m.runtime.Exec(ctx, id, cmd, timeout)
}

// ExecStream runs a command in a running container connected to streams
// (see Runtime.ExecStream).
func (m *Manager) ExecStream(ctx context.Context, id string, cmd []string, s kubecontainer.Streams) (int, error) {
	return m.runtime.ExecStream(ctx, id, cmd, s)
}

// Attach connects streams to a running container (see Runtime.Attach).
func (m *Manager) Attach(ctx context.Context, id string, s kubecontainer.Streams) error {
	return m.runtime.Attach(ctx, id, s)
}

// PortForward connects stream to port on the loopback of the pod whose
// infra container is infraID, as the kubelet does: the connection is made
// from inside the pod's network namespace, so a server listening on the
// pod's 127.0.0.1 is reached too. It returns when either side closes.
func (m *Manager) PortForward(ctx context.Context, infraID string, port int32, stream io.ReadWriteCloser) error {
	d, err := m.runtime.Inspect(ctx, infraID)
	if err != nil {
		return err
	}
	if !d.Running || d.Pid <= 0 {
		return fmt.Errorf("pod sandbox %s is not running", infraID)
	}
	conn, err := dialInNetns(d.Pid, fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("connect to port %d in the pod: %w", port, err)
	}
	defer conn.Close()
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(conn, stream)
		if tc, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite() // the client is done sending; the server may still answer
		}
		errc <- err
	}()
	go func() {
		_, err := io.Copy(stream, conn)
		errc <- err
	}()
	select {
	case err = <-errc:
		if err == nil {
			err = <-errc
		}
	case <-ctx.Done():
	}
	return err
}
