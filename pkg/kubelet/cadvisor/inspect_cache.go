package cadvisor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
)

// inspectCache is the Docker socket cAdvisor is given: a proxy to the real
// one that answers container inspects from memory. cAdvisor's Docker
// handler inspects every container at each housekeeping (for its health
// status), so a node of 250 idle pods cost dockerd some 40 inspects a
// second. A container's inspect changes only with an event about it
// (start, die, health_status, update, rename, destroy, ...), so an answer
// is kept until Docker's event stream names the container; while that
// stream is down nothing is kept. The events come from the agent's one
// subscription (pkg/kubelet/runtimeevents): the cache makes no /events
// request of its own.
//
// cAdvisor was also seen to go on housekeeping some containers removed
// during bursts (it drops one only once it finds none of its cgroups),
// inspecting each every 10-15 s for an answer of 404. A 404 for a
// container whose destroy event was seen is final (IDs are never reused),
// so it is kept too, for as long as cAdvisor keeps asking.
type inspectCache struct {
	upstream *url.URL // a unix:// endpoint
	dir      string   // holds the socket
	srv      *http.Server
	proxy    *httputil.ReverseProxy
	client   *http.Client
	cancel   context.CancelFunc
	done     chan struct{}

	mu      sync.Mutex
	live    bool              // the event stream is connected
	epoch   uint64            // bumped when the stream is lost or regained
	seq     uint64            // bumped by every event
	touched map[string]uint64 // seq of the last event about each container
	entries map[string]cached // by full container ID
	// destroyed holds the containers whose destroy event was seen, with
	// when they were last asked about; pruned after goneTTL unasked.
	destroyed map[string]time.Time
	pruned    time.Time
}

// goneTTL is how long a destroyed container is remembered without being
// asked about: twice cAdvisor's longest housekeeping interval (15 s), so
// what it still housekeeps stays and the one inspect of its own removal
// (for the exit code) is soon forgotten.
const goneTTL = 30 * time.Second

type cached struct {
	status int
	header http.Header
	body   []byte
}

// newInspectCache starts a cache in front of the unix socket endpoint that
// follows every container's events on events (nil: none, and nothing is
// kept), and returns it; Endpoint is what cAdvisor is to use.
func newInspectCache(endpoint string, events *runtimeevents.Hub) (*inspectCache, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "unix" {
		return nil, fmt.Errorf("inspect cache: %q is not a unix socket endpoint", endpoint)
	}
	dir, err := os.MkdirTemp("", "classic-kubelet-cadvisor-")
	if err != nil {
		return nil, fmt.Errorf("inspect cache: %w", err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "docker.sock"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("inspect cache: %w", err)
	}
	transport := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", u.Path)
	}}
	ctx, cancel := context.WithCancel(context.Background())
	c := &inspectCache{upstream: u, dir: dir, client: &http.Client{Transport: transport}, cancel: cancel,
		done: make(chan struct{}), entries: map[string]cached{}, touched: map[string]uint64{},
		destroyed: map[string]time.Time{}}
	c.proxy = httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: "docker"})
	c.proxy.Transport = transport
	c.proxy.FlushInterval = -1                    // event and stats streams
	c.proxy.ErrorLog = log.New(io.Discard, "", 0) // cAdvisor's own stream ending is not news
	c.srv = &http.Server{Handler: http.HandlerFunc(c.serve)}
	go c.srv.Serve(ln)
	if events == nil {
		close(c.done)
		return c, nil
	}
	sub := events.Subscribe("cadvisor", func(ev kubecontainer.Event) bool { return ev.Type == kubecontainer.ContainerEvent })
	go c.watch(ctx, sub)
	return c, nil
}

// Endpoint is the cache's own socket.
func (c *inspectCache) Endpoint() string { return "unix://" + filepath.Join(c.dir, "docker.sock") }

// Close stops the proxy and the event watch and removes the socket.
func (c *inspectCache) Close() {
	c.cancel()
	c.srv.Close()
	<-c.done
	os.RemoveAll(c.dir)
}

var inspectPath = regexp.MustCompile(`^(/v[0-9.]+)?/containers/([0-9a-f]{64})/json$`)

