package bench

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// Run runs every scenario (or the groups Config.Only names) and returns the
// results.
func (h *Harness) Run() []Result {
	var peers []*peer
	if h.cfg.Peers && h.cfg.runs("bursts") {
		peers = h.peers()
	}
	var rs []Result
	level := 0 // the baseline's level for the density burst: the sweep's best for its size
	if h.cfg.runs("bursts") {
		rs = append(rs, h.burst(1, h.cfg.Rounds, peers))
		for _, n := range h.cfg.Burst {
			rounds := h.cfg.Rounds
			if n <= 10 {
				rounds = max(rounds, h.cfg.SmallRounds)
			}
			r := h.burst(n, rounds, peers)
			if n == h.cfg.DensityBurst {
				level = r.bestLevel()
			}
			rs = append(rs, r)
		}
	}
	if h.cfg.runs("arrivals") {
		rs = append(rs, h.arrivals())
	}
	if h.cfg.runs("idle") {
		for _, n := range h.cfg.IdleSizes {
			rs = append(rs, h.steady(n))
		}
	}
	if h.cfg.runs("density") {
		rs = append(rs, h.density(level)...)
	}
	if h.cfg.runs("churn") {
		rs = append(rs, h.churn())
	}
	if h.cfg.runs("failure") {
		rs = append(rs, h.failureDetection())
	}
	if h.cfg.runs("probes") {
		rs = append(rs, h.probes())
	}
	if h.cfg.NodePods > 0 && h.cfg.runs("node") {
		rs = append(rs, h.nodeMode()...)
	}
	return rs
}

// removeBaseline removes the baseline's and the CLI's pods.
func (h *Harness) removeBaseline([]string) { h.removeLabelled(ownerLabel + "=" + h.baselineNode()) }

