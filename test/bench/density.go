package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// density: a node filled to Density pods. A burst of DensityBurst pods on a
// node already holding Density-DensityBurst, agent against the baseline
// (at level, the sweep's best for that burst on an empty node) in the same
// rounds; then, at Density pods, the steady state, kill → replacement
// against the baseline under the same load, the latency of GET /pods and
// /stats/summary, and how long SIGTERM takes to stop the agent.
func (h *Harness) density(level int) []Result {
	total, burst := h.cfg.Density, h.cfg.DensityBurst
	title := func(s string) string { return fmt.Sprintf("density, %d pods: %s", total, s) }
	fail := func(err error) []Result { return []Result{{Scenario: title("setup"), Note: err.Error()}} }
	a, err := h.startAgent("density", agentOptions{countCalls: true, flags: []string{"--max-pods", fmt.Sprint(total + 10)}})
	if err != nil {
		return fail(err)
	}
	defer h.stopAgent(a)
	if _, err := a.burst(h, podNames("d", total-burst)); err != nil {
		return fail(err)
	}
	var rs []Result

	// A burst on a loaded node.
	times := map[string][]float64{}
	contenders := []contender{
		{levelName(level), func(names []string) (time.Duration, error) {
			return h.baselinePods(h.baselineNode(), names, level)
		}, h.removeBaseline},
		{"agent", func(names []string) (time.Duration, error) {
			return a.burst(h, names)
		}, func(names []string) { a.remove(h, names) }},
	}
	name := title(fmt.Sprintf("burst of %d on %d (ms)", burst, total-burst))
	for r := 0; r < h.cfg.Rounds; r++ {
		names := podNames(fmt.Sprintf("db%d-", r), burst)
		for i := range contenders {
			c := contenders[(i+r)%len(contenders)]
			d, err := c.run(names)
			c.clean(names)
			if err != nil {
				return append(rs, Result{Scenario: name, Note: c.name + ": " + err.Error()})
			}
			times[c.name] = append(times[c.name], ms(d))
			h.settle()
		}
	}
	res := Result{Scenario: name, Values: map[string]float64{}, Samples: times, Target: "ratio <= 1.05"}
	var ratios []float64
	for r := range times["agent"] {
		ratios = append(ratios, times["agent"][r]/times[levelName(level)][r])
	}
	res.Values["agent"], res.Values["baseline"], res.Values["ratio"] = median(times["agent"]), median(times[levelName(level)]), median(ratios)
	res.Met = res.Values["ratio"] <= 1.05
	res.Remark = "baseline = " + levelName(level)[len("baseline "):] + ", the sweep's fastest level for this burst on an empty node"
	rs = append(rs, res)
	h.logf("%s: %v", name, res.Values)

	// Fill the node.
	if _, err := a.burst(h, podNames(fmt.Sprintf("d%d-", total), burst)); err != nil {
		return append(rs, Result{Scenario: title("fill"), Note: err.Error()})
	}
	rs = append(rs, h.idle(a, total), h.idleUnderSystemd(a, total))
	rs = append(rs, h.replaceUnderLoad(a, total))
	rs = append(rs, a.latency(title("GET /pods (ms)"), "/pods", 50), a.latency(title("GET /stats/summary (ms)"), "/stats/summary", 100))

	// SIGTERM: the agent stops within 5 s and leaves its pods running.
	start := time.Now()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	_ = a.cmd.Wait()
	exit := time.Since(start)
	list, _ := h.docker.ListContainers(docker.ListContainersOptions{Filters: map[string][]string{"label": {ownerLabel + "=" + a.node}}})
	rs = append(rs, Result{Scenario: title("SIGTERM → exit (ms)"), Values: map[string]float64{"exit": ms(exit), "containers left running": float64(len(list))},
		Target: fmt.Sprintf("<= 5000 ms, all %d containers left running", 2*total), Met: exit <= 5*time.Second && len(list) == 2*total})
	evicted := a.evictions()
	rs = append(rs, Result{Scenario: title("pods evicted on the kubelet's default thresholds"), Values: map[string]float64{"evicted": float64(evicted)},
		Target: "0", Met: evicted == 0})
	return rs
}

