package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// podStatus fetches one pod's status from the agent's read-only API.
type containerStatus struct {
	Name         string         `json:"name"`
	Ready        bool           `json:"ready"`
	Started      *bool          `json:"started"`
	RestartCount int            `json:"restartCount"`
	ContainerID  string         `json:"containerID"`
	State        containerState `json:"state"`
	LastState    containerState `json:"lastState"`
}

type containerState struct {
	Waiting *struct {
		Reason  string `json:"reason"`
		Message string `json:"message"`
	} `json:"waiting"`
	Running    *struct{} `json:"running"`
	Terminated *struct {
		ExitCode int    `json:"exitCode"`
		Reason   string `json:"reason"`
		Message  string `json:"message"`
	} `json:"terminated"`
}

type podStatusJSON struct {
	Phase      string `json:"phase"`
	Reason     string `json:"reason"`
	Message    string `json:"message"`
	Conditions []struct {
		Type               string `json:"type"`
		Status             string `json:"status"`
		LastTransitionTime string `json:"lastTransitionTime"`
	} `json:"conditions"`
	ContainerStatuses     []containerStatus `json:"containerStatuses"`
	InitContainerStatuses []containerStatus `json:"initContainerStatuses"`
	PodIP                 string            `json:"podIP"`
	QOSClass              string            `json:"qosClass"`
}

func (a *agent) status(name string) podStatusJSON {
	a.t.Helper()
	code, body := httpGet(a.api(true) + "/pods/default/" + name)
	if code != 200 {
		return podStatusJSON{}
	}
	var p struct {
		Status podStatusJSON `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		a.t.Fatalf("decode pod: %v", err)
	}
	return p.Status
}

func (s podStatusJSON) condition(t string) string {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// instances returns every container of one name of a pod, oldest first.
func (a *agent) instances(pod, name string) []*docker.Container {
	var out []*docker.Container
	for _, c := range a.containers(pod) {
		if c.Labels["io.kubernetes.container.name"] == name {
			out = append(out, inspect(a.t, c.ID))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

func lifecyclePod(name, policy, body string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: %s
  terminationGracePeriodSeconds: 2
%s`, name, policy, body)
}

func TestLivenessRestartsWithBackoff(t *testing.T) {
	a := startAgent(t, "--backoff-initial", "2s", "--backoff-max", "4s")
	a.writeManifest("live.yaml", lifecyclePod("live", "Always", `  containers:
  - name: server
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    args: ["/testserver", "-unhealthy"]
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
      failureThreshold: 1
`))
	inst := a.watchInstances("live", "server", 4, 60*time.Second)
	// Restart gaps (from one instance's exit to the next one's start): the
	// first restart is immediate, then 2 s, then 4 s (the maximum).
	wantMin := []time.Duration{0, 2 * time.Second, 4 * time.Second}
	for i := 0; i+1 < len(inst) && i < len(wantMin); i++ {
		gap := inst[i+1].started.Sub(inst[i].finished)
		if gap < wantMin[i]-200*time.Millisecond || gap > wantMin[i]+3*time.Second {
			t.Errorf("gap before restart %d = %v, want about %v", i+1, gap, wantMin[i])
		}
		if inst[i+1].restartCount != fmt.Sprint(i+1) {
			t.Errorf("restart %d has restartCount label %q", i+1, inst[i+1].restartCount)
		}
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := a.status("live")
		return len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].RestartCount >= 3,
			fmt.Sprintf("status %+v", st.ContainerStatuses)
	})
}

