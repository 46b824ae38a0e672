package config

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestURLSource(t *testing.T) {
	var mu sync.Mutex
	status, body, etag := 200, manifest("a", "i:1"), `"v1"`
	var gotHeader, gotIfNoneMatch string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		gotHeader, gotIfNoneMatch = r.Header.Get("X-Node-Token"), r.Header.Get("If-None-Match")
		if etag != "" && gotIfNoneMatch == etag && status == 200 {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if etag != "" {
			w.Header().Set("ETag", etag)
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	defer srv.Close()
	header, err := ParseHeaders([]string{"X-Node-Token: secret"})
	if err != nil {
		t.Fatal(err)
	}
	sink := newSink()
	s := NewURLSource(srv.URL, header, "node", time.Hour, sink)
	ctx := context.Background()
	set := func(st int, b, e string) { mu.Lock(); status, body, etag = st, b, e; mu.Unlock() }

	steps := []struct {
		name     string
		st       int
		body     string
		etag     string
		snapshot string
		sent     int
		wantErr  string
	}{
		{"first answer", 200, manifest("a", "i:1"), `"v1"`, "a:i:1", 1, ""},
		{"304 does no work", 200, manifest("a", "i:1"), `"v1"`, "a:i:1", 1, ""},
		{"5xx keeps pods", 500, "oops", "", "a:i:1", 1, "HTTP 500"},
		{"404 keeps pods", 404, "", "", "a:i:1", 1, "HTTP 404"},
		{"empty 200 keeps pods", 200, "", "", "a:i:1", 1, "empty body"},
		{"invalid body keeps pods", 200, "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: i, x: 1}]}\n", "", "a:i:1", 1, "spec.containers[0].x"},
		{"same body without etag does no work", 200, manifest("a", "i:1"), "", "a:i:1", 1, ""},
		{"new body applies", 200, "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: b}\n  spec: {containers: [{name: c, image: 'i:2'}]}\n", `"v2"`, "b:i:2", 2, ""},
	}
	for _, st := range steps {
		set(st.st, st.body, st.etag)
		s.poll(ctx)
		got, n := sink.last()
		if got != st.snapshot || n != st.sent {
			t.Errorf("%s: snapshot %q (%d sent), want %q (%d)", st.name, got, n, st.snapshot, st.sent)
		}
		if st.wantErr != "" && !strings.Contains(sink.lastErr(), st.wantErr) {
			t.Errorf("%s: last error %q, want %q", st.name, sink.lastErr(), st.wantErr)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if gotHeader != "secret" {
		t.Errorf("configured header not sent: %q", gotHeader)
	}
}

func TestURLSourceTimeoutKeepsPods(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	sink := newSink()
	s := NewURLSource(srv.URL, nil, "node", time.Hour, sink)
	s.client.Timeout = 100 * time.Millisecond
	s.poll(context.Background())
	if _, n := sink.last(); n != 0 {
		t.Error("a timed-out poll sent a snapshot")
	}
	if !strings.Contains(sink.lastErr(), "Timeout") && !strings.Contains(sink.lastErr(), "deadline") {
		t.Errorf("timeout not reported: %q", sink.lastErr())
	}
}

func TestParseHeaders(t *testing.T) {
	if _, err := ParseHeaders([]string{"novalue"}); err == nil {
		t.Error("header without ':' accepted")
	}
	h, err := ParseHeaders([]string{"A: b:c", "A:d"})
	if err != nil || strings.Join(h.Values("A"), ",") != "b:c,d" {
		t.Errorf("ParseHeaders = %v, %v", h, err)
	}
}
