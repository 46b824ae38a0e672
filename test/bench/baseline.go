package bench

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// The baseline makes, through the Docker API and with nothing pre-created,
// the same two containers the agent makes for podManifest's pod on default
// flags: an infra container holding the namespaces and an app container
// joining them, in a besteffort pod cgroup, the app with the agent's log
// rotation, OOM score, termination-log file and /etc/hosts, written once
// the infra container's IP is known (TestBaselineMakesTheAgentsContainers
// compares the two with docker inspect). It is swept over these
// concurrencies; 0 is unbounded.
var sweepLevels = []int{1, 2, 4, 8, 16, 0}

func levelName(l int) string {
	if l == 0 {
		return "baseline c=∞"
	}
	return "baseline c=" + strconv.Itoa(l)
}

// benchPod is one pod of a run as the baseline and the CLI make it.
type benchPod struct {
	node, name, uid string
	termLog         string // the app's termination-log file, as the agent makes one
	hosts           string // the pod's /etc/hosts, as the agent makes one
}

func (h *Harness) newBenchPod(node, name string) (benchPod, error) {
	sum := sha256.Sum256([]byte(node + "/" + name))
	uid := fmt.Sprintf("%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])
	dir := filepath.Join(h.dir, "baseline", uid)
	p := benchPod{node: node, name: name, uid: uid, termLog: filepath.Join(dir, "termination-log"), hosts: filepath.Join(dir, "etc-hosts")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return p, err
	}
	return p, os.WriteFile(p.termLog, nil, 0o666)
}

// writeHosts writes the pod's /etc/hosts for its IP, as the agent does.
func (p benchPod) writeHosts(ip string) error {
	return os.WriteFile(p.hosts, fmt.Appendf(nil, "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n%s\t%s\n", ip, p.name), 0o644)
}

func (p benchPod) labels(run string) map[string]string {
	return map[string]string{benchLabel: run, ownerLabel: p.node, "io.kubernetes.pod.name": p.name, "io.kubernetes.pod.uid": p.uid}
}

func (p benchPod) cgroupParent() string { return "/kubepods/besteffort/pod" + p.uid }

// appLogConfig is the agent's default container log rotation (10 MiB, 5 files).
var appLogConfig = docker.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10485760", "max-file": "5"}}

// baselinePod creates and starts one pod through the Docker API: its infra
// container, then the app container in the infra container's namespaces.
func (h *Harness) baselinePod(node, name string) (infraID, appID string, err error) {
	p, err := h.newBenchPod(node, name)
	if err != nil {
		return "", "", err
	}
	infra, err := h.docker.CreateContainer(docker.CreateContainerOptions{
		Name:   fmt.Sprintf("bench-%s-%s-%s-pod", h.run, node, name),
		Config: &docker.Config{Image: pauseImage, Labels: p.labels(h.run), Hostname: name},
		HostConfig: &docker.HostConfig{IpcMode: "shareable", CPUShares: 2, CgroupParent: p.cgroupParent(),
			RestartPolicy: docker.RestartPolicy{Name: "no"}},
	})
	if err != nil {
		return "", "", err
	}
	if err := h.docker.StartContainer(infra.ID, nil); err != nil {
		return "", "", err
	}
	started, err := h.docker.InspectContainerWithOptions(docker.InspectContainerOptions{ID: infra.ID})
	if err != nil {
		return "", "", err
	}
	if err := p.writeHosts(started.NetworkSettings.IPAddress); err != nil {
		return "", "", err
	}
	appID, err = h.baselineApp(p, infra.ID, 0)
	return infra.ID, appID, err
}

func (h *Harness) baselineApp(p benchPod, infraID string, instance int) (string, error) {
	app, err := h.docker.CreateContainer(docker.CreateContainerOptions{
		Name:   fmt.Sprintf("bench-%s-%s-%s-app%d", h.run, p.node, p.name, instance),
		Config: &docker.Config{Image: testImage, Labels: p.labels(h.run), Cmd: []string{"/testserver"}},
		HostConfig: &docker.HostConfig{NetworkMode: "container:" + infraID, IpcMode: "container:" + infraID, CPUShares: 2,
			OomScoreAdj: 1000, CgroupParent: p.cgroupParent(), LogConfig: appLogConfig,
			Binds:         []string{p.termLog + ":/dev/termination-log"},
			Mounts:        []docker.HostMount{{Target: "/etc/hosts", Source: p.hosts, Type: "bind"}},
			RestartPolicy: docker.RestartPolicy{Name: "no"}},
	})
	if err != nil {
		return "", err
	}
	return app.ID, h.docker.StartContainer(app.ID, nil)
}

// baselinePods makes the named pods through the Docker API, level at a time
// (0: all at once), and returns when Docker said the last container started,
// from the call.
func (h *Harness) baselinePods(node string, names []string, level int) (time.Duration, error) {
	return h.makePods(node, names, level, func(n string) error {
		_, _, err := h.baselinePod(node, n)
		return err
	})
}

// cliPods makes the named pods with `docker run -d`, every pod at once (its
// infra container, then its app container), as a shell loop with & would.
func (h *Harness) cliPods(node string, names []string) (time.Duration, error) {
	return h.makePods(node, names, 0, func(n string) error { return h.cliPod(node, n) })
}

// makePods runs makePod for every name, level at a time (0: all at once),
// and returns the time from the first call to Docker's start of the last
// container.
func (h *Harness) makePods(node string, names []string, level int, makePod func(name string) error) (time.Duration, error) {
	w, err := h.watchStarts(node, 2)
	if err != nil {
		return 0, err
	}
	defer w.close()
	if level <= 0 {
		level = len(names)
	}
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, level)
	errs := make(chan error, len(names))
	for _, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := makePod(n); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return lastStart(w, names, start)
}

