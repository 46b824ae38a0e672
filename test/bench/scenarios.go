package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// Run runs every scenario and returns the results.
func (h *Harness) Run() []Result {
	var rs []Result
	rs = append(rs, h.burst(1))
	for _, n := range h.cfg.Burst {
		rs = append(rs, h.burst(n))
	}
	rs = append(rs, h.arrivals())
	for _, n := range h.cfg.IdleSizes {
		rs = append(rs, h.steady(n))
	}
	rs = append(rs, h.failureDetection())
	return rs
}

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

// burst: n pods appear at once; baseline and agent alternate each round.
// The agent's clock starts at the first rename and stops when Docker reports
// the last container started.
func (h *Harness) burst(n int) Result {
	a, err := h.startAgent(fmt.Sprintf("burst%d", n))
	if err != nil {
		return Result{Scenario: fmt.Sprintf("%d pods at once", n), Note: err.Error()}
	}
	defer h.stopAgent(a)
	time.Sleep(time.Second) // the agent is up and idle before the clock
	var base, agentT []float64
	for r := 0; r < h.cfg.Rounds; r++ {
		base = append(base, ms(h.baselinePods(n, r)))
		h.removeLabelled(benchLabel + "=" + h.run)

		w, err := h.watchStarts(a.node)
		if err != nil {
			return Result{Scenario: fmt.Sprintf("%d pods at once", n), Note: err.Error()}
		}
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("r%d-p%d", r, i)
		}
		at := a.drop(names, "", 0)
		done := w.wait(n, 2*time.Minute)
		w.close()
		var last time.Time
		for _, t := range done {
			if t.After(last) {
				last = t
			}
		}
		agentT = append(agentT, ms(last.Sub(at[0])))
		h.clear(a)
	}
	mb, ma := median(base), median(agentT)
	res := Result{Scenario: fmt.Sprintf("%d pod(s) dropped at once: time to running (ms)", n),
		Values: map[string]float64{"baseline": mb, "agent": ma, "ratio": ma / mb}}
	if n == 1 {
		res.Target, res.Met = "agent <= baseline + 50 ms", ma <= mb+50
	} else {
		res.Target, res.Met = "ratio <= 1.10", ma/mb <= 1.10
	}
	h.logf("%s: baseline %.0f ms, agent %.0f ms", res.Scenario, mb, ma)
	return res
}

// arrivals: pods arrive at a steady rate; each pod's time from its rename to
// Docker's last start.
func (h *Harness) arrivals() Result {
	name := fmt.Sprintf("%d pods arriving at %.0f/s: time to running", h.cfg.Arrivals, h.cfg.ArrivalRate)
	a, err := h.startAgent("arrivals")
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	defer h.stopAgent(a)
	time.Sleep(time.Second)
	w, err := h.watchStarts(a.node)
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	names := make([]string, h.cfg.Arrivals)
	for i := range names {
		names[i] = fmt.Sprintf("a%d", i)
	}
	at := a.drop(names, "", time.Duration(float64(time.Second)/h.cfg.ArrivalRate))
	done := w.wait(len(names), 2*time.Minute)
	w.close()
	var lat []float64
	for i, n := range names {
		if t, ok := done[n]; ok {
			lat = append(lat, ms(t.Sub(at[i])))
		}
	}
	p99 := percentile(lat, 99)
	h.logf("%s: p50 %.0f ms, p99 %.0f ms", name, median(lat), p99)
	return Result{Scenario: name + " (ms)", Values: map[string]float64{"p50": median(lat), "p99": p99, "pods": float64(len(lat))},
		Target: "p99 <= 1000 ms", Met: p99 <= 1000 && len(lat) == len(names)}
}

