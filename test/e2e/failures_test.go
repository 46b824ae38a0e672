package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metric sums the samples of a counter or gauge (or the observation counts
// of a histogram) on the agent's /metrics whose labels include want.
// operations are the agent's Docker calls so far by operation type
// (kubelet_runtime_operations_total).
func (a *agent) operations() map[string]float64 {
	a.t.Helper()
	out := map[string]float64{}
	for _, op := range []string{"list_containers", "container_status", "get_container_events", "create_container", "start_container",
		"stop_container", "update_container", "remove_container", "image_status", "pull_image", "remove_image", "image_fs_info",
		"exec_sync", "exec", "attach", "container_logs"} {
		out[op] = a.metric("kubelet_runtime_operations_total", map[string]string{"operation_type": op})
	}
	return out
}

// operationsSince are the operations made since an earlier count, by type.
func (a *agent) operationsSince(before map[string]float64) map[string]float64 {
	a.t.Helper()
	out := map[string]float64{}
	for op, n := range a.operations() {
		if d := n - before[op]; d != 0 {
			out[op] = d
		}
	}
	return out
}

func (a *agent) metric(name string, want map[string]string) float64 {
	a.t.Helper()
	path := "/metrics"
	if strings.HasPrefix(name, "prober_") {
		path = "/metrics/probes"
	}
	resp, err := http.Get(a.api(true) + path)
	if err != nil {
		return 0 // not serving yet
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mf, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		a.t.Fatalf("parse %s: %v", path, err)
	}
	sum := 0.0
	f := mf[name]
	if f == nil {
		return 0
	}
	for _, m := range f.Metric {
		if labelsMatch(m, want) {
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.Label {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// errorLines counts the agent's error-level log lines containing s.
func (a *agent) errorLines(s string) int {
	n := 0
	for _, line := range strings.Split(a.log(), "\n") {
		if strings.HasPrefix(line, "E") && strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// reached returns when the counter metric first reached 1, 2, ... n, polled
// every 200 ms for up to timeout. A back-off shows in the spacing of the
// attempts it counts, however loaded the machine: load only spreads them.
func (a *agent) reached(name string, labels map[string]string, n int, timeout time.Duration) []time.Time {
	a.t.Helper()
	var at []time.Time
	waitFor(a.t, timeout, func() (bool, string) {
		for v := a.metric(name, labels); len(at) < n && float64(len(at)) < v; {
			at = append(at, time.Now())
		}
		return len(at) == n, fmt.Sprintf("%s reached %d, want %d", name, len(at), n)
	})
	return at
}

// A container Docker cannot start (its command does not exist) is retried
// on the crash back-off, reported as ContainerCannotRun with Docker's exit
// code, and an OnFailure pod keeps retrying instead of being declared
// Failed. With a 2 s initial back-off doubling to 8 s, attempts fall at
// about 0, 0 (the first failure is retried at once, as upstream's), 2, 6
// and 14 s (before the fix: one a second).
func TestStartFailureBacksOff(t *testing.T) {
	a := startAgent(t, "--backoff-initial", "2s", "--backoff-max", "8s")
	a.writeManifest("nobin.yaml", lifecyclePod("nobin", "OnFailure", `  containers:
  - name: app
    image: `+testImage+`
    command: ["/no/such/binary"]
`))
	// The attempts are counted from the agent's start, so the first is seen
	// when it happens: counting from later would see several at once and
	// shorten the span (as it did on a loaded CI machine).
	at := a.reached("kubelet_started_containers_total", map[string]string{"container_type": "container"}, 5, startupWait+time.Minute)
	for i := range at {
		t.Logf("start attempt %d at %v", i+1, at[i].Sub(at[0]).Round(100*time.Millisecond))
	}
	if took := at[4].Sub(at[0]); took < 10*time.Second {
		t.Errorf("5 start attempts in %v, want at least 10 s (back-off 2 s doubling to 8 s)", took.Round(100*time.Millisecond))
	}
	errs := map[string]string{"container_type": "container", "code": "RunContainerError"}
	waitFor(t, 10*time.Second, func() (bool, string) {
		n := a.metric("kubelet_started_containers_errors_total", errs)
		return n >= 5, fmt.Sprintf("%v start errors counted for 5 attempts", n)
	})

	// The status shows Docker's reason and exit code, between retries.
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := a.status("nobin")
		if len(st.ContainerStatuses) != 1 {
			return false, fmt.Sprintf("status %+v", st)
		}
		cs := st.ContainerStatuses[0]
		last := cs.LastState.Terminated
		ok := cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff" &&
			last != nil && last.Reason == "ContainerCannotRun" && last.ExitCode == 127 &&
			strings.Contains(last.Message, "/no/such/binary")
		return ok, fmt.Sprintf("phase %s, container %+v, last %+v", st.Phase, cs.State, last)
	})
	if st := a.status("nobin"); st.Phase == "Failed" || st.Phase == "Succeeded" {
		t.Errorf("an OnFailure pod whose container cannot start is %s; it must keep retrying", st.Phase)
	}
	for _, c := range a.instances("nobin", "app") {
		if c.State.ExitCode == 0 && !c.State.Running {
			t.Errorf("instance %s reports exit code 0 (%q)", c.Name, c.State.Error)
		}
	}
	if n := a.errorLines("Sync pod default/nobin"); n > 2 {
		t.Errorf("the same start failure was logged %d times at error level, want it once", n)
	}
}

// Failures before any container exists back off too, and say why: an infra
// image that is missing (the sandbox cannot be made: the containers wait in
// ContainerCreating, as the kubelet's, and the event says why), and an image
// absent under imagePullPolicy Never (the waiting reason). With a 2 s
// initial back-off doubling to 8 s, attempts fall at about 0, 1 (the retry
// after the next relist), 3, 7 and 15 s; the failure is logged once.
func TestPreContainerFailuresBackOff(t *testing.T) {
	for _, tc := range []struct {
		name, image, infraImage, reason, message string
		event, missing                           string // the event saying why, naming the missing image
		metric                                   string
		labels                                   map[string]string
	}{
		{"missing infra image", testImage, "classic-kubelet/no-such-pause:1", "ContainerCreating", "",
			"FailedCreatePodSandBox", "classic-kubelet/no-such-pause:1", "kubelet_started_pods_errors_total", nil},
		{"image never pulled", "classic-kubelet/absent-image:1", pauseImage, "ErrImageNeverPull", "absent-image",
			"ErrImageNeverPull", "classic-kubelet/absent-image:1", "kubelet_started_containers_errors_total", map[string]string{"code": "ErrImageNeverPull"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := startAgent(t, "--backoff-initial", "2s", "--backoff-max", "8s", "--pod-infra-container-image", tc.infraImage)
			a.writeManifest("failing.yaml", lifecyclePod("failing", "Always", `  containers:
  - name: app
    image: `+tc.image+`
    imagePullPolicy: Never
    command: ["sleep", "1000"]
`))
			// Counted from the start, so that the first attempts are seen when
			// they happen, not bunched by a slow wait before (see above).
			at := a.reached(tc.metric, tc.labels, 5, startupWait+time.Minute)
			if took := at[4].Sub(at[0]); took < 10*time.Second {
				t.Errorf("5 failed attempts in %v, want at least 10 s (back-off 2 s doubling to 8 s)", took.Round(100*time.Millisecond))
			}
			// ContainerCreating is also what a pod not yet synced reports, so
			// the wait holds until the event saying why is there too.
			waitFor(t, startupWait, func() (bool, string) {
				reason, msg := a.waitingReason("failing", "app")
				e, ok := a.findEvent("failing", tc.event)
				ok = ok && strings.Contains(e.Message, tc.missing)
				return ok && reason == tc.reason && strings.Contains(msg, tc.message),
					fmt.Sprintf("waiting %q %q; event %s %+v, want one naming %s", reason, msg, tc.event, e, tc.missing)
			})
			if n := a.errorLines("Sync pod default/failing"); n != 1 {
				t.Errorf("the failure was logged %d times at error level, want once", n)
			}
		})
	}
}

// An infra container removed from outside (docker rm -f) is noticed and the
// pod's sandbox made again, its app containers with it, within 2 s.
func TestInfraRemovedFromOutsideIsRecreated(t *testing.T) {
	a := startAgent(t)
	a.writeManifest("sbx.yaml", lifecyclePod("sbx", "Always", `  containers:
  - name: app
    image: `+testImage+`
    command: ["sleep", "100000"]
`))
	before := a.waitRunning("sbx", "app")
	removed := time.Now()
	if err := dockerc.RemoveContainer(docker.RemoveContainerOptions{ID: before["POD"].ID, Force: true}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		now := a.running("sbx")
		ok := now["POD"].ID != "" && now["POD"].ID != before["POD"].ID && now["app"].ID != "" && now["app"].ID != before["app"].ID
		return ok, fmt.Sprintf("running %v", keys(now))
	})
	took := time.Since(removed)
	t.Logf("infra removed → sandbox and app running again in %v", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("sandbox and app made again %v after the infra container was removed, want ≤ 2 s", took.Round(10*time.Millisecond))
	}
}

// A container tries to swap a directory of its downwardAPI volume for a
// link to a host directory, then exits so that the agent rewrites the
// volume on restart. The volume is read-only to it, and the agent's writes
// never follow links: the host directory stays empty and unchanged.
func TestDownwardAPIVolumeLinkSwapDoesNotReachHost(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	target := t.TempDir()
	if err := os.Chmod(target, 0o700); err != nil {
		t.Fatal(err)
	}
	a.writeManifest("swap.yaml", lifecyclePod("swap", "Always", `  containers:
  - name: app
    image: `+testImage+`
    command: ["sh", "-c", "rm -rf /podinfo/dir 2>&1; ln -s `+target+` /podinfo/dir 2>&1; ls -la /podinfo; sleep 1; exit 1"]
    volumeMounts: [{name: info, mountPath: /podinfo}]
  volumes:
  - name: info
    downwardAPI:
      items:
      - path: dir/labels
        fieldRef: {fieldPath: metadata.labels}
`))
	a.watchInstances("swap", "app", 3, 60*time.Second)
	entries, _ := os.ReadDir(target)
	fi, _ := os.Stat(target)
	if len(entries) != 0 || fi.Mode().Perm() != 0o700 {
		t.Fatalf("host directory now holds %d entries, mode %v: the agent wrote through the container's link", len(entries), fi.Mode().Perm())
	}
	inst := a.instances("swap", "app")
	var logs strings.Builder
	_ = dockerc.Logs(docker.LogsOptions{Container: inst[0].ID, Stdout: true, Stderr: true, OutputStream: &logs, ErrorStream: &logs})
	if !strings.Contains(logs.String(), "Read-only file system") {
		t.Errorf("the container could write its downwardAPI volume; its output:\n%s", logs.String())
	}
}

func uidPod(name, uid string) string {
	return fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"uid":%q},"spec":{"terminationGracePeriodSeconds":2,"containers":[{"name":"server","image":%q,"imagePullPolicy":"IfNotPresent"}]}}`,
		name, uid, testImage)
}

// Two pods with one metadata.uid (a file and a POST): the one admitted first
// keeps it and is never touched; the other is rejected with an error naming
// both, shown in /sources, and deleting it harms nothing.
func TestDuplicateUIDRejected(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	uid := "dup-" + a.node
	a.writeManifest("first.json", uidPod("first", uid))
	first := ids(a.waitRunning("first", "server"))
	a.waitAPI()
	if code, body := request(t, "POST", a.api(false)+"/pods", uidPod("second", uid)); code != 200 {
		t.Fatalf("POST /pods = %d %s", code, body)
	}
	want := fmt.Sprintf(`pod default/second from source \"api\" rejected: its uid %s is that of pod default/first from source \"file\"`, uid)
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		return strings.Contains(sources, want), "/sources: " + sources
	})
	if code, body := request(t, "DELETE", a.api(false)+"/pods/default/second", ""); code != 200 {
		t.Fatalf("DELETE second = %d %s", code, body)
	}
	// The sync loop has handled the DELETE once /sources no longer lists the
	// rejection; then any kill would show in a relist.
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		return !strings.Contains(sources, "rejected"), "/sources: " + sources
	})
	a.waitRounds(3)
	if now := ids(a.running("first")); fmt.Sprint(now) != fmt.Sprint(first) {
		t.Errorf("the first pod's containers changed: %v, were %v", now, first)
	}
	if code, _ := httpGet(a.api(true) + "/pods/default/first"); code != 200 {
		t.Errorf("GET /pods/default/first = %d: the first pod vanished", code)
	}
	if len(a.containers("second")) != 0 {
		t.Errorf("containers were made for the rejected pod")
	}
}

