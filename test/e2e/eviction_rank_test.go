package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The tests of issue 49: the pod causing the pressure is the one evicted,
// never a bystander, and an evicted pod stays evicted across a restart.

// podEphemeral is a pod's ephemeral storage in the agent's summary, as its
// background disk measurement last saw it (-1: not measured yet).
func (a *agent) podEphemeral(pod string) int64 {
	a.t.Helper()
	code, body := httpGet(a.api(true) + "/stats/summary")
	if code != 200 {
		return -1
	}
	var sum statsapi.Summary
	if err := json.Unmarshal([]byte(body), &sum); err != nil {
		a.t.Fatalf("decode summary: %v", err)
	}
	for _, p := range sum.Pods {
		if p.PodRef.Name == pod && p.EphemeralStorage != nil && p.EphemeralStorage.UsedBytes != nil {
			return int64(*p.EphemeralStorage.UsedBytes)
		}
	}
	return -1
}

// evictedPods are the pods the agent's log says it evicted, in order.
func (a *agent) evictedPods() []string {
	var out []string
	for _, line := range strings.Split(a.log(), "\n") {
		if _, rest, ok := strings.Cut(line, "Eviction: evicting pod default/"); ok {
			name, _, _ := strings.Cut(rest, " ")
			out = append(out, name)
		}
	}
	return out
}

