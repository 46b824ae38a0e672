// Package server is the agent's HTTP API: one route table served on two
// ports, the full-access port (everything) and the read-only port (a GET
// allowlist). Errors are JSON; bodies are size-limited.
package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/config"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/cadvisor"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/diskusage"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// MaxBodyBytes bounds request bodies (1 MiB): larger answers 413.
const MaxBodyBytes = 1 << 20

// HostInterface is what the server needs from the agent beyond its pods
// (which it reads through its own PodView).
type HostInterface interface {
	Health() (syncLoop, relist error)
	// PodCgroupPath is the pod's cgroup as cAdvisor names it ("" if the
	// pod has none).
	PodCgroupPath(pod *v1.Pod) string
	// PodsCgroupPath is the cgroup of every pod (kubepods) as cAdvisor
	// names it ("" if there is none).
	PodsCgroupPath() string
}

// DiskUsage is the agent's background measurement of what its pods hold on
// disk.
type DiskUsage interface {
	// Last is the last measurement (nil before the first).
	Last() *diskusage.Stats
}

// ContainerRuntime runs the container operations the API exposes.
type ContainerRuntime interface {
	Logs(ctx context.Context, id string, o kubecontainer.LogOptions, w io.Writer) error
	Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error)
	ExecStream(ctx context.Context, id string, cmd []string, s kubecontainer.Streams) (int, error)
	Attach(ctx context.Context, id string, s kubecontainer.Streams) error
	// PortForward connects stream to port in the network namespace of the
	// pod whose infra container is infraID.
	PortForward(ctx context.Context, infraID string, port int32, stream io.ReadWriteCloser) error
}

// PodSource is the source fed by POST, PUT and DELETE /pods.
type PodSource interface {
	Upsert(ctx context.Context, body []byte) ([]string, error)
	Replace(ctx context.Context, body []byte) ([]string, error)
	Delete(ctx context.Context, namespace, name string) (bool, error)
}

