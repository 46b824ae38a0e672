package kuberuntime

import (
	"context"
	"fmt"
	"io"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Logs streams a container's output. The API reaches the runtime only
// through the Manager, so its calls are measured like the agent's own.
func (m *Manager) Logs(ctx context.Context, id string, o kubecontainer.LogOptions, w io.Writer) error {
	return m.runtime.Logs(ctx, id, o, w)
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
