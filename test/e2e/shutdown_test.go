package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	v1 "k8s.io/api/core/v1"
)

// privateBus is a dbus-daemon of the test's own (never the machine's system
// bus), on a socket in a directory of its own.
type privateBus struct {
	address string
	cmd     *exec.Cmd
}

// busConfig is the private bus's configuration: anyone on it may own any
// name and talk to anyone (it is reachable by its socket's path alone).
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`

// startPrivateBus runs dbus-daemon on a private socket until the test
// ends. Without dbus-daemon the test skips (fails under CI=true: the test
// dependencies install it).
func startPrivateBus(t *testing.T) *privateBus {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("dbus-daemon is required under CI=true (hack/ensure-test-deps.sh installs it): %v", err)
		}
		t.Skipf("dbus-daemon not installed (hack/ensure-test-deps.sh installs it): %v", err)
	}
	// A short directory: a socket's path is at most 107 bytes.
	dir, err := os.MkdirTemp("", "ck-bus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "system_bus_socket")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(busConfig, sock)), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &privateBus{address: "unix:path=" + sock, cmd: exec.Command(daemon, "--config-file="+conf, "--nofork", "--nopidfile")}
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start dbus-daemon: %v", err)
	}
	t.Cleanup(func() { _ = b.cmd.Process.Kill(); _ = b.cmd.Wait() })
	waitFor(t, 10*time.Second, func() (bool, string) {
		_, err := os.Stat(sock)
		return err == nil, fmt.Sprintf("no bus socket: %v", err)
	})
	return b
}

// logindStandIn is test/logind on a private bus: it owns
// org.freedesktop.login1 and tells its events line by line.
type logindStandIn struct {
	t     *testing.T
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	at    []time.Time
}

func startLogindStandIn(t *testing.T, bus *privateBus) *logindStandIn {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "logind")
	build := exec.Command("go", "build", "-o", bin, "github.com/classic-kubelet/kubelet/test/logind")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the logind stand-in: %v\n%s", err, out)
	}
	l := &logindStandIn{t: t, cmd: exec.Command(bin, "--address", bus.address, "--inhibit-delay-max", "30s")}
	l.cmd.Stderr = os.Stderr
	stdout, err := l.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := l.cmd.Start(); err != nil {
		t.Fatalf("start the logind stand-in: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l.mu.Lock()
			l.lines, l.at = append(l.lines, sc.Text()), append(l.at, time.Now())
			l.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = l.cmd.Process.Kill(); <-done; _ = l.cmd.Wait() })
	l.wait("ready", 10*time.Second)
	return l
}

// wait waits for a line starting with prefix and returns when it came.
func (l *logindStandIn) wait(prefix string, timeout time.Duration) time.Time {
	l.t.Helper()
	var at time.Time
	waitFor(l.t, timeout, func() (bool, string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		for i, line := range l.lines {
			if strings.HasPrefix(line, prefix) {
				at = l.at[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("logind stand-in said %q, want %q", l.lines, prefix)
	})
	return at
}

func (l *logindStandIn) signal(sig syscall.Signal) {
	l.t.Helper()
	if err := l.cmd.Process.Signal(sig); err != nil {
		l.t.Fatal(err)
	}
}

// shutdownPod is a pod whose preStop hook sleeps a moment, then writes the
// second it ran to /out/<name> (a host directory).
func shutdownPod(name, extra, hostDir string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
%s  volumes: [{name: out, hostPath: {path: %s}}]
  containers:
  - name: app
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    volumeMounts: [{name: out, mountPath: /out}]
    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "sleep 2; date +%%s > /out/%s"]}
`, name, extra, hostDir, testImage, name)
}

// etcdNodeReady is the Ready condition of the Node the agent writes to etcd.
func etcdNodeReady(t *testing.T, cl *clientv3.Client, node string) (v1.NodeCondition, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := cl.Get(ctx, "/registry/hosts/"+node+"/node")
	if err != nil || len(r.Kvs) == 0 {
		return v1.NodeCondition{}, false
	}
	var n v1.Node
	if err := json.Unmarshal(r.Kvs[0].Value, &n); err != nil {
		t.Fatalf("decode the node: %v", err)
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c, true
		}
	}
	return v1.NodeCondition{}, false
}

