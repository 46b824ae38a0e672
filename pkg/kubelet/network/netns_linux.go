package network

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// nsfsMagic is the file system type of a namespace file (NSFS_MAGIC).
const nsfsMagic = 0x6e736673

// pinNetNS bind-mounts the network namespace of process pid on a file of
// dir named id, as containerd pins a sandbox's: the namespace then outlives
// the sandbox's process, so the DEL of a sandbox that died (or was removed
// while the agent was down) still finds its interface. The bridge plugin
// tears down its masquerade rules only when it finds the interface: without
// the namespace they would leak.
func pinNetNS(dir, id string, pid int) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, id)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return "", err
	}
	f.Close()
	if err := unix.Mount(fmt.Sprintf("/proc/%d/ns/net", pid), path, "", unix.MS_BIND, ""); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("pin the network namespace of process %d: %w", pid, err)
	}
	return path, nil
}

// pinnedNetNS is the pinned namespace of sandbox id, "" if there is none
// (never pinned, released, or gone with a reboot).
func pinnedNetNS(dir, id string) string {
	path := filepath.Join(dir, id)
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil || int64(st.Type) != nsfsMagic {
		return ""
	}
	return path
}

// releaseNetNS unpins sandbox id's namespace (the kernel frees it with its
// last user) and removes its file.
func releaseNetNS(dir, id string) error {
	path := filepath.Join(dir, id)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unpin the network namespace of sandbox %s: %w", id, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