func TestReadinessFlipsReadyWithoutRestart(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	port := freePort(t)
	a.writeManifest("ready.yaml", lifecyclePod("ready", "Always", fmt.Sprintf(`  containers:
  - name: server
    image: %s
    imagePullPolicy: IfNotPresent
    args: ["/testserver", "-listen", ":8080", "-grpc-listen", ":9090"]
    ports: [{name: http, containerPort: 8080, hostPort: %d, hostIP: 127.0.0.1}]
    readinessProbe:
      httpGet: {path: /healthz, port: http}
      periodSeconds: 1
      failureThreshold: 1
    livenessProbe:
      grpc: {port: 9090}
      periodSeconds: 1
      failureThreshold: 30
    startupProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
`, testImage, port)))
	first := a.waitRunning("ready", "server")["server"].ID
	waitFor(t, 20*time.Second, func() (bool, string) {
		st := a.status("ready")
		return st.condition("Ready") == "True", fmt.Sprintf("Ready=%s", st.condition("Ready"))
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	httpGet(base + "/unhealthy")
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := a.status("ready")
		return st.condition("Ready") == "False" && len(st.ContainerStatuses) == 1 && !st.ContainerStatuses[0].Ready,
			fmt.Sprintf("Ready=%s", st.condition("Ready"))
	})
	httpGet(base + "/healthy")
	waitFor(t, 10*time.Second, func() (bool, string) {
		return a.status("ready").condition("Ready") == "True", "not ready again"
	})
	if now := a.running("ready")["server"].ID; now != first {
		t.Error("readiness changes restarted the container")
	}
}

func TestRestartPolicies(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--backoff-initial", "1s", "--backoff-max", "1s")
	crash := func(name, policy, code string) string {
		return lifecyclePod(name, policy, `  containers:
  - name: job
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 1; exit `+code+`"]
`)
	}
	a.writeManifest("onfailure.yaml", crash("onfailure", "OnFailure", "1"))
	a.writeManifest("never.yaml", crash("never", "Never", "1"))
	a.writeManifest("job.yaml", crash("job", "OnFailure", "0"))

	a.watchInstances("onfailure", "job", 3, startupWait)
	for _, c := range []struct{ pod, phase string }{{"never", "Failed"}, {"job", "Succeeded"}} {
		waitFor(t, 30*time.Second, func() (bool, string) {
			st := a.status(c.pod)
			return st.Phase == c.phase, fmt.Sprintf("%s phase %q", c.pod, st.Phase)
		})
		// The finished pod's infra container is stopped (its ports freed);
		// its final container is kept for inspection, never restarted.
		waitFor(t, 10*time.Second, func() (bool, string) {
			return len(a.running(c.pod)) == 0, fmt.Sprintf("%s still runs %v", c.pod, keys(a.running(c.pod)))
		})
		if n := len(a.instances(c.pod, "job")); n != 1 {
			t.Errorf("%s: %d instances of the job container, want 1", c.pod, n)
		}
	}
	st := a.status("never")
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].State.Terminated == nil || st.ContainerStatuses[0].State.Terminated.ExitCode != 1 {
		t.Errorf("Never pod container status %+v, want terminated with exit code 1", st.ContainerStatuses)
	}
	a.waitRounds(3)
	if n := len(a.instances("never", "job")); n != 1 {
		t.Errorf("Never pod restarted: %d instances", n)
	}
}

func TestInitContainersRunInOrderOnce(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("init.yaml", lifecyclePod("init", "Always", `  volumes: [{name: work, emptyDir: {}}]
  initContainers:
  - name: first
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 1; echo first >> /work/log"]
    volumeMounts: [{name: work, mountPath: /work}]
  - name: second
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo second >> /work/log"]
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo app >> /work/log; exec sleep 1000"]
    volumeMounts: [{name: work, mountPath: /work}]
`))
	running := a.waitRunning("init", "app")
	uid := running["app"].Labels["io.kubernetes.pod.uid"]
	logPath := filepath.Join(a.rootDir, "pods", uid, "volumes", "kubernetes.io~empty-dir", "work", "log")
	want := "first\nsecond\napp\n"
	waitFor(t, 10*time.Second, func() (bool, string) {
		data, _ := os.ReadFile(logPath)
		return string(data) == want, fmt.Sprintf("log %q", data)
	})
	waitFor(t, 10*time.Second, func() (bool, string) {
		st := a.status("init")
		ok := st.condition("Initialized") == "True" && len(st.InitContainerStatuses) == 2 &&
			st.InitContainerStatuses[1].State.Terminated != nil && st.InitContainerStatuses[1].State.Terminated.Reason == "Completed"
		return ok, fmt.Sprintf("status %+v", st)
	})

	a.stop(syscall.SIGKILL)
	a.start()
	a.waitRounds(4)
	if data, _ := os.ReadFile(logPath); string(data) != want {
		t.Errorf("after an agent restart the log is %q: init containers ran again", data)
	}
	if now := a.running("init")["app"].ID; now != running["app"].ID {
		t.Error("app container restarted after an agent restart")
	}
	for _, name := range []string{"first", "second"} {
		if n := len(a.instances("init", name)); n != 1 {
			t.Errorf("%d instances of init container %s, want 1", n, name)
		}
	}
}

