package eviction

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// eventfdWatch is a set of cgroup v1 memory thresholds: for each level an
// eventfd the kernel signals when memory.usage_in_bytes crosses it
// (registered by writing "<eventfd> <usage fd> <level>" to
// cgroup.event_control), all in one epoll set with a wake eventfd that
// Wake writes to. The kubelet's notifier waits with a timeout and checks
// a stop channel in between; the wake eventfd stops it at once, and the
// descriptors are closed only after Wait returned, never under it.
//
// The kernel keeps a registration until its eventfd is closed; the usage
// and control files need not stay open.
type eventfdWatch struct {
	epfd   int
	wakefd int
	fds    []int // one eventfd per level
}

var _ usageWatch = (*eventfdWatch)(nil)

func armEventfd(dir string, levels []int64) (_ usageWatch, err error) {
	w := &eventfdWatch{epfd: -1, wakefd: -1}
	defer func() {
		if err != nil {
			_ = w.Close()
		}
	}()
	if w.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("epoll_create1: %w", err)
	}
	if w.wakefd, err = w.addEventfd(); err != nil {
		return nil, err
	}
	usage, err := unix.Open(filepath.Join(dir, "memory.usage_in_bytes"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Join(dir, "memory.usage_in_bytes"), err)
	}
	defer unix.Close(usage)
	control, err := unix.Open(filepath.Join(dir, "cgroup.event_control"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", filepath.Join(dir, "cgroup.event_control"), err)
	}
	defer unix.Close(control)
	for _, l := range levels {
		fd, err := w.addEventfd()
		if err != nil {
			return nil, err
		}
		w.fds = append(w.fds, fd)
		reg := strconv.Itoa(fd) + " " + strconv.Itoa(usage) + " " + strconv.FormatInt(l, 10)
		if _, err := unix.Write(control, []byte(reg)); err != nil {
			return nil, fmt.Errorf("register usage level %d in %s: %w", l, dir, err)
		}
	}
	return w, nil
}

// addEventfd creates a non-blocking eventfd in the epoll set. The caller
// records it for Close.
func (w *eventfdWatch) addEventfd() (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, fmt.Errorf("eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(w.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("epoll_ctl add eventfd: %w", err)
	}
	return fd, nil
}

// Wait blocks in epoll_wait (no timeout: Wake ends it). A crossing's
// counter is read to zero so that it is not seen again; the wake eventfd
// is never read, so every later Wait returns false at once.
func (w *eventfdWatch) Wait() (bool, error) {
	events := make([]unix.EpollEvent, len(w.fds)+1)
	for {
		n, err := unix.EpollWait(w.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("epoll_wait: %w", err)
		}
		crossed := false
		for _, ev := range events[:n] {
			if int(ev.Fd) == w.wakefd {
				return false, nil
			}
			var buf [8]byte
			switch _, err := unix.Read(int(ev.Fd), buf[:]); {
			case err == nil:
				crossed = true
			case !errors.Is(err, unix.EAGAIN): // EAGAIN: read already, nothing new
				return false, fmt.Errorf("read eventfd: %w", err)
			}
		}
		if crossed {
			return true, nil
		}
	}
}

// Wake adds 1 to the wake eventfd's counter.
func (w *eventfdWatch) Wake() {
	var buf [8]byte
	binary.NativeEndian.PutUint64(buf[:], 1)
	_, _ = unix.Write(w.wakefd, buf[:]) // EAGAIN only at a counter near 2^64: already awake
}

// Close closes the eventfds, which unregisters their levels, and the
// epoll set.
func (w *eventfdWatch) Close() error {
	var errs []error
	for _, fd := range append(w.fds, w.wakefd, w.epfd) {
		if fd >= 0 {
			if err := unix.Close(fd); err != nil {
				errs = append(errs, fmt.Errorf("close fd %d: %w", fd, err))
			}
		}
	}
	w.fds, w.wakefd, w.epfd = nil, -1, -1
	return errors.Join(errs...)
}
