package dockertools

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"

	docker "github.com/fsouza/go-dockerclient"
)

// BuildPauseImage builds the infra image tag from the pause program at
// binary (FROM scratch, the program as entrypoint), so a node needs no build
// tools and no registry for it.
func (c *Client) BuildPauseImage(ctx context.Context, tag, binary string) error {
	prog, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("pause program: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"Dockerfile", 0o644, []byte("FROM scratch\nCOPY pause /pause\nENTRYPOINT [\"/pause\"]\n")},
		{"pause", 0o755, prog},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	err = c.c.BuildImage(docker.BuildImageOptions{
		Context: ctx, Name: tag, InputStream: &buf, OutputStream: io.Discard, RmTmpContainer: true, ForceRmTmpContainer: true,
	})
	if err != nil {
		return fmt.Errorf("build infra image %s: %w", tag, translate(err))
	}
	return nil
}