func (c *inspectCache) serve(w http.ResponseWriter, r *http.Request) {
	m := inspectPath.FindStringSubmatch(r.URL.Path)
	if r.Method != http.MethodGet || m == nil || r.URL.RawQuery != "" {
		c.proxy.ServeHTTP(w, r)
		return
	}
	id := m[2]
	c.mu.Lock()
	e, hit := c.entries[id]
	live, epoch, seq := c.live, c.epoch, c.seq
	now := time.Now()
	if _, gone := c.destroyed[id]; gone {
		c.destroyed[id] = now
	}
	c.prune(now) // here too: an idle node has no events
	c.mu.Unlock()
	if hit {
		writeCached(w, e)
		return
	}
	req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://docker"+r.URL.Path, nil)
	req.Header = r.Header.Clone()
	resp, err := c.client.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	header := resp.Header.Clone()
	if resp.StatusCode == http.StatusOK {
		body = slim(body)
		header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	e = cached{status: resp.StatusCode, header: header, body: body}
	if live && (e.status == http.StatusOK || e.status == http.StatusNotFound) {
		c.mu.Lock()
		_, gone := c.destroyed[id]
		// Kept only if no event about the container came while the answer
		// was on its way: it may predate the change the event announced.
		// A 404 is kept only once Docker said the container was destroyed
		// (before that it may be one being created).
		if c.live && c.epoch == epoch && c.touched[id] <= seq && (e.status == http.StatusOK || gone) {
			c.entries[id] = e
		}
		c.mu.Unlock()
	}
	writeCached(w, e)
}

// slimInspect is the part of an inspect that cAdvisor (v0.57: its Docker
// factory and handler) reads. The rest, HostConfig's some 60 fields above
// all, is dropped: cAdvisor decodes the answer at every housekeeping of
// every container, and that decoding was 14 % of an idle agent's CPU
// at 250 pods.
type slimInspect struct {
	ID           string `json:"Id"`
	Name         string
	Created      string
	RestartCount int
	State        json.RawMessage
	Config       struct {
		Image  string
		Labels map[string]string
		Env    []string
	}
	HostConfig struct {
		NetworkMode string
	}
	NetworkSettings json.RawMessage
}

// slim returns an inspect's body cut down to slimInspect, or the body as it
// is if it is not an inspect's.
func slim(body []byte) []byte {
	var s slimInspect
	if err := json.Unmarshal(body, &s); err != nil || s.ID == "" || s.State == nil {
		return body
	}
	out, err := json.Marshal(&s)
	if err != nil {
		return body
	}
	return out
}

func writeCached(w http.ResponseWriter, e cached) {
	for k, v := range e.header {
		w.Header()[k] = v
	}
	w.WriteHeader(e.status)
	w.Write(e.body)
}

// forget drops one container's answer after an event about it (action:
// its destroy ends its record and starts its memory as destroyed).
func (c *inspectCache) forget(id, action string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	delete(c.entries, id)
	now := time.Now()
	if action == "destroy" {
		delete(c.touched, id)
		c.destroyed[id] = now
	} else {
		c.touched[id] = c.seq
	}
	c.prune(now)
}

// prune forgets, every goneTTL/2, the destroyed containers nobody asked
// about for goneTTL. Callers hold mu.
func (c *inspectCache) prune(now time.Time) {
	if now.Sub(c.pruned) < goneTTL/2 {
		return
	}
	c.pruned = now
	for id, asked := range c.destroyed {
		if now.Sub(asked) > goneTTL {
			delete(c.destroyed, id)
			delete(c.entries, id)
		}
	}
}

// reset drops every answer when the event stream is lost or regained.
func (c *inspectCache) reset(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.live = live
	c.entries = map[string]cached{}
	c.touched = map[string]uint64{}
	c.destroyed = map[string]time.Time{}
}

// watch follows the containers' events until ctx ends: each drops what it
// names; the stream connecting, breaking or losing events for this reader
// drops everything.
func (c *inspectCache) watch(ctx context.Context, sub *runtimeevents.Reader) {
	defer close(c.done)
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Resync():
			c.reset(sub.Live()) // while live, from here on no change goes unseen
		case ev := <-sub.Events():
			c.forget(ev.ContainerID, ev.Action)
		}
	}
}
