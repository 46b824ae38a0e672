package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// etcdServer is a real etcd, embedded in the test process, that a test can
// stop and start again on the same ports and data.
type etcdServer struct {
	t                  *testing.T
	dir                string
	clientURL, peerURL url.URL
	e                  *embed.Etcd
}

func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	s := &etcdServer{
		t:         t,
		dir:       t.TempDir(),
		clientURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePort(t))},
		peerURL:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", freePort(t))},
	}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *etcdServer) start() {
	s.t.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "e2e"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = "e2e=" + s.peerURL.String()
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		s.t.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		s.t.Fatal("etcd did not become ready")
	}
	s.e = e
}

func (s *etcdServer) stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

func (s *etcdServer) put(key, value string) {
	s.t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.clientURL.String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, key, value); err != nil {
		s.t.Fatalf("etcd put: %v", err)
	}
}

// manifestServer serves a manifest at a URL; a test switches what it answers.
type manifestServer struct {
	mu     sync.Mutex
	status int
	body   string
	served int // answers given since the last set
	*httptest.Server
}

func newManifestServer(t *testing.T, body string) *manifestServer {
	m := &manifestServer{status: 200, body: body}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.served++
		w.WriteHeader(m.status)
		fmt.Fprint(w, m.body)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *manifestServer) set(status int, body string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status, m.body, m.served = status, body, 0
}

// waitServed waits until the current answer was served n times.
func (m *manifestServer) waitServed(t *testing.T, n int) {
	t.Helper()
	waitFor(t, 20*time.Second, func() (bool, string) {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.served >= n, fmt.Sprintf("served %d times, want %d", m.served, n)
	})
}

func simplePod(name, value string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q},"spec":{"terminationGracePeriodSeconds":2,"containers":[{"name":"server","image":%q,"imagePullPolicy":"IfNotPresent","env":[{"name":"VALUE","value":%q}]}]}}`,
		name, testImage, value)
}

func (a *agent) etcdKey() string { return "/registry/hosts/" + a.node + "/kubelet" }

func request(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func ids(m map[string]docker.APIContainers) map[string]string {
	out := map[string]string{}
	for k, c := range m {
		out[k] = c.ID
	}
	return out
}

// waitAPI waits until the agent's API answers.
func (a *agent) waitAPI() {
	a.t.Helper()
	waitFor(a.t, startupWait, func() (bool, string) {
		code, body := httpGet(a.api(true) + "/healthz")
		return code == 200, fmt.Sprintf("healthz %d %s", code, body)
	})
}

// waitStats waits until the agent's stats answer: cAdvisor starts in the
// background, reading every container's cgroups on the host first.
func (a *agent) waitStats() {
	a.t.Helper()
	waitFor(a.t, startupWait, func() (bool, string) {
		code, body := httpGet(a.api(true) + "/spec")
		return code == 200, fmt.Sprintf("/spec %d %.200s", code, body)
	})
}

func TestAllSourcesTogether(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	web := newManifestServer(t, simplePod("from-url", "1"))
	a := startAgent(t, "--etcd-servers", etcd.clientURL.String(), "--manifest-url", web.URL, "--http-check-frequency", "1s")
	etcd.put(a.etcdKey(), "["+simplePod("from-etcd", "1")+"]")
	a.writeManifest("file.json", simplePod("from-file", "1"))
	a.waitAPI()
	if code, body := request(t, "POST", a.api(false)+"/pods", simplePod("from-api", "1")); code != 200 {
		t.Fatalf("POST /pods = %d %s", code, body)
	}
	for _, p := range []string{"from-url", "from-etcd", "from-file", "from-api"} {
		a.waitRunning(p, "server")
	}
	// Each pod's infra container records the source that declared it.
	for pod, src := range map[string]string{"from-url": "http", "from-etcd": "etcd", "from-file": "file", "from-api": "api"} {
		if got := a.running(pod)["POD"].Labels["io.classic-kubelet.source"]; got != src {
			t.Errorf("pod %s source label %q, want %q", pod, got, src)
		}
	}
	// GET /pods lists all four with their status; /sources all four sources.
	code, body := httpGet(a.api(true) + "/pods")
	var list struct {
		Items []struct {
			Metadata struct{ Name string }  `json:"metadata"`
			Status   struct{ Phase string } `json:"status"`
		} `json:"items"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 4 {
		t.Fatalf("GET /pods = %d %s", code, body)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, body := httpGet(a.api(true) + "/pods/default/from-etcd")
		return strings.Contains(body, `"phase": "Running"`), body
	})
	_, sources := httpGet(a.api(true) + "/sources")
	for _, s := range []string{`"name": "api"`, `"name": "etcd"`, `"name": "file"`, `"name": "http"`} {
		if !strings.Contains(sources, s) {
			t.Errorf("/sources lacks %s: %s", s, sources)
		}
	}
	// The read-only port refuses changes.
	if code, _ := request(t, "POST", a.api(true)+"/pods", simplePod("nope", "1")); code != 405 {
		t.Errorf("POST on the read-only port = %d, want 405", code)
	}
}