// changeErrorStatus is the HTTP status of a refused change: the agent's
// fault (it could not make the change durable) or the request's.
func changeErrorStatus(err error) int {
	if errors.Is(err, config.ErrNotDurable) {
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// SourcesStatus describes the config sources for GET /sources.
type SourcesStatus interface {
	Status() []config.SourceStatus
	// RejectedPods are the pods the config refused, their status saying why.
	RejectedPods() []*v1.Pod
	// RejectedOf are the rejections of one source's pods, by key.
	RejectedOf(source string, keys []string) []config.Rejection
}

// Deps are the server's collaborators; Pods, Stats and Metrics may be nil.
type Deps struct {
	Host HostInterface
	// View is the agent's pods: the desired ones, those in Docker, their
	// containers.
	View    *PodView
	Runtime ContainerRuntime
	Pods    PodSource // nil: POST/PUT/DELETE /pods disabled
	Sources SourcesStatus
	Stats   cadvisor.Interface  // nil: the stats endpoints answer 503
	Metrics prometheus.Gatherer // the agent's metrics
	// DiskUsage serves the disk usage of /stats/summary and
	// /metrics/cadvisor (nil: none measured).
	DiskUsage DiskUsage
	// ProbeMetrics gathers the prober's per-container series (nil: 503).
	ProbeMetrics prometheus.Gatherer
	// Config returns the running configuration as /configz serves it: an
	// object of named sections, the kubelet's under "kubeletconfig"
	// (nil: 404).
	Config func() any
	// CadvisorMetrics gathers container metrics (nil: 503).
	CadvisorMetrics prometheus.Gatherer
	// Events lists recent events (nil: 404).
	Events interface{ List() v1.EventList }
	// NodeName says whether the agent still holds its node name (nil:
	// nothing to check); /healthz/nodename.
	NodeName func() error
	// Claims lists the pods' persistent volumes that are measured, for
	// /stats/summary's volume stats and the kubelet_volume_stats_* series
	// of /metrics (nil: none).
	Claims interface {
		MeasuredClaims(pod *v1.Pod) []volumes.MeasuredClaim
	}
}

// Options are the server's settings.
type Options struct {
	NodeName   string
	NodeLogDir string // served at /logs/
	RootDir    string // its file system is the node's in /stats/summary
	Profiling  bool   // /debug/pprof/ on the full-access port
	// Auth guards the full-access port (nil: open, as on loopback).
	Auth *Auth
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
	Deps
	opts    Options
	routes  []route
	encoder *podEncoder // of GET /pods and GET /pods/<ns>/<name>
	// allMetrics is /metrics: the agent's, and the volume stats measured
	// at each scrape.
	allMetrics prometheus.Gatherers
}

// New returns a server.
func New(d Deps, o Options) *Server {
	s := &Server{Deps: d, opts: o, encoder: newPodEncoder()}
	if d.Metrics != nil {
		s.allMetrics = prometheus.Gatherers{d.Metrics}
		if d.Claims != nil {
			reg := prometheus.NewRegistry()
			reg.MustRegister(volumeStatsCollector{s})
			s.allMetrics = append(s.allMetrics, reg)
		}
	}
	s.routes = []route{
		{http.MethodGet, "/healthz", true, s.healthz},
		{http.MethodGet, "/healthz/{check}", true, s.healthz},
		{http.MethodGet, "/pods", true, s.listPods},
		{http.MethodGet, "/pods/{namespace}/{name}", true, s.getPod},
		{http.MethodGet, "/sources", true, s.listSources},
		{http.MethodGet, "/spec", true, s.spec},
		{http.MethodGet, "/stats/summary", true, s.summary},
		{http.MethodGet, "/stats", true, s.rootStats},
		{http.MethodGet, "/stats/{namespace}/{pod}/{uid}/{container}", true, s.containerStats},
		{http.MethodGet, "/stats/{podFullName}/{container}", true, s.containerStats},
		{http.MethodGet, "/metrics", true, s.metrics},
		{http.MethodGet, "/events", true, s.listEvents},
		{http.MethodGet, "/metrics/cadvisor", true, s.cadvisorMetrics},
		{http.MethodGet, "/metrics/resource", true, s.resourceMetrics},
		{http.MethodGet, "/metrics/probes", true, s.probeMetrics},
		{http.MethodGet, "/runningpods", false, s.runningPods},
		{http.MethodGet, "/configz", false, s.configz},
		{http.MethodPost, "/pods", false, s.postPods},
		{http.MethodPut, "/pods", false, s.putPods},
		{http.MethodDelete, "/pods/{namespace}/{name}", false, s.deletePod},
		{http.MethodGet, "/containerLogs/{namespace}/{pod}/{container}", false, s.containerLogs},
		{http.MethodGet, "/logs", false, s.nodeLogs},
		{http.MethodGet, "/logs/*", false, s.nodeLogs},
		{http.MethodPost, "/exec/{namespace}/{pod}/{container}", false, s.exec},
		{http.MethodGet, "/exec/{namespace}/{pod}/{container}", false, s.exec},
		{http.MethodPost, "/exec/{namespace}/{pod}/{uid}/{container}", false, s.exec},
		{http.MethodGet, "/exec/{namespace}/{pod}/{uid}/{container}", false, s.exec},
		{http.MethodPost, "/attach/{namespace}/{pod}/{container}", false, s.attach},
		{http.MethodGet, "/attach/{namespace}/{pod}/{container}", false, s.attach},
		{http.MethodPost, "/attach/{namespace}/{pod}/{uid}/{container}", false, s.attach},
		{http.MethodGet, "/attach/{namespace}/{pod}/{uid}/{container}", false, s.attach},
		{http.MethodPost, "/portForward/{namespace}/{pod}", false, s.portForward},
		{http.MethodGet, "/portForward/{namespace}/{pod}", false, s.portForward},
		{http.MethodPost, "/portForward/{namespace}/{pod}/{uid}", false, s.portForward},
		{http.MethodGet, "/portForward/{namespace}/{pod}/{uid}", false, s.portForward},
		{http.MethodPost, "/run/{namespace}/{pod}/{container}", false, s.exec},
	}
	if o.Profiling {
		s.routes = append(s.routes,
			route{http.MethodGet, "/debug/pprof/*", false, func(w http.ResponseWriter, r *http.Request, p map[string]string) {
				switch p["*"] {
				case "cmdline":
					pprof.Cmdline(w, r)
				case "profile":
					pprof.Profile(w, r)
				case "symbol":
					pprof.Symbol(w, r)
				case "trace":
					pprof.Trace(w, r)
				default:
					pprof.Index(w, r)
				}
			}})
	}
	return s
}

// HealthzHandler serves /healthz and its checks alone, for the healthz port:
// a health check answered on a port of its own is not slowed by the
// clients of the API ports.
func (s *Server) HealthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
			return
		}
		for _, pattern := range []string{"/healthz", "/healthz/{check}"} {
			if params, ok := match(pattern, r.URL.Path); ok {
				s.healthz(w, r, params)
				return
			}
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s (this port serves /healthz only)", r.URL.Path))
	})
}

