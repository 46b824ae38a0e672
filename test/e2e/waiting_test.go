package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// unpullable is an image no pull can get: a registry address on loopback
// where nothing listens (refused at once, and nothing leaves the machine).
const unpullable = "127.0.0.1:9/e2e/unpullable:1"

// A pod that waits costs the node nothing between its retries, whatever it
// waits for: no Docker call beyond the node's periodic relist, no CPU, and
// its events folded (one BackOff event whose count grows, at most one per
// sync). Each reason runs under its own agent, all at once; the back-off is
// 30 s, so no retry falls in the measured window. The CPU a waiting pod costs
// is its agent's CPU beyond that of an idle agent measured over the same
// window on the same busy machine: an agent's own housekeeping (cAdvisor,
// relists, disk usage) is no pod's cost, and it varies with the load of the
// agents around it. One idle agent serves every reason: its CPU is read over
// each one's window. Docker calls and CPU are counted per agent, which
// other tests do not move: it runs beside them.
func TestWaitingPodsCostNothing(t *testing.T) {
	t.Parallel()
	const window = 10 * time.Second
	backoff := []string{"--backoff-initial", "30s", "--backoff-max", "30s"}
	idle := startAgent(t, backoff...)
	pod := func(name, body string) string { return lifecyclePod(name, "Always", body) }
	app := func(image, policy, extra string) string {
		return `  containers:
  - name: app
    image: ` + image + `
    imagePullPolicy: ` + policy + `
    command: ` + sleeper + "\n" + extra
	}
	for _, tc := range []struct {
		reason   string
		manifest string
		pods     int      // copies of the manifest (under distinct names)
		args     []string // beyond the back-off
		// sandbox: the pod's sandbox fails, its containers wait in
		// ContainerCreating (as the kubelet's: the reason is the event's);
		// the wait has begun after the first failure and its retry at once.
		sandbox bool
	}{
		{reason: "ImagePullBackOff", manifest: app(unpullable, "Always", "")},
		{reason: "ImagePullBackOff", manifest: app(unpullable, "IfNotPresent", ""), pods: 10},
		{reason: "ErrImageNeverPull", manifest: app("classic-kubelet/absent-image:1", "Never", "")},
		{reason: "CreateContainerConfigError", manifest: app(testImage, "IfNotPresent", "    securityContext: {runAsNonRoot: true}\n")},
		{reason: "CreateContainerError", manifest: app(testImage, "IfNotPresent",
			"    securityContext: {seccompProfile: {type: Localhost, localhostProfile: absent.json}}\n")},
		{reason: "FailedMount", manifest: app(testImage, "IfNotPresent", `    volumeMounts: [{name: v, mountPath: /v}]
  volumes:
  - name: v
    hostPath: {path: /nonexistent/classic-kubelet-e2e, type: Directory}
`), sandbox: true},
		{reason: "InfraImageMissing", manifest: app(testImage, "IfNotPresent", ""), sandbox: true,
			args: []string{"--pod-infra-container-image", "classic-kubelet/no-such-pause:1"}},
		{reason: "CrashLoopBackOff", manifest: `  containers:
  - name: app
    image: ` + testImage + `
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "exit 3"]
`},
	} {
		name := tc.reason
		if tc.pods > 1 {
			name = fmt.Sprintf("%s x%d", tc.reason, tc.pods)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := startAgent(t, slices.Concat(backoff, tc.args)...)
			n := max(tc.pods, 1)
			waiting := tc.reason // the reason that shows the wait has begun
			if tc.sandbox {
				waiting = "ContainerCreating"
			}
			for i := range n {
				a.writeManifest(fmt.Sprintf("w%d.yaml", i), pod(fmt.Sprintf("w%d", i), tc.manifest))
			}
			waitFor(t, 60*time.Second, func() (bool, string) {
				for i := range n {
					reason, msg := a.waitingReason(fmt.Sprintf("w%d", i), "app")
					if reason != waiting {
						return false, fmt.Sprintf("pod w%d waiting %q %q, want %q", i, reason, msg, waiting)
					}
				}
				if errs := a.metric("kubelet_started_pods_errors_total", nil); tc.sandbox && errs < float64(2*n) {
					return false, fmt.Sprintf("%v sandbox failures, want the first and its retry", errs)
				}
				return true, ""
			})
			a.waitRounds(3) // the retry at once after a first failure is behind us

			lists := func() float64 {
				return a.metric("kubelet_runtime_operations_total", map[string]string{"operation_type": "list_containers"})
			}
			attempts := a.attempts()
			idle.waitRounds(1)
			lists0, cpu0, idle0, events0, t0 := lists(), a.cpu(), idle.cpu(), a.eventCount(), time.Now()
			time.Sleep(window)
			took := time.Since(t0)
			nLists, cpu, idleCPU, events := lists()-lists0, a.cpu()-cpu0, idle.cpu()-idle0, a.eventCount()-events0
			cores := func(d time.Duration) float64 { return d.Seconds() / took.Seconds() }
			t.Logf("%s, %d pod(s): %v list calls, %.4f cores (an idle agent %.4f), %d events in %v",
				tc.reason, n, nLists, cores(cpu), cores(idleCPU), events, took.Round(time.Millisecond))
			// The node's relist: one list per 5 s while events flow, and a
			// spare for the window's edges.
			if limit := float64(window/(5*time.Second)) + 2; nLists > limit {
				t.Errorf("%v list calls in %v while waiting, want at most %v (one per relist period)", nLists, window, limit)
			}
			if perPod := cores(cpu-idleCPU) / float64(n); perPod > 0.01 {
				t.Errorf("%.4f cores per waiting pod beyond an idle agent's, want at most 0.01", perPod)
			}
			// Syncs while waiting: the resync (every 10 s) at most, so at
			// most a few folded repeats, never a new event per sync.
			if events > 0 {
				t.Errorf("%d new events while waiting, want repeats folded into one event each", events)
			}
			if got := a.attempts(); got != attempts {
				t.Errorf("%v attempts (pulls, sandboxes, starts) while waiting for a back-off of 30 s, want none", got-attempts)
			}
		})
	}
}

