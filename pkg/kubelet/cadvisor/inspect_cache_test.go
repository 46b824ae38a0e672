package cadvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"

	"github.com/classic-kubelet/kubelet/pkg/await"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
)

// fakeDocker is a stand-in Engine API on a unix socket that counts
// inspects, and the runtime's event stream, fed by the test: each
// subscription's stream is handed to events.
type fakeDocker struct {
	inspects atomic.Int32
	lists    atomic.Int32
	removed  sync.Map // IDs whose inspect answers 404
	streams  chan chan kubecontainer.Event
	stream   chan kubecontainer.Event // the current one
}

func (f *fakeDocker) Events(ctx context.Context) (<-chan kubecontainer.Event, error) {
	ch := make(chan kubecontainer.Event)
	f.streams <- ch
	return ch, nil
}

// send hands the cache an event about container id and waits until the
// cache has taken it: its goroutine is parked again.
func (f *fakeDocker) send(t *testing.T, id, action string) {
	t.Helper()
	f.stream <- kubecontainer.Event{Type: kubecontainer.ContainerEvent, ContainerID: id, Action: action}
	settle(t)
}

// settle waits until what the test did to the stream has reached the
// cache: the hub is parked (it handed the event on, or heard the stream
// end), then the cache's goroutine (it applied what it was handed). A
// goroutine handed something is runnable until it runs: parked, it has
// nothing left to do.
func settle(t *testing.T) {
	t.Helper()
	await.Parked(t, 1, "runtimeevents.(*Hub).Run(")
	await.Parked(t, 1, "cadvisor.(*inspectCache).watch(")
}

func startFakeDocker(t *testing.T) (*fakeDocker, string) {
	f := &fakeDocker{streams: make(chan chan kubecontainer.Event, 1)}
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/events":
			t.Error("the cache subscribed to Docker's events itself")
			http.NotFound(w, r)
		case strings.HasSuffix(r.URL.Path, "/containers/json"):
			f.lists.Add(1)
			io.WriteString(w, "[]")
		case strings.HasSuffix(r.URL.Path, "/json"):
			n := f.inspects.Add(1)
			if _, gone := f.removed.Load(strings.Split(r.URL.Path, "/")[3]); gone {
				http.Error(w, `{"message":"No such container"}`, http.StatusNotFound)
				return
			}
			fmt.Fprintf(w, `{"Id":"x","n":%d}`, n)
		default:
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f, "unix://" + sock
}

