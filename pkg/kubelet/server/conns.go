package server

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"syscall"

	"k8s.io/klog/v2"
)

// connLimiter caps the connections open on one port. When the cap is
// reached, the connection idle longest (a keep-alive waiting for its next
// request) is closed to make room; if none is idle, the new connection is
// closed at once. A client holding a thousand idle keep-alives so takes
// nothing from a health check, and the agent keeps descriptors for Docker,
// cAdvisor and its manifests.
type connLimiter struct {
	max int

	mu    sync.Mutex // guards the fields below
	open  map[net.Conn]*list.Element
	idle  *list.List // of net.Conn, longest idle first
	count int
}

func newConnLimiter(max int) *connLimiter {
	return &connLimiter{max: max, open: map[net.Conn]*list.Element{}, idle: list.New()}
}

// maxConnsPerPort is the cap for each port: a quarter of the descriptors
// the process may open (there are up to three ports), at most 1024.
func maxConnsPerPort() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur == 0 {
		return 256
	}
	return int(max(16, min(1024, rl.Cur/4)))
}

// listener wraps ln so that each accepted connection counts against the cap.
func (l *connLimiter) listener(ln net.Listener) net.Listener { return limitedListener{ln, l} }

type limitedListener struct {
	net.Listener
	l *connLimiter
}

func (ll limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ll.l.admit(c) {
			return c, nil
		}
		c.Close()
	}
}

// admit counts a new connection, closing the longest-idle one if the cap is
// reached; it reports false when every open connection is busy.
func (l *connLimiter) admit(c net.Conn) bool {
	l.mu.Lock()
	var victim net.Conn
	if l.count >= l.max {
		front := l.idle.Front()
		if front == nil {
			l.mu.Unlock()
			klog.V(2).Infof("API: %d connections busy on %s; refusing %s", l.count, c.LocalAddr(), c.RemoteAddr())
			return false
		}
		victim = front.Value.(net.Conn)
		l.idle.Remove(front)
		l.open[victim] = nil
	}
	l.count++
	l.open[c] = nil
	l.mu.Unlock()
	if victim != nil {
		victim.Close() // its StateClosed hook uncounts it
	}
	return true
}

// connState is the http.Server hook that tracks which connections are idle.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	el, known := l.open[c]
	if !known {
		return // hijacked or never admitted
	}
	if el != nil {
		l.idle.Remove(el)
		l.open[c] = nil
	}
	switch st {
	case http.StateIdle:
		l.open[c] = l.idle.PushBack(c)
	case http.StateClosed, http.StateHijacked:
		delete(l.open, c)
		l.count--
	}
}