func TestEtcdSource(t *testing.T) {
	etcd := startEtcd(t)
	a := startAgent(t, "--etcd-servers", etcd.clientURL.String())
	etcd.put(a.etcdKey(), "["+simplePod("e", "1")+"]")
	before := a.waitRunning("e", "server")

	// A change applies within about a second (the new container's start
	// included; the watch delivers at once).
	start := time.Now()
	etcd.put(a.etcdKey(), "["+simplePod("e", "2")+"]")
	waitFor(t, 10*time.Second, func() (bool, string) {
		now := a.running("e")
		return now["server"].ID != "" && now["server"].ID != before["server"].ID, "not replaced"
	})
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("etcd change applied after %v, want about a second", d)
	}
	running := a.running("e")

	// An empty value is an error, not "zero pods".
	etcd.put(a.etcdKey(), "")
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		return strings.Contains(sources, "empty"), "/sources does not report the empty value: " + sources
	})
	a.waitRounds(3)
	if now := a.running("e"); now["server"].ID != running["server"].ID {
		t.Fatal("an empty etcd value changed the pod")
	}

	// etcd down for a while: pods keep running; a change made after it
	// returns applies.
	etcd.stop()
	waitFor(t, 20*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		return strings.Contains(sources, `"name": "etcd"`) && strings.Contains(sources, "lastError"), "/sources does not report etcd down: " + sources
	})
	a.waitRounds(3)
	if now := a.running("e"); len(now) != 2 || now["server"].ID != running["server"].ID {
		t.Fatalf("pods changed while etcd was down: %v", keys(now))
	}
	etcd.start()
	etcd.put(a.etcdKey(), "["+simplePod("e", "3")+"]")
	waitFor(t, 30*time.Second, func() (bool, string) {
		now := a.running("e")
		return now["server"].ID != "" && now["server"].ID != running["server"].ID, "change after etcd returned not applied"
	})

	// The 2014 format: an array of ContainerManifests.
	etcd.put(a.etcdKey(), `[{"version":"v1beta1","id":"classic","containers":[{"name":"server","image":"`+testImage+`","command":["/testserver"],"cpu":100}]}]`)
	running = a.waitRunning("classic", "server")
	if hc := inspect(t, running["server"].ID).HostConfig; hc.CPUShares != 102 || hc.CPUQuota != 0 {
		t.Errorf("classic cpu 100 → shares %d quota %d, want 102 and none", hc.CPUShares, hc.CPUQuota)
	}
	waitFor(t, 30*time.Second, func() (bool, string) { return len(a.containers("e")) == 0, "pod e not removed" })
}

func TestURLSourceFailuresKeepPods(t *testing.T) {
	t.Parallel()
	web := newManifestServer(t, simplePod("u", "1"))
	a := startAgent(t, "--manifest-url", web.URL, "--http-check-frequency", "500ms")
	before := a.waitRunning("u", "server")
	for _, answer := range []struct {
		status int
		body   string
	}{{500, "oops"}, {200, ""}, {404, "gone"}} {
		web.set(answer.status, answer.body)
		web.waitServed(t, 2) // the agent has polled the new answer (at least once after it was set)
		a.waitRounds(3)
		now := a.running("u")
		if len(now) != 2 || now["server"].ID != before["server"].ID {
			t.Fatalf("after HTTP %d %q the pod changed: %v", answer.status, answer.body, keys(now))
		}
	}
	_, sources := httpGet(a.api(true) + "/sources")
	if !strings.Contains(sources, "HTTP 404") {
		t.Errorf("/sources does not report the failure: %s", sources)
	}
	web.set(200, `{"apiVersion":"v1","kind":"List","items":[]}`)
	waitFor(t, 30*time.Second, func() (bool, string) {
		return len(a.containers("u")) == 0, "explicit empty list did not remove the pod"
	})
}

