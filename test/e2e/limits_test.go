package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/classic-kubelet/kubelet/test/cleanup"
	"github.com/classic-kubelet/kubelet/test/etcdtest"
)

// A fork bomb in one pod stops at --pod-max-pids (its pod cgroup's
// pids.max) while the agent and another pod's probes carry on. The bomb
// bounds itself at 300 processes too, so that this test is harmless on an
// agent that sets no limit.
func TestPodMaxPidsStopsAForkBomb(t *testing.T) {
	requireCgroupV1(t)
	a := startAgent(t, "--pod-max-pids", "100")
	a.writeManifest("probed.yaml", `apiVersion: v1
kind: Pod
metadata: {name: probed}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: server
    image: `+testImage+`
    imagePullPolicy: Never
    args: ["/testserver"]
    livenessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1, failureThreshold: 2}
    readinessProbe: {exec: {command: ["true"]}, periodSeconds: 1, failureThreshold: 2}
`)
	waitFor(t, 30*time.Second, func() (bool, string) {
		st := a.status("probed")
		return st.condition("Ready") == "True", fmt.Sprintf("probed: %+v", st)
	})
	a.writeManifest("bomb.yaml", `apiVersion: v1
kind: Pod
metadata: {name: bomb}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: bomb
    image: `+testImage+`
    imagePullPolicy: Never
    # A shell exits when it cannot fork: the bomb runs in a child shell,
    # whose processes stay when it exits.
    command: [sh, -c, 'sh -c "i=0; while [ \$i -lt 300 ]; do sleep 100000 & i=\$((i+1)); done; wait"; exec sleep 100000']
`)
	running := a.waitRunning("bomb", "bomb")
	uid := inspect(t, running["bomb"].ID).Config.Labels["io.kubernetes.pod.uid"]
	pod := "/kubepods/besteffort/pod" + uid
	if got := readCgroup("pids", pod, "pids.max"); got != "100" {
		t.Errorf("the pod cgroup's pids.max is %q, want 100", got)
	}
	// The bomb's forks stop at the limit: the pod's processes (infra,
	// shells, sleeps) stay there.
	waitFor(t, 30*time.Second, func() (bool, string) {
		cur, _ := strconv.Atoi(readCgroup("pids", pod, "pids.current"))
		return cur >= 95, fmt.Sprintf("the bomb's pod has %d processes, want it at the limit, 100", cur)
	})
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if cur, _ := strconv.Atoi(readCgroup("pids", pod, "pids.current")); cur > 100 {
			t.Fatalf("the bomb's pod has %d processes, over --pod-max-pids=100", cur)
		}
		start := time.Now()
		code, body := httpGet(fmt.Sprintf("http://127.0.0.1:%d/healthz", a.healthzPort))
		if took := time.Since(start); code != 200 || took > time.Second {
			t.Errorf("/healthz during the fork bomb: %d %q in %v, want 200 within 1 s", code, body, took)
		}
	}
	st := a.status("probed")
	if st.condition("Ready") != "True" || len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the other pod's probes failed during the fork bomb: %+v", st)
	}
	a.removeManifest("bomb.yaml")
	waitFor(t, 30*time.Second, func() (bool, string) {
		left := cleanup.PodCgroupDirs(uid)
		return len(left) == 0, fmt.Sprintf("the bomb's cgroup left in %v", left)
	})
}