// idleUnderSystemd measures the steady state again with Docker's processes
// in a cgroup of their own, as on a node run by systemd (cgroup.go), where
// the machine has them in the root cgroup; then puts them back.
func (h *Harness) idleUnderSystemd(a *agent, total int) Result {
	name := fmt.Sprintf("density, %d pods: steady state with Docker in a cgroup of its own, as under systemd", total)
	moved, restore, err := dockerInServiceCgroup()
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	r := h.idle(a, total)
	if err := restore(); err != nil {
		r.Note = "restoring Docker's cgroups: " + err.Error()
	}
	r.Scenario = name
	r.Values["Docker processes moved"] = float64(moved)
	if moved == 0 {
		r.Remark = "Docker was in a cgroup of its own already: the same as the row before"
	}
	return r
}

// replaceUnderLoad: kill → replacement started, the agent's pods (an app
// container of a different pod each trial, so back-off never applies)
// against the baseline's own pod made on the same loaded node.
func (h *Harness) replaceUnderLoad(a *agent, total int) Result {
	name := fmt.Sprintf("density, %d pods: kill → replacement started (ms)", total)
	var lat, base []float64
	for i := 0; i < h.cfg.Failures; i++ {
		d, err := h.baselineReplace(fmt.Sprintf("dk%d", i))
		if err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		base = append(base, ms(d))
		pod := fmt.Sprintf("d%d", i)
		list, err := h.docker.ListContainers(docker.ListContainersOptions{Filters: map[string][]string{"label": {
			ownerLabel + "=" + a.node, "io.kubernetes.pod.name=" + pod, "io.kubernetes.container.name=app"}}})
		if err != nil || len(list) != 1 {
			return Result{Scenario: name, Note: fmt.Sprintf("pod %s: app container not found (%v)", pod, err)}
		}
		if d, err = h.killAndWaitReplacement(a.node, pod, list[0].ID, nil); err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		lat = append(lat, ms(d))
	}
	m, mb := median(lat), median(base)
	return Result{Scenario: name, Values: map[string]float64{"agent": m, "baseline": mb, "trials": float64(len(lat))},
		Samples: map[string][]float64{"agent": lat, "baseline": base}, Target: "agent median <= baseline + 25 ms", Met: m <= mb+25}
}

// latency GETs path 200 times, one after another, from the read-only port.
func (a *agent) latency(name, path string, p99Target float64) Result {
	var lat []float64
	for i := 0; i < 200; i++ {
		start := time.Now()
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", a.port, path))
		if err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return Result{Scenario: name, Note: fmt.Sprintf("GET %s: %s", path, resp.Status)}
		}
		lat = append(lat, ms(time.Since(start)))
	}
	p99 := percentile(lat, 99)
	return Result{Scenario: name, Values: map[string]float64{"p50": median(lat), "p99": p99, "max": percentile(lat, 100)},
		Target: fmt.Sprintf("p99 <= %.0f ms over 200 GETs", p99Target), Met: p99 <= p99Target}
}

// remove deletes the named pods' manifests and waits (up to 2 minutes)
// until their containers are gone.
func (a *agent) remove(h *Harness, names []string) {
	gone := map[string]bool{}
	for _, n := range names {
		os.Remove(filepath.Join(a.manifests, n+".yaml"))
		gone[n] = true
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		list, _ := h.docker.ListContainers(docker.ListContainersOptions{All: true, Filters: map[string][]string{"label": {ownerLabel + "=" + a.node}}})
		left := 0
		for _, c := range list {
			if gone[c.Labels["io.kubernetes.pod.name"]] {
				left++
			}
		}
		if left == 0 {
			return
		}
	}
}
