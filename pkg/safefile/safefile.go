// Package safefile writes files durably and, under a directory that a
// container can write to, without following links: every path it is given
// below a root resolves beneath that root with no symlink on the way
// (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or a component-wise
// O_NOFOLLOW walk where the kernel lacks openat2), and modes are set on the
// opened descriptor, never through a path.
package safefile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrEscape is returned for a relative path that would leave its root: "..",
// an absolute path, or a symlink anywhere on the way.
var ErrEscape = errors.New("safefile: path escapes its root or crosses a symlink")

// WriteAtomic replaces path with data so that a crash leaves either the old
// or the new content, and the new content survives a power loss once it
// returns: a new file, fsynced, renamed over the old, and the directory
// fsynced. Unchanged content is not rewritten. Missing parent directories
// are made private (0700). The path is the agent's own: links are followed.
func WriteAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// WriteBeneath writes data to root/rel with mode perm, atomically (a new
// file renamed over the old one, so a reader never sees half a file). The
// parent directories below root are made (mode dirPerm) as needed; neither
// they nor the file may be symlinks. root itself is trusted. A gid of -1
// leaves the group alone; any other gid is given to the file and to the
// directories made (on their descriptors).
func WriteBeneath(root, rel string, data []byte, perm, dirPerm os.FileMode, gid int) error {
	dir, name := filepath.Split(filepath.Clean(rel))
	if name == "" || name == "." || name == ".." {
		return fmt.Errorf("%q: %w", rel, ErrEscape)
	}
	dfd, err := MkdirBeneath(root, dir, dirPerm, gid)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	var tmp string
	var fd int
	for i := 0; ; i++ {
		tmp = fmt.Sprintf(".%s.tmp%d", name, os.Getpid()+i)
		fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if !errors.Is(err, unix.EEXIST) || i > 100 {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Join(root, dir, tmp), err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	_, err = f.Write(data)
	if err == nil && gid >= 0 {
		err = f.Chown(-1, gid)
	}
	if err == nil {
		err = f.Chmod(perm) // on the descriptor: never through a link (after the chown, which clears setgid bits)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// renameat replaces a symlink named name rather than following it.
		err = unix.Renameat(dfd, tmp, dfd, name)
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("write %s: %w", filepath.Join(root, rel), err)
	}
	return nil
}

// MkdirBeneath makes root/rel and every directory between (mode perm, and
// group gid unless it is -1, set on the descriptor of each one it makes),
// refusing symlinks and paths that leave root, and returns a descriptor of
// the last one.
func MkdirBeneath(root, rel string, perm os.FileMode, gid int) (int, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open %s: %w", root, err)
	}
	parts, err := split(rel)
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	for i, part := range parts {
		made := true
		if err := unix.Mkdirat(fd, part, fileModeBits(perm)); errors.Is(err, unix.EEXIST) {
			made = false
		} else if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("mkdir %s: %w", filepath.Join(root, filepath.Join(parts[:i+1]...)), err)
		}
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				err = ErrEscape
			}
			return -1, fmt.Errorf("%s: %w", filepath.Join(root, filepath.Join(parts[:i+1]...)), err)
		}
		fd = next
		if !made {
			continue
		}
		if gid >= 0 {
			if err := unix.Fchown(fd, -1, gid); err != nil {
				unix.Close(fd)
				return -1, err
			}
		}
		if err := unix.Fchmod(fd, fileModeBits(perm)); err != nil { // past the umask
			unix.Close(fd)
			return -1, err
		}
	}
	return fd, nil
}

// OpenBeneath opens root/rel with flags (O_NOFOLLOW and O_CLOEXEC are
// added), resolving it beneath root with no symlink anywhere on the way.
func OpenBeneath(root, rel string, flags int, perm os.FileMode) (*os.File, error) {
	parts, err := split(rel)
	if err != nil {
		return nil, err
	}
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(rfd)
	fd, err := openat2(rfd, strings.Join(parts, "/"), flags, perm)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = walk(rfd, parts, flags, perm)
	}
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
			err = fmt.Errorf("%w (%v)", ErrEscape, err)
		}
		return nil, fmt.Errorf("open %s: %w", filepath.Join(root, rel), err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, rel)), nil
}

func openat2(dirfd int, path string, flags int, perm os.FileMode) (int, error) {
	how := &unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	if flags&unix.O_CREAT != 0 {
		how.Mode = uint64(perm.Perm())
	}
	if path == "" {
		path = "."
	}
	for {
		fd, err := unix.Openat2(dirfd, path, how)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// walk is openat2's fallback: one component at a time, none followed.
func walk(rfd int, parts []string, flags int, perm os.FileMode) (int, error) {
	fd, err := unix.Dup(rfd)
	if err != nil {
		return -1, err
	}
	for i, part := range parts {
		last := i == len(parts)-1
		f, m := unix.O_PATH|unix.O_DIRECTORY, uint32(0)
		if last {
			f, m = flags, uint32(perm.Perm())
		}
		next, err := unix.Openat(fd, part, f|unix.O_NOFOLLOW|unix.O_CLOEXEC, m)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = next
	}
	if len(parts) == 0 {
		defer unix.Close(fd)
		return unix.Openat(fd, ".", flags|unix.O_CLOEXEC, 0)
	}
	return fd, nil
}

// split cleans a relative path into its components, refusing absolute
// paths and "..".
func split(rel string) ([]string, error) {
	if filepath.IsAbs(rel) {
		return nil, fmt.Errorf("%q: %w", rel, ErrEscape)
	}
	var out []string
	for _, p := range strings.Split(filepath.Clean(rel), "/") {
		switch p {
		case "", ".":
		case "..":
			return nil, fmt.Errorf("%q: %w", rel, ErrEscape)
		default:
			out = append(out, p)
		}
	}
	return out, nil
}

// fileModeBits are the permission and setuid/setgid/sticky bits of m, as
// the kernel takes them.
func fileModeBits(m os.FileMode) uint32 {
	bits := uint32(m.Perm())
	if m&os.ModeSetgid != 0 {
		bits |= unix.S_ISGID
	}
	if m&os.ModeSetuid != 0 {
		bits |= unix.S_ISUID
	}
	if m&os.ModeSticky != 0 {
		bits |= unix.S_ISVTX
	}
	return bits
}
