package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/await"
	"github.com/classic-kubelet/kubelet/pkg/config"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/diskusage"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fakeHost is the agent beyond its pods.
type fakeHost struct {
	relist error
	// podsCgroup is kubepods as cAdvisor names it ("" for none).
	podsCgroup string
}

func (f *fakeHost) PodCgroupPath(*v1.Pod) string { return "" }
func (f *fakeHost) PodsCgroupPath() string       { return f.podsCgroup }
func (f *fakeHost) Health() (error, error)       { return nil, f.relist }

// fakePods are the PodSources of a view: desired pods, their statuses and
// the containers the last relist found, by pod UID. relists counts the
// relists asked for; each one moves the containers of fresh into the
// cache, as a relist that finds containers started since the last.
type fakePods struct {
	mu       sync.Mutex
	desired  []*v1.Pod
	statuses map[types.UID]v1.PodStatus
	cache    map[types.UID]*kubecontainer.PodState
	fresh    map[types.UID]*kubecontainer.PodState
	relists  int
	relisted time.Time
}

type fakeDesired struct{ *fakePods }

func (f fakeDesired) All() []*v1.Pod { return append([]*v1.Pod(nil), f.desired...) }

type fakeStatuses struct{ *fakePods }

func (f fakeStatuses) Get(uid types.UID) (v1.PodStatus, bool) {
	st, ok := f.statuses[uid]
	return st, ok
}

type fakeCache struct{ *fakePods }

func (f fakeCache) Get(uid types.UID) *kubecontainer.PodState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cache[uid]
}
func (f fakeCache) All() map[types.UID]*kubecontainer.PodState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cache
}
func (f fakeCache) GetNewerThan(ctx context.Context, uid types.UID, since time.Time) (*kubecontainer.PodState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.relisted.After(since) {
		return nil, context.DeadlineExceeded // no relist came: as if ctx ended
	}
	return f.cache[uid], nil
}

type fakeRelist struct{ *fakePods }

func (f fakeRelist) RelistNow() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.relists++
	if f.fresh != nil {
		f.cache = f.fresh
		f.fresh = nil
	}
	f.relisted = time.Now().Add(time.Nanosecond)
}

// view is a PodView over f; a pod without a status has its fallback's,
// which names it.
func (f *fakePods) view() *PodView {
	return NewPodView(PodSources{Desired: fakeDesired{f}, Statuses: fakeStatuses{f}, Cache: fakeCache{f}, Relist: fakeRelist{f},
		Fallback: func(p *v1.Pod) v1.PodStatus {
			return v1.PodStatus{Phase: v1.PodPending, Message: "fallback of " + p.Name}
		}})
}

// webPods are a desired pod default/web (UID u1) whose container server
// runs as abc, and an orphan pod found in Docker that nothing desires.
func webPods(status v1.PodStatus) *fakePods {
	return &fakePods{
		desired: []*v1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "server", Image: "srv:1"}}},
		}},
		statuses: map[types.UID]v1.PodStatus{"u1": status},
		cache: map[types.UID]*kubecontainer.PodState{
			"u1": {UID: "u1", Name: "web", Namespace: "default", Containers: []*kubecontainer.ContainerState{
				{ID: "abc", Name: "server", Image: "srv:1", Running: true}}},
			"u-orphan": {UID: "u-orphan", Name: "orphan", Namespace: "default", Containers: []*kubecontainer.ContainerState{
				{ID: "def", Name: "c", Image: "busybox", Running: true}}},
		},
	}
}

// fakeDisk is a disk usage measurement taken already.
type fakeDisk struct{ st *diskusage.Stats }

func (f fakeDisk) Last() *diskusage.Stats { return f.st }

type fakeRuntime struct{}

func (fakeRuntime) Logs(_ context.Context, id string, o kubecontainer.LogOptions, w io.Writer) error {
	fmt.Fprintf(w, "logs of %s tail=%d follow=%v\n", id, o.TailLines, o.Follow)
	return nil
}
func (fakeRuntime) Exec(_ context.Context, id string, cmd []string, _ time.Duration) (int, []byte, error) {
	return 3, []byte(strings.Join(cmd, " ")), nil
}

func (fakeRuntime) ExecStream(context.Context, string, []string, kubecontainer.Streams) (int, error) {
	return 0, errors.New("not in unit tests")
}
func (fakeRuntime) Attach(context.Context, string, kubecontainer.Streams) error {
	return errors.New("not in unit tests")
}
func (fakeRuntime) PortForward(context.Context, string, int32, io.ReadWriteCloser) error {
	return errors.New("not in unit tests")
}

type fakeSource struct{ calls []string }

