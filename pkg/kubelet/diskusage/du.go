package diskusage

import (
	"context"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// LogFilesSize is the size of a container's log file and its rotated
// copies (<path>.1, ...).
func LogFilesSize(path string) int64 {
	matches, _ := filepath.Glob(path + "*")
	var n int64
	for _, m := range matches {
		if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// DirBytes is what the tree at dir holds on disk, counted as du counts it:
// the allocated blocks (st_blocks × 512) of dir and of everything under it,
// directories included, a file of several hard links once, a symlink's own
// blocks and never its target's. A sparse file counts what it allocated,
// not its length. The walk stops once ctx ends: whole is false then, and n
// what was counted by then. A missing dir holds nothing.
func DirBytes(ctx context.Context, dir string) (n int64, whole bool) {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return 0, true
	}
	w := &duWalk{ctx: ctx, linked: map[[2]uint64]bool{}}
	w.count(&st)
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		w.walk(dir)
	}
	return w.n, ctx.Err() == nil
}

type duWalk struct {
	ctx    context.Context
	n      int64
	linked map[[2]uint64]bool // device and inode of the files of several links counted
}

func (w *duWalk) count(st *unix.Stat_t) {
	if st.Nlink > 1 && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		id := [2]uint64{uint64(st.Dev), st.Ino}
		if w.linked[id] {
			return
		}
		w.linked[id] = true
	}
	w.n += st.Blocks * 512
}

// walk counts what is in dir (dir itself is counted), then walks its
// subdirectories. The directory is read a batch of names at a time, each
// name stat'ed relative to it, and closed before its subdirectories are
// walked: a wide directory costs no memory per file, a deep tree no
// descriptor per level. What cannot be read (gone, say) is left out.
func (w *duWalk) walk(dir string) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), dir)
	var subdirs []string
	for w.ctx.Err() == nil {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			if w.ctx.Err() != nil {
				break
			}
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			w.count(&st)
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				subdirs = append(subdirs, name)
			}
		}
		if err != nil { // io.EOF once every name is read
			break
		}
	}
	f.Close()
	for _, name := range subdirs {
		if w.ctx.Err() != nil {
			return
		}
		w.walk(filepath.Join(dir, name))
	}
}