// cpu is the agent's CPU time so far.
func (a *agent) cpu() time.Duration {
	a.t.Helper()
	a.mu.Lock()
	pid := a.cmd.Process.Pid
	a.mu.Unlock()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		a.t.Fatal(err)
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// eventCount is how many distinct events the agent keeps.
func (a *agent) eventCount() int {
	a.t.Helper()
	_, body := httpGet(a.api(true) + "/events")
	var l struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		a.t.Fatalf("decode /events: %v", err)
	}
	return len(l.Items)
}

// attempts counts what the agent tried and failed: pulls, pod sandboxes
// and container starts.
func (a *agent) attempts() float64 {
	return a.metric("kubelet_runtime_operations_total", map[string]string{"operation_type": "pull_image"}) +
		a.metric("kubelet_started_pods_errors_total", nil) +
		a.metric("kubelet_started_containers_total", nil)
}

// An image that appears while its pod waits in pull back-off (docker load,
// tag, pull by hand) is used at once under IfNotPresent, as the kubelet,
// which looks for the image before the back-off, would: the image event
// wakes the pod, long before its back-off of a minute ends.
func TestImageLoadedDuringPullBackOff(t *testing.T) {
	a := startAgent(t, "--backoff-initial", "60s", "--backoff-max", "60s")
	var b [4]byte
	_, _ = rand.Read(b[:])
	repo := "127.0.0.1:9/e2e/loaded-" + hex.EncodeToString(b[:])
	image := repo + ":1"
	t.Cleanup(func() { _ = dockerc.RemoveImageExtended(image, docker.RemoveImageOptions{NoPrune: true}) })
	a.writeManifest("loaded.yaml", imagePod("loaded", image, "IfNotPresent"))
	waitFor(t, 30*time.Second, func() (bool, string) {
		reason, msg := a.waitingReason("loaded", "c")
		return reason == "ErrImagePull" || reason == "ImagePullBackOff", fmt.Sprintf("waiting %q %q", reason, msg)
	})
	if err := dockerc.TagImage(testImage, docker.TagImageOptions{Repo: repo, Tag: "1"}); err != nil {
		t.Fatal(err)
	}
	tagged := time.Now()
	a.waitRunning("loaded", "c")
	if d := time.Since(tagged); d > 15*time.Second {
		t.Errorf("ran %v after its image was tagged, want well before the back-off of 60 s ends", d)
	}
}
