package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/classic-kubelet/kubelet/pkg/await"
)

// At the cap, a new connection closes the longest-idle one; a busy one is
// never closed to make room.
func TestConnLimiterClosesIdleFirst(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	limit := newConnLimiter(2)
	release := make(chan struct{})
	idled := make(chan struct{}, 4) // the limiter has seen a connection go idle
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/busy" {
				<-release
			}
			fmt.Fprint(w, "ok")
		}),
		ConnState: func(c net.Conn, st http.ConnState) {
			limit.connState(c, st)
			if st == http.StateIdle {
				idled <- struct{}{}
			}
		},
	}
	go func() { _ = srv.Serve(limit.listener(ln)) }()
	defer srv.Close()
	defer close(release)

	dial := func(path string) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path)
		return c, bufio.NewReader(c)
	}
	answered := func(r *bufio.Reader, c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return false
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	busy, _ := dial("/busy") // holds its slot, never idle
	defer busy.Close()
	idle, idleR := dial("/")
	defer idle.Close()
	if !answered(idleR, idle) {
		t.Fatal("first request not answered")
	}
	// The server marks the connection idle after it has written the answer,
	// which the client may read first: wait for that, not for some time.
	select {
	case <-idled:
	case <-time.After(await.Timeout):
		t.Fatal("the answered connection never went idle")
	}
	fresh, freshR := dial("/")
	defer fresh.Close()
	if !answered(freshR, fresh) {
		t.Fatal("a new connection at the cap was refused although one was idle")
	}
	// The idle one was closed to make room.
	_ = idle.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); err == nil {
		t.Error("the idle connection is still open")
	}
}
