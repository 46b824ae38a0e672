package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// nodeLockDir holds one lock file per node name on this host.
const nodeLockDir = "/run/classic-kubelet"

// lockNode takes the host-wide lock of a node name, held until the
// process exits (the kernel drops it then, kill -9 included). Two agents
// with one node name would own the same containers and fight over them,
// whatever their root dirs: the second refuses to start, naming the first.
func lockNode(node, rootDir string) (*os.File, error) {
	if err := os.MkdirAll(nodeLockDir, 0o755); err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(nodeLockDir, node+".lock"), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := io.ReadAll(io.LimitReader(f, 512))
		f.Close()
		return nil, fmt.Errorf("node name %q is taken by another agent on this host (%s): give each agent its own --hostname-override",
			node, strings.TrimSpace(string(holder)))
	}
	_ = f.Truncate(0)
	_, _ = fmt.Fprintf(f, "pid %d, root dir %s\n", os.Getpid(), rootDir)
	return f, nil
}