// clear deletes an agent's manifests and waits until its containers are gone.
func (h *Harness) clear(a *agent) {
	entries, _ := os.ReadDir(a.manifests)
	for _, e := range entries {
		os.Remove(filepath.Join(a.manifests, e.Name()))
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		list, _ := h.docker.ListContainers(docker.ListContainersOptions{All: true, Filters: map[string][]string{"label": {ownerLabel + "=" + a.node}}})
		if len(list) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podNames returns n pod names: prefix0, prefix1, ...
func podNames(prefix string, n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = prefix + strconv.Itoa(i)
	}
	return names
}

// contender is one way of making the pods of a round, timed by itself.
// clean removes what run made, after the round's CPU seconds are read: the
// agent stops its pods gracefully and the baseline force-removes, and that
// teardown is no part of the time to running.
type contender struct {
	name  string
	run   func(names []string) (time.Duration, error)
	clean func(names []string)
}

const cliName = "docker run (CLI)"

// burst: n pods appear at once on an empty node. Every round, in a rotating
// order: the baseline at each level of its sweep, parallel `docker run`,
// the agent and the peers. The baseline's, the CLI's and the agent's clocks
// start at the first call (for the agent, the first rename) and stop at
// Docker's start event of the last container; a peer's is its command's run
// time. The baseline is the sweep level with the lowest median; the ratio is
// the median over rounds of agent ÷ that level in the same round.
func (h *Harness) burst(n, rounds int, peers []*peer) Result {
	name := fmt.Sprintf("%d pod(s) dropped at once: time to running (ms)", n)
	a, err := h.startAgent(fmt.Sprintf("burst%d", n), agentOptions{})
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	defer h.stopAgent(a)
	time.Sleep(time.Second) // the agent is up and idle before the clock
	levels := sweepLevels
	if len(h.cfg.Levels) > 0 {
		levels = h.cfg.Levels
	}
	if n == 1 {
		levels = []int{0} // one pod: every level is the same
	}
	var contenders []contender
	for _, l := range levels {
		contenders = append(contenders, contender{levelName(l), func(names []string) (time.Duration, error) {
			return h.baselinePods(h.baselineNode(), names, l)
		}, h.removeBaseline})
	}
	contenders = append(contenders, contender{cliName, func(names []string) (time.Duration, error) {
		return h.cliPods(h.baselineNode(), names)
	}, h.removeBaseline}, contender{"agent", func(names []string) (time.Duration, error) {
		return a.burst(h, names)
	}, func([]string) { h.clear(a) }})
	// A peer that fails is left out of the rest of the scenario, rather than
	// the scenario left out.
	isPeer := map[string]bool{}
	for _, p := range peers {
		isPeer[p.name] = true
		contenders = append(contenders, contender{p.name, func(names []string) (time.Duration, error) {
			start := time.Now()
			err := p.up(names)
			return time.Since(start), err
		}, p.down})
	}
	times := map[string][]float64{}
	failed := map[string]string{} // peers left out, with why
	dockerd := dockerdPID()
	for r := 0; r < rounds; r++ {
		names := podNames(fmt.Sprintf("r%d-p", r), n)
		for i := range contenders {
			c := contenders[(i+r)%len(contenders)]
			if _, out := failed[c.name]; out {
				continue
			}
			busy0, dockerd0, agent0 := machineBusy(), cpuOf(dockerd), cpuOf(a.cmd.Process.Pid)
			d, err := c.run(names)
			h.logf("%s, round %d, %s: %v; CPU s: machine %.2f, dockerd %.2f, agent %.2f", name, r+1, c.name, d.Round(time.Millisecond),
				(machineBusy() - busy0).Seconds(), (cpuOf(dockerd) - dockerd0).Seconds(), (cpuOf(a.cmd.Process.Pid) - agent0).Seconds())
			c.clean(names)
			if err != nil && isPeer[c.name] {
				failed[c.name] = err.Error()
				h.logf("%s: %s left out: %v", name, c.name, err)
				h.removeLabelled(benchLabel + "=" + h.run) // what it left running
				h.settle()
				continue
			}
			if err != nil {
				return Result{Scenario: name, Note: c.name + ": " + err.Error()}
			}
			times[c.name] = append(times[c.name], ms(d))
			h.settle()
		}
	}
	res := Result{Scenario: name, Values: map[string]float64{}, Samples: times}
	for c, ts := range times {
		if _, out := failed[c]; !out {
			res.Values[c] = median(ts)
		}
	}
	best := levels[0]
	for _, l := range levels {
		if res.Values[levelName(l)] < res.Values[levelName(best)] {
			best = l
		}
	}
	mb, ma, cli := res.Values[levelName(best)], res.Values["agent"], res.Values[cliName]
	res.Values["baseline"], res.Values["baseline level"] = mb, float64(best)
	var ratios []float64
	for r := range times["agent"] {
		ratios = append(ratios, times["agent"][r]/times[levelName(best)][r])
	}
	res.Values["ratio"] = median(ratios)
	res.Remark = "baseline = " + strings.TrimPrefix(levelName(best), "baseline ") + ", the sweep's fastest level"
	if n == 1 {
		res.Target, res.Met = "agent <= baseline + 50 ms; baseline <= CLI", ma <= mb+50 && mb <= cli
	} else {
		res.Target, res.Met = "ratio <= 1.05; baseline <= CLI", res.Values["ratio"] <= 1.05 && mb <= cli
		if pm, ok := res.Values["podman kube play"]; ok && pm < mb {
			res.Remark += "; podman kube play beat the Docker baseline itself: it runs containers without dockerd, " +
				"the daemon that bounds the agent and the baseline alike"
		}
	}
	for c, why := range failed {
		res.Remark += fmt.Sprintf("; %s left out after it failed in round %d of %d: %s", c, len(times[c])+1, rounds, why)
	}
	h.logf("%s: %v", name, res.Values)
	return res
}

// bestLevel is the sweep level a burst's result chose (0: unbounded).
func (r Result) bestLevel() int { return int(r.Values["baseline level"]) }

// burst drops the named pods' manifests at once and returns the time from
// the first rename to Docker's start of the last container, once the
// agent's /pods agrees they run.
func (a *agent) burst(h *Harness, names []string) (time.Duration, error) {
	w, err := h.watchStarts(a.node, 2)
	if err != nil {
		return 0, err
	}
	defer w.close()
	at := a.drop(names, podManifest, 0)
	d, err := lastStart(w, names, at[0])
	if err != nil {
		return 0, fmt.Errorf("agent: %w", err)
	}
	return d, a.crossCheck(names)
}

// arrivals: pods arrive at a steady rate; each pod's time from its arrival
// to Docker's last start. The baseline makes each pod through the Docker API
// as it arrives, the agent as its manifest
// is renamed in; they alternate for the rounds and every pod counts.
func (h *Harness) arrivals() Result {
	name := fmt.Sprintf("%d pods arriving at %.0f/s: time to running (ms)", h.cfg.Arrivals, h.cfg.ArrivalRate)
	a, err := h.startAgent("arrivals", agentOptions{})
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	defer h.stopAgent(a)
	time.Sleep(time.Second)
	gap := time.Duration(float64(time.Second) / h.cfg.ArrivalRate)
	var base, agentLat []float64
	for r := 0; r < h.cfg.Rounds; r++ {
		names := podNames(fmt.Sprintf("a%d-", r), h.cfg.Arrivals)
		lat, err := h.baselineArrivals(names, gap)
		if err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		base = append(base, lat...)
		h.settle()

		w, err := h.watchStarts(a.node, 2)
		if err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		at := a.drop(names, podManifest, gap)
		done := w.wait(len(names), 2*time.Minute)
		w.close()
		for i, n := range names {
			if t, ok := done[n]; ok {
				agentLat = append(agentLat, ms(t.Sub(at[i])))
			}
		}
		h.clear(a)
		h.settle()
	}
	p99, b99 := percentile(agentLat, 99), percentile(base, 99)
	h.logf("%s: agent p50 %.0f p99 %.0f, baseline p50 %.0f p99 %.0f", name, median(agentLat), p99, median(base), b99)
	return Result{Scenario: name, Values: map[string]float64{"agent p50": median(agentLat), "agent p99": p99,
		"baseline p50": median(base), "baseline p99": b99, "p99 ratio": p99 / b99, "pods": float64(len(agentLat))},
		Samples: map[string][]float64{"agent": agentLat, "baseline": base},
		Target:  "agent p99 <= 1000 ms", Met: p99 <= 1000 && len(agentLat) == h.cfg.Rounds*h.cfg.Arrivals}
}

// baselineArrivals makes the named pods through the Docker API, one every
// gap, and returns each one's time from arrival to its app container's start.
func (h *Harness) baselineArrivals(names []string, gap time.Duration) ([]float64, error) {
	w, err := h.watchStarts(h.baselineNode(), 2)
	if err != nil {
		return nil, err
	}
	defer h.removeLabelled(ownerLabel + "=" + h.baselineNode())
	at := make([]time.Time, len(names))
	start := time.Now()
	for i, n := range names {
		at[i] = start.Add(time.Duration(i) * gap)
		time.Sleep(time.Until(at[i]))
		go func() {
			if _, _, err := h.baselinePod(h.baselineNode(), n); err != nil {
				h.logf("baseline: %v", err)
			}
		}()
	}
	done := w.wait(len(names), 2*time.Minute)
	w.close()
	var lat []float64
	for i, n := range names {
		if t, ok := done[n]; ok {
			lat = append(lat, ms(t.Sub(at[i])))
		}
	}
	return lat, nil
}

// steady: n idle pods on an agent of their own.
func (h *Harness) steady(n int) Result {
	name := fmt.Sprintf("steady state, %d idle pods", n)
	a, err := h.startAgent(fmt.Sprintf("idle%d", n), agentOptions{countCalls: true})
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	defer h.stopAgent(a)
	if n > 0 {
		if _, err := a.burst(h, podNames("i", n)); err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
	}
	return h.idle(a, n)
}

// idleTargets are the steady-state bounds by pod count: agent CPU in cores,
// RSS in MiB.
var idleTargets = map[int][2]float64{0: {0.02, 50}, 35: {0.04, 60}, 100: {0.06, 80}, 250: {0.08, 120}}

// idle measures an agent holding n idle pods over IdleWindow: its CPU and
// RSS, dockerd's CPU beside it, and its Docker calls as counted at the
// socket (lists per 1 s relist period; container inspects).
// relistPeriod is the agent's relist period on default flags while Docker's
// event stream flows: --relist-period (1 s) stretched fivefold.
const relistPeriod = 5 * time.Second

func (h *Harness) idle(a *agent, n int) Result {
	name := fmt.Sprintf("steady state, %d idle pods", n)
	// Settle: the relist has inspected every container and cAdvisor has
	// housekept each one twice (its first inspect of a new container may
	// predate the start event, which drops it): no inspect for 20 s, longer
	// than cAdvisor's longest housekeeping interval (15 s).
	settled := 20
	if q := h.cfg.IdleQuiet; q > 0 {
		settled = int(q / time.Second)
	}
	if n == 0 {
		settled = min(settled, 5)
	}
	time.Sleep(time.Duration(min(settled, 5)) * time.Second)
	last, quiet := a.calls.snapshot()["inspect"], 0
	for i := 0; i < 180 && quiet < settled; i++ {
		time.Sleep(time.Second)
		quiet++
		if now := a.calls.snapshot()["inspect"]; now != last {
			last, quiet = now, 0
		}
	}
	pid, dockerd := a.cmd.Process.Pid, dockerdPID()
	cpu0, _ := procStats(pid)
	dcpu0, _ := procStats(dockerd)
	calls0 := a.calls.snapshot()
	start := time.Now()
	time.Sleep(h.cfg.IdleWindow)
	cpu1, rss := procStats(pid)
	dcpu1, _ := procStats(dockerd)
	calls1 := a.calls.snapshot()
	window := time.Since(start).Seconds()
	cores := (cpu1 - cpu0).Seconds() / window
	lists := (calls1["list"] - calls0["list"]) / window * relistPeriod.Seconds()
	inspects := calls1["inspect"] - calls0["inspect"]
	var all float64
	for k, v := range calls1 {
		all += v - calls0[k]
	}
	t, ok := idleTargets[n]
	if !ok {
		t = idleTargets[100]
	}
	res := Result{Scenario: name, Values: map[string]float64{
		"agent CPU (cores)": cores, "agent RSS (MiB)": float64(rss) / (1 << 20), "pods": float64(n),
		"lists per relist period": lists, "inspects": inspects, "Docker calls per s": all / window,
		"processes in the root cgroup": float64(rootCgroupProcesses()),
	}, Target: fmt.Sprintf("CPU <= %.2f cores, RSS <= %.0f MiB, <= 1 list per period, 0 inspects (at the Docker socket)", t[0], t[1])}
	if dockerd > 0 {
		res.Values["dockerd CPU (cores)"] = (dcpu1 - dcpu0).Seconds() / window
	}
	res.Met = cores <= t[0] && float64(rss)/(1<<20) <= t[1] && lists <= 1.05 && inspects == 0
	h.logf("%s: %v", name, res.Values)
	return res
}

// failureDetection: a container killed from outside (a fresh pod per trial,
// so back-off does not apply) is replaced; kill → replacement started. The
// baseline is the physical limit: the harness itself waits for Docker's die
// event and creates and starts the replacement in the same infra container.
func (h *Harness) failureDetection() Result {
	name := "failure detection: kill → replacement started (ms)"
	a, err := h.startAgent("failures", agentOptions{})
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	defer h.stopAgent(a)
	time.Sleep(time.Second)
	var lat, base []float64
	for i := 0; i < h.cfg.Failures; i++ {
		d, err := h.baselineReplace(fmt.Sprintf("k%d", i))
		if err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		base = append(base, ms(d))
		if d, err = h.agentReplace(a, fmt.Sprintf("f%d", i)); err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		lat = append(lat, ms(d))
	}
	m, mb := median(lat), median(base)
	h.logf("%s: agent %.0f ms, baseline %.0f ms over %d trials", name, m, mb, len(lat))
	return Result{Scenario: name, Values: map[string]float64{"agent": m, "baseline": mb, "ratio": m / mb, "trials": float64(len(lat))},
		Target: "agent median <= 200 ms", Met: m <= 200}
}

// killAndWaitReplacement kills the container id and returns the time from
// the kill to the start of the pod's next app container (by Docker's
// record), which replace makes.
func (h *Harness) killAndWaitReplacement(node, pod, id string, replace func() error) (time.Duration, error) {
	w, err := h.watchStarts(node, 1)
	if err != nil {
		return 0, err
	}
	defer w.close()
	killed := time.Now()
	if err := h.docker.KillContainer(docker.KillContainerOptions{ID: id}); err != nil {
		return 0, err
	}
	if replace != nil {
		if err := replace(); err != nil {
			return 0, err
		}
	}
	done := w.wait(1, 30*time.Second)
	t, ok := done[pod]
	if !ok {
		return 0, fmt.Errorf("pod %s: no replacement started within 30 s of the kill", pod)
	}
	return t.Sub(killed), nil
}

func (h *Harness) agentReplace(a *agent, pod string) (time.Duration, error) {
	defer h.clear(a)
	w, err := h.watchStarts(a.node, 2)
	if err != nil {
		return 0, err
	}
	a.drop([]string{pod}, podManifest, 0)
	w.wait(1, time.Minute)
	w.close()
	list, err := h.docker.ListContainers(docker.ListContainersOptions{Filters: map[string][]string{"label": {
		ownerLabel + "=" + a.node, "io.kubernetes.pod.name=" + pod, "io.kubernetes.container.name=app"}}})
	if err != nil || len(list) != 1 {
		return 0, fmt.Errorf("pod %s: app container not found (%v)", pod, err)
	}
	return h.killAndWaitReplacement(a.node, pod, list[0].ID, nil)
}

func (h *Harness) baselineReplace(pod string) (time.Duration, error) {
	defer h.removeLabelled(ownerLabel + "=" + h.baselineNode())
	node := h.baselineNode()
	infra, app, err := h.baselinePod(node, pod)
	if err != nil {
		return 0, err
	}
	died, c, err := subscribe(map[string][]string{"type": {"container"}, "event": {"die"}, "container": {app}})
	if err != nil {
		return 0, err
	}
	defer c.RemoveEventListener(died)
	return h.killAndWaitReplacement(h.baselineNode(), pod, app, func() error {
		select {
		case <-died:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("baseline: no die event for %s", app)
		}
		p, err := h.newBenchPod(node, pod)
		if err == nil {
			_, err = h.baselineApp(p, infra, 1)
		}
		return err
	})
}

// probes: containers with 1 s HTTP liveness probes, five to a pod. Over a
// window, each container logs when it was probed (testserver -log-probes):
// the intervals it saw, how far they stray from 1 s, and whether any
// container was restarted.
func (h *Harness) probes() Result {
	const perPod = 5
	name := fmt.Sprintf("%d containers with 1 s HTTP liveness probes", h.cfg.Probed)
	a, err := h.startAgent("probes", agentOptions{})
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	defer h.stopAgent(a)
	pods := (h.cfg.Probed + perPod - 1) / perPod
	w, err := h.watchStarts(a.node, perPod+1)
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	names := podNames("probed", pods)
	a.drop(names, func(n string) string { return probedPodManifest(n, perPod) }, 0)
	if done := w.wait(pods, 5*time.Minute); len(done) < pods {
		w.close()
		return Result{Scenario: name, Note: fmt.Sprintf("%d of %d pods started", len(done), pods)}
	}
	w.close()
	time.Sleep(5 * time.Second) // every probe worker past its initial delay
	pid := a.cmd.Process.Pid
	cpu0, _ := procStats(pid)
	from := time.Now()
	time.Sleep(h.cfg.ProbeWindow)
	to := time.Now()
	cpu1, rss := procStats(pid)

	list, err := h.docker.ListContainers(docker.ListContainersOptions{All: true, Filters: map[string][]string{"label": {
		ownerLabel + "=" + a.node}}})
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	var errs []float64
	apps, probesSeen := 0, 0
	for _, c := range list {
		if c.Labels["io.kubernetes.container.name"] == "POD" {
			continue
		}
		apps++
		var out bytes.Buffer
		if err := h.docker.Logs(docker.LogsOptions{Container: c.ID, OutputStream: &out, ErrorStream: io.Discard, Stdout: true}); err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		var prev int64
		for _, line := range strings.Split(out.String(), "\n") {
			var at int64
			if _, err := fmt.Sscanf(line, "probe %d", &at); err != nil || at < from.UnixNano() || at > to.UnixNano() {
				continue
			}
			probesSeen++
			if prev != 0 {
				errs = append(errs, math.Abs(float64(at-prev)/1e6-1000))
			}
			prev = at
		}
	}
	restarts := float64(apps - pods*perPod) // a restarted container leaves its dead instance
	cores := (cpu1 - cpu0).Seconds() / to.Sub(from).Seconds()
	p99 := percentile(errs, 99)
	h.logf("%s: %d probes seen, interval error p50 %.1f ms p99 %.1f ms, %.0f restarts, %.3f cores", name, probesSeen, median(errs), p99, restarts, cores)
	return Result{Scenario: name, Values: map[string]float64{
		"probes seen": float64(probesSeen), "interval error p50 (ms)": median(errs), "interval error p99 (ms)": p99,
		"restarts": restarts, "agent CPU (cores)": cores, "agent RSS (MiB)": float64(rss) / (1 << 20),
	}, Target: "no restarts, interval error p99 <= 100 ms", Met: restarts == 0 && p99 <= 100}
}

// probedPodManifest is a pod of k test servers, each on its own port with a
// 1 s HTTP liveness probe.
func probedPodManifest(name string, k int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 2\n  containers:\n", name)
	for i := 0; i < k; i++ {
		port := 8080 + i
		fmt.Fprintf(&b, `  - name: s%d
    image: %s
    imagePullPolicy: IfNotPresent
    args: ["/testserver", "-listen", ":%d", "-log-probes"]
    livenessProbe:
      httpGet: {path: /healthz, port: %d}
      periodSeconds: 1
      failureThreshold: 3
`, i, testImage, port, port)
	}
	return b.String()
}

// settle waits (up to a minute, or SettleFor) for the Docker daemon and the machine to go
// idle after a contender's clean-up, so that the removal of its containers
// does not slow the next contender down. The kernel tears the removed
// containers' network namespaces down after dockerd is done with them: after
// a burst of 100 pods that kept a core busy for up to a minute more, and the
// contender that came next was measured on one core.
func (h *Harness) settle() {
	bound := h.cfg.SettleFor
	if bound == 0 {
		bound = time.Minute
	}
	pid := dockerdPID()
	if pid == 0 {
		time.Sleep(min(bound, time.Second))
		return
	}
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); {
		c0, _ := procStats(pid)
		m0 := machineBusy()
		time.Sleep(500 * time.Millisecond)
		c1, _ := procStats(pid)
		// dockerd at most 4 % of a core, the machine at most 10 % of two.
		if c1-c0 <= 20*time.Millisecond && machineBusy()-m0 <= 100*time.Millisecond {
			return
		}
	}
}

