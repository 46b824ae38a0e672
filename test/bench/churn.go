package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// churn: Churn pods live; every ChurnEvery one pod is added and the oldest
// removed, for ChurnFor. Each added pod's time from its rename to Docker's
// start of its last container; at the end, no container of a removed pod
// left, and the agent's heap after a GC, goroutines (but open HTTP
// connections) and per-pod tables back to where they were with the same
// pods live before the churn. Then the same
// churn through the Docker API alone (baselineChurn), which tells whether
// the node itself keeps up with it.
func (h *Harness) churn() Result {
	name := fmt.Sprintf("churn: 1 pod added and 1 removed every %v for %v, %d live", h.cfg.ChurnEvery, h.cfg.ChurnFor, h.cfg.Churn)
	a, err := h.startAgent("churn", agentOptions{api: true})
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	defer h.stopAgent(a)
	live := podNames("c", h.cfg.Churn)
	if _, err := a.burst(h, live); err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	before, err := a.settledState(h.cfg.ChurnSettle)
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	w, err := h.watchStarts(a.node, 2)
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	added := map[string]time.Time{}
	next := len(live)
	for end := time.Now().Add(h.cfg.ChurnFor); time.Now().Before(end); {
		tick := time.Now()
		n := "c" + strconv.Itoa(next)
		next++
		added[n] = a.drop([]string{n}, podManifest, 0)[0]
		os.Remove(filepath.Join(a.manifests, live[0]+".yaml"))
		live = append(live[1:], n)
		time.Sleep(time.Until(tick.Add(h.cfg.ChurnEvery)))
	}
	// Pods removed before they started never start: the live ones are
	// waited for.
	done := w.waitFor(live, 2*time.Minute)
	w.close()
	var lat []float64
	for n, at := range added {
		if t, ok := done[n]; ok {
			lat = append(lat, ms(t.Sub(at)))
		}
	}
	// A node that can't keep up with the churn is a result, not a failure
	// of the run: the figures say how far behind it fell.
	var behind string
	if err := a.crossCheck(live); err != nil {
		behind = err.Error()
	}
	// Every container left is a live pod's, one infra and one app each.
	want := map[string]bool{}
	for _, n := range live {
		want[n] = true
	}
	var leftovers int
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list, err := h.docker.ListContainers(docker.ListContainersOptions{All: true, Filters: map[string][]string{"label": {ownerLabel + "=" + a.node}}})
		if err != nil {
			return Result{Scenario: name, Note: err.Error()}
		}
		leftovers = 0
		for _, c := range list {
			if !want[c.Labels["io.kubernetes.pod.name"]] {
				leftovers++
			}
		}
		if (leftovers == 0 && len(list) == 2*len(live)) || time.Now().After(deadline) {
			break
		}
	}
	after, err := a.settledState(h.cfg.ChurnSettle)
	if err != nil {
		return Result{Scenario: name, Note: err.Error()}
	}
	h.settle()
	base, err := h.baselineChurn()
	if err != nil {
		return Result{Scenario: name, Note: "baseline: " + err.Error()}
	}
	p99 := percentile(lat, 99)
	res := Result{Scenario: name, Values: map[string]float64{
		"p50 (ms)": median(lat), "p99 (ms)": p99, "pods added": float64(len(added)), "pods started": float64(len(lat)),
		"baseline p50 (ms)": median(base), "baseline p99 (ms)": percentile(base, 99), "baseline pods started": float64(len(base)),
		"containers of removed pods left": float64(leftovers),
		"heap before (MiB)":               before["heap"] / (1 << 20), "heap after (MiB)": after["heap"] / (1 << 20),
		"goroutines before": before["goroutines"], "goroutines after": after["goroutines"],
		"goroutines but HTTP connections before": before["goroutines"] - before["http"],
		"goroutines but HTTP connections after":  after["goroutines"] - after["http"],
		"pods evicted":                           float64(a.evictions()),
	}, Samples: map[string][]float64{"agent": lat, "baseline": base},
		Target: "p99 <= 1000 ms; no container left, no pod evicted; heap after GC <= before + 10 %, goroutines (but HTTP connections) and per-pod tables back"}
	grown := []string{}
	for k, v := range after {
		if !strings.HasPrefix(k, "table ") {
			continue
		}
		if v > before[k] {
			grown = append(grown, fmt.Sprintf("%s %.0f → %.0f", strings.TrimPrefix(k, "table "), before[k], v))
		}
	}
	var more []string // goroutines by function, where there are more
	for k, v := range after {
		if fn, ok := strings.CutPrefix(k, "goroutine "); ok && v > before[k] {
			more = append(more, fmt.Sprintf("%s %.0f → %.0f", fn, before[k], v))
		}
	}
	sort.Strings(more)
	res.Met = p99 <= 1000 && len(lat) == len(added) && behind == "" && leftovers == 0 && res.Values["pods evicted"] == 0 && after["heap"] <= before["heap"]*1.10 &&
		after["goroutines"]-after["http"] <= before["goroutines"]-before["http"] && len(grown) == 0
	if len(grown) > 0 {
		res.Remark = "per-pod tables grown: " + strings.Join(grown, ", ")
	}
	if after["goroutines"] > before["goroutines"] && len(more) > 0 {
		res.Remark = strings.TrimPrefix(res.Remark+"; more goroutines in "+strings.Join(more, ", "), "; ")
	}
	if behind != "" {
		res.Remark = strings.TrimPrefix(res.Remark+"; at the end of the churn "+behind, "; ")
	}
	if b99 := res.Values["baseline p99 (ms)"]; b99 > 1000 || len(base) < len(added) {
		res.Remark = strings.TrimPrefix(fmt.Sprintf("%s; the node can't keep up with this churn through Docker alone (p99 %.0f ms, %d of %d pods started)",
			res.Remark, b99, len(base), len(added)), "; ")
	}
	h.logf("%s: %v %s", name, res.Values, res.Remark)
	return res
}

