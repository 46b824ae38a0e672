// Package e2e drives the built agent binary against the real Docker daemon.
// Every agent a test starts has its own node name, root dir and manifest
// dir, and the test removes exactly the containers carrying its node name.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"

	"github.com/classic-kubelet/kubelet/test/cleanup"
)

const (
	pauseImage = "classic-kubelet/pause:1"
	testImage  = "classic-kubelet/testserver:1"
	ownerLabel = "io.classic-kubelet.node"
)

var (
	agentBinary string
	dockerc     *docker.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	c, err := docker.NewClientFromEnv()
	if err == nil {
		err = c.Ping()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "e2e: Docker is required under CI=true and is not reachable: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: SKIPPING end-to-end tests: Docker is not reachable (%v); run hack/ensure-docker.sh\n", err)
		return 0
	}
	dockerc = c
	for _, img := range []string{pauseImage, testImage} {
		if _, err := c.InspectImage(img); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: image %s is missing (%v): run `make images`\n", img, err)
			return 1
		}
	}
	dir, err := os.MkdirTemp("", "classic-kubelet-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	agentBinary = filepath.Join(dir, "kubelet")
	build := exec.Command("go", "build", "-o", agentBinary, "github.com/classic-kubelet/kubelet/cmd/kubelet")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: build agent: %v\n", err)
		return 1
	}
	defer stopSharedCluster() // the node-mode tests' control plane, if one started
	code := m.Run()
	sweepNodes()
	return code
}

// nodes are the node names of this run's agents.
var nodes struct {
	sync.Mutex
	names map[string]bool
}

// sweepNodes removes, once every test is done, what the run's agents left:
// a container whose create was in flight in dockerd when its test killed
// the agent appears after the test's own removal (seen: one in three runs,
// left Created).
func sweepNodes() {
	nodes.Lock()
	defer nodes.Unlock()
	list, err := dockerc.ListContainers(docker.ListContainersOptions{All: true, Filters: map[string][]string{"label": {ownerLabel}}})
	if err != nil {
		return
	}
	swept := map[string]bool{}
	for _, c := range list {
		if n := c.Labels[ownerLabel]; nodes.names[n] && !swept[n] {
			swept[n] = true
			removeNodeContainers(n)
		}
	}
}

// agent is one running agent binary under test.
type agent struct {
	t           *testing.T
	node        string
	rootDir     string
	manifestDir string
	extraArgs   []string
	env         []string // added to the test's environment
	binary      string   // the agent binary; agentBinary unless a test installs its own
	legacy      bool     // binary is a build from before --eviction-hard (the upgrade test's)
	fileLogging bool     // -v comes from the agent's configuration file, not the command line
	exitErr     error    // how the last run ended
	port        int      // full-access API
	roPort      int      // read-only API
	healthzPort int      // /healthz alone
	logDir      string
	logPath     string
	cmd         *exec.Cmd
	exited      chan struct{}
	mu          sync.Mutex
}

var nameUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// startAgent starts an agent with a fresh node name, root dir and manifest
// dir; cleanup stops it and removes the containers of its node name.
func startAgent(t *testing.T, extraArgs ...string) *agent {
	t.Helper()
	return startAgentWith(t, nil, extraArgs...)
}

