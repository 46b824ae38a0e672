package app

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// nodeLockDir holds one lock file per node name on this host.
const nodeLockDir = "/run/classic-kubelet"

// nodeLock is the host-wide lock of a node name.
type nodeLock struct {
	f    *os.File
	path string
}

// lockNode takes the host-wide lock of a node name, held until release or
// until the process exits (the kernel drops it then, kill -9 included). Two
// agents with one node name would own the same containers and fight over
// them, whatever their root dirs: the second refuses to start, naming the
// first. A lock file left by an agent that died is no obstacle: nothing
// holds its lock.
func lockNode(node, rootDir string) (*nodeLock, error) {
	return lockFile(filepath.Join(nodeLockDir, node+".lock"), node, rootDir)
}

func lockFile(path, node, rootDir string) (*nodeLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("node lock: %w", err)
	}
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o644)
		if err != nil {
			return nil, fmt.Errorf("node lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			holder, _ := io.ReadAll(io.LimitReader(f, 512))
			f.Close()
			return nil, fmt.Errorf("node name %q is taken by another agent on this host (%s): give each agent its own --hostname-override",
				node, strings.TrimSpace(string(holder)))
		}
		// An agent that stops removes its file while it holds the lock: a
		// file opened before that removal and locked after it is no longer
		// the one at path, and locking it would let a third agent lock a
		// new file beside us. Only the file still at path counts.
		same, err := isFileAt(f, path)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("node lock: %w", err)
		}
		if !same {
			f.Close()
			continue
		}
		_ = f.Truncate(0)
		_, _ = fmt.Fprintf(f, "pid %d, root dir %s\n", os.Getpid(), rootDir)
		return &nodeLock{f: f, path: path}, nil
	}
}

// isFileAt reports whether the open file f is the file now at path.
func isFileAt(f *os.File, path string) (bool, error) {
	var open, named unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &open); err != nil {
		return false, err
	}
	if err := unix.Lstat(path, &named); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	return open.Dev == named.Dev && open.Ino == named.Ino, nil
}

// release removes the lock file, then drops the lock: removing it while
// the lock is held means no other agent holds it at that moment, and one
// that opened the file before will find it is no longer at the path.
func (l *nodeLock) release() {
	if same, err := isFileAt(l.f, l.path); err == nil && same {
		_ = os.Remove(l.path)
	}
	_ = l.f.Close()
}