// cpuOf is a process's CPU time so far.
func cpuOf(pid int) time.Duration {
	cpu, _ := procStats(pid)
	return cpu
}

// machineBusy is the CPU time all cores spent working since boot (time the
// hypervisor stole is not this machine's work).
func machineBusy() time.Duration {
	data, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(data), "\n")
	var busy int64
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		if i <= 2 || i == 5 || i == 6 { // user, nice, system, irq, softirq: not idle, iowait, steal or guest (in user already)
			busy += v
		}
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// dockerdPID finds the local Docker daemon's process (0 if it is not here).
func dockerdPID() int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); strings.TrimSpace(string(comm)) == "dockerd" {
			return pid
		}
	}
	return 0
}

// Machine describes where the run happened: the host, and the Docker
// daemon every contender but podman goes through.
func (h *Harness) Machine() string {
	host, _ := os.Hostname()
	cpu := ""
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v) + ", "
				break
			}
		}
	}
	desc := fmt.Sprintf("%s: %s%d cores, Go %s, %s", host, cpu, runtime.NumCPU(), runtime.Version(), runtime.GOOS)
	if info, err := h.docker.Info(); err == nil {
		desc += fmt.Sprintf(", %.0f GiB, kernel %s; Docker %s (storage driver %s, cgroup driver %s)", float64(info.MemTotal)/(1<<30),
			info.KernelVersion, info.ServerVersion, info.Driver, info.CgroupDriver)
	}
	return desc
}