// steady: n idle pods; over a window, the agent's CPU and RSS, and its
// Docker calls (from its own metrics).
func (h *Harness) steady(n int) Result {
	name := fmt.Sprintf("steady state, %d idle pods", n)
	a, err := h.startAgent(fmt.Sprintf("idle%d", n))
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	defer h.stopAgent(a)
	if n > 0 {
		w, err := h.watchStarts(a.node)
		if err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("i%d", i)
		}
		a.drop(names, "", 0)
		w.wait(n, 5*time.Minute)
		w.close()
	}
	// Settle: the relist has seen every container (no inspect for 5 s),
	// cAdvisor has done its first housekeeping.
	time.Sleep(10 * time.Second)
	last, quiet := h.dockerOps(a)["inspect"], 0
	for i := 0; i < 120 && quiet < 5; i++ {
		time.Sleep(time.Second)
		quiet++
		if now := h.dockerOps(a)["inspect"]; now != last {
			last, quiet = now, 0
		}
	}
	pid := a.cmd.Process.Pid
	cpu0, _ := procStats(pid)
	ops0 := h.dockerOps(a)
	start := time.Now()
	time.Sleep(h.cfg.IdleWindow)
	cpu1, rss := procStats(pid)
	ops1 := h.dockerOps(a)
	window := time.Since(start)
	cores := (cpu1 - cpu0).Seconds() / window.Seconds()
	lists := ops1["list"] - ops0["list"]
	inspects := ops1["inspect"] - ops0["inspect"]
	targets := map[int][2]float64{0: {0.02, 50}, 35: {0.04, 60}, 100: {0.06, 80}}
	t, ok := targets[n]
	if !ok {
		t = [2]float64{0.06, 80}
	}
	periods := window.Seconds() // relist period 1 s
	res := Result{Scenario: name, Values: map[string]float64{
		"agent CPU (cores)": cores, "agent RSS (MiB)": float64(rss) / (1 << 20),
		"lists per relist period": lists / periods, "inspects": inspects,
	}, Target: fmt.Sprintf("CPU <= %.2f cores, RSS <= %.0f MiB, <= 1 list per period, 0 inspects", t[0], t[1])}
	res.Met = cores <= t[0] && float64(rss)/(1<<20) <= t[1] && lists/periods <= 1.05 && inspects == 0
	h.logf("%s: %.3f cores, %.0f MiB, %.2f lists/period, %.0f inspects", name, cores, float64(rss)/(1<<20), lists/periods, inspects)
	return res
}

// dockerOps reads the agent's Docker operation counts from /metrics.
func (h *Harness) dockerOps(a *agent) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", a.port))
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		const p = `kubelet_docker_operations_duration_seconds_count{operation="`
		if strings.HasPrefix(line, p) {
			rest := line[len(p):]
			op := rest[:strings.IndexByte(rest, '"')]
			var v float64
			fmt.Sscan(strings.Fields(line)[1], &v)
			out[op] = v
		}
	}
	return out
}

// failureDetection: a container killed from outside (a fresh pod per trial,
// so back-off does not apply) is replaced; kill → replacement started.
func (h *Harness) failureDetection() Result {
	name := "failure detection: kill → replacement started (ms)"
	a, err := h.startAgent("failures")
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	defer h.stopAgent(a)
	time.Sleep(time.Second)
	var lat []float64
	for i := 0; i < h.cfg.Failures; i++ {
		pod := fmt.Sprintf("f%d", i)
		w, err := h.watchStarts(a.node)
		if err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		a.drop([]string{pod}, "", 0)
		w.wait(1, time.Minute)
		list, _ := h.docker.ListContainers(docker.ListContainersOptions{Filters: map[string][]string{"label": {
			ownerLabel + "=" + a.node, "io.kubernetes.pod.name=" + pod, "io.kubernetes.container.name=app"}}})
		if len(list) != 1 {
			w.close()
			continue
		}
		killed := time.Now()
		_ = h.docker.KillContainer(docker.KillContainerOptions{ID: list[0].ID})
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			w.mu.Lock()
			n := w.started[pod]
			w.mu.Unlock()
			if n >= 3 {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		// The third start of the pod is the replacement's.
		evs, _ := h.docker.ListContainers(docker.ListContainersOptions{Filters: map[string][]string{"label": {
			ownerLabel + "=" + a.node, "io.kubernetes.pod.name=" + pod, "io.kubernetes.container.name=app"}}})
		w.close()
		if len(evs) == 1 && evs[0].ID != list[0].ID {
			c, err := h.docker.InspectContainer(evs[0].ID)
			if err == nil {
				lat = append(lat, ms(c.State.StartedAt.Sub(killed)))
			}
		}
	}
	m := median(lat)
	h.logf("%s: median %.0f ms over %d trials", name, m, len(lat))
	return Result{Scenario: name, Values: map[string]float64{"median": m, "trials": float64(len(lat))},
		Target: "median <= 200 ms", Met: m <= 200 && len(lat) > 0}
}

// Machine describes where the run happened.
func Machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s, %d cores, Go %s, %s", host, runtime.NumCPU(), runtime.Version(), runtime.GOOS)
}