func (f *fakeSource) Upsert(_ context.Context, body []byte) ([]string, error) {
	if strings.Contains(string(body), "bad") {
		return nil, errors.New("document 1: spec.containers[0].bad: unknown field")
	}
	f.calls = append(f.calls, "upsert")
	return []string{"default/a"}, nil
}
func (f *fakeSource) Replace(_ context.Context, _ []byte) ([]string, error) {
	f.calls = append(f.calls, "replace")
	return []string{}, nil
}
func (f *fakeSource) Delete(_ context.Context, ns, name string) (bool, error) {
	f.calls = append(f.calls, "delete "+ns+"/"+name)
	return name == "a", nil
}

type fakeSources struct{}

func (fakeSources) RejectedPods() []*v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "default"}}
	p.Status = v1.PodStatus{Phase: v1.PodPending, Reason: "NodePorts", Message: "Pod was rejected: host port 0.0.0.0:80/TCP is claimed by pod default/web"}
	return []*v1.Pod{p}
}

func (fakeSources) RejectedOf(source string, keys []string) []config.Rejection {
	if source == "api" && len(keys) == 1 && keys[0] == "default/a" {
		return []config.Rejection{{Key: "default/a", Reason: "NodePorts", Message: "host port held"}}
	}
	return nil
}

func (fakeSources) Status() []config.SourceStatus {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return []config.SourceStatus{
		{Name: "file", Seen: true, Pods: 1, LastSuccess: &t},
		{Name: "http", LastError: "HTTP 500", LastErrorAt: &t},
	}
}

func testServer(t *testing.T) (*fakeSource, *httptest.Server, *httptest.Server) {
	t.Helper()
	start := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	pods := webPods(v1.PodStatus{Phase: v1.PodRunning, PodIP: "172.17.0.2", StartTime: &start,
		ContainerStatuses: []v1.ContainerStatus{{Name: "server", Ready: true, ContainerID: "docker://abc",
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: start}}}}})
	src := &fakeSource{}
	logDir := t.TempDir()
	_ = os.WriteFile(filepath.Join(logDir, "syslog"), []byte("node log line\n"), 0o644)
	_ = syscall.Mkfifo(filepath.Join(logDir, "fifo"), 0o644) // would block a plain open
	s := New(Deps{Host: &fakeHost{}, View: pods.view(), Runtime: fakeRuntime{}, Pods: src, Sources: fakeSources{}, Stats: failedStats{errors.New("no cgroups here")},
		Config: func() any { return map[string]any{"kubeletconfig": map[string]string{"maxPods": "110"}} }},
		Options{NodeName: "n", NodeLogDir: logDir, RootDir: t.TempDir()})
	full := httptest.NewServer(s.Handler(false))
	ro := httptest.NewServer(s.Handler(true))
	t.Cleanup(func() { full.Close(); ro.Close() })
	return src, full, ro
}

