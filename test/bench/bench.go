// Package bench measures the agent against the physical limit: the same pods
// (infra + app container, same images, same networking) made directly
// through the Docker API. Contenders alternate in every round; results are
// medians and ratios from one run, so the machine's mood cancels out.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	docker "github.com/fsouza/go-dockerclient"

	"github.com/classic-kubelet/kubelet/test/cleanup"
	v1 "k8s.io/api/core/v1"
)

const (
	pauseImage = "classic-kubelet/pause:1"
	testImage  = "classic-kubelet/testserver:1"
	ownerLabel = "io.classic-kubelet.node"
	benchLabel = "io.classic-kubelet.bench"
)

// Config sizes a run.
type Config struct {
	Binary      string        // the agent binary
	Rounds      int           // alternations of the contenders (at least 5 for a real run)
	SmallRounds int           // rounds of bursts of 10 pods or fewer (at least 9)
	Burst       []int         // pods dropped at once
	Levels      []int         // the baseline's concurrencies, if not sweepLevels
	Arrivals    int           // pods arriving at ArrivalRate
	ArrivalRate float64       // pods per second
	IdleSizes   []int         // idle pod counts for the steady-state windows
	IdleWindow  time.Duration // length of a steady-state window
	// IdleQuiet is how long no inspect must come before a steady-state
	// window opens (0: 20 s, past cAdvisor's longest housekeeping
	// interval; a smoke run, which asserts no figure, waits less).
	IdleQuiet time.Duration
	// SettleFor bounds the wait for Docker and the machine to go idle
	// between measurements (0: a minute). A smoke run asserts no figure
	// and runs beside other tests, whose work would hold every wait to
	// its bound: it waits at most a moment.
	SettleFor    time.Duration
	Failures     int           // kill-to-replacement trials
	Probed       int           // containers with 1 s liveness probes (5 per pod)
	ProbeWindow  time.Duration // how long their probes are watched
	Peers        bool          // measure podman and docker-compose too, where installed
	Density      int           // pods on the filled node
	DensityBurst int           // of which this many come as the timed burst
	Churn        int           // live pods during the churn
	ChurnEvery   time.Duration // one pod added and one removed this often
	ChurnFor     time.Duration // for this long
	// ChurnSettle is how long the agent runs with Churn pods before its
	// state is read, before and after the churn: long enough for cAdvisor's
	// minute of samples per container to fill, or "before" is an agent
	// still growing.
	ChurnSettle time.Duration
	// NodePods is the Deployment's size in node mode (0: no node-mode
	// group); NodeIdle the idle pods whose request rate is measured.
	NodePods, NodeIdle int
	// Only, when set, names the scenario groups to run (bursts, arrivals,
	// idle, density, churn, failure, probes, node): a partial run, for work on one
	// of them. Without bursts, density's baseline makes its pods all at once.
	Only []string
}

// runs says whether the scenario group is part of this run.
func (c Config) runs(group string) bool {
	return len(c.Only) == 0 || slices.Contains(c.Only, group)
}

// Result is one scenario's outcome.
type Result struct {
	Scenario string             `json:"scenario"`
	Values   map[string]float64 `json:"values"` // medians, ratios and the like
	Target   string             `json:"target"`
	Met      bool               `json:"met"`
	Note     string             `json:"note,omitempty"`   // why the scenario could not be measured
	Remark   string             `json:"remark,omitempty"` // how to read a measurement
	// Samples are the raw measurements behind some values (the charts'
	// distributions), by contender.
	Samples map[string][]float64 `json:"samples,omitempty"`
}

// Harness holds what every scenario uses.
type Harness struct {
	cfg    Config
	docker *docker.Client
	dir    string
	run    string // unique per run: names and labels
	log    io.Writer
}

// New returns a harness; Close removes what it made.
func New(cfg Config, log io.Writer) (*Harness, error) {
	c, err := docker.NewClientFromEnv()
	if err != nil {
		return nil, err
	}
	if err := c.Ping(); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	dir, err := os.MkdirTemp("", "classic-kubelet-bench")
	if err != nil {
		return nil, err
	}
	return &Harness{cfg: cfg, docker: c, dir: dir, run: strconv.FormatInt(time.Now().UnixNano()%1e9, 36), log: log}, nil
}

// Close removes every container of this run and the work directory.
func (h *Harness) Close() {
	h.removeLabelled(benchLabel + "=" + h.run)
	os.RemoveAll(h.dir)
}

// removeTimeout bounds removeLabelled. Docker 20.10 was seen to deadlock in
// libnetwork while removing a burst's containers: every removal, inspect and
// start then waits for good, and the run hung for 19 minutes unnoticed.
const removeTimeout = 2 * time.Minute