func TestGracefulTerminationRunsPreStopThenKills(t *testing.T) {
	a := startAgent(t)
	hostDir := t.TempDir()
	a.writeManifest("stubborn.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: 4
  volumes: [{name: out, hostPath: {path: %s}}]
  containers:
  - name: app
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]
    volumeMounts: [{name: out, mountPath: /out}]
    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "date +%%s > /out/prestop"]}
`, hostDir, testImage))
	a.waitRunning("stubborn", "app")
	start := time.Now()
	a.removeManifest("stubborn.yaml")
	waitFor(t, 30*time.Second, func() (bool, string) { return len(a.containers("stubborn")) == 0, "not removed" })
	took := time.Since(start)
	if took < 4*time.Second {
		t.Errorf("a container ignoring SIGTERM was gone after %v, before its 4 s grace period", took)
	}
	if took > 12*time.Second {
		t.Errorf("stopping took %v, want the grace period and a kill", took)
	}
	if _, err := os.Stat(filepath.Join(hostDir, "prestop")); err != nil {
		t.Errorf("preStop hook did not run: %v", err)
	}
}

func TestHungExecProbeIsKilled(t *testing.T) {
	a := startAgent(t)
	a.writeManifest("hung.yaml", lifecyclePod("hung", "Always", `  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "exec sleep 1000"]
    livenessProbe:
      exec: {command: ["sh", "-c", "sleep 999"]}
      timeoutSeconds: 1
      periodSeconds: 2
      failureThreshold: 100
