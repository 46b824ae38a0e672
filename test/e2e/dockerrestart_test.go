package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"

	"github.com/classic-kubelet/kubelet/test/cleanup"
)

// privateDocker is a Docker daemon of a test's own, isolated from the
// machine's: its own config file, socket, data and exec roots, pidfile,
// bridge and (managed) containerd, no iptables. The machine's daemon is
// never touched.
type privateDocker struct {
	t        *testing.T
	dir      string // config, socket, pidfile, log
	execRoot string // short: socket paths must stay under 108 bytes
	dataRoot string
	bridge   string
	args     []string
	cmd      *exec.Cmd
	exited   chan struct{}
	client   *docker.Client
}

func (d *privateDocker) endpoint() string { return "unix://" + filepath.Join(d.dir, "d.sock") }

func startPrivateDocker(t *testing.T, liveRestore bool) *privateDocker {
	t.Helper()
	for _, tool := range []string{"dockerd", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to run a private Docker daemon: %v", tool, err)
		}
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	d := &privateDocker{t: t, dir: t.TempDir(), dataRoot: t.TempDir(), bridge: "ckl" + id}
	var err error
	if d.execRoot, err = os.MkdirTemp("/tmp", "ckx"); err != nil {
		t.Fatal(err)
	}
	// A bridge of its own, on a range the machine's daemon does not use.
	subnet := fmt.Sprintf("10.%d.%d.1/24", 200+int(b[0])%50, b[1])
	for _, args := range [][]string{
		{"link", "add", d.bridge, "type", "bridge"},
		{"addr", "add", subnet, "dev", d.bridge},
		{"link", "set", d.bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	cfg := filepath.Join(d.dir, "daemon.json")
	if err := os.WriteFile(cfg, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := dockerc.Info()
	if err != nil {
		t.Fatal(err)
	}
	d.args = []string{
		"--config-file", cfg, "-H", d.endpoint(), "--data-root", d.dataRoot, "--exec-root", d.execRoot,
		"--pidfile", filepath.Join(d.dir, "d.pid"), "--iptables=false", "--ip6tables=false", "--ip-masq=false",
		"--bridge=" + d.bridge, "--storage-driver", info.Driver,
	}
	if liveRestore {
		d.args = append(d.args, "--live-restore")
	}
	t.Cleanup(d.teardown)
	d.start()
	// The images the pods use, from the machine's daemon (nothing is pulled).
	for _, img := range []string{pauseImage, testImage} {
		load := exec.Command("sh", "-c", "docker save "+img+" | docker -H "+d.endpoint()+" load -q")
		if out, err := load.CombinedOutput(); err != nil {
			t.Fatalf("load %s into the private daemon: %v %s", img, err, out)
		}
	}
	return d
}

// start runs dockerd and waits until it answers /_ping; it returns when.
func (d *privateDocker) start() time.Time {
	d.t.Helper()
	logf, err := os.OpenFile(filepath.Join(d.dir, "dockerd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	d.cmd = exec.Command("dockerd", d.args...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}(d.cmd, d.exited)
	if d.client, err = docker.NewClient(d.endpoint()); err != nil {
		d.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for d.client.Ping() != nil {
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(filepath.Join(d.dir, "dockerd.log"))
			d.t.Fatalf("private dockerd did not answer /_ping:\n%s", tail(string(data), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Now()
}

// stop ends dockerd (SIGTERM) and waits for it.
func (d *privateDocker) stop() {
	if d.cmd == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(60 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.exited
	}
	d.cmd = nil
}

// teardown removes everything the daemon made: its containers and their
// pods' cgroups (the agent, stopped first, leaves those), the daemon and its
// containerd (by PID), its mounts, its bridge, its directories.
func (d *privateDocker) teardown() {
	if d.cmd != nil && d.client != nil {
		if list, err := d.client.ListContainers(docker.ListContainersOptions{All: true}); err == nil {
			uids := map[string]bool{}
			for _, c := range list {
				uids[c.Labels["io.kubernetes.pod.uid"]] = true
				_ = d.client.RemoveContainer(docker.RemoveContainerOptions{ID: c.ID, Force: true})
			}
			cleanup.PodCgroups(uids)
		}
	}
	d.stop()
	if data, err := os.ReadFile(filepath.Join(d.execRoot, "containerd", "containerd.pid")); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			for i := 0; i < 50 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	unmountUnder(d.dataRoot)
	unmountUnder(d.execRoot)
	_ = exec.Command("ip", "link", "del", d.bridge).Run()
	_ = os.RemoveAll(d.execRoot)
}

// podsRunning counts, per pod of the agent, the running containers.
func (d *privateDocker) running(node string) map[string][]string {
	list, err := d.client.ListContainers(docker.ListContainersOptions{All: true, Filters: map[string][]string{"label": {ownerLabel + "=" + node}}})
	if err != nil {
		return nil
	}
	out := map[string][]string{}
	for _, c := range list {
		if c.State == "running" {
			pod := c.Labels["io.kubernetes.pod.name"]
			out[pod] = append(out[pod], c.Labels["io.kubernetes.container.name"]+"="+c.ID)
		}
	}
	for _, v := range out {
		sort.Strings(v)
	}
	return out
}

// mainDaemonState is what the private daemon must leave alone: the machine
// daemon's iptables chains and containers.
func mainDaemonState(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"-S", "DOCKER"}, {"-t", "nat", "-S", "DOCKER"}, {"-S", "DOCKER-USER"}} {
		out, _ := exec.Command("iptables", args...).CombinedOutput()
		fmt.Fprintf(&b, "iptables %v:\n%s\n", args, out)
	}
	list, err := dockerc.ListContainers(docker.ListContainersOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.ID+" "+c.State)
	}
	sort.Strings(ids)
	fmt.Fprintf(&b, "containers:\n%s\n", strings.Join(ids, "\n"))
	return b.String()
}

// A Docker daemon restarted under 8 pods: without live-restore every pod
// runs again within 30 s of the daemon answering (or, on a daemon slow to
// start containers, within 1.5 times what their first start took), with no
// duplicates; with
// live-restore no container is recreated. The machine's daemon is not
// disturbed: its containers are compared before and after, so the test runs
// alone (tests beside it would change them).
func TestDockerDaemonRestart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("a private Docker daemon needs root")
	}
	before := mainDaemonState(t)
	// 8 pods a daemon (30, then 15, until the test had to fit make test's
	// 20 minutes): two daemons at once make 32 containers twice.
	const pods = 8
	// The two daemons side by side: a recovery took a fifth of what it is
	// allowed (6 s of 30), and a daemon's first start, which the allowance
	// follows, shares the machine alike.
	t.Run("daemons", func(t *testing.T) {
		for _, liveRestore := range []bool{false, true} {
			t.Run(fmt.Sprintf("live-restore=%v", liveRestore), func(t *testing.T) {
				t.Parallel()
				d := startPrivateDocker(t, liveRestore)
				a := startAgent(t, "--docker-endpoint", d.endpoint())
				written := time.Now()
				for i := range pods {
					a.writeManifest(fmt.Sprintf("d%02d.yaml", i), lifecyclePod(fmt.Sprintf("d%02d", i), "Always", `  containers:
  - {name: app, image: `+testImage+`, command: [sleep, "100000"]}
`))
				}
				allRunning := func() (bool, string) {
					r := d.running(a.node)
					n := 0
					for _, cs := range r {
						if len(cs) == 2 {
							n++
						}
					}
					return n == pods && len(r) == pods, fmt.Sprintf("%d of %d pods running whole (%d with containers)", n, pods, len(r))
				}
				waitFor(t, 90*time.Second, allRunning)
				// Recreating every container is the first start again: no slower
				// than this daemon made them the first time.
				recovery := max(30*time.Second, time.Since(written)*3/2)
				first := d.running(a.node)

				relists := a.metric("kubelet_pleg_relist_duration_seconds", nil) // successful relists
				d.stop()
				answered := d.start()
				// waitFor is the assertion: every pod runs again within recovery.
				waitFor(t, recovery, allRunning)
				t.Logf("all %d pods running %v after the daemon answered /_ping (allowed %v)", pods, time.Since(answered).Round(100*time.Millisecond), recovery.Round(time.Second))
				if liveRestore {
					// The agent has seen the daemon back (successful relists
					// since: one on resubscribing to its events, one a
					// stretched period later) and had the chance to act.
					waitFor(t, 30*time.Second, func() (bool, string) {
						n := a.metric("kubelet_pleg_relist_duration_seconds", nil)
						return n >= relists+2, fmt.Sprintf("%v relists since the restart", n-relists)
					})
					time.Sleep(2 * time.Second)
					if now := d.running(a.node); fmt.Sprint(now) != fmt.Sprint(first) {
						t.Errorf("with live-restore, containers changed across the daemon restart")
					}
				}
				// No duplicates: every container of the node is one pod's
				// current infra or app (dead ones aside).
				for pod, cs := range d.running(a.node) {
					if len(cs) != 2 {
						t.Errorf("pod %s runs %d containers: %v", pod, len(cs), cs)
					}
				}
				a.stop(syscall.SIGTERM)
			})
		}
	})
	if after := mainDaemonState(t); after != before {
		t.Errorf("the machine's Docker daemon changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