// removeLabelled force-removes the containers that carry all the labels
// (key=value), and their pods' cgroups.
func (h *Harness) removeLabelled(labels ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	list, _ := h.docker.ListContainers(docker.ListContainersOptions{All: true, Filters: map[string][]string{"label": labels}, Context: ctx})
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	uids := map[string]bool{}
	for _, c := range list {
		uids[c.Labels["io.kubernetes.pod.uid"]] = true
		wg.Add(1)
		sem <- struct{}{}
		go func(id string) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := h.docker.RemoveContainer(docker.RemoveContainerOptions{ID: id, Force: true, Context: ctx}); err != nil && ctx.Err() != nil {
				h.logf("remove container %s: %v (Docker wedged? the measurements after this are not to be trusted)", id, err)
			}
		}(c.ID)
	}
	wg.Wait()
	cleanup.PodCgroups(uids)
}

func (h *Harness) logf(format string, args ...any) { fmt.Fprintf(h.log, format+"\n", args...) }

// baselineNode is the owner label value of the baseline's and the CLI's
// containers, so the harness's event watcher sees them as it sees an agent's.
func (h *Harness) baselineNode() string { return "bench-" + h.run + "-baseline" }

// agent is one running agent under measurement.
type agent struct {
	node, manifests string
	root            string         // its --root-dir
	log             string         // its log file
	port            int            // the read-only port
	apiPort         int            // the full-access port (with pprof), 0 if off
	calls           *socketCounter // its Docker calls, if it goes through a counter
	cmd             *exec.Cmd
}

// agentOptions are what a scenario changes: the agent otherwise runs on
// default flags but for its directories, ports and node name, and image
// garbage collection off (it must not remove the test image mid-run).
type agentOptions struct {
	countCalls bool     // talk to Docker through a socketCounter
	api        bool     // serve the full-access port, with /debug/pprof
	flags      []string // more flags
}

func (h *Harness) startAgent(name string, opts agentOptions) (*agent, error) {
	a := &agent{node: "bench-" + h.run + "-" + name, manifests: filepath.Join(h.dir, name, "manifests"), root: filepath.Join(h.dir, name, "root")}
	os.MkdirAll(a.manifests, 0o755)
	a.port = freePort()
	args := []string{"--pod-manifest-path", a.manifests, "--root-dir", a.root, "--hostname-override", a.node,
		"--port", "0", "--healthz-port", "0", "--read-only-port", strconv.Itoa(a.port), "--container-log-dir", filepath.Join(h.dir, name, "logs"),
		"--pod-logs-dir", filepath.Join(h.dir, name, "pods"),
		"--image-gc-high-threshold", "100", "--image-gc-low-threshold", "99"}
	if opts.api {
		a.apiPort = freePort()
		args = append(args, "--port", strconv.Itoa(a.apiPort), "--profiling")
	}
	a.cmd = exec.Command(h.cfg.Binary, append(args, opts.flags...)...)
	if opts.countCalls {
		sc, err := newSocketCounter(filepath.Join(h.dir, name))
		if err != nil {
			return nil, err
		}
		a.calls = sc
		a.cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+sc.path)
	}
	a.log = filepath.Join(h.dir, name, "agent.log")
	logf, _ := os.Create(a.log)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	if err := a.cmd.Start(); err != nil {
		return nil, err
	}
	// Measurements start from an agent that has finished starting: its
	// cAdvisor reads every container's cgroups in the background first,
	// and answers /spec once it has.
	client := http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/spec", a.port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return a, nil
			}
		}
		if time.Now().After(deadline) {
			_ = a.cmd.Process.Kill()
			_ = a.cmd.Wait()
			return nil, fmt.Errorf("agent %s: stats not available within 2 minutes (see %s)", name, a.log)
		}
	}
}

// evictions counts the pods the agent evicted, by its log: the bench runs it
// on the kubelet's default thresholds, and a dense or churning node that is
// not short of anything must evict nothing.
func (a *agent) evictions() int {
	data, _ := os.ReadFile(a.log)
	return strings.Count(string(data), "Eviction: evicting pod ")
}

// freePort returns a loopback TCP port nobody listens on now.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 20000 + int(time.Now().UnixNano()%20000)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// stopAgent stops an agent and removes its containers.
func (h *Harness) stopAgent(a *agent) {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	_ = a.cmd.Wait()
	if a.calls != nil {
		a.calls.close()
	}
	h.removeLabelled(ownerLabel + "=" + a.node)
	cleanup.PodCgroups(cleanup.PodDirUIDs(a.root))
	cleanup.UnmountUnder(a.root) // the agent made its root dir a shared mount
}