// baselineChurn runs the same churn through the Docker API alone: Churn
// pods made, then every ChurnEvery one pod made and the oldest removed (both
// its containers at once, forced: less work than the agent's graceful stop,
// once its making has ended).
// It returns each added pod's time from its first call to Docker's start of
// its app container: what the node itself can do at this churn.
func (h *Harness) baselineChurn() ([]float64, error) {
	node := h.baselineNode()
	defer h.removeLabelled(ownerLabel + "=" + node)
	live := podNames("b", h.cfg.Churn)
	if _, err := h.baselinePods(node, live, 8); err != nil {
		return nil, err
	}
	w, err := h.watchStarts(node, 2)
	if err != nil {
		return nil, err
	}
	added := map[string]time.Time{}
	// A pod's removal waits for its making to end: on a node that falls
	// behind, a removal sent first would find nothing, and the pod made
	// after it would stay.
	made := map[string]chan struct{}{}
	var wg sync.WaitGroup
	for end, next := time.Now().Add(h.cfg.ChurnFor), len(live); time.Now().Before(end); next++ {
		tick := time.Now()
		n, old := "b"+strconv.Itoa(next), live[0]
		live = append(live[1:], n)
		added[n] = tick
		done, oldDone := make(chan struct{}), made[old]
		made[n] = done
		delete(made, old)
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer close(done)
			if _, _, err := h.baselinePod(node, n); err != nil {
				h.logf("baseline churn: %v", err)
			}
		}()
		go func() {
			defer wg.Done()
			if oldDone != nil {
				<-oldDone
			}
			h.removeLabelled(ownerLabel+"="+node, "io.kubernetes.pod.name="+old)
		}()
		time.Sleep(time.Until(tick.Add(h.cfg.ChurnEvery)))
	}
	done := w.waitFor(live, 2*time.Minute)
	w.close()
	wg.Wait()
	var lat []float64
	for n, at := range added {
		if t, ok := done[n]; ok {
			lat = append(lat, ms(t.Sub(at)))
		}
	}
	return lat, nil
}

// stateClient reads the agent's state on a new connection each time: a
// connection kept open would be one more goroutine in the agent's count.
var stateClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// settledState waits settle for the agent to finish what pods' going left
// (kills, the grace of a relist, cAdvisor's samples of removed containers
// ageing out), then reads its live heap after a forced GC, its
// goroutines and its per-pod tables ("table <name>").
func (a *agent) settledState(settle time.Duration) (map[string]float64, error) {
	time.Sleep(settle)
	out := map[string]float64{}
	resp, err := stateClient.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1&debug=1", a.apiPort))
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		// The live heap: what a forced GC left allocated (HeapInuse would
		// count the free slots of partly used spans too, which churn grows).
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapAlloc = "); ok {
			out["heap"], _ = strconv.ParseFloat(v, 64)
		}
	}
	resp.Body.Close()
	resp, err = stateClient.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", a.port))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc = bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch {
		case f[0] == "go_goroutines":
			out["goroutines"] = v
		case strings.HasPrefix(f[0], `kubelet_pod_state_entries{table="`):
			out["table "+strings.TrimSuffix(strings.TrimPrefix(f[0], `kubelet_pod_state_entries{table="`), `"}`)] = v
		}
	}
	if out["heap"] == 0 || out["goroutines"] == 0 {
		return nil, fmt.Errorf("agent: heap or goroutines not read from pprof and /metrics")
	}
	// Goroutines by the function each runs, to name what grew.
	resp, err = stateClient.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/goroutine?debug=1", a.apiPort))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	dump, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	for fn, n := range goroutinesByStart(string(dump)) {
		out["goroutine "+fn] = n
		// Connections, kept open by the HTTP clients' and server's pools
		// (bounded, and as many as the last requests left), are no pod's
		// state: told apart.
		if strings.HasPrefix(fn, "net/http.") {
			out["http"] += n
		}
	}
	return out, nil
}

// goroutinesByStart counts the goroutines of a pprof goroutine dump (debug=1)
// by the function each started in: its groups are "N @ 0x..." then one
// "#\t0x...\tfunction+0x...\tfile:line" per frame, innermost first.
func goroutinesByStart(dump string) map[string]float64 {
	out := map[string]float64{}
	_, groups, _ := strings.Cut(dump, "\n") // past "goroutine profile: total N"
	for group := range strings.SplitSeq(groups, "\n\n") {
		lines := strings.Split(strings.TrimSpace(group), "\n")
		var n float64
		if _, err := fmt.Sscanf(lines[0], "%g @", &n); err != nil {
			continue
		}
		if f := strings.Fields(lines[len(lines)-1]); len(f) >= 3 && f[0] == "#" {
			fn, _, _ := strings.Cut(f[2], "+0x")
			out[fn] += n
		}
	}
	return out
}