// Handler returns the handler of one port: full access, or read-only.
func (s *Server) Handler(readOnly bool) http.Handler {
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, readOnly)
	}))
	if !readOnly && s.opts.Auth != nil {
		h = s.opts.Auth.filter(s.opts.NodeName, h)
	}
	return h
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, readOnly bool) {
	// r.URL.Query() silently drops what it cannot parse ("command=a;b"
	// would lose an argument): a malformed query is refused instead.
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("malformed query %q: %v", r.URL.RawQuery, err))
		return
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet // net/http drops the body
	}
	var allow []string
	for _, rt := range s.routes {
		params, ok := match(rt.pattern, r.URL.Path)
		if !ok {
			continue
		}
		if rt.method != method {
			allow = append(allow, rt.method)
			if rt.method == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
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
// A trailing slash is ignored ("/stats/" is "/stats").
func match(pattern, path string) (map[string]string, bool) {
	ps := strings.Split(strings.Trim(pattern, "/"), "/")
	xs := strings.Split(strings.Trim(path, "/"), "/")
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

// statusReasons are the reasons an API server gives with each code, so
// clients built for Kubernetes (kubectl, client-go) show and classify our
// errors as theirs: "(NotFound)".
var statusReasons = map[int]metav1.StatusReason{
	http.StatusBadRequest:            metav1.StatusReasonBadRequest,
	http.StatusForbidden:             metav1.StatusReasonForbidden,
	http.StatusNotFound:              metav1.StatusReasonNotFound,
	http.StatusMethodNotAllowed:      metav1.StatusReasonMethodNotAllowed,
	http.StatusConflict:              metav1.StatusReasonConflict,
	http.StatusRequestEntityTooLarge: metav1.StatusReasonRequestEntityTooLarge,
	http.StatusTooManyRequests:       metav1.StatusReasonTooManyRequests,
	http.StatusInternalServerError:   metav1.StatusReasonInternalError,
	http.StatusServiceUnavailable:    metav1.StatusReasonServiceUnavailable,
	http.StatusGatewayTimeout:        metav1.StatusReasonTimeout,
}

// errorStatus is the body of every error: a metav1.Status.
func errorStatus(code int, msg string) *metav1.Status {
	reason, ok := statusReasons[code]
	if !ok {
		reason = metav1.StatusReasonUnknown
	}
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code)}
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorStatus(code, msg))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		klog.V(2).Infof("Write response: %v", err)
	}
}

// healthz answers ok when the sync loop and the relist have completed
// recently and the agent still holds its node name; /healthz/syncloop,
// /healthz/relist and /healthz/nodename check one each.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, p map[string]string) {
	syncLoop, relist := s.Host.Health()
	var nodeName error
	if s.NodeName != nil {
		nodeName = s.NodeName()
	}
	checks := map[string]error{"syncloop": syncLoop, "relist": relist, "nodename": nodeName}
	var failed []string
	switch c := p["check"]; c {
	case "":
		for _, err := range []error{syncLoop, relist, nodeName} {
			if err != nil {
				failed = append(failed, err.Error())
			}
		}
	case "syncloop", "relist", "nodename":
		if err := checks[c]; err != nil {
			failed = append(failed, err.Error())
		}
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such health check: %s", p["check"]))
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(failed) > 0 {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "unhealthy: "+strings.Join(failed, "; ")+"\n")
		return
	}
	_, _ = io.WriteString(w, "ok")
}

func (s *Server) listPods(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	body, err := s.encoder.list(r.Context(), func() []*v1.Pod {
		// Pods the config refused are listed too, so a rejection is
		// never silent: their status says why.
		return append(s.View.GetPods(), s.Sources.RejectedPods()...)
	})
	writeEncoded(w, body, err)
}

// writeEncoded writes what the pod encoder made; it fails only when the
// client went away while waiting, or for a value JSON cannot carry.
func writeEncoded(w http.ResponseWriter, body []byte, err error) {
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		klog.V(2).Infof("Encode pods: %v", err)
		return // nobody is listening
	case err != nil:
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("encode pods: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body); err != nil {
		klog.V(2).Infof("Write response: %v", err)
	}
}

func (s *Server) getPod(w http.ResponseWriter, r *http.Request, p map[string]string) {
	pod, ok := s.View.GetPod(p["namespace"], p["name"])
	if !ok {
		for _, r := range s.Sources.RejectedPods() {
			if r.Namespace == p["namespace"] && r.Name == p["name"] {
				pod, ok = r, true
				break
			}
		}
	}
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("pod %s/%s not found", p["namespace"], p["name"]))
		return
	}
	pod.APIVersion, pod.Kind = "v1", "Pod"
	body, err := s.encoder.one(r.Context(), pod)
	writeEncoded(w, body, err)
}