func (h *Harness) cliPod(node, name string) error {
	p, err := h.newBenchPod(node, name)
	if err != nil {
		return err
	}
	infra := fmt.Sprintf("bench-%s-%s-%s-pod", h.run, node, name)
	var labels []string
	for k, v := range p.labels(h.run) {
		labels = append(labels, "--label", k+"="+v)
	}
	args := append([]string{"run", "-d", "--name", infra, "--hostname", name, "--ipc", "shareable", "--cpu-shares", "2",
		"--cgroup-parent", p.cgroupParent(), "--restart", "no"}, labels...)
	if out, err := exec.Command("docker", append(args, pauseImage)...).CombinedOutput(); err != nil {
		return fmt.Errorf("docker run %s: %w: %s", infra, err, out)
	}
	ip, err := exec.Command("docker", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", infra).Output()
	if err != nil {
		return fmt.Errorf("docker inspect %s: %w", infra, err)
	}
	if err := p.writeHosts(strings.TrimSpace(string(ip))); err != nil {
		return err
	}
	args = append([]string{"run", "-d", "--name", fmt.Sprintf("bench-%s-%s-%s-app0", h.run, node, name),
		"--network", "container:" + infra, "--ipc", "container:" + infra, "--cpu-shares", "2", "--oom-score-adj", "1000",
		"--cgroup-parent", p.cgroupParent(), "--restart", "no", "--log-driver", "json-file",
		"--log-opt", "max-size=" + appLogConfig.Config["max-size"], "--log-opt", "max-file=" + appLogConfig.Config["max-file"],
		"-v", p.termLog + ":/dev/termination-log", "--mount", "type=bind,source=" + p.hosts + ",target=/etc/hosts"}, labels...)
	if out, err := exec.Command("docker", append(args, testImage, "/testserver")...).CombinedOutput(); err != nil {
		return fmt.Errorf("docker run %s app: %w: %s", name, err, out)
	}
	return nil
}

// lastStart waits for Docker's start events of every named pod and returns
// the last one's time from start.
func lastStart(w *startWatcher, names []string, start time.Time) (time.Duration, error) {
	done := w.wait(len(names), 5*time.Minute)
	if len(done) < len(names) {
		return 0, fmt.Errorf("%d of %d pods started", len(done), len(names))
	}
	var last time.Time
	for _, n := range names {
		if t := done[n]; t.After(last) {
			last = t
		}
	}
	return last.Sub(start), nil
}
