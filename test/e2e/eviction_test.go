package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// memoryAvailable is the node's memory.available as the kubelet computes
// it (and the agent): capacity minus the root cgroup's working set.
func memoryAvailable(t *testing.T) int64 {
	t.Helper()
	read := func(path string) map[string]int64 {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(strings.Replace(line, ":", " ", 1)); len(f) >= 2 {
				out[f[0]], _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
		return out
	}
	mem := read("/proc/meminfo")
	capacity := mem["MemTotal"] << 10
	if _, err := os.Stat("/sys/fs/cgroup/memory.stat"); err == nil { // v2
		return capacity - (capacity - mem["MemFree"]<<10 - read("/sys/fs/cgroup/memory.stat")["inactive_file"])
	}
	usage, err := os.ReadFile("/sys/fs/cgroup/memory/memory.usage_in_bytes")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := strconv.ParseInt(strings.TrimSpace(string(usage)), 10, 64)
	return capacity - (u - read("/sys/fs/cgroup/memory/memory.stat")["total_inactive_file"])
}

// podPhaseReason is a pod's phase, reason and message from /pods.
func (a *agent) podPhaseReason(pod string) (phase, reason, message string) {
	a.t.Helper()
	var p struct {
		Status struct{ Phase, Reason, Message string } `json:"status"`
	}
	if code, body := httpGet(a.api(true) + "/pods/default/" + pod); code == 200 {
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			a.t.Fatalf("decode pod %s: %v", pod, err)
		}
	}
	return p.Status.Phase, p.Status.Reason, p.Status.Message
}