func do(t *testing.T, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func TestRoutes(t *testing.T) {
	src, full, ro := testServer(t)
	cases := []struct {
		name       string
		base       *httptest.Server
		method     string
		path, body string
		code       int
		contains   string
		golden     string
		allow      string
	}{
		{"healthz", full, "GET", "/healthz", "", 200, "ok", "", ""},
		{"healthz syncloop", full, "GET", "/healthz/syncloop", "", 200, "ok", "", ""},
		{"healthz unknown check", full, "GET", "/healthz/nope", "", 404, "no such health check", "", ""},
		{"stats without cadvisor", ro, "GET", "/stats/summary", "", 503, "no cgroups here", "", ""},
		{"spec without cadvisor", ro, "GET", "/spec", "", 503, "no cgroups here", "", ""},
		{"container logs", full, "GET", "/containerLogs/default/web/server?tailLines=5&follow=true", "", 200, "logs of abc tail=5 follow=true", "", ""},
		{"container logs bad param", full, "GET", "/containerLogs/default/web/server?tailLines=x", "", 400, "tailLines", "", ""},
		{"container logs missing", full, "GET", "/containerLogs/default/web/nope", "", 404, "not found", "", ""},
		{"container logs on read-only", ro, "GET", "/containerLogs/default/web/server", "", 405, "read-only port", "", ""},
		{"exec", full, "POST", "/exec/default/web/server?command=echo&command=hi", "", 200, `"exitCode": 3`, "", ""},
		{"run alias", full, "POST", "/run/default/web/server?cmd=echo+hi", "", 200, `"output": "echo hi"`, "", ""},
		{"exec without command", full, "POST", "/exec/default/web/server", "", 400, "no command", "", ""},
		{"GET exec without upgrade", full, "GET", "/exec/default/web/server?command=id", "", 400, "streaming upgrade", "", ""},
		{"exec with the pod's UID", full, "POST", "/exec/default/web/nope/server?command=id", "", 404, "not found", "", ""},
		{"attach without upgrade", full, "POST", "/attach/default/web/server", "", 400, "streaming upgrade", "", ""},
		{"attach on read-only", ro, "GET", "/attach/default/web/server", "", 405, "read-only port", "", ""},
		{"portForward to a missing pod", full, "GET", "/portForward/default/nope", "", 404, "not found", "", ""},
		{"exec on read-only", ro, "POST", "/exec/default/web/server?command=id", "", 405, "read-only port", "", ""},
		{"node log", full, "GET", "/logs/syslog", "", 200, "node log line", "", ""},
		{"node log listing", full, "GET", "/logs/", "", 200, "syslog", "", ""},
		{"node log FIFO refused without blocking", full, "GET", "/logs/fifo", "", 403, "not a regular file", "", ""},
		{"pprof off by default", full, "GET", "/debug/pprof/", "", 404, "no such endpoint", "", ""},
		{"healthz read-only", ro, "GET", "/healthz", "", 200, "ok", "", ""},
		{"pods", ro, "GET", "/pods", "", 200, "", "pods.json", ""},
		{"one pod", full, "GET", "/pods/default/web", "", 200, `"kind": "Pod"`, "", ""},
		{"missing pod", full, "GET", "/pods/default/nope", "", 404, `"message": "pod default/nope not found"`, "", ""},
		{"sources", ro, "GET", "/sources", "", 200, "", "sources.json", ""},
		{"unknown path", full, "GET", "/nope", "", 404, `"kind": "Status"`, "", ""},
		{"errors are API statuses", full, "GET", "/pods/default/nope", "", 404, `"reason": "NotFound"`, "", ""},
		{"error status has apiVersion", full, "PATCH", "/pods", "", 405, `"apiVersion": "v1"`, "", ""},
		{"running pods", full, "GET", "/runningpods/", "", 200, `"name": "orphan"`, "", ""},
		{"running pods not on read-only", ro, "GET", "/runningpods/", "", 405, "read-only port", "", ""},
		{"configz", full, "GET", "/configz", "", 200, `"kubeletconfig": {`, "", ""},
		{"resource metrics without stats", ro, "GET", "/metrics/resource", "", 200, "resource_scrape_error 1", "", ""},
		{"trailing junk", full, "GET", "/pods/default/web/extra", "", 404, "no such endpoint", "", ""},
		{"wrong method", full, "DELETE", "/healthz", "", 405, "not allowed", "", "GET, HEAD"},
		{"wrong method lists all allowed", full, "PATCH", "/pods", "", 405, "not allowed", "", "GET, HEAD, POST, PUT"},
		{"HEAD of a GET endpoint", ro, "HEAD", "/pods", "", 200, "", "", ""},
		{"HEAD of healthz", ro, "HEAD", "/healthz", "", 200, "", "", ""},
		{"malformed exec query", full, "POST", "/exec/default/web/server?command=a;b", "", 400, "malformed query", "", ""},
		{"post on read-only", ro, "POST", "/pods", "{}", 405, "read-only port", "", ""},
		{"delete on read-only", ro, "DELETE", "/pods/default/a", "", 405, "read-only port", "", ""},
		{"post answers its pods and those rejected", full, "POST", "/pods", "apiVersion: v1", 200, `"pod": "default/a"`, "", ""},
		{"a rejected pod by name", ro, "GET", "/pods/default/held", "", 200, `"message": "Pod was rejected: host port`, "", ""},
		{"post invalid names the field", full, "POST", "/pods", "bad", 400, "spec.containers[0].bad", "", ""},
		{"post too big", full, "POST", "/pods", strings.Repeat("x", MaxBodyBytes+1), 413, "larger than", "", ""},
		{"put", full, "PUT", "/pods", "apiVersion: v1\nkind: List\nitems: []", 200, `"pods": []`, "", ""},
		{"delete", full, "DELETE", "/pods/default/a", "", 200, `"default/a"`, "", ""},
		{"delete other source's pod", full, "DELETE", "/pods/default/web", "", 404, "not a pod of the API source", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, c.method, c.base.URL+c.path, c.body)
			if resp.StatusCode != c.code {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, c.code, body)
			}
			if c.code >= 400 && resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("error content type %q, want JSON", resp.Header.Get("Content-Type"))
			}
			if c.contains != "" && !strings.Contains(body, c.contains) {
				t.Errorf("body %s lacks %q", body, c.contains)
			}
			if c.allow != "" && resp.Header.Get("Allow") != c.allow {
				t.Errorf("Allow %q, want %q", resp.Header.Get("Allow"), c.allow)
			}
			if c.golden != "" {
				path := filepath.Join("testdata", c.golden)
				if *update {
					_ = os.WriteFile(path, []byte(body), 0o644)
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if body != string(want) {
					t.Errorf("body differs from %s:\n%s", path, body)
				}
			}
		})
	}
	want := "upsert,replace,delete default/a,delete default/web"
	if got := strings.Join(src.calls, ","); got != want {
		t.Errorf("source calls %s, want %s (read-only and invalid requests must not reach it)", got, want)
	}
}