// startAgentWith is startAgent with a hook that adjusts the agent (its
// binary, say) before it starts.
func startAgentWith(t *testing.T, configure func(*agent), extraArgs ...string) *agent {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	base := strings.Trim(nameUnsafe.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 30 {
		base = base[:30]
	}
	a := &agent{
		t:           t,
		node:        "e2e-" + base + "-" + hex.EncodeToString(b[:]),
		rootDir:     t.TempDir(),
		manifestDir: t.TempDir(),
		extraArgs:   extraArgs,
		port:        freePort(t),
		roPort:      freePort(t),
		healthzPort: freePort(t),
		logDir:      t.TempDir(),
	}
	a.logPath = filepath.Join(t.TempDir(), "agent.log")
	nodes.Lock()
	if nodes.names == nil {
		nodes.names = map[string]bool{}
	}
	nodes.names[a.node] = true
	nodes.Unlock()
	t.Cleanup(func() {
		a.stop(syscall.SIGKILL)
		removeNodeContainers(a.node)
		cleanup.PodCgroups(cleanup.PodDirUIDs(a.rootDir))
		unmountUnder(a.rootDir) // tmpfs volumes and subPath binds of pods left running
		if t.Failed() {
			data, _ := os.ReadFile(a.logPath)
			t.Logf("agent log (%s):\n%s", a.node, tail(string(data), 150))
		}
	})
	if configure != nil {
		configure(a)
	}
	a.start()
	return a
}

func (a *agent) args() []string {
	args := []string{
		"--pod-manifest-path", a.manifestDir,
		"--root-dir", a.rootDir,
		"--hostname-override", a.node,
		"--file-check-frequency", "2s",
		"--port", fmt.Sprint(a.port),
		"--read-only-port", fmt.Sprint(a.roPort),
		"--healthz-port", fmt.Sprint(a.healthzPort),
		// Image GC effectively off: no test deletes images it did not pull.
		"--image-gc-high-threshold", "100", "--image-gc-low-threshold", "99",
		"--container-log-dir", a.logDir,
	}
	if !a.fileLogging {
		args = append(args, "-v", "2")
	}
	// Flags newer than the upgrade test's legacy build: eviction off (no
	// thresholds: with the kubelet's defaults, a CI machine whose disk is
	// over 90 % full would evict every test pod; the eviction tests set
	// their own, a later flag wins), and a pod log tree of its own (never
	// the machine's /var/log/pods).
	if !a.legacy {
		args = append(args, "--eviction-hard=", "--pod-logs-dir", filepath.Join(a.rootDir, "pods"))
	}
	return append(args, a.extraArgs...)
}

// starting bounds how many agents are in their first seconds at once: a
// new agent's cAdvisor inspects every container on the host while its pods
// start, and six doing so together (the parallel tests) held Docker's own
// calls up for minutes, past every timeout. An agent holds its place until
// its stats answer (cAdvisor has started), it exits, or a minute passes.
var starting = make(chan struct{}, 2)

func (a *agent) start() {
	a.t.Helper()
	starting <- struct{}{}
	logf, err := os.OpenFile(a.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		a.t.Fatal(err)
	}
	bin := a.binary
	if bin == "" {
		bin = agentBinary
	}
	cmd := exec.Command(bin, a.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(a.env) > 0 {
		cmd.Env = append(os.Environ(), a.env...)
	}
	if err := cmd.Start(); err != nil {
		<-starting
		a.t.Fatalf("start agent: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		logf.Close()
		a.mu.Lock()
		a.exitErr = err
		a.mu.Unlock()
		close(exited)
	}()
	go func() {
		defer func() { <-starting }()
		spec := fmt.Sprintf("http://127.0.0.1:%d/spec", a.roPort)
		client := http.Client{Timeout: 2 * time.Second} // an agent that hangs does not hold the place
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			select {
			case <-exited:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if resp, err := client.Get(spec); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
		}
	}()
	a.mu.Lock()
	a.cmd, a.exited = cmd, exited
	a.mu.Unlock()
}

// api returns the base URL of the full-access (or read-only) API.
func (a *agent) api(readOnly bool) string {
	if readOnly {
		return fmt.Sprintf("http://127.0.0.1:%d", a.roPort)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", a.port)
}

// stop signals the agent and waits for it to exit.
func (a *agent) stop(sig syscall.Signal) {
	a.mu.Lock()
	cmd, exited := a.cmd, a.exited
	a.cmd = nil
	a.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// writeManifest writes a manifest into the watched directory atomically
// (write a hidden file, rename it in), as editors and config tools do.
func (a *agent) writeManifest(name, content string) {
	a.t.Helper()
	tmp := filepath.Join(a.manifestDir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		a.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(a.manifestDir, name)); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agent) removeManifest(name string) {
	a.t.Helper()
	if err := os.Remove(filepath.Join(a.manifestDir, name)); err != nil {
		a.t.Fatal(err)
	}
}

func (a *agent) log() string {
	data, _ := os.ReadFile(a.logPath)
	return string(data)
}

// containers lists this agent's containers of one pod (all states).
func (a *agent) containers(pod string) []docker.APIContainers {
	a.t.Helper()
	list, err := dockerc.ListContainers(docker.ListContainersOptions{
		All: true,
		Filters: map[string][]string{"label": {
			ownerLabel + "=" + a.node,
			"io.kubernetes.pod.name=" + pod,
		}},
	})
	if err != nil {
		a.t.Fatalf("list containers: %v", err)
	}
	return list
}

// running returns the running containers of a pod by container name.
func (a *agent) running(pod string) map[string]docker.APIContainers {
	out := map[string]docker.APIContainers{}
	for _, c := range a.containers(pod) {
		if c.State == "running" {
			out[c.Labels["io.kubernetes.container.name"]] = c
		}
	}
	return out
}

// waitRunning waits until exactly the named containers (plus POD) of a pod
// run, and returns them.
func (a *agent) waitRunning(pod string, names ...string) map[string]docker.APIContainers {
	a.t.Helper()
	return a.waitRunningWithin(startupWait, pod, names...)
}

// waitRunningWithin is waitRunning with a wait of d, for an agent that is
// slower still (built with -race).
func (a *agent) waitRunningWithin(d time.Duration, pod string, names ...string) map[string]docker.APIContainers {
	a.t.Helper()
	want := append([]string{"POD"}, names...)
	var got map[string]docker.APIContainers
	waitFor(a.t, d, func() (bool, string) {
		got = a.running(pod)
		if len(got) != len(want) {
			return false, fmt.Sprintf("pod %s: running %v, want %v", pod, keys(got), want)
		}
		for _, n := range want {
			if _, ok := got[n]; !ok {
				return false, fmt.Sprintf("pod %s: running %v, want %v", pod, keys(got), want)
			}
		}
		return true, ""
	})
	return got
}

func keys(m map[string]docker.APIContainers) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// waitRounds waits for evidence that the agent has seen the node as it is
// now and had the chance to act on it: a successful relist since (one every
// 5 s while Docker's event stream flows, which tells the agent of every
// change in between), its sync loop having run since, and n seconds (n ≥ 3
// spans a housekeeping round). Tests that check nothing changed wait for
// this, not for a guessed time.
func (a *agent) waitRounds(n int) {
	a.t.Helper()
	a.waitAPI()
	start := time.Now()
	relists := a.metric("kubelet_pleg_relist_duration_seconds", nil)
	loops := a.metric("kubelet_sync_loop_iteration_duration_seconds", nil)
	waitFor(a.t, 30*time.Second, func() (bool, string) {
		r := a.metric("kubelet_pleg_relist_duration_seconds", nil)
		l := a.metric("kubelet_sync_loop_iteration_duration_seconds", nil)
		return r > relists && l > loops && time.Since(start) >= time.Duration(n)*time.Second,
			fmt.Sprintf("%v relists, %v sync loop rounds in %v", r-relists, l-loops, time.Since(start).Round(time.Second))
	})
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	waitEvery(t, timeout, 100*time.Millisecond, cond)
}

// waitEvery is waitFor polling every interval: a condition that execs in a
// container costs Docker a process each time, and the e2e package's
// parallel tests share two cores.
func waitEvery(t *testing.T, timeout, interval time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", timeout, why)
		}
		time.Sleep(interval)
	}
}

// removeNodeContainers removes every container of one node name: exactly
// what one test created, never anything else on the daemon.
func removeNodeContainers(node string) { cleanup.NodeContainers(dockerc, node) }

// unmountUnder detaches every mount below dir, and dir itself if it is one.
func unmountUnder(dir string) { cleanup.UnmountUnder(dir) }

func inspect(t *testing.T, id string) *docker.Container {
	t.Helper()
	c, err := dockerc.InspectContainerWithOptions(docker.InspectContainerOptions{ID: id, Context: context.Background()})
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return c
}

// freePort returns a TCP port free on the host right now, never one it
// returned before in this run (the kernel may hand a just-closed port out
// again, and two agents, or two ports of one, would then collide).
func freePort(t *testing.T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !portsGiven[port] {
			portsGiven[port] = true
			return port
		}
	}
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// httpGet fetches a URL, returning status and body ("" and 0 on error).
func httpGet(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func httpPut(url, body string) (int, string) {
	req, _ := http.NewRequest(http.MethodPut, url, bytes.NewBufferString(body))
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func tail(s string, lines int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