// Disk pressure with stale background stats (the default
// --disk-usage-period, 5 min: one measurement, 5 s after start): an idle
// bystander wrote 173 bytes before that measurement, the writer writes
// 40 MiB of a 64 MiB nodefs after it. The round that ranks measures the
// pods afresh, so the writer is evicted first and the bystander, whose
// stale usage was the larger, never is; the writer's volumes gone, the
// pressure ends.
func TestEvictionDiskPressureEvictsTheWriter(t *testing.T) {
	root := t.TempDir()
	if err := syscall.Mount("tmpfs", root, "tmpfs", 0, "size=64m"); err != nil {
		t.Fatalf("mount a tmpfs root dir: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(root, syscall.MNT_DETACH) }) // after the agent's cleanup
	a := startAgentWith(t, func(a *agent) { a.rootDir = root },
		"--eviction-hard=nodefs.available<50%", "--eviction-pressure-transition-period=5s")
	a.writeManifest("bystander.yaml", lifecyclePod("bystander", "Always", `  containers:
  - name: idle
    image: `+testImage+`
    command: ["sh", "-c", "head -c 173 /dev/zero > /data/note; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {}}]
`))
	// The writer waits for the test's go-ahead: it has written nothing
	// when the background measurement is taken.
	a.writeManifest("writer.yaml", lifecyclePod("writer", "Always", `  containers:
  - name: writer
    image: `+testImage+`
    command: ["sh", "-c", "while [ ! -e /data/go ]; do sleep 0.2; done; head -c 41943040 /dev/zero > /data/fill; sleep 3600"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {}}]
`))
	bystander := a.waitRunning("bystander", "idle")["idle"].ID
	writer := a.waitRunning("writer", "writer")["writer"]
	waitFor(t, 30*time.Second, func() (bool, string) {
		n := a.podEphemeral("bystander")
		return n > 0, fmt.Sprintf("the bystander's usage in the summary: %d", n)
	})
	t.Logf("background measurement: bystander %d bytes, writer %d bytes", a.podEphemeral("bystander"), a.podEphemeral("writer"))
	data := filepath.Join(root, "pods", writer.Labels["io.kubernetes.pod.uid"], "volumes", "kubernetes.io~empty-dir", "data")
	if err := os.WriteFile(filepath.Join(data, "go"), nil, 0o644); err != nil {
		t.Fatalf("the writer's go-ahead: %v", err)
	}
	wrote := time.Now()

	waitFor(t, 45*time.Second, func() (bool, string) {
		phase, reason, msg := a.podPhaseReason("writer")
		return phase == "Failed" && reason == "Evicted", fmt.Sprintf("writer %s %s %q; evicted so far %v", phase, reason, msg, a.evictedPods())
	})
	t.Logf("writer evicted %v after its go-ahead", time.Since(wrote).Round(100*time.Millisecond))
	// Its volumes gone, the pressure ends; rounds go on meanwhile.
	waitFor(t, 20*time.Second, func() (bool, string) {
		_, err := os.Stat(data)
		return os.IsNotExist(err), fmt.Sprintf("the writer's emptyDir: %v", err)
	})
	a.waitRounds(4)
	if got := a.evictedPods(); !slices.Equal(got, []string{"writer"}) {
		t.Errorf("evicted %v, want the writer alone", got)
	}
	if phase, reason, _ := a.podPhaseReason("bystander"); phase != "Running" {
		t.Errorf("the bystander is %s %s", phase, reason)
	}
	if got := a.running("bystander")["idle"].ID; got != bystander {
		t.Errorf("the bystander's container is %q, want %q untouched", got, bystander)
	}
}

// PID pressure: a bystander whose process count cannot be read (its pod
// cgroup's pids.current hidden under an empty tmpfs, as for a pod the
// agent could not measure) and a forker, 1000 processes past the
// threshold. The forker, measured, is evicted; the unmeasured bystander
// ranks after every measured pod and is never evicted. (The kubelet ranks
// a pod without stats first; its stats are always there, ours may not be.)
func TestEvictionPIDPressureEvictsTheForker(t *testing.T) {
	requireCgroupV1(t)
	data, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	limit, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if data, err = os.ReadFile("/proc/sys/kernel/threads-max"); err == nil {
		if n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); n > 0 && n < limit {
			limit = n
		}
	}
	data, err = os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	_, tasks, _ := strings.Cut(strings.Fields(string(data))[3], "/")
	used, _ := strconv.ParseInt(tasks, 10, 64)
	// 600 tasks of headroom for the rest of the machine; the forker makes
	// 1600.
	threshold := limit - used - 600
	if threshold < 1000 {
		t.Fatalf("only %d PIDs available: too few for this test", limit-used)
	}
	a := startAgent(t, fmt.Sprintf("--eviction-hard=pid.available<%d", threshold), "--eviction-pressure-transition-period=5s")
	a.writeManifest("bystander.yaml", lifecyclePod("bystander", "Always", `  containers:
  - name: idle
    image: `+testImage+`
    command: ["sleep", "3600"]
`))
	bystander := a.waitRunning("bystander", "idle")["idle"]
	pids := filepath.Join(cgroupMount, "pids", "kubepods", "besteffort", "pod"+bystander.Labels["io.kubernetes.pod.uid"])
	if _, err := os.Stat(filepath.Join(pids, "pids.current")); err != nil {
		t.Fatalf("the bystander's pod cgroup: %v", err)
	}
	if err := syscall.Mount("tmpfs", pids, "tmpfs", 0, "size=4k"); err != nil {
		t.Fatalf("hide the bystander's pids.current: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(pids, syscall.MNT_DETACH) }) // before the agent's cleanup
	a.writeManifest("forker.yaml", lifecyclePod("forker", "Always", `  containers:
  - name: forker
    image: `+testImage+`
    command: ["sh", "-c", "for i in $(seq 1 1600); do sleep 3600 & done; wait"]
`))
	a.waitRunning("forker", "forker")
	started := time.Now()
	waitFor(t, 45*time.Second, func() (bool, string) {
		phase, reason, msg := a.podPhaseReason("forker")
		return phase == "Failed" && reason == "Evicted", fmt.Sprintf("forker %s %s %q; evicted so far %v", phase, reason, msg, a.evictedPods())
	})
	t.Logf("forker evicted %v after it ran", time.Since(started).Round(100*time.Millisecond))
	_, _, msg := a.podPhaseReason("forker")
	if want := fmt.Sprintf("The node was low on resource: pids. Threshold quantity: %d, available: ", threshold); !strings.HasPrefix(msg, want) {
		t.Errorf("message %q, want it to start with %q", msg, want)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		n := len(a.running("forker"))
		return n == 0, fmt.Sprintf("%d containers of the forker running", n)
	})
	a.waitRounds(4)
	if got := a.evictedPods(); !slices.Equal(got, []string{"forker"}) {
		t.Errorf("evicted %v, want the forker alone", got)
	}
	if got := a.running("bystander")["idle"].ID; got != bystander.ID {
		t.Errorf("the bystander's container is %q, want %q untouched", got, bystander.ID)
	}
}

// An evicted static pod (a file's, over its emptyDir's sizeLimit) stays
// evicted across an agent restart, as the kubelet keeps it Failed: the
// restarted agent creates none of its containers again and reports it
// Failed, Evicted, with the eviction's message. Its manifest changed while
// the agent was down, it runs again.
func TestEvictionEvictedStaticPodStaysEvictedAcrossRestart(t *testing.T) {
	a := startAgent(t)
	manifest := func(command string) string {
		return lifecyclePod("filler", "Always", `  containers:
  - name: filler
    image: `+testImage+`
    command: ["sh", "-c", "`+command+`"]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {sizeLimit: 1Mi}}]
`)
	}
	a.writeManifest("filler.yaml", manifest("head -c 2097152 /dev/zero > /data/fill; sleep 3600"))
	a.waitRunning("filler", "filler")
	var msg string
	waitFor(t, 30*time.Second, func() (bool, string) {
		var phase, reason string
		phase, reason, msg = a.podPhaseReason("filler")
		return phase == "Failed" && reason == "Evicted", fmt.Sprintf("filler %s %s %q", phase, reason, msg)
	})
	waitFor(t, 30*time.Second, func() (bool, string) {
		n := len(a.running("filler"))
		return n == 0, fmt.Sprintf("%d containers of the filler running", n)
	})
	ids := func() []string {
		var out []string
		for _, c := range a.containers("filler") {
			out = append(out, c.ID)
		}
		slices.Sort(out)
		return out
	}
	before := ids()

	a.stop(syscall.SIGKILL)
	a.start()
	a.waitRounds(4)
	if after := ids(); !slices.Equal(after, before) {
		t.Errorf("the restarted agent made containers of the evicted pod: %v, before %v", after, before)
	}
	if got := a.running("filler"); len(got) != 0 {
		t.Errorf("the evicted pod runs again after the restart: %v", keys(got))
	}
	if phase, reason, got := a.podPhaseReason("filler"); phase != "Failed" || reason != "Evicted" || got != msg {
		t.Errorf("after the restart the pod is %s %s %q, want Failed Evicted %q", phase, reason, got, msg)
	}

	a.stop(syscall.SIGKILL)
	a.writeManifest("filler.yaml", manifest("sleep 3600"))
	a.start()
	a.waitRunning("filler", "filler")
	// The status follows the container's start by a sync.
	waitFor(t, 30*time.Second, func() (bool, string) {
		phase, _, _ := a.podPhaseReason("filler")
		return phase == "Running", fmt.Sprintf("with its manifest changed the pod is %s, want Running", phase)
	})
}