// A node agent with shutdownGracePeriod 10s and
// shutdownGracePeriodCriticalPods 4s holds logind's delay inhibitor (a
// real D-Bus daemon, a logind stand-in speaking logind's interface). When
// logind announces a shutdown (PrepareForShutdown(true)), the node turns
// NotReady with the kubelet's message, the ordinary pod is stopped first
// (its preStop hook runs, within 6 s), the node-critical one only after it
// (within 4 s); both end Failed with reason Terminated and the kubelet's
// message; then the inhibitor is released, with nothing of either pod
// running; a pod given meanwhile is rejected (NodeShutdown), as the
// kubelet's admission rejects it. The shutdown cancelled
// (PrepareForShutdown(false)), the node is Ready again and the inhibitor
// is taken again.
func TestGracefulNodeShutdownStopsPodsByPriority(t *testing.T) {
	t.Parallel()
	bus := startPrivateBus(t)
	logind := startLogindStandIn(t, bus)
	etcd := startEtcd(t)
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.clientURL.String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	a := startAgentWith(t, func(a *agent) {
		dropIns := t.TempDir()
		conf := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
authentication: {webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
shutdownGracePeriod: 10s
shutdownGracePeriodCriticalPods: 4s
`
		if err := os.WriteFile(filepath.Join(dropIns, "10-shutdown.conf"), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		a.extraArgs = append(a.extraArgs, "--config-dir", dropIns)
		a.env = append(a.env, "DBUS_SYSTEM_BUS_ADDRESS="+bus.address)
	}, "--etcd-servers", etcd.clientURL.String(), "--node-lease-renew-interval", "1s")
	logind.wait("inhibited 1 shutdown kubelet delay", startupWait)

	hostDir := t.TempDir()
	suffix := a.node[len(a.node)-6:]
	app, crit := "app-"+suffix, "crit-"+suffix
	a.writeManifest("app.yaml", shutdownPod(app, "", hostDir))
	a.writeManifest("crit.yaml", shutdownPod(crit, "  priorityClassName: system-node-critical\n", hostDir))
	a.waitRunning(app, "app")
	a.waitRunning(crit, "app")
	waitFor(t, 20*time.Second, func() (bool, string) {
		c, ok := etcdNodeReady(t, cl, a.node)
		return ok && c.Status == v1.ConditionTrue, fmt.Sprintf("node Ready %+v", c)
	})

	logind.signal(syscall.SIGUSR1)
	logind.wait("emitted true", 10*time.Second)
	waitFor(t, 10*time.Second, func() (bool, string) {
		c, _ := etcdNodeReady(t, cl, a.node)
		return c.Status == v1.ConditionFalse && c.Reason == "KubeletNotReady" && c.Message == "node is shutting down",
			fmt.Sprintf("node Ready %+v, want False KubeletNotReady %q", c, "node is shutting down")
	})
	// A pod given while the node shuts down never starts.
	late := "late-" + suffix
	a.writeManifest("late.yaml", shutdownPod(late, "", hostDir))
	released := logind.wait("released 1", 30*time.Second)
	// Released once nothing of either pod runs.
	for _, pod := range []string{app, crit} {
		if r := a.running(pod); len(r) != 0 {
			t.Errorf("pod %s still runs %v after the inhibitor was released", pod, keys(r))
		}
	}
	prestop := func(name string) int64 {
		data, err := os.ReadFile(filepath.Join(hostDir, name))
		if err != nil {
			t.Fatalf("the preStop hook of %s did not run: %v", name, err)
		}
		s, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		return s
	}
	appHook, critHook := prestop(app), prestop(crit)
	var appFinished time.Time
	for _, c := range a.containers(app) {
		if c.Labels["io.kubernetes.container.name"] == "app" {
			appFinished = inspect(t, c.ID).State.FinishedAt
		}
	}
	// The critical pod's preStop hook (2 s long) started only once the
	// ordinary pod's container had exited: stopped one after the other
	// (at once, both hooks would have written the same second).
	if appFinished.IsZero() || critHook < appFinished.Unix()+2 || critHook-appHook < 2 {
		t.Errorf("preStop hooks ran at %d (app) and %d (critical); app exited at %v: want the critical pod stopped after the app",
			appHook, critHook, appFinished)
	}
	if released.Before(appFinished) {
		t.Errorf("inhibitor released at %v, before the app exited at %v", released, appFinished)
	}
	for _, pod := range []string{app, crit} {
		waitFor(t, 15*time.Second, func() (bool, string) {
			s := a.status(pod)
			return s.Phase == "Failed" && s.Reason == "Terminated" && s.Message == "Pod was terminated in response to imminent node shutdown." &&
					s.condition("DisruptionTarget") == "True",
				fmt.Sprintf("pod %s: %s %s %q, DisruptionTarget %q; want Failed Terminated with the kubelet's message", pod, s.Phase, s.Reason, s.Message,
					s.condition("DisruptionTarget"))
		})
	}
	waitFor(t, 15*time.Second, func() (bool, string) {
		s := a.status(late)
		return s.Phase == "Failed" && s.Reason == "NodeShutdown" && s.Message == "Pod was rejected: Pod was rejected as the node is shutting down.",
			fmt.Sprintf("pod %s: %s %s %q, want Failed NodeShutdown, rejected", late, s.Phase, s.Reason, s.Message)
	})
	if c := a.containers(late); len(c) != 0 {
		t.Errorf("pod %s given during the shutdown has %d containers", late, len(c))
	}
	log := a.log()
	for _, want := range []string{
		fmt.Sprintf("stopping pod default/%s (priority 0) within 6s", app),
		fmt.Sprintf("stopping pod default/%s (priority 2000001000) within 4s", crit),
	} {
		if !strings.Contains(log, want) {
			t.Errorf("agent log lacks %q", want)
		}
	}
	start, end := a.metric("kubelet_graceful_shutdown_start_time_seconds", nil), a.metric("kubelet_graceful_shutdown_end_time_seconds", nil)
	if start <= 0 || end < start {
		t.Errorf("graceful shutdown gauges start %v end %v, want a start and a later end", start, end)
	}

	// Cancelled: Ready again, the inhibitor taken again; the pods stay
	// stopped, as the kubelet leaves them.
	logind.signal(syscall.SIGUSR2)
	logind.wait("inhibited 2 shutdown kubelet delay", 10*time.Second)
	waitFor(t, 10*time.Second, func() (bool, string) {
		c, _ := etcdNodeReady(t, cl, a.node)
		return c.Status == v1.ConditionTrue, fmt.Sprintf("node Ready %+v after the cancellation", c)
	})
	if r := a.running(app); len(r) != 0 {
		t.Errorf("pod %s started again after the cancellation: %v", app, keys(r))
	}
}

// Without a system bus the agent says so at start, once, and runs pods.
func TestGracefulNodeShutdownWithoutLogindWarns(t *testing.T) {
	t.Parallel()
	dropIns := t.TempDir()
	conf := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
authentication: {webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
shutdownGracePeriod: 10s
`
	if err := os.WriteFile(filepath.Join(dropIns, "10-shutdown.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	a := startAgentWith(t, func(a *agent) {
		a.env = append(a.env, "DBUS_SYSTEM_BUS_ADDRESS=unix:path="+filepath.Join(t.TempDir(), "no-bus"))
	}, "--config-dir", dropIns)
	a.writeManifest("p.yaml", shutdownPod("p", "", t.TempDir()))
	a.waitRunning("p", "app")
	waitFor(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(a.log(), "Graceful node shutdown is off: connect to the system bus"), "no warning that graceful node shutdown is off"
	})
}