// A truncated API checkpoint never kills POSTed pods: the previous
// generation (or nothing, when that is unreadable too) is in force and the
// source is held until a PUT; /sources says so. A POST that cannot be
// checkpointed is refused with a 5xx and changes nothing.
func TestCorruptCheckpointKillsNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		corrupt    []string
	}{
		{"newest truncated", "checkpoint degraded", []string{"source-api.json"}},
		{"every generation truncated", "checkpoint lost", []string{"source-api.json", "source-api.json.prev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startAgent(t)
			a.waitAPI()
			for _, name := range []string{"posted-a", "posted-b"} {
				if code, body := request(t, "POST", a.api(false)+"/pods", simplePod(name, "1")); code != 200 {
					t.Fatalf("POST = %d %s", code, body)
				}
			}
			before := map[string]map[string]string{}
			for _, name := range []string{"posted-a", "posted-b"} {
				before[name] = ids(a.waitRunning(name, "server"))
			}
			a.stop(syscall.SIGTERM)
			for _, f := range tc.corrupt {
				p := filepath.Join(a.rootDir, "checkpoints", f)
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, data[:len(data)/2], 0o600); err != nil {
					t.Fatal(err)
				}
			}
			a.start()
			a.waitAPI()
			waitFor(t, 10*time.Second, func() (bool, string) {
				_, sources := httpGet(a.api(true) + "/sources")
				return strings.Contains(sources, tc.want), "/sources: " + sources
			})
			// A relist, a sync loop round and a housekeeping round (every
			// 2 s), which would have killed pods of a seen source.
			a.waitRounds(3)
			for name, ids0 := range before {
				if now := ids(a.running(name)); fmt.Sprint(now) != fmt.Sprint(ids0) {
					t.Errorf("pod %s: containers %v after the restart, were %v", name, now, ids0)
				}
			}
		})
	}
}

func TestNonDurablePostRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.waitAPI()
	dir := filepath.Join(a.rootDir, "checkpoints")
	// The checkpoint directory becomes a file: nothing can be written there
	// (root ignores permission bits, so a read-only mode would not do).
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, body := request(t, "POST", a.api(false)+"/pods", simplePod("undurable", "1"))
	if code < 500 || !strings.Contains(body, "not durable") {
		t.Errorf("POST with an unwritable checkpoint = %d %s, want a 5xx naming the cause", code, body)
	}
	a.waitRounds(3)
	if n := len(a.containers("undurable")); n != 0 {
		t.Errorf("the refused pod got %d containers", n)
	}
	if code, _ := httpGet(a.api(true) + "/pods/default/undurable"); code != 404 {
		t.Errorf("GET the refused pod = %d, want 404", code)
	}
}

// Under a 256-descriptor limit, a client holding 1,000 idle keep-alive
// connections takes nothing from the agent: /healthz answers within 1 s on
// its own port and on the API port (idle connections are closed first when
// the per-port cap is reached), and a new manifest still runs.
func TestIdleConnectionsDoNotStarveTheAgent(t *testing.T) {
	wrapper := filepath.Join(t.TempDir(), "kubelet-256")
	script := "#!/bin/sh\nulimit -n 256\nexec " + agentBinary + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	a := startAgentWith(t, func(a *agent) { a.binary = wrapper })
	a.waitAPI()

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 1000; i++ {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", a.roPort), 2*time.Second)
		if err != nil {
			continue // refused or reset: the agent protects itself
		}
		conns = append(conns, c)
		// One request each, answered, then the connection idles.
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 512)
		_, _ = c.Read(buf)
	}
	client := http.Client{Timeout: time.Second}
	for _, port := range []int{a.healthzPort, a.roPort} {
		start := time.Now()
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err != nil {
			t.Fatalf("GET /healthz on port %d with 1,000 idle connections held: %v", port, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET /healthz on port %d = %d after %v", port, resp.StatusCode, time.Since(start))
		}
	}
	a.writeManifest("after.yaml", lifecyclePod("after", "Always", `  containers:
  - name: app
    image: `+testImage+`
    command: ["sleep", "100000"]
`))
	a.waitRunning("after", "app")
}