// No request reaches outside the node log directory.
func TestNodeLogsPathTraversal(t *testing.T) {
	logDir := t.TempDir()
	outside := t.TempDir()
	for _, f := range []string{filepath.Join(logDir, "ok.log"), filepath.Join(outside, "secret"), filepath.Join(outside, "container.log")} {
		if err := os.WriteFile(f, []byte("content of "+filepath.Base(f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Symlink(filepath.Join(outside, "secret"), filepath.Join(logDir, "escape"))
	_ = os.Symlink(outside, filepath.Join(logDir, "escapedir"))
	_ = os.Symlink(filepath.Join(outside, "container.log"), filepath.Join(logDir, "managed.log"))
	pods := &fakePods{cache: map[types.UID]*kubecontainer.PodState{"u1": {UID: "u1", Name: "web", Namespace: "default",
		Containers: []*kubecontainer.ContainerState{{ID: "abc", Name: "server", LogPath: filepath.Join(outside, "container.log")}}}}}
	s := New(Deps{Host: &fakeHost{}, View: pods.view(), Runtime: fakeRuntime{}, Sources: fakeSources{}}, Options{NodeLogDir: logDir})
	srv := httptest.NewServer(s.Handler(false))
	defer srv.Close()

	attempts := []string{
		"/logs/../" + filepath.Base(outside) + "/secret",
		"/logs/%2e%2e/%2e%2e/etc/passwd",
		"/logs/%252e%252e/%252e%252e/etc/passwd",
		"/logs/..%2f..%2fetc%2fpasswd",
		"/logs/..\\..\\etc\\passwd",
		"/logs/%5c..%5c..%5cetc%5cpasswd",
		"/logs//etc/passwd",
		"/logs/escape",
		"/logs/escapedir/secret",
		"/logs/./../secret",
		"/logs/ok.log%00.txt",
		"/logs/" + outside + "/secret",
	}
	for _, path := range attempts {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.URL.Opaque = path // send exactly these bytes
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || strings.Contains(string(body), "content of secret") {
			t.Errorf("%s: %d %q, want a refusal", path, resp.StatusCode, body)
		}
	}
	for path, want := range map[string]string{"/logs/ok.log": "content of ok.log", "/logs/managed.log": "content of container.log"} {
		_, body := do(t, "GET", srv.URL+path, "")
		if body != want {
			t.Errorf("%s = %q, want %q", path, body, want)
		}
	}
}

// An agent whose node name another agent took in etcd says so on /healthz
// (it writes nothing to etcd any more), while the other checks pass.
func TestHealthzNodeName(t *testing.T) {
	taken := errors.New(`node name "n" is held in etcd by instance b on host h2`)
	var nodeName error
	s := New(Deps{Host: &fakeHost{}, Runtime: fakeRuntime{}, Sources: fakeSources{},
		NodeName: func() error { return nodeName }}, Options{})
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		s.HealthzHandler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, body := get("/healthz/nodename"); code != 200 || body != "ok" {
		t.Errorf("held: %d %q", code, body)
	}
	nodeName = taken
	for _, path := range []string{"/healthz", "/healthz/nodename"} {
		if code, body := get(path); code != 500 || !strings.Contains(body, "held in etcd by instance b") {
			t.Errorf("%s when taken: %d %q", path, code, body)
		}
	}
	if code, _ := get("/healthz/relist"); code != 200 {
		t.Errorf("/healthz/relist failed with the node name check: %d", code)
	}
}

// A hijacked stream (exec, attach, port-forward) ends with the server: its
// request's context is cancelled when the server's is, and the server waits
// for it before it returns (http.Server.Shutdown does neither for a
// hijacked connection).
func TestServeEndsHijackedStreams(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inStream, release, ended := make(chan struct{}), make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		close(inStream)
		<-r.Context().Done() // a session's streams run until this
		<-release            // a session winding down: the server waits for it
		close(ended)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	wait, err := Serve(ctx, addr, h, nil)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- wait() }()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /exec HTTP/1.1\r\nHost: x\r\n\r\n")
	<-inStream
	cancel()
	// The server waits for the session's handler, and has nothing else
	// left to do.
	await.Parked(t, 1, "server.Serve.", "sync.(*WaitGroup).Wait(")
	select {
	case <-served:
		t.Fatal("the server returned while its hijacked stream was winding down")
	default:
	}
	close(release)
	select {
	case <-served:
	case <-time.After(await.Timeout):
		t.Fatal("the server did not return after its context ended and its stream did")
	}
	select {
	case <-ended:
	default:
		t.Error("the server returned before its hijacked stream ended")
	}
}