// kubepods is bounded to capacity less --kube-reserved and
// --system-reserved; the Node's allocatable also leaves out the hard
// memory eviction threshold (100Mi, the kubelet's default, given here as
// the harness turns eviction off). kubepods is the host's, shared with
// every agent here: its bounds are put back as they were.
func TestNodeAllocatableBoundsKubepods(t *testing.T) {
	requireCgroupV1(t)
	files := [][2]string{{"cpu", "cpu.shares"}, {"memory", "memory.limit_in_bytes"}, {"pids", "pids.max"}}
	saved := map[[2]string]string{}
	for _, f := range files {
		saved[f] = readCgroup(f[0], "/kubepods", f[1])
	}
	t.Cleanup(func() { // after the agent stopped (cleanups run last first)
		for _, f := range files {
			if v := saved[f]; v != "" {
				if err := os.WriteFile(cgroupMount+"/"+f[0]+"/kubepods/"+f[1], []byte(v), 0o644); err != nil {
					t.Errorf("restore kubepods: %v", err)
				}
			}
		}
	})
	cluster := etcdtest.Start(t, 1)
	cl := cluster.Client()
	defer cl.Close()
	prefix := "/alloc-" + cluster.Token
	a := startAgent(t, "--kube-reserved", "cpu=500m,memory=1Gi,pid=1000", "--system-reserved", "cpu=250m,memory=512Mi",
		"--enforce-node-allocatable", "pods", "--eviction-hard", "memory.available<100Mi",
		"--etcd-servers", strings.Join(cluster.Endpoints(), ","), "--etcd-prefix", prefix)

	memTotal := meminfoTotal(t)
	pidMax, _ := strconv.ParseInt(strings.TrimSpace(readFile(t, "/proc/sys/kernel/pid_max")), 10, 64)
	cpuMilli := int64(runtime.NumCPU()) * 1000
	want := map[[2]string]string{
		files[0]: fmt.Sprint((cpuMilli - 750) * 1024 / 1000),
		files[1]: fmt.Sprint((memTotal - 1536<<20) &^ 4095), // the kernel counts pages
		files[2]: fmt.Sprint(pidMax - 1000),
	}
	waitFor(t, 15*time.Second, func() (bool, string) {
		var got []string
		ok := true
		for _, f := range files {
			v := readCgroup(f[0], "/kubepods", f[1])
			ok = ok && v == want[f]
			got = append(got, fmt.Sprintf("%s=%s (want %s)", f[1], v, want[f]))
		}
		return ok, "kubepods: " + strings.Join(got, ", ")
	})

	waitFor(t, 20*time.Second, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r, err := cl.Get(ctx, prefix+"/"+a.node+"/node")
		if err != nil || len(r.Kvs) == 0 {
			return false, fmt.Sprintf("no node key yet (%v)", err)
		}
		var n struct {
			Status struct {
				Capacity, Allocatable map[string]string
			}
		}
		if err := json.Unmarshal(r.Kvs[0].Value, &n); err != nil {
			return false, err.Error()
		}
		wantCPU, wantMem := fmt.Sprintf("%dm", cpuMilli-750), fmt.Sprint(memTotal-(1536+100)<<20)
		cpu, mem := n.Status.Allocatable["cpu"], n.Status.Allocatable["memory"]
		return cpu == wantCPU && quantityBytes(mem) == wantMem,
			fmt.Sprintf("node allocatable cpu %s memory %s (capacity %v), want %s and %s bytes", cpu, mem, n.Status.Capacity, wantCPU, wantMem)
	})

	// The summary's "pods" system container is kubepods: its available
	// memory is counted against the allocatable limit, as the kubelet's.
	limit, _ := strconv.ParseUint(want[files[1]], 10, 64)
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, body := httpGet(a.api(true) + "/stats/summary")
		var s struct {
			Node struct {
				SystemContainers []struct {
					Name   string
					Memory *struct{ AvailableBytes, WorkingSetBytes *uint64 }
				} `json:"systemContainers"`
			}
		}
		_ = json.Unmarshal([]byte(body), &s)
		for _, c := range s.Node.SystemContainers {
			if c.Name == "pods" && c.Memory != nil && c.Memory.AvailableBytes != nil && c.Memory.WorkingSetBytes != nil {
				got := *c.Memory.AvailableBytes + *c.Memory.WorkingSetBytes
				return got == limit, fmt.Sprintf("pods: available %d + working set %d = %d, want kubepods' limit %d",
					*c.Memory.AvailableBytes, *c.Memory.WorkingSetBytes, got, limit)
			}
		}
		return false, "no pods system container with memory in the summary: " + tail(body, 20)
	})
}

func meminfoTotal(t *testing.T) int64 {
	for _, line := range strings.Split(readFile(t, "/proc/meminfo"), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// quantityBytes is a memory quantity as bytes ("" if it is none).
func quantityBytes(s string) string {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return ""
	}
	return fmt.Sprint(q.Value())
}

// The agent lowers its own oom_score_adj to the kubelet's -999, below every
// pod, where the host allows it; where it does not (no CAP_SYS_RESOURCE, as
// on this CI machine), it says so once.
func TestAgentProtectsItselfFromTheOOMKiller(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.waitRounds(1)
	a.mu.Lock()
	pid := a.cmd.Process.Pid
	a.mu.Unlock()
	got := strings.TrimSpace(readFile(t, fmt.Sprintf("/proc/%d/oom_score_adj", pid)))
	const warning = "the agent keeps its own"
	if canLowerOOMScore(t) {
		if got != "-999" {
			t.Errorf("the agent's oom_score_adj is %s, want -999", got)
		}
		return
	}
	if n := strings.Count(a.log(), warning); got != "0" || n != 1 {
		t.Errorf("a host refusing lower scores: the agent's oom_score_adj %s and %d warnings %q; want 0 and one warning\n%s", got, n, warning, tail(a.log(), 30))
	}
}