// A BestEffort container without a memory limit allocates (16 MiB at a
// time, at most 1.75 GiB) past a hard memory.available threshold set
// 1 GiB below what the node has free at the start: the agent evicts it
// (Failed, Evicted, the kubelet's message, an Evicted event), before the
// kernel's OOM killer acts, and does not restart it; a Guaranteed pod
// beside it is untouched. On cgroup v1 the round that evicts it is normally the one
// the kernel's memory threshold notification started as the allocation
// crossed the threshold, not the next periodic one (below). While MemoryPressure
// holds (the transition period) a new BestEffort pod is refused as the
// kubelet's admission refuses it, and admitted once the pressure is gone.
// The allocation is quick: the notification's level is usage, set from the
// inactive file pages of the last round, and page cache that goes between
// two rounds (files removed, pages activated) opens a window in which the
// threshold is met below that level, which a periodic round can fall in
// (seen twice in a day on this machine, a few MiB below the threshold):
// then the notification must still have started a round.
func TestEvictionMemoryHardThreshold(t *testing.T) {
	avail := memoryAvailable(t)
	threshold := (avail - 1<<30) >> 20
	if threshold < 200 {
		t.Fatalf("only %d MiB available: too little memory for this test", avail>>20)
	}
	a := startAgent(t, fmt.Sprintf("--eviction-hard=memory.available<%dMi", threshold),
		"--eviction-pressure-transition-period=20s")
	t.Logf("memory.available %d MiB at the start; hard threshold %d MiB", avail>>20, threshold)
	a.writeManifest("guaranteed.yaml", lifecyclePod("guaranteed", "Always", `  containers:
  - name: app
    image: `+testImage+`
    resources:
      limits: {cpu: 100m, memory: 64Mi}
`))
	guaranteed := a.waitRunning("guaranteed", "app")["app"].ID
	// The hog holds what it read in tail's buffer (no newline ever comes);
	// the trailing sleep keeps the pipe open.
	a.writeManifest("hog.yaml", lifecyclePod("hog", "Always", `  containers:
  - name: hog
    image: `+testImage+`
    command: ["sh", "-c", "(for i in $(seq 1 112); do head -c 16777216 /dev/zero; sleep 0.01; done; sleep 3600) | tail >/dev/null"]
`))
	hog := a.waitRunning("hog", "hog")["hog"].ID

	var phase, reason, msg string
	waitFor(t, 3*time.Minute, func() (bool, string) {
		phase, reason, msg = a.podPhaseReason("hog")
		return phase == "Failed" && reason == "Evicted", fmt.Sprintf("hog %s %s %q; memory.available %d MiB", phase, reason, msg, memoryAvailable(t)>>20)
	})
	want := regexp.MustCompile(`^The node was low on resource: memory\. Threshold quantity: ` + strconv.FormatInt(threshold, 10) +
		`Mi, available: \d+(Ki|Mi)?\. Container hog was using \d+(Ki|Mi|Gi)?, request is 0, has larger consumption of memory\. $`)
	if !want.MatchString(msg) {
		t.Errorf("message %q, want one matching %s", msg, want)
	}
	if e, ok := a.findEvent("hog", "Evicted"); !ok || e.Type != "Warning" || e.Message != msg {
		t.Errorf("Evicted event %+v (found %v), want a Warning with the status's message", e, ok)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		return !inspect(t, hog).State.Running, "hog still running"
	})
	if st := inspect(t, hog).State; st.OOMKilled {
		t.Errorf("the hog was OOM-killed (%+v): the kernel acted before the agent", st)
	}
	if m := regexp.MustCompile(`Eviction: pod default/hog stopped (\S+) after`).FindStringSubmatch(a.log()); m != nil {
		t.Logf("threshold first met to hog stopped: %s", m[1])
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/cgroup.event_control"); err == nil {
		log := a.log()
		if !strings.Contains(log, "Eviction: memory threshold notification armed on /sys/fs/cgroup/memory ") {
			t.Error("the agent never armed the memory threshold notification")
		}
		m := regexp.MustCompile(`Eviction: hard memory\.available<` + strconv.FormatInt(threshold, 10) + `Mi met, in a round started by the (.+)`).FindStringSubmatch(log)
		switch {
		case m == nil:
			t.Error("no eviction round saw the threshold met")
		case m[1] == "memory threshold notification":
		case strings.Contains(log, "Eviction: memory threshold notification: a round now"):
			// The race the doc comment names: the round was periodic, and
			// the notification (armed, firing) came after it.
			t.Logf("the hog's eviction round was the periodic one; the notification fired after it")
		default:
			t.Errorf("the hog's eviction round: %q, and the memory threshold notification never started one", m)
		}
		if m := regexp.MustCompile(`available: (\d+)(Ki|Mi)\.`).FindStringSubmatch(msg); m != nil {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			if m[2] == "Ki" {
				n >>= 10
			}
			t.Logf("available when the round saw the threshold met: %d MiB, %d MiB below it", n, threshold-n)
		}
	} else {
		t.Logf("no cgroup v1 memory threshold notification (%v): the hog is evicted by a periodic round", err)
	}

	// The refusal: while MemoryPressure holds, a new BestEffort pod.
	a.writeManifest("late.yaml", lifecyclePod("late", "Always", `  containers:
  - name: app
    image: `+testImage+`
`))
	waitFor(t, 20*time.Second, func() (bool, string) {
		phase, reason, msg = a.podPhaseReason("late")
		return phase == "Failed" && reason == "Evicted", fmt.Sprintf("late %s %s %q", phase, reason, msg)
	})
	if want := "Pod was rejected: The node had condition: [MemoryPressure]. "; msg != want {
		t.Errorf("refusal message %q, want %q", msg, want)
	}
	if n := len(a.containers("late")); n != 0 {
		t.Errorf("the refused pod has %d containers", n)
	}
	// Admitted once the pressure is gone: the 20 s transition period from
	// when it was last seen, then the pod's start.
	a.waitAdmitted("late")

	if got := a.running("hog"); len(got) != 0 {
		t.Errorf("the evicted pod runs again: %v", keys(got))
	}
	if phase, reason, _ = a.podPhaseReason("hog"); phase != "Failed" || reason != "Evicted" {
		t.Errorf("the evicted pod is now %s %s, want it to stay Failed Evicted", phase, reason)
	}
	if got := a.running("guaranteed")["app"].ID; got != guaranteed {
		t.Errorf("the Guaranteed pod's container is %q, want %q untouched", got, guaranteed)
	}
	if phase, _, _ = a.podPhaseReason("guaranteed"); phase != "Running" {
		t.Errorf("the Guaranteed pod is %s", phase)
	}
}