// procStatus reads one field (in kB) of the agent's /proc status.
func (a *agent) procStatus(field string) int {
	a.t.Helper()
	a.mu.Lock()
	pid := a.cmd.Process.Pid
	a.mu.Unlock()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		a.t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int
			fmt.Sscan(rest, &kb)
			return kb
		}
	}
	return 0
}

// A valid 10,000-pod manifest and a 50 MB one cost the agent little: pods
// past --max-pods are rejected (OutOfpods, the first 100 listed in /sources,
// the rest counted) and the oversized file is refused by its size (before:
// 1.1 GB and 2.3 GB).
func TestHugeManifestsAreBounded(t *testing.T) {
	a := startAgent(t, "--max-pods", "3")
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := range 10000 {
		fmt.Fprintf(&b, "- apiVersion: v1\n  kind: Pod\n  metadata: {name: p%05d}\n  spec:\n    terminationGracePeriodSeconds: 2\n    containers:\n    - {name: c, image: %s, command: [sleep, \"100000\"]}\n", i, testImage)
	}
	a.writeManifest("many.yaml", b.String())
	big := "# " + strings.Repeat("x", 50<<20) + "\n"
	a.writeManifest("big.yaml", big)
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		return strings.Contains(sources, `"rejectedMore": 9897`) && strings.Contains(sources, "big.yaml: 52428803 bytes, larger than"), "/sources: " + tail(sources, 5)
	})
	for _, name := range []string{"p00000", "p00001", "p00002"} {
		a.waitRunning(name, "c")
	}
	if n := len(a.containers("p00003")); n != 0 {
		t.Errorf("a pod past --max-pods got %d containers", n)
	}
	if peak := a.procStatus("VmHWM"); peak > 300<<10 {
		t.Errorf("agent peak RSS %d MiB, want ≤ 300 MiB", peak>>10)
	} else {
		t.Logf("agent peak RSS %d MiB", peak>>10)
	}
}

