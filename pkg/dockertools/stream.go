package dockertools

import (
	"context"
	"fmt"
	"time"

	docker "github.com/fsouza/go-dockerclient"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// ExecStream runs cmd in a running container with its standard streams
// connected to s, until it exits or ctx ends; it returns the exit code.
// Docker cannot stop an exec, so when ctx ends first (the client went away)
// the agent kills its process itself, as Exec does at its timeout: left
// alone, it would run on with Docker's exec and shim.
func (c *Client) ExecStream(ctx context.Context, containerID string, cmd []string, s kubecontainer.Streams) (int, error) {
	cctx, cancel := short(ctx)
	var ex *docker.Exec
	err := c.learningVersion(func() (err error) {
		ex, err = c.c.CreateExec(docker.CreateExecOptions{
			Container: containerID, Cmd: cmd, Tty: s.TTY, Context: cctx,
			AttachStdin: s.Stdin != nil, AttachStdout: s.Stdout != nil, AttachStderr: s.Stderr != nil,
		})
		return err
	})
	cancel()
	if err != nil {
		return 0, fmt.Errorf("create exec in %s: %w", kubecontainer.ShortID(containerID), translate(err))
	}
	// Sizes are forwarded once Docker has started the exec: a resize
	// before that fails. The hijacked start takes no context: Close ends it.
	started := make(chan struct{})
	cw, err := c.c.StartExecNonBlocking(ex.ID, docker.StartExecOptions{InputStream: s.Stdin, OutputStream: s.Stdout, ErrorStream: s.Stderr,
		Tty: s.TTY, RawTerminal: s.TTY, Success: started})
	if err != nil {
		return 0, fmt.Errorf("run exec in %s: %w", kubecontainer.ShortID(containerID), translate(err))
	}
	select {
	case <-started: // sent once Docker has answered the start, whatever it said
	case <-ctx.Done():
		// The session ended before Docker answered: release the
		// client's goroutine, which hands over on started once it does.
		go func() { <-started; started <- struct{}{} }()
		c.killExec(containerID, ex.ID, "its session ended")
		_ = cw.Close()
		return 0, ctx.Err()
	}
	stop := c.forwardResizes(ctx, s.Resize, func(sz kubecontainer.TerminalSize) error {
		return c.c.ResizeExecTTY(ex.ID, int(sz.Height), int(sz.Width))
	})
	defer stop()
	started <- struct{}{}
	done := make(chan error, 1)
	go func() { done <- cw.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		c.killExec(containerID, ex.ID, "its session ended")
		_ = cw.Close()
		<-done
		return 0, ctx.Err()
	}
	if err != nil {
		return 0, fmt.Errorf("run exec in %s: %w", kubecontainer.ShortID(containerID), translate(err))
	}
	insp, err := c.c.InspectExec(ex.ID)
	if err != nil {
		return 0, fmt.Errorf("inspect exec in %s: %w", kubecontainer.ShortID(containerID), translate(err))
	}
	return insp.ExitCode, nil
}

// Attach connects s to a running container's main process, until it exits
// or ctx ends.
func (c *Client) Attach(ctx context.Context, containerID string, s kubecontainer.Streams) error {
	stop := c.forwardResizes(ctx, s.Resize, func(sz kubecontainer.TerminalSize) error {
		return c.c.ResizeContainerTTY(containerID, int(sz.Height), int(sz.Width))
	})
	defer stop()
	cw, err := c.c.AttachToContainerNonBlocking(docker.AttachToContainerOptions{Container: containerID,
		InputStream: s.Stdin, OutputStream: s.Stdout, ErrorStream: s.Stderr,
		Stdin: s.Stdin != nil, Stdout: s.Stdout != nil, Stderr: s.Stderr != nil, Stream: true, RawTerminal: s.TTY})
	if err != nil {
		return fmt.Errorf("attach to %s: %w", kubecontainer.ShortID(containerID), translate(err))
	}
	// The attach has no context of its own: a session that ends closes it.
	done := make(chan error, 1)
	go func() { done <- cw.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = cw.Close()
		err = <-done
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("attach to %s: %w", kubecontainer.ShortID(containerID), translate(err))
	}
	return nil
}

// forwardResizes applies each terminal size from sizes until it closes or
// the returned stop is called.
func (c *Client) forwardResizes(ctx context.Context, sizes <-chan kubecontainer.TerminalSize, resize func(kubecontainer.TerminalSize) error) (stop func()) {
	if sizes == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case sz, ok := <-sizes:
				if !ok {
					return
				}
				// The process may not have its terminal yet right after
				// the start: a failed resize is retried briefly.
				for i := 0; i < 10 && resize(sz) != nil; i++ {
					select {
					case <-ctx.Done():
						return
					case <-time.After(20 * time.Millisecond):
					}
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