`))
	app := a.waitRunning("hung", "app")["app"].ID
	// Evidence, not a sleep: four probes ran and timed out.
	waitFor(t, 30*time.Second, func() (bool, string) {
		n := a.metric("prober_probe_total", map[string]string{"probe_type": "Liveness", "result": "failed", "pod": "hung", "container": "app"})
		return n >= 4, fmt.Sprintf("%v liveness probes failed", n)
	})
	top, err := dockerc.TopContainer(app, "")
	if err != nil {
		t.Fatal(err)
	}
	hung := 0
	for _, p := range top.Processes {
		if strings.Contains(strings.Join(p, " "), "sleep 999") && !strings.Contains(strings.Join(p, " "), "sleep 9990") {
			hung++
		}
	}
	if hung > 1 {
		t.Errorf("%d hung probe processes left in the container, want at most the current one", hung)
	}
	if a.running("hung")["app"].ID != app {
		t.Error("a timing-out probe below its failure threshold restarted the container")
	}
}

// instance is one container of a pod, as watched over time.
type instance struct {
	id                string
	started, finished time.Time
	restartCount      string
}

// watchInstances follows the containers of one name of a pod (the agent
// removes older dead ones, so they are recorded while they exist) until n
// have started, and returns them oldest first.
func (a *agent) watchInstances(pod, name string, n int, timeout time.Duration) []*instance {
	a.t.Helper()
	seen := map[string]*instance{}
	var order []*instance
	deadline := time.Now().Add(timeout)
	for {
		for _, c := range a.containers(pod) {
			if c.Labels["io.kubernetes.container.name"] != name {
				continue
			}
			rec := seen[c.ID]
			if rec != nil && !rec.finished.IsZero() {
				continue
			}
			ct, err := dockerc.InspectContainerWithOptions(docker.InspectContainerOptions{ID: c.ID})
			if err != nil {
				continue
			}
			if rec == nil {
				rec = &instance{id: c.ID, restartCount: ct.Config.Labels["io.kubernetes.container.restartCount"]}
				seen[c.ID] = rec
				order = append(order, rec)
			}
			if !ct.State.StartedAt.IsZero() {
				rec.started = ct.State.StartedAt
			}
			if !ct.State.Running && !ct.State.FinishedAt.IsZero() {
				rec.finished = ct.State.FinishedAt
			}
		}
		started := 0
		for _, r := range order {
			if !r.started.IsZero() {
				started++
			}
		}
		if started >= n {
			sort.Slice(order, func(i, j int) bool { return order[i].started.Before(order[j].started) })
			return order
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("pod %s: %d instances of %s started within %v, want %d", pod, started, name, timeout, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dockerProxy forwards a unix socket to the Docker daemon's; the test can
// cut it (as a daemon restart would) and restore it, without touching the
// shared daemon.
type dockerProxy struct {
	path  string
	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
}

func newDockerProxy(t *testing.T) *dockerProxy {
	p := &dockerProxy{path: filepath.Join(t.TempDir(), "docker.sock"), conns: map[net.Conn]bool{}}
	p.restore(t)
	t.Cleanup(p.cut)
	return p
}

func (p *dockerProxy) restore(t *testing.T) {
	_ = os.Remove(p.path)
	ln, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", "/var/run/docker.sock")
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *dockerProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

func TestDockerConnectionCutAndRestored(t *testing.T) {
	t.Parallel()
	proxy := newDockerProxy(t)
	a := startAgent(t, "--docker-endpoint", "unix://"+proxy.path)
	a.writeManifest("pod.yaml", twoContainerPod("survivor", "x"))
	before := a.waitRunning("survivor", "server", "sidecar")

	proxy.cut()
	// While the agent is cut off, the server container dies.
	if err := dockerc.KillContainer(docker.KillContainerOptions{ID: before["server"].ID}); err != nil {
		t.Fatal(err)
	}
	// The relist health check fails while Docker is unreachable.
	waitFor(t, 20*time.Second, func() (bool, string) {
		code, body := httpGet(a.api(true) + "/healthz/relist")
		return code == 500, fmt.Sprintf("/healthz/relist = %d %s", code, body)
	})
	if n := len(a.running("survivor")); n != 2 {
		t.Fatalf("%d containers run while the agent is cut off, want 2 (it cannot act)", n)
	}
	proxy.restore(t)
	waitFor(t, 20*time.Second, func() (bool, string) {
		code, body := httpGet(a.api(true) + "/healthz")
		return code == 200, fmt.Sprintf("/healthz = %d %s", code, body)
	})
	now := a.waitRunning("survivor", "server", "sidecar")
	a.waitRounds(3) // would a duplicate appear?
	now2 := a.running("survivor")
	if len(now2) != 3 || now2["server"].ID != now["server"].ID {
		t.Errorf("after reconnecting: running %v", keys(now2))
	}
	if now["POD"].ID != before["POD"].ID || now["sidecar"].ID != before["sidecar"].ID {
		t.Error("healthy containers were replaced after reconnecting")
	}
	if got := now["server"].Labels["io.kubernetes.container.restartCount"]; got != "1" {
		t.Errorf("recreated server restartCount %q, want 1", got)
	}
	if n := len(a.instances("survivor", "server")); n != 2 {
		t.Errorf("%d instances of server, want the dead one and its one replacement", n)
	}
}

// A container the kernel OOM-kills says so: Docker sends "oom" before "die"
// and tells OOMKilled only in the inspect after the exit, which the agent
// makes for a die that followed an oom (any other die it takes from the
// event alone).
func TestOOMKilledContainerSaysSo(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("oom.yaml", lifecyclePod("oom", "Never", `  containers:
  - name: hog
    image: `+testImage+`
    command: [sh, -c, "tail /dev/zero"]
    resources: {limits: {memory: 16Mi}}