// runningPods serves /runningpods/: the pods as found in Docker.
func (s *Server) runningPods(w http.ResponseWriter, _ *http.Request, _ map[string]string) {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: []v1.Pod{}}
	for _, p := range s.View.RunningPods() {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, http.StatusOK, list)
}

// configz serves the running configuration, in sections as the kubelet's
// /configz does (its KubeletConfiguration under "kubeletconfig").
func (s *Server) configz(w http.ResponseWriter, _ *http.Request, _ map[string]string) {
	if s.Config == nil {
		writeError(w, http.StatusNotFound, "the configuration is not served")
		return
	}
	writeJSON(w, http.StatusOK, s.Config())
}

func (s *Server) listEvents(w http.ResponseWriter, _ *http.Request, _ map[string]string) {
	if s.Events == nil {
		writeError(w, http.StatusNotFound, "events are not recorded")
		return
	}
	writeJSON(w, http.StatusOK, s.Events.List())
}

func (s *Server) listSources(w http.ResponseWriter, _ *http.Request, _ map[string]string) {
	writeJSON(w, http.StatusOK, s.Sources.Status())
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
	Pods     []string           `json:"pods"`
	Rejected []config.Rejection `json:"rejected,omitempty"` // of those, the ones refused, and why
}

func (s *Server) changePods(w http.ResponseWriter, r *http.Request, change func(context.Context, []byte) ([]string, error)) {
	if s.Pods == nil {
		writeError(w, http.StatusNotFound, "the API pod source is disabled")
		return
	}
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	keys, err := change(r.Context(), body)
	if err != nil {
		writeError(w, changeErrorStatus(err), fmt.Sprintf("%s /pods: %v", r.Method, err))
		return
	}
	klog.Infof("API source: %s /pods from %s: %s", r.Method, r.RemoteAddr, strings.Join(keys, ", "))
	writeJSON(w, http.StatusOK, podsResult{Pods: keys, Rejected: s.Sources.RejectedOf(api.SourceAPI, keys)})
}

func (s *Server) postPods(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	s.changePods(w, r, s.Pods.Upsert)
}

func (s *Server) putPods(w http.ResponseWriter, r *http.Request, _ map[string]string) {
	s.changePods(w, r, s.Pods.Replace)
}

func (s *Server) deletePod(w http.ResponseWriter, r *http.Request, p map[string]string) {
	if s.Pods == nil {
		writeError(w, http.StatusNotFound, "the API pod source is disabled")
		return
	}
	found, err := s.Pods.Delete(r.Context(), p["namespace"], p["name"])
	if err != nil {
		writeError(w, changeErrorStatus(err), fmt.Sprintf("DELETE pod %s/%s: %v", p["namespace"], p["name"], err))
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, fmt.Sprintf("pod %s/%s is not a pod of the API source", p["namespace"], p["name"]))
		return
	}
	klog.Infof("API source: DELETE pod %s/%s from %s", p["namespace"], p["name"], r.RemoteAddr)
	writeJSON(w, http.StatusOK, podsResult{Pods: []string{p["namespace"] + "/" + p["name"]}})
}

// shutdownGrace is how long a stopping server waits for its requests and
// streams to end.
const shutdownGrace = 2 * time.Second

// Serve listens on addr and serves h (over TLS when tlsConfig is set) until
// ctx is cancelled, then shuts down (in-flight requests get a moment to
// finish). The listener is bound before Serve returns, so callers know the
// port is up; the returned function serves.
func Serve(ctx context.Context, addr string, h http.Handler, tlsConfig *tls.Config) (func() error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	limit := newConnLimiter(maxConnsPerPort())
	ln = limit.listener(ln)
	// Every request's context ends with ctx, so a hijacked stream (exec,
	// attach, port-forward), which Shutdown neither cancels nor waits for,
	// ends with the server too; handlers counts them, to wait for them.
	var handlers sync.WaitGroup
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Done()
			h.ServeHTTP(w, r)
		}),
		BaseContext: func(net.Listener) context.Context { return ctx },
		// A client that sends nothing, or a body slowly, holds a
		// connection for at most these; streams (logs -f, exec) are not
		// bounded once their request is read.
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       time.Minute,
		ConnState:         limit.connState,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	wait := func() error {
		errc := make(chan error, 1)
		go func() { errc <- srv.Serve(ln) }()
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-errc
		done := make(chan struct{})
		go func() { handlers.Wait(); close(done) }()
		select {
		case <-done:
		case <-sctx.Done():
			klog.Errorf("Server on %s: streams still open %v after shutdown", addr, shutdownGrace)
		}
		return nil
	}
	return wait, nil
}
