// Package server is the agent's HTTP API: one route table served on two
// ports, the full-access port (everything) and the read-only port (a GET
// allowlist). Errors are JSON; bodies are size-limited.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/pkg/config"
)

// MaxBodyBytes bounds request bodies (1 MiB): larger answers 413.
const MaxBodyBytes = 1 << 20

// HostInterface is what the server needs from the agent.
type HostInterface interface {
	GetPods() []*v1.Pod
	GetPod(namespace, name string) (*v1.Pod, bool)
}

// PodSource is the source fed by POST, PUT and DELETE /pods.
type PodSource interface {
	Upsert(ctx context.Context, body []byte) ([]string, error)
	Replace(ctx context.Context, body []byte) ([]string, error)
	Delete(ctx context.Context, namespace, name string) bool
}

// SourcesStatus describes the config sources for GET /sources.
type SourcesStatus interface {
	Status() []config.SourceStatus
}

// route is one endpoint. Patterns are split on "/": a segment "{x}" matches
// any one segment, a final "*" matches the rest of the path.
type route struct {
	method   string
	pattern  string
	readOnly bool // also served on the read-only port
	handle   func(w http.ResponseWriter, r *http.Request, params map[string]string)
}

// Server serves the API.
type Server struct {
	host    HostInterface
	pods    PodSource // nil: no API source
	sources SourcesStatus
	routes  []route
}

// New returns a server. pods may be nil, disabling POST/PUT/DELETE /pods.
func New(host HostInterface, pods PodSource, sources SourcesStatus) *Server {
	s := &Server{host: host, pods: pods, sources: sources}
	s.routes = []route{
		{http.MethodGet, "/healthz", true, s.healthz},
		{http.MethodGet, "/pods", true, s.listPods},
		{http.MethodGet, "/pods/{namespace}/{name}", true, s.getPod},
		{http.MethodGet, "/sources", true, s.listSources},
		{http.MethodPost, "/pods", false, s.postPods},
		{http.MethodPut, "/pods", false, s.putPods},
		{http.MethodDelete, "/pods/{namespace}/{name}", false, s.deletePod},
	}
	return s
}

// Handler returns the handler of one port: full access, or read-only.
func (s *Server) Handler(readOnly bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, readOnly)
	})
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, readOnly bool) {
	var allow []string
	for _, rt := range s.routes {
		params, ok := match(rt.pattern, r.URL.Path)
		if !ok {
			continue
		}
		if rt.method != r.Method {
			allow = append(allow, rt.method)
			continue
		}
		if readOnly && !rt.readOnly {
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s is not served on the read-only port", r.Method, r.URL.Path))
			return
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		}
		rt.handle(w, r, params)
		return
	}
	if len(allow) == 0 {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s", r.URL.Path))
		return
	}
	sort.Strings(allow)
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
}

// match matches a path against a pattern, returning the named segments.
func match(pattern, path string) (map[string]string, bool) {
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	xs := strings.Split(strings.Trim(path, "/"), "/")
	if path != "/" && strings.HasSuffix(path, "/") && !strings.HasSuffix(pattern, "*") {
		return nil, false
	}
	params := map[string]string{}
	for i, p := range ps {
		if p == "*" {
			params["*"] = strings.Join(xs[i:], "/")
			return params, true
		}
		if i >= len(xs) {
			return nil, false
		}
		switch {
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
			if xs[i] == "" {
				return nil, false
			}
			params[p[1:len(p)-1]] = xs[i]
		case p != xs[i]:
			return nil, false
		}
	}
	return params, len(xs) == len(ps)
}

// Status is the JSON body of every error.
type Status struct {
	Kind    string `json:"kind"`
	Status  string `json:"status"`
	Message string `json:"message"`
	Code    int    `json:"code"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, Status{Kind: "Status", Status: "Failure", Message: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		glog.V(2).Infof("Write response: %v", err)
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ map[string]string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok")
}

func (s *Server) listPods(w http.ResponseWriter, _ *http.Request, _ map[string]string) {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: []v1.Pod{}}
	for _, p := range s.host.GetPods() {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getPod(w http.ResponseWriter, _ *http.Request, p map[string]string) {
	pod, ok := s.host.GetPod(p["namespace"], p["name"])
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("pod %s/%s not found", p["namespace"], p["name"]))
		return
	}
	pod.APIVersion, pod.Kind = "v1", "Pod"
	writeJSON(w, http.StatusOK, pod)
}

func (s *Server) listSources(w http.ResponseWriter, _ *http.Request, _ map[string]string) {
	writeJSON(w, http.StatusOK, s.sources.Status())
}

// readBody reads a size-limited body, answering 413 or 400 itself.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	data, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", MaxBodyBytes))
		return nil, false
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("read body: %v", err))
		return nil, false
	}
	return data, true
}

// podsResult is the answer to POST and PUT /pods.
type podsResult struct {
	Pods []string `json:"pods"`
}

func (s *Server) changePods(w http.ResponseWriter, r *http.Request, change func(context.Context, []byte) ([]string, error)) {
	if s.pods == nil {
		writeError(w, http.StatusNotFound, "the API pod source is disabled")
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	keys, err := change(r.Context(), body)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("%s /pods: %v", r.Method, err))
		return
	}
	glog.Infof("API source: %s /pods from %s: %s", r.Method, r.RemoteAddr, strings.Join(keys, ", "))
	writeJSON(w, http.StatusOK, podsResult{Pods: keys})
}

func (s *Server) postPods(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	s.changePods(w, r, s.pods.Upsert)
}

func (s *Server) putPods(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	s.changePods(w, r, s.pods.Replace)
}

func (s *Server) deletePod(w http.ResponseWriter, r *http.Request, p map[string]string) {
	if s.pods == nil {
		writeError(w, http.StatusNotFound, "the API pod source is disabled")
		return
	}
	if !s.pods.Delete(r.Context(), p["namespace"], p["name"]) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("pod %s/%s is not a pod of the API source", p["namespace"], p["name"]))
		return
	}
	glog.Infof("API source: DELETE pod %s/%s from %s", p["namespace"], p["name"], r.RemoteAddr)
	writeJSON(w, http.StatusOK, podsResult{Pods: []string{p["namespace"] + "/" + p["name"]}})
}

// Serve listens on addr and serves h until ctx is cancelled, then shuts down
// (in-flight requests get a moment to finish). The listener is bound before
// Serve returns its start error, so callers know the port is up.
func Serve(ctx context.Context, addr string, h http.Handler) (func() error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	wait := func() error {
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		return nil
	}
	return wait, nil
}