`))
	waitFor(t, 60*time.Second, func() (bool, string) {
		st := a.status("oom")
		if len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Terminated != nil {
			term := st.ContainerStatuses[0].State.Terminated
			return term.Reason == "OOMKilled" && term.ExitCode == 137, fmt.Sprintf("terminated: %+v", *term)
		}
		return false, fmt.Sprintf("oom: %+v", st)
	})
}

// A pod active longer than its activeDeadlineSeconds is stopped and Failed
// with the kubelet's reason, its containers stopped, and stays so; the
// retry queue wakes it at the deadline (no resync needed: 30 s here).
func TestActiveDeadlineSeconds(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--sync-frequency", "30s")
	a.writeManifest("deadline.yaml", lifecyclePod("deadline", "Always", `  activeDeadlineSeconds: 3
  containers:
  - name: app
    image: `+testImage+`
    command: ["sleep", "1000"]
`))
	a.waitRunning("deadline", "app")
	started := time.Now()
	waitFor(t, 20*time.Second, func() (bool, string) {
		st := a.status("deadline")
		return st.Phase == "Failed" && st.Reason == "DeadlineExceeded", fmt.Sprintf("phase %s reason %q", st.Phase, st.Reason)
	})
	// About 3 s; up to 12 s when Docker is slow to answer the start, which
	// the worker waits for before it sees the deadline.
	if took := time.Since(started); took > 12*time.Second {
		t.Errorf("Failed %v after the start, want about 3 s", took.Round(time.Millisecond))
	}
	if st := a.status("deadline"); st.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("message %q", st.Message)
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		r := a.running("deadline")
		return len(r) == 0, fmt.Sprintf("running %v", keys(r))
	})
	if _, ok := a.findEvent("deadline", "DeadlineExceeded"); !ok {
		t.Errorf("no DeadlineExceeded event")
	}
	time.Sleep(2 * time.Second)
	if r := a.running("deadline"); len(r) > 0 {
		t.Errorf("containers started again after the deadline: %v", keys(r))
	}
}

// A container's own restartPolicy and restartPolicyRules
// (ContainerRestartRules) decide its restarts over the pod's policy: the
// first matching rule restarts it; without a match its policy decides.
func TestContainerRestartRules(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--backoff-initial", "1s", "--backoff-max", "2s")
	for _, tc := range []struct{ name, podPolicy, body string }{
		{"rule-match", "Never", `    command: ["sh", "-c", "exit 42"]
    restartPolicy: Never
    restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]
`},
		{"rule-mismatch", "Never", `    command: ["sh", "-c", "exit 1"]
    restartPolicy: Never
    restartPolicyRules: [{action: Restart, exitCodes: {operator: In, values: [42]}}]
`},
		{"container-never", "Always", `    command: ["sh", "-c", "exit 1"]
    restartPolicy: Never
`},
		{"container-always", "Never", `    command: ["sh", "-c", "exit 1"]
    restartPolicy: Always
`},
	} {
		a.writeManifest(tc.name+".yaml", lifecyclePod(tc.name, tc.podPolicy, `  containers:
  - name: app
    image: `+testImage+`
`+tc.body))
	}
	for _, tc := range []struct {
		name     string
		restarts bool
		phase    string
	}{{"rule-match", true, "Running"}, {"rule-mismatch", false, "Failed"}, {"container-never", false, "Failed"}, {"container-always", true, "Running"}} {
		// A parallel test: beside the node-mode tests a pod may take 15 s
		// to start here; nothing about its time is asserted.
		waitFor(t, 60*time.Second, func() (bool, string) {
			st := a.status(tc.name)
			if len(st.ContainerStatuses) != 1 {
				return false, fmt.Sprintf("%s: %+v", tc.name, st)
			}
			cs := st.ContainerStatuses[0]
			if tc.restarts {
				return cs.RestartCount > 0 && st.Phase == tc.phase, fmt.Sprintf("%s: phase %s restarts %d", tc.name, st.Phase, cs.RestartCount)
			}
			return cs.State.Terminated != nil && st.Phase == tc.phase, fmt.Sprintf("%s: phase %s state %+v", tc.name, st.Phase, cs.State)
		})
	}
	a.waitRounds(3)
	for _, name := range []string{"rule-mismatch", "container-never"} {
		if st := a.status(name); st.ContainerStatuses[0].RestartCount != 0 || st.Phase != "Failed" {
			t.Errorf("%s: restarted (%d) or %s", name, st.ContainerStatuses[0].RestartCount, st.Phase)
		}
	}
}
