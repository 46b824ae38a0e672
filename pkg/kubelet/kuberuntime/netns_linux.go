package kuberuntime

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// dialInNetns dials addr from the network namespace of process pid. The
// socket is made on a thread moved into that namespace and keeps it; the
// thread is moved back before it is released, and is never reused if it
// cannot be (the locked thread then dies with its goroutine).
func dialInNetns(pid int, addr string) (net.Conn, error) {
	target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, fmt.Errorf("open the pod's network namespace: %w", err)
	}
	defer target.Close()
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("open the agent's network namespace: %w", err)}
			return
		}
		defer own.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("enter the pod's network namespace: %w", err)}
			return
		}
		// net.Dialer would hand the connect to other threads; a raw
		// socket made here is the pod's.
		conn, err := dialOnThisThread(addr)
		if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- result{conn, err}
	}()
	r := <-done
	return r.conn, r.err
}

// dialOnThisThread connects a TCP socket made on the calling thread (so in
// its network namespace) to addr, then hands it to the Go runtime. The
// connect is blocking: addr is on the loopback, it is answered at once.
func dialOnThisThread(addr string) (net.Conn, error) {
	ap, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	sa := &unix.SockaddrInet4{Port: ap.Port}
	copy(sa.Addr[:], ap.IP.To4())
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "portforward")
	defer f.Close() // FileConn dups it
	return net.FileConn(f)
}
