package bench

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// socketCounter is a Docker socket of the harness's own in front of the
// daemon's. An agent started with DOCKER_HOST pointing at it talks to
// Docker only through it, cAdvisor inside the agent included, so its counts
// are every call the agent makes, whoever in it makes them.
type socketCounter struct {
	path string
	srv  *http.Server

	mu     sync.Mutex
	counts map[string]float64
}

func newSocketCounter(dir string) (*socketCounter, error) {
	daemon := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		daemon = strings.TrimPrefix(h, "unix://")
	}
	s := &socketCounter{path: filepath.Join(dir, "docker.sock"), counts: map[string]float64{}}
	ln, err := net.Listen("unix", s.path)
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: "docker"})
	proxy.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", daemon)
	}}
	proxy.FlushInterval = -1                    // events and logs stream
	proxy.ErrorLog = log.New(io.Discard, "", 0) // a stream the agent ends is not news
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts[callKind(r)]++
		s.mu.Unlock()
		proxy.ServeHTTP(w, r)
	})}
	go s.srv.Serve(ln)
	return s, nil
}

var (
	apiVersion       = regexp.MustCompile(`^/v[0-9.]+`)
	containerInspect = regexp.MustCompile(`^/containers/[^/]+/json$`)
)

// callKind names an Engine API request: "list" and "inspect" (of a
// container) by themselves, the rest by method and first path element.
func callKind(r *http.Request) string {
	p := apiVersion.ReplaceAllString(r.URL.Path, "")
	switch {
	case r.Method == http.MethodGet && p == "/containers/json":
		return "list"
	case r.Method == http.MethodGet && containerInspect.MatchString(p):
		return "inspect"
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return r.Method + " /" + first
}

// snapshot returns the counts so far.
func (s *socketCounter) snapshot() map[string]float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]float64, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

func (s *socketCounter) close() { s.srv.Close() }