// crossCheck waits (up to 10 s) for the agent's /pods to show every named
// pod with all its containers running, as Docker already said they are.
func (a *agent) crossCheck(names []string) error {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		running, err := a.runningPods(want)
		if err == nil && running == len(want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("docker started %d pods, the agent's /pods shows %d running (%v)", len(want), running, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (a *agent) runningPods(want map[string]bool) (int, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/pods", a.port))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		if !want[p.Name] || len(p.Status.ContainerStatuses) == 0 {
			continue
		}
		all := true
		for _, c := range p.Status.ContainerStatuses {
			all = all && c.State.Running != nil
		}
		if all {
			n++
		}
	}
	return n, nil
}

// podManifest is the pod every timed scenario runs: one test server.
func podManifest(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: %s
    imagePullPolicy: IfNotPresent
    args: ["/testserver"]
`, name, testImage)
}

// drop renames the named pods' manifests into the agent's directory (as a
// deploy tool does), gap apart, and returns the instant of each rename.
func (a *agent) drop(names []string, manifest func(name string) string, gap time.Duration) []time.Time {
	var at []time.Time
	for _, n := range names {
		tmp := filepath.Join(a.manifests, "."+n+".tmp")
		os.WriteFile(tmp, []byte(manifest(n)), 0o644)
		at = append(at, time.Now())
		os.Rename(tmp, filepath.Join(a.manifests, n+".yaml"))
		if gap > 0 {
			time.Sleep(gap)
		}
	}
	return at
}

// startWatcher reports, per pod, when Docker said all of its containers
// (perPod of them) started: the clock stops on Docker's word, not the
// agent's.
type startWatcher struct {
	mu      sync.Mutex
	started map[string]int // pod → starts seen
	done    map[string]time.Time
	ch      chan *docker.APIEvents
	c       *docker.Client
}

func (h *Harness) watchStarts(node string, perPod int) (*startWatcher, error) {
	ch, c, err := subscribe(map[string][]string{"type": {"container"}, "event": {"start"}, "label": {ownerLabel + "=" + node}})
	if err != nil {
		return nil, err
	}
	w := &startWatcher{started: map[string]int{}, done: map[string]time.Time{}, ch: ch, c: c}
	go func() {
		for ev := range w.ch {
			if ev.Action != "start" {
				continue
			}
			pod := ev.Actor.Attributes["io.kubernetes.pod.name"]
			t := time.Unix(0, ev.TimeNano)
			w.mu.Lock()
			w.started[pod]++
			if w.started[pod] == perPod {
				w.done[pod] = t
			}
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func (w *startWatcher) close() { _ = w.c.RemoveEventListener(w.ch) }

// subscribe listens to Docker's events with the given filters on a client
// of its own: go-dockerclient shares one event stream among a client's
// listeners, filtered as the first listener asked.
func subscribe(filters map[string][]string) (chan *docker.APIEvents, *docker.Client, error) {
	c, err := docker.NewClientFromEnv()
	if err != nil {
		return nil, nil, err
	}
	ch := make(chan *docker.APIEvents, 4096)
	if err := c.AddEventListenerWithOptions(docker.EventsOptions{Filters: filters}, ch); err != nil {
		return nil, nil, err
	}
	return ch, c, nil
}

// wait waits until n pods have both containers started (or timeout) and
// returns their completion times by pod.
func (w *startWatcher) wait(n int, timeout time.Duration) map[string]time.Time {
	return w.waitUntil(func(done map[string]time.Time) bool { return len(done) >= n }, timeout)
}

// waitFor waits until all the named pods have started, or timeout, and
// returns every pod started so far.
func (w *startWatcher) waitFor(names []string, timeout time.Duration) map[string]time.Time {
	return w.waitUntil(func(done map[string]time.Time) bool {
		for _, n := range names {
			if _, ok := done[n]; !ok {
				return false
			}
		}
		return true
	}, timeout)
}

func (w *startWatcher) waitUntil(enough func(done map[string]time.Time) bool, timeout time.Duration) map[string]time.Time {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		if enough(w.done) || time.Now().After(deadline) {
			defer w.mu.Unlock()
			return maps.Clone(w.done)
		}
		w.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// procStats reads a process's CPU time (user+system) and RSS.
func procStats(pid int) (cpu time.Duration, rssBytes int64) {
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
		if len(f) > 13 {
			ut, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ
		}
	}
	if data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
				rssBytes = kb * 1024
			}
		}
	}
	return cpu, rssBytes
}

// WriteJSON writes the results.
func WriteJSON(path string, machine string, rs []Result) error {
	data, err := json.MarshalIndent(map[string]any{"machine": machine, "results": rs}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// Markdown renders the results as a table.
func Markdown(rs []Result) string {
	var b strings.Builder
	b.WriteString("| scenario | measured | target | met |\n|---|---|---|---|\n")
	for _, r := range rs {
		keys := make([]string, 0, len(r.Values))
		for k := range r.Values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+" "+formatValue(r.Values[k]))
		}
		met := "yes"
		if !r.Met {
			met = "**no**"
		}
		for _, n := range []string{r.Remark, r.Note} {
			if n != "" {
				parts = append(parts, n)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.Scenario, cell(strings.Join(parts, "; ")), r.Target, met)
	}
	return b.String()
}

// cell keeps a table cell on its row: a failed peer's output in a remark
// may hold line breaks (docker-compose's progress lines end in \r) and pipes.
var cell = strings.NewReplacer("\r\n", " / ", "\n", " / ", "\r", " / ", "|", "\\|").Replace

// formatValue prints milliseconds and counts whole, small values to three
// significant digits.
func formatValue(v float64) string {
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}
