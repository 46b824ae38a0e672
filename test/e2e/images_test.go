package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"
)

// registry is a real Docker registry (Debian's docker-registry) on a
// loopback port, optionally behind htpasswd basic auth.
type registry struct {
	t          *testing.T
	addr       string
	user, pass string
}

func startRegistry(t *testing.T, withAuth bool) *registry {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("docker-registry is required under CI=true: run hack/ensure-test-deps.sh")
		}
		t.Skip("docker-registry not installed (hack/ensure-test-deps.sh installs it)")
	}
	dir := t.TempDir()
	r := &registry{t: t, addr: fmt.Sprintf("127.0.0.1:%d", freePort(t))}
	auth := ""
	if withAuth {
		r.user, r.pass = "e2e", "s3cret"
		hash, _ := bcrypt.GenerateFromPassword([]byte(r.pass), bcrypt.MinCost)
		os.WriteFile(filepath.Join(dir, "htpasswd"), []byte(r.user+":"+string(hash)+"\n"), 0o600)
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: e2e\n    path: %s\n", filepath.Join(dir, "htpasswd"))
	}
	cfg := filepath.Join(dir, "config.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`version: 0.1
log: {level: error}
storage:
  filesystem: {rootdirectory: %s}
  delete: {enabled: true}
http: {addr: %s}
%s`, filepath.Join(dir, "data"), r.addr, auth)), 0o600)
	cmd := exec.Command(bin, "serve", cfg)
	logf, _ := os.Create(filepath.Join(dir, "registry.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, 20*time.Second, func() (bool, string) {
		resp, err := http.Get("http://" + r.addr + "/v2/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200 || resp.StatusCode == 401, fmt.Sprint(resp.StatusCode)
	})
	return r
}

// push puts the test image into the registry as <addr>/e2e/<name>:1 and
// removes the local tag, so the agent has to pull it. Cleanup removes the
// tag again if a test pulled it.
func (r *registry) push(name string) string {
	r.t.Helper()
	repo := r.addr + "/e2e/" + name
	if err := dockerc.TagImage(testImage, docker.TagImageOptions{Repo: repo, Tag: "1"}); err != nil {
		r.t.Fatal(err)
	}
	auth := docker.AuthConfiguration{Username: r.user, Password: r.pass, ServerAddress: r.addr}
	if err := dockerc.PushImage(docker.PushImageOptions{Name: repo, Tag: "1", Registry: r.addr}, auth); err != nil {
		r.t.Fatalf("push %s: %v", repo, err)
	}
	ref := repo + ":1"
	untag := func() { _ = dockerc.RemoveImageExtended(ref, docker.RemoveImageOptions{NoPrune: true}) }
	untag()
	r.t.Cleanup(untag)
	return ref
}

func imagePod(name, image, policy string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: c
    image: %s
    imagePullPolicy: %s
    command: ["sh", "-c", "exec sleep 100000"]
`, name, image, policy)
}

func (a *agent) pullCount() int {
	a.t.Helper()
	_, body := httpGet(a.api(true) + "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, `kubelet_runtime_operations_total{operation_type="pull_image"}`) {
			var n int
			fmt.Sscan(strings.Fields(line)[1], &n)
			return n
		}
	}
	return 0
}

func TestPullPolicies(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t, false)
	a := startAgent(t)
	img := reg.push("policy")
	a.writeManifest("ifnp.yaml", imagePod("ifnp", img, "IfNotPresent"))
	a.waitRunning("ifnp", "c")
	a.writeManifest("never.yaml", imagePod("never", reg.addr+"/e2e/absent:1", "Never"))
	waitFor(t, 20*time.Second, func() (bool, string) {
		reason, msg := a.waitingReason("never", "c")
		return reason == "ErrImageNeverPull", fmt.Sprintf("%s %s", reason, msg)
	})
	before := a.pullCount()
	a.writeManifest("always.yaml", imagePod("always", img, "Always")) // present, pulled anyway
	a.waitRunning("always", "c")
	if after := a.pullCount(); after != before+1 {
		t.Errorf("Always with the image present: %d pulls, want 1", after-before)
	}
	ifnpBefore := a.pullCount()
	a.writeManifest("ifnp2.yaml", imagePod("ifnp2", img, "IfNotPresent")) // present: no pull
	a.waitRunning("ifnp2", "c")
	if n := a.pullCount(); n != ifnpBefore {
		t.Errorf("IfNotPresent with the image present pulled %d times", n-ifnpBefore)
	}
	// A registry error is a waiting reason, then a back-off.
	a.writeManifest("missing.yaml", imagePod("missing", reg.addr+"/e2e/missing:1", "IfNotPresent"))
	waitFor(t, 30*time.Second, func() (bool, string) {
		reason, msg := a.waitingReason("missing", "c")
		return reason == "ImagePullBackOff" && !strings.Contains(msg, "<"), fmt.Sprintf("%s %s", reason, msg)
	})
	_, ev := httpGet(a.api(true) + "/events")
	for _, want := range []string{`"reason": "Pulling"`, `"reason": "Pulled"`, `"reason": "Failed"`, `"reason": "Started"`} {
		if !strings.Contains(ev, want) {
			t.Errorf("/events lacks %s", want)
		}
	}
}