// startCache puts an inspect cache in front of f, following f's events
// through a hub, and returns a GET of a path through it (status and body)
// once it follows them.
func startCache(t *testing.T, f *fakeDocker, endpoint string) (*inspectCache, func(path string) (int, string), *await.FakeClock) {
	t.Helper()
	clk := await.NewFakeClock(time.Now())
	hub := runtimeevents.NewHub(f, clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	c, err := newInspectCache(endpoint, hub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	sock := strings.TrimPrefix(c.Endpoint(), "unix://")
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get("http://docker" + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	f.stream = <-f.streams
	waitLive(t, c)
	return c, get, clk
}

// waitLive waits until c follows the event stream the hub subscribed to.
func waitLive(t *testing.T, c *inspectCache) {
	t.Helper()
	settle(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.live {
		t.Fatal("the cache does not follow the stream the hub subscribed to")
	}
}

func TestInspectCache(t *testing.T) {
	f, endpoint := startFakeDocker(t)
	c, getStatus, clk := startCache(t, f, endpoint)
	get := func(path string) string {
		t.Helper()
		_, body := getStatus(path)
		return body
	}
	id := strings.Repeat("ab", 32)
	inspect := "/v1.41/containers/" + id + "/json"

	steps := []struct {
		name         string
		do           func()
		wantInspects int32
		wantBody     string
	}{
		{"first inspect reaches Docker", func() { get(inspect) }, 1, `"n":1`},
		{"second is answered from memory", func() {}, 1, `"n":1`},
		{"an event about another container changes nothing", func() { f.send(t, strings.Repeat("cd", 32), "start") }, 1, `"n":1`},
		{"an event about it drops its answer", func() { f.send(t, id, "die") }, 2, `"n":2`},
		{"a broken event stream drops everything", func() {
			close(f.stream)
			settle(t)
			c.mu.Lock()
			live, n := c.live, len(c.entries)
			c.mu.Unlock()
			if live || n != 0 {
				t.Fatalf("with the stream broken the cache is live %v with %d answers", live, n)
			}
		}, 3, `"n":3`},
		{"nothing is kept while it is down", func() {}, 4, `"n":4`},
		{"the stream is back", func() {
			clk.Step(clk.AwaitWait(t, 1)) // the hub's back-off
			f.stream = <-f.streams
			waitLive(t, c)
		}, 5, `"n":5`},
		{"answers are kept again", func() {}, 5, `"n":5`},
	}
	for _, s := range steps {
		s.do()
		body := get(inspect)
		if got := f.inspects.Load(); got != s.wantInspects || !strings.Contains(body, s.wantBody) {
			t.Fatalf("%s: Docker saw %d inspects (want %d), answer %s (want %s)", s.name, got, s.wantInspects, body, s.wantBody)
		}
	}
	// Everything else passes through, every time.
	get("/v1.41/containers/json")
	get("/v1.41/containers/json")
	if f.lists.Load() != 2 {
		t.Errorf("lists reaching Docker: %d, want 2", f.lists.Load())
	}
	// An inspect with a query (size=1) is not cached.
	get(inspect + "?size=1")
	if f.inspects.Load() != 6 {
		t.Errorf("an inspect with a query was answered from memory")
	}
}

// A container removed from Docker but still housekept by cAdvisor (one of
// its cgroups left) is inspected every 10-15 s: once its destroy event
// was seen, the 404 is final and answered from memory, until nobody has
// asked for goneTTL.
func TestInspectCacheKeepsTheNotFoundOfADestroyedContainer(t *testing.T) {
	f, endpoint := startFakeDocker(t)
	c, get, _ := startCache(t, f, endpoint)
	id := strings.Repeat("ef", 32)
	inspect := "/v1.41/containers/" + id + "/json"
	f.removed.Store(id, true)

	expect := func(step string, wantInspects int32) {
		t.Helper()
		status, body := get(inspect)
		if got := f.inspects.Load(); status != http.StatusNotFound || got != wantInspects {
			t.Fatalf("%s: answer %d %s, Docker saw %d inspects (want 404, %d)", step, status, body, got, wantInspects)
		}
	}
	// Not yet destroyed: a 404 may be a container being created.
	expect("before its destroy event", 1)
	expect("before its destroy event, again", 2)

	f.send(t, id, "destroy")
	c.mu.Lock()
	_, seen := c.destroyed[id]
	c.mu.Unlock()
	if !seen {
		t.Fatal("the destroy event was not applied")
	}
	expect("first inspect after its destroy", 3)
	expect("later inspects", 3)
	expect("later inspects, again", 3)

	// Unasked for longer than goneTTL, it is forgotten at the next inspect
	// of any container (an idle node has no events to prune at).
	c.mu.Lock()
	c.destroyed[id] = time.Now().Add(-2 * goneTTL)
	c.pruned = time.Time{}
	c.mu.Unlock()
	get("/v1.41/containers/" + strings.Repeat("cd", 32) + "/json")
	c.mu.Lock()
	n, m := len(c.destroyed), len(c.entries)
	c.mu.Unlock()
	if n != 0 || m != 1 { // the other container's answer
		t.Fatalf("a destroyed container unasked for 2 × goneTTL is still remembered (%d destroyed, %d answers)", n, m)
	}
	expect("after it was forgotten", 5)
}

// The slimmed inspect decodes, in the types cAdvisor uses, to the same
// values in every field cAdvisor reads, and is less than half the size.
func TestSlimInspectKeepsWhatCAdvisorReads(t *testing.T) {
	full, err := os.ReadFile("testdata/inspect-infra.json") // a real answer of Docker 26
	if err != nil {
		t.Fatal(err)
	}
	s := slim(full)
	if 2*len(s) > len(full) {
		t.Errorf("slim inspect is %d bytes of %d", len(s), len(full))
	}
	var want, got container.InspectResponse
	if err := json.Unmarshal(full, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(s, &got); err != nil {
		t.Fatalf("slim inspect %s: %v", s, err)
	}
	read := func(c container.InspectResponse) []any {
		return []any{c.ID, c.Name, c.Created, c.RestartCount, c.State, c.Config.Image, c.Config.Labels, c.Config.Env,
			c.HostConfig.NetworkMode, c.NetworkSettings}
	}
	if !reflect.DeepEqual(read(want), read(got)) {
		t.Errorf("slim inspect differs where cAdvisor reads:\nfull %+v\nslim %+v", read(want), read(got))
	}
	if got.State == nil || got.State.Pid == 0 || got.NetworkSettings == nil || len(got.NetworkSettings.Networks) == 0 {
		t.Errorf("the fixture lacks what the test compares: %+v", got)
	}
	for _, notInspect := range []string{`{"message":"No such container"}`, `[]`, `not json`} {
		if string(slim([]byte(notInspect))) != notInspect {
			t.Errorf("slim changed %s", notInspect)
		}
	}
}