func TestAPISourcePostPutDelete(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.waitAPI()
	base := a.api(false) + "/pods"
	if code, body := request(t, "POST", base, simplePod("p1", "1")+"\n---\n"+simplePod("p2", "1")); code != 200 {
		t.Fatalf("POST = %d %s", code, body)
	}
	a.waitRunning("p1", "server")
	p2 := a.waitRunning("p2", "server")

	// An invalid body answers 400 naming the field, and changes nothing.
	code, body := request(t, "POST", base, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p3"},"spec":{"containers":[{"name":"server","image":"x","ports":[{"containerPort":70000}]}]}}`)
	if code != 400 || !strings.Contains(body, "spec.containers[0].ports[0].containerPort") {
		t.Errorf("invalid POST = %d %s", code, body)
	}

	// PUT replaces the whole set of the API source.
	if code, body := request(t, "PUT", base, simplePod("p2", "1")+"\n---\n"+simplePod("p4", "1")); code != 200 {
		t.Fatalf("PUT = %d %s", code, body)
	}
	a.waitRunning("p4", "server")
	waitFor(t, 30*time.Second, func() (bool, string) { return len(a.containers("p1")) == 0, "p1 not removed by PUT" })
	if a.running("p2")["server"].ID != p2["server"].ID {
		t.Error("PUT restarted an unchanged pod")
	}

	if code, body := request(t, "DELETE", base+"/default/p4", ""); code != 200 {
		t.Fatalf("DELETE = %d %s", code, body)
	}
	waitFor(t, 30*time.Second, func() (bool, string) { return len(a.containers("p4")) == 0, "p4 not removed by DELETE" })
	if code, _ := request(t, "DELETE", base+"/default/p4", ""); code != 404 {
		t.Errorf("second DELETE = %d, want 404", code)
	}
}

// After a restart the agent remembers POSTed pods and etcd's last snapshot,
// even with etcd down: nothing is stopped or restarted.
func TestRestartWithPostedPodsAndEtcdDown(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a := startAgent(t, "--etcd-servers", etcd.clientURL.String())
	etcd.put(a.etcdKey(), "["+simplePod("remote", "1")+"]")
	a.waitAPI()
	if code, body := request(t, "POST", a.api(false)+"/pods", simplePod("posted", "1")); code != 200 {
		t.Fatalf("POST = %d %s", code, body)
	}
	remote := a.waitRunning("remote", "server")
	posted := a.waitRunning("posted", "server")

	etcd.stop()
	a.stop(syscall.SIGKILL)
	a.start()
	a.waitRounds(4)
	for pod, before := range map[string]map[string]string{"remote": ids(remote), "posted": ids(posted)} {
		now := a.running(pod)
		for name, id := range before {
			if now[name].ID != id {
				t.Errorf("pod %s container %s changed across the restart", pod, name)
			}
		}
	}
	code, body := httpGet(a.api(true) + "/pods")
	if code != 200 || !strings.Contains(body, `"name": "remote"`) || !strings.Contains(body, `"name": "posted"`) {
		t.Errorf("GET /pods after restart lacks the restored pods: %s", body)
	}
	// The API source still owns the posted pod.
	if code, _ := request(t, "DELETE", a.api(false)+"/pods/default/posted", ""); code != 200 {
		t.Errorf("DELETE of the restored posted pod = %d", code)
	}
	waitFor(t, 30*time.Second, func() (bool, string) { return len(a.containers("posted")) == 0, "posted pod not removed" })
	if len(a.running("remote")) != 2 {
		t.Error("etcd's pod stopped while etcd was down")
	}
}