func TestConcurrentPullsCollapse(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t, false)
	a := startAgent(t)
	img := reg.push("burst")
	for i := 0; i < 5; i++ {
		a.writeManifest(fmt.Sprintf("b%d.yaml", i), imagePod(fmt.Sprintf("burst-%d", i), img, "IfNotPresent"))
	}
	for i := 0; i < 5; i++ {
		a.waitRunning(fmt.Sprintf("burst-%d", i), "c")
	}
	if n := a.pullCount(); n != 1 {
		t.Errorf("5 pods of one absent image made %d pulls, want 1", n)
	}
}

func TestPrivateRegistryCredentials(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t, true)
	img := reg.push("private")
	a := startAgent(t, "--docker-config", filepath.Join(t.TempDir(), "none.json"))
	// --docker-config naming a missing file is refused at start: the agent
	// exits, naming the flag.
	a.mu.Lock()
	exited := a.exited
	a.mu.Unlock()
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the agent kept running with a missing --docker-config")
	}
	if a.mu.Lock(); a.exitErr == nil || !strings.Contains(a.log(), "--docker-config") {
		t.Errorf("a missing --docker-config was not refused (exit %v): %s", a.exitErr, tail(a.log(), 5))
	}
	a.mu.Unlock()

	empty := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(empty, []byte(`{"auths": {}}`), 0o600)
	b := startAgent(t, "--docker-config", empty)
	b.writeManifest("p.yaml", imagePod("private", img, "IfNotPresent"))
	waitFor(t, 30*time.Second, func() (bool, string) {
		reason, msg := b.waitingReason("private", "c")
		return (reason == "ErrImagePull" || reason == "ImagePullBackOff") && strings.Contains(msg, "no credentials for registry "+reg.addr),
			fmt.Sprintf("%s %s", reason, msg)
	})

	withCreds := filepath.Join(t.TempDir(), "config.json")
	cred := base64.StdEncoding.EncodeToString([]byte(reg.user + ":" + reg.pass))
	os.WriteFile(withCreds, []byte(`{"auths": {"`+reg.addr+`": {"auth": "`+base64.StdEncoding.EncodeToString([]byte("e2e:wrong"))+`"}, "http://`+reg.addr+`/v2/": {"auth": "`+cred+`"}}}`), 0o600)
	c := startAgent(t, "--docker-config", withCreds)
	c.writeManifest("p.yaml", imagePod("private", img, "IfNotPresent"))
	c.waitRunning("private", "c")
}

func TestDeadContainerGC(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--gc-period", "1s", "--backoff-initial", "1s", "--backoff-max", "1s", "--maximum-dead-containers-per-container", "2")
	a.writeManifest("crash.yaml", lifecyclePod("crash", "Always", `  initContainers:
  - name: init
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["true"]
  containers:
  - name: c
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 0.5; exit 1"]
`))
	a.watchInstances("crash", "c", 6, 60*time.Second)
	// Stop the churn (a new spec that keeps running), then the collector
	// settles on the two newest dead instances.
	a.writeManifest("crash.yaml", lifecyclePod("crash", "Always", `  initContainers:
  - name: init
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["true"]
  containers:
  - name: c
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "exec sleep 100000"]
`))
	waitFor(t, 20*time.Second, func() (bool, string) {
		dead := 0
		for _, c := range a.containers("crash") {
			if c.Labels["io.kubernetes.container.name"] == "c" && c.State != "running" {
				dead++
			}
		}
		return dead == 2, fmt.Sprintf("%d dead instances of c, want 2", dead)
	})
	if n := len(a.instances("crash", "init")); n != 1 {
		t.Errorf("the completed init container was collected (%d instances)", n)
	}
}