// A Memory emptyDir without a sizeLimit is bounded by the pod's memory
// limit (before: half the node's memory, whatever the pod's limit).
func TestMemoryEmptyDirBoundedByPodLimit(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("memlim.yaml", lifecyclePod("memlim", "Always", `  volumes: [{name: cache, emptyDir: {medium: Memory}}]
  containers:
  - name: app
    image: `+testImage+`
    command: ["sleep", "100000"]
    resources: {limits: {memory: 48Mi}}
    volumeMounts: [{name: cache, mountPath: /cache}]
`))
	a.waitRunning("memlim", "app")
	if _, out := a.execIn("memlim", "app", "sh", "-c", "grep ' /cache ' /proc/mounts"); !strings.Contains(out, "size=49152k") {
		t.Errorf("/cache mount: %q, want a tmpfs of the pod's 48Mi limit", out)
	}
}

// Quantities whose conversion would overflow, and a hostPath Docker's binds
// cannot carry, are refused by validation naming the field; the file's
// other pods run.
func TestOverflowingQuantitiesRefused(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("ok.yaml", lifecyclePod("fine", "Always", `  containers:
  - {name: app, image: `+testImage+`, command: [sleep, "100000"]}
`))
	for name, body := range map[string]string{
		"cpu.yaml":   "  containers:\n  - {name: app, image: " + testImage + ", resources: {limits: {cpu: 8Ei}}}\n",
		"mem.yaml":   "  containers:\n  - {name: app, image: " + testImage + ", resources: {limits: {memory: 1e30}}}\n",
		"colon.yaml": "  volumes: [{name: h, hostPath: {path: \"/tmp/a:b\"}}]\n  containers:\n  - {name: app, image: " + testImage + "}\n",
	} {
		a.writeManifest(name, lifecyclePod(strings.TrimSuffix(name, ".yaml"), "Always", body))
	}
	a.waitRunning("fine", "app")
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		ok := strings.Contains(sources, "limits[cpu]: Invalid value") && strings.Contains(sources, "limits[memory]: Invalid value") &&
			strings.Contains(sources, "hostPath.path: Invalid value") && strings.Contains(sources, "must be at most")
		return ok, "/sources: " + sources
	})
	for _, pod := range []string{"cpu", "mem", "colon"} {
		if n := len(a.containers(pod)); n != 0 {
			t.Errorf("refused pod %s got %d containers", pod, n)
		}
	}
}