// nodefs.available under a hard threshold on a 64 MiB tmpfs --root-dir:
// the agent reclaims at node level first (dead containers, unused images),
// then evicts the BestEffort pod that filled its emptyDir, with the
// kubelet's message, and removes its volumes (which ends the pressure); a
// new pod is refused under DiskPressure as the kubelet refuses it.
func TestEvictionNodeFsHardThreshold(t *testing.T) {
	root := t.TempDir()
	if err := syscall.Mount("tmpfs", root, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatalf("mount a tmpfs root dir: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(root, syscall.MNT_DETACH) }) // after the agent's cleanup
	a := startAgentWith(t, func(a *agent) { a.rootDir = root },
		"--eviction-hard=nodefs.available<50%", "--eviction-pressure-transition-period=20s", "--disk-usage-period=2s")
	a.writeManifest("writer.yaml", lifecyclePod("writer", "Always", `  containers:
  - name: writer
    image: `+testImage+`
    command: ["sh", "-c", "sleep 2; head -c 41943040 /dev/zero > /data/fill; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {}}]
`))
	writer := a.waitRunning("writer", "writer")["writer"]
	volumesDir := filepath.Join(root, "pods", writer.Labels["io.kubernetes.pod.uid"], "volumes")
	if _, err := os.Stat(volumesDir); err != nil {
		t.Fatalf("the writer's volumes: %v", err)
	}

	var phase, reason, msg string
	waitFor(t, time.Minute, func() (bool, string) {
		phase, reason, msg = a.podPhaseReason("writer")
		return phase == "Failed" && reason == "Evicted", fmt.Sprintf("writer %s %s %q", phase, reason, msg)
	})
	want := regexp.MustCompile(`^The node was low on resource: ephemeral-storage\. Threshold quantity: 32Mi, available: \d+(Ki|Mi)?\. `)
	if !want.MatchString(msg) {
		t.Errorf("message %q, want one matching %s", msg, want)
	}
	if e, ok := a.findEvent("writer", "Evicted"); !ok || e.Type != "Warning" || e.Message != msg {
		t.Errorf("Evicted event %+v (found %v), want a Warning with the status's message", e, ok)
	}
	log := a.log()
	reclaim := strings.Index(log, "Eviction: hard nodefs.available<50% met; collecting dead containers and unused images first")
	evict := strings.Index(log, "Eviction: evicting pod default/writer")
	if reclaim < 0 || evict < reclaim {
		t.Errorf("node-level reclaim at %d, eviction at %d in the log: want the reclaim first", reclaim, evict)
	}

	a.writeManifest("late.yaml", lifecyclePod("late", "Always", `  containers:
  - name: app
    image: `+testImage+`
    resources:
      limits: {cpu: 100m, memory: 64Mi}
`))
	waitFor(t, 20*time.Second, func() (bool, string) {
		phase, reason, msg = a.podPhaseReason("late")
		return phase == "Failed" && reason == "Evicted", fmt.Sprintf("late %s %s %q", phase, reason, msg)
	})
	if want := "Pod was rejected: The node had condition: [DiskPressure]. "; msg != want {
		t.Errorf("refusal message %q, want %q", msg, want)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, err := os.Stat(volumesDir)
		return os.IsNotExist(err), fmt.Sprintf("the evicted pod's volumes: %v", err)
	})
	// The volumes gone, the pressure ends (after the 20 s transition
	// period): the refused pod is admitted.
	a.waitAdmitted("late")
	if m := regexp.MustCompile(`Eviction: pod default/writer stopped (\S+) after`).FindStringSubmatch(a.log()); m != nil {
		t.Logf("threshold first met to writer stopped: %s", m[1])
	}
	if got := a.running("writer"); len(got) != 0 {
		t.Errorf("the evicted pod runs again: %v", keys(got))
	}
}

// Local storage limits, with eviction thresholds off: an emptyDir written
// past its sizeLimit, a container writing past its
// limits.ephemeral-storage to its stdout (logs) and one writing to its
// writable layer are each evicted at once with the kubelet's message; the
// emptyDir's directory is removed; a sibling within its limits is not.
// The agent runs with the default --disk-usage-period (5 min, the first
// measurement 5 s after start): a pod with limits has its emptyDirs, logs
// and writable layers measured every eviction round (2 s), so each is
// caught within a few seconds; the layer is written after that first
// measurement, which would not see it.
func TestEvictionLocalStorageLimits(t *testing.T) {
	a := startAgent(t)
	sibling := `  - name: quiet
    image: ` + testImage + `
    resources: {limits: {ephemeral-storage: 100Mi}}
`
	a.writeManifest("emptydir.yaml", lifecyclePod("emptydir", "Always", `  containers:
  - name: writer
    image: `+testImage+`
    command: ["sh", "-c", "sleep 1; head -c 20971520 /dev/zero > /data/fill; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {sizeLimit: 10Mi}}]
`))
	a.writeManifest("logs.yaml", lifecyclePod("logs", "Always", `  containers:
  - name: chatty
    image: `+testImage+`
    command: ["sh", "-c", "sleep 1; yes 0123456789012345678901234567890123456789 | head -c 12582912; sleep 3600"]
    resources: {limits: {ephemeral-storage: 10Mi}}
`+sibling))
	a.writeManifest("layer.yaml", lifecyclePod("layer", "Always", `  containers:
  - name: scribbler
    image: `+testImage+`
    command: ["sh", "-c", "sleep 8; head -c 12582912 /dev/zero > /layer; sleep 3600"]
    resources: {limits: {ephemeral-storage: 10Mi}}
`+sibling))
	uid := a.waitRunning("emptydir", "writer")["writer"].Labels["io.kubernetes.pod.uid"]
	running := time.Now() // the three pods were written together
	for pod, want := range map[string]string{
		"emptydir": `Usage of EmptyDir volume "data" exceeds the limit "10Mi". `,
		"logs":     `Container chatty exceeded its local ephemeral storage limit "10Mi". `,
		"layer":    `Container scribbler exceeded its local ephemeral storage limit "10Mi". `,
	} {
		var phase, reason, msg string
		// Written 1 s (the layer: 8 s) after its start, caught within an
		// eviction round (2 s) of the write, with a margin.
		waitFor(t, time.Until(running.Add(20*time.Second)), func() (bool, string) {
			phase, reason, msg = a.podPhaseReason(pod)
			return phase == "Failed" && reason == "Evicted", fmt.Sprintf("%s: %s %s %q", pod, phase, reason, msg)
		})
		t.Logf("%s: evicted within %v of the first pod's start", pod, time.Since(running).Round(100*time.Millisecond))
		if msg != want {
			t.Errorf("%s: message %q, want %q", pod, msg, want)
		}
		if e, ok := a.findEvent(pod, "Evicted"); !ok || e.Message != want {
			t.Errorf("%s: Evicted event %+v (found %v)", pod, e, ok)
		}
		if m := regexp.MustCompile(`Eviction: pod default/` + pod + ` stopped (\S+) after`).FindStringSubmatch(a.log()); m != nil {
			t.Logf("%s: overuse seen to pod stopped: %s", pod, m[1])
		}
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(a.rootDir, "pods", uid, "volumes"))
		return os.IsNotExist(err), fmt.Sprintf("the evicted pod's volumes: %v", err)
	})
}

// waitAdmitted waits for a pod refused under pressure to run its app
// container once the pressure is gone: the transition period from when it
// was last seen, then the pod's start.
func (a *agent) waitAdmitted(pod string) {
	a.t.Helper()
	waitFor(a.t, 60*time.Second, func() (bool, string) {
		got := a.running(pod)
		_, ok := got["app"]
		return ok && len(got) == 2, fmt.Sprintf("pod %s: running %v", pod, keys(got))
	})
}