func TestImageGCRemovesOnlyPulledUnusedImages(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t, false)
	a := startAgent(t, "--gc-period", "1s", "--image-gc-high-threshold", "0", "--image-gc-low-threshold", "0",
		"--minimum-image-ttl-duration", "1s")
	unused, inUse := reg.push("gc-unused"), reg.push("gc-used")
	a.writeManifest("u.yaml", imagePod("unused", unused, "IfNotPresent"))
	a.writeManifest("k.yaml", imagePod("used", inUse, "IfNotPresent"))
	a.waitRunning("unused", "c")
	a.waitRunning("used", "c")
	a.removeManifest("u.yaml")
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, err := dockerc.InspectImage(unused)
		return err != nil, "the pulled, unused image is still there"
	})
	for _, img := range []string{inUse, testImage, pauseImage} {
		if _, err := dockerc.InspectImage(img); err != nil {
			t.Errorf("image GC removed %s: %v", img, err)
		}
	}
}

func TestContainerLogSymlinksAndRotation(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--container-log-max-size", "1Mi", "--container-log-max-files", "3")
	a.writeManifest("p.yaml", twoContainerPod("logs", "x"))
	running := a.waitRunning("logs", "server", "sidecar")
	id := running["server"].ID
	link := filepath.Join(a.logDir, fmt.Sprintf("logs_default_server-%s.log", id))
	ct := inspect(t, id)
	waitFor(t, 10*time.Second, func() (bool, string) {
		target, err := os.Readlink(link)
		return err == nil && target == ct.LogPath, fmt.Sprintf("link %s: %q %v", link, target, err)
	})
	if cfg := ct.HostConfig.LogConfig; cfg.Type != "json-file" || cfg.Config["max-size"] != "1048576" || cfg.Config["max-file"] != "3" {
		t.Errorf("log config %+v", cfg)
	}
	a.removeManifest("p.yaml")
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, err := os.Lstat(link)
		return os.IsNotExist(err), "symlink not removed with its container"
	})
}

func TestEventsWrittenToEtcdWithLease(t *testing.T) {
	t.Parallel()
	etcd := startEtcd(t)
	a := startAgent(t, "--etcd-servers", etcd.clientURL.String(), "--event-ttl", "2h")
	a.writeManifest("p.yaml", twoContainerPod("evented", "x"))
	a.waitRunning("evented", "server", "sidecar")
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.clientURL.String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var kvs []*struct {
		key   string
		lease clientv3.LeaseID
		value string
	}
	waitFor(t, 20*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := c.Get(ctx, "/events/"+a.node+"/default/evented/", clientv3.WithPrefix())
		if err != nil {
			return false, err.Error()
		}
		kvs = nil
		for _, kv := range resp.Kvs {
			kvs = append(kvs, &struct {
				key   string
				lease clientv3.LeaseID
				value string
			}{string(kv.Key), clientv3.LeaseID(kv.Lease), string(kv.Value)})
		}
		started := 0
		for _, kv := range kvs {
			var e struct{ Reason string }
			json.Unmarshal([]byte(kv.value), &e)
			if e.Reason == "Started" {
				started++
			}
		}
		return started >= 2, fmt.Sprintf("%d events in etcd", len(kvs))
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ttl, err := c.TimeToLive(ctx, kvs[0].lease)
	// --event-ttl, plus the minute during which the lease is shared.
	if err != nil || ttl.TTL < int64((2*time.Hour).Seconds())-10 || ttl.TTL > int64((2*time.Hour+time.Minute).Seconds()) {
		t.Errorf("event lease TTL %v (%v), want 2 h (--event-ttl) to 2 h 1 min", ttl, err)
	}
	if _, body := httpGet(a.api(true) + "/events"); !strings.Contains(body, `"reason": "Started"`) {
		t.Errorf("/events: %.300s", body)
	}
}