// The manifest directory replaced by an invalid file, or removed, keeps
// every file pod (before: the file in its place killed them all).
func TestManifestDirReplacedKeepsPods(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		replace    func(dir string) error
	}{
		{"replaced by a file", "no longer a directory", func(dir string) error {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			return os.WriteFile(dir, []byte("not: a pod\n"), 0o644)
		}},
		{"removed", "no such file or directory", os.RemoveAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startAgent(t)
			a.writeManifest("kept.yaml", lifecyclePod("kept", "Always", `  containers:
  - {name: app, image: `+testImage+`, command: [sleep, "100000"]}
`))
			before := ids(a.waitRunning("kept", "app"))
			if err := tc.replace(a.manifestDir); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, func() (bool, string) {
				_, sources := httpGet(a.api(true) + "/sources")
				return strings.Contains(sources, tc.want), "/sources: " + sources
			})
			a.waitRounds(3) // housekeeping (every 2 s) would have killed an unwanted pod
			if now := ids(a.running("kept")); fmt.Sprint(now) != fmt.Sprint(before) {
				t.Errorf("containers %v, were %v", now, before)
			}
			if !strings.Contains(a.log(), "keeping the 1 pod it last produced") {
				t.Errorf("the log does not say the pod is kept")
			}
		})
	}
}

// A FIFO swapped in for the manifest file, or served under /logs, never
// blocks the agent: refused as not a regular file, and the next good
// manifest still applies (before: the file source hung for good, and GETs
// of a FIFO pinned a thread each).
func TestFIFOsNeverBlock(t *testing.T) {
	logDir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(logDir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	single := filepath.Join(t.TempDir(), "pod.yaml")
	a := startAgent(t, "--pod-manifest-path", single, "--node-log-dir", logDir)
	write := func(value string) {
		tmp := single + ".new"
		if err := os.WriteFile(tmp, []byte(twoContainerPod("single", value)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, single); err != nil {
			t.Fatal(err)
		}
	}
	write("one")
	a.waitRunning("single", "server", "sidecar")
	fifo := single + ".fifo"
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fifo, single); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, sources := httpGet(a.api(true) + "/sources")
		return strings.Contains(sources, "not a regular file"), "/sources: " + sources
	})
	for range 20 {
		if code, body := httpGet(a.api(false) + "/logs/fifo"); code != http.StatusForbidden {
			t.Fatalf("GET /logs/fifo = %d %s, want 403 at once", code, body)
		}
	}
	sidecar := a.running("single")["sidecar"].ID
	write("two")
	waitFor(t, 20*time.Second, func() (bool, string) {
		c := a.running("single")["sidecar"]
		return c.ID != "" && c.ID != sidecar, "the manifest written after the FIFO was not applied"
	})
}

// Against the real binary: HEAD works on GET endpoints, and a query the
// standard parser would silently cut is refused.
func TestAPIQueriesAndHEAD(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.waitAPI()
	for _, path := range []string{"/pods", "/healthz", "/sources", "/metrics"} {
		req, _ := http.NewRequest(http.MethodHead, a.api(true)+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("HEAD %s = %d, want 200", path, resp.StatusCode)
		}
	}
	if code, body := request(t, "POST", a.api(false)+"/exec/default/nope/c?command=a;b", ""); code != 400 || !strings.Contains(body, "malformed query") {
		t.Errorf("POST /exec?command=a;b = %d %s, want 400", code, body)
	}
}
