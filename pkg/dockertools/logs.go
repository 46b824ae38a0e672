package dockertools

import (
	"context"
	"fmt"
	"io"
	"strconv"

	docker "github.com/fsouza/go-dockerclient"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Logs streams a container's stdout and stderr (interleaved, as written) to
// w until the logs end, or, with Follow, until ctx is cancelled. It has no
// short timeout.
func (c *Client) Logs(ctx context.Context, id string, o kubecontainer.LogOptions, w io.Writer) error {
	// A container with a terminal (kubectl debug's, or tty: true) has one
	// raw stream, without the frames that multiplex stdout and stderr.
	d, err := c.c.InspectContainerWithOptions(docker.InspectContainerOptions{Context: ctx, ID: id})
	if err != nil {
		return fmt.Errorf("logs of container %s: %w", kubecontainer.ShortID(id), translate(err))
	}
	tail := "all"
	if o.TailLines >= 0 {
		tail = strconv.FormatInt(o.TailLines, 10)
	}
	var since int64
	if !o.Since.IsZero() {
		since = o.Since.Unix()
	}
	err = c.c.Logs(docker.LogsOptions{
		Context: ctx, Container: id, OutputStream: w, ErrorStream: w, RawTerminal: d.Config != nil && d.Config.Tty,
		Stdout: true, Stderr: true, Follow: o.Follow, Timestamps: o.Timestamps, Tail: tail, Since: since,
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("logs of container %s: %w", kubecontainer.ShortID(id), translate(err))
	}
	return nil
}
