package dockertools

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Cancelling an event subscription leaves no goroutine behind (the library
// never closes the listener's channel).
func TestEventsCancelLeaksNoGoroutine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c, err := NewClient("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		events, err := c.Events(ctx, kubecontainer.LabelOwner, "n")
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		for range events {
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+1 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after 5 cancelled subscriptions, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
