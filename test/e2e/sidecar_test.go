package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// A process that exits at once on SIGTERM (sh runs the trap between sleeps).
const exitsOnTerm = `["sh", "-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"]`

// Native sidecars (init containers with restartPolicy: Always): started in
// order, the next init container only once a sidecar's startup probe has
// passed; kept running and restarted whatever the pod's restart policy;
// their readiness in the pod's; at removal stopped after the app container,
// the last declared first.
func TestNativeSidecars(t *testing.T) {
	a := startAgent(t, "--backoff-initial", "1s", "--backoff-max", "1s")
	a.writeManifest("side.yaml", `apiVersion: v1
kind: Pod
metadata: {name: side}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 30
  initContainers:
  - name: s1
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: `+exitsOnTerm+`
  - name: s2
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 2; touch /tmp/up; while :; do sleep 0.1; done"]
    startupProbe:
      exec: {command: ["test", "-f", "/tmp/up"]}
      periodSeconds: 1
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
  - name: init
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["true"]
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+exitsOnTerm+`
`)
	running := a.waitRunning("side", "s1", "s2", "app")
	waitFor(t, 20*time.Second, func() (bool, string) {
		st := a.status("side")
		ok := st.Phase == "Running" && st.condition("Ready") == "True" && st.condition("Initialized") == "True" && len(st.InitContainerStatuses) == 3
		for _, cs := range st.InitContainerStatuses[:min(2, len(st.InitContainerStatuses))] {
			ok = ok && cs.State.Running != nil && cs.Ready && cs.Started != nil && *cs.Started
		}
		return ok, fmt.Sprintf("status %+v", st)
	})
	// The regular init container ran only after s2's startup probe passed
	// (s2 creates its marker 2 s after it starts).
	var initFinished time.Time
	for _, c := range a.containers("side") {
		if c.Labels["io.kubernetes.container.name"] == "init" {
			initFinished = inspect(t, c.ID).State.StartedAt
		}
	}
	s2Started := inspect(t, running["s2"].ID).State.StartedAt
	if initFinished.Sub(s2Started) < 2*time.Second {
		t.Errorf("init started %v after s2: before s2's startup probe could pass", initFinished.Sub(s2Started))
	}
	s1Started := inspect(t, running["s1"].ID).State.StartedAt
	if !s1Started.Before(s2Started) {
		t.Errorf("s2 started before s1")
	}

	// A sidecar that dies is restarted, though the pod's policy is Never;
	// the app is left alone.
	must(t, dockerc.KillContainer(docker.KillContainerOptions{ID: running["s1"].ID}))
	waitFor(t, 20*time.Second, func() (bool, string) {
		r := a.running("side")
		return r["s1"].ID != "" && r["s1"].ID != running["s1"].ID, "s1 not restarted"
	})
	if r := a.running("side"); r["app"].ID != running["app"].ID {
		t.Errorf("the app container was restarted with its sidecar")
	}
	running = a.running("side")

	// Removal: the app stops first, then s2, then s1.
	events := make(chan *docker.APIEvents, 100)
	must(t, dockerc.AddEventListener(events))
	defer func() { _ = dockerc.RemoveEventListener(events) }()
	start := time.Now()
	a.removeManifest("side.yaml")
	ids := map[string]string{running["app"].ID: "app", running["s1"].ID: "s1", running["s2"].ID: "s2"}
	var order []string
	timeout := time.After(40 * time.Second)
	for len(order) < 3 {
		select {
		case ev := <-events:
			if name, ok := ids[ev.Actor.ID]; ok && ev.Action == "die" {
				order = append(order, name)
			}
		case <-timeout:
			t.Fatalf("containers that died: %v", order)
		}
	}
	if got := strings.Join(order, ","); got != "app,s2,s1" {
		t.Errorf("died in the order %s, want app,s2,s1", got)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("containers that exit on SIGTERM took %v to stop", took)
	}
}

// A Never pod with a sidecar completes when its app container does: the
// sidecar is then stopped and its exit (SIGTERM) does not fail the pod.
func TestSidecarPodCompletes(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("job.yaml", `apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  initContainers:
  - name: log
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: ["sleep", "3600"]
  containers:
  - name: work
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 2"]
`)
	waitFor(t, 30*time.Second, func() (bool, string) {
		st := a.status("job")
		return st.Phase == "Succeeded" && len(a.running("job")) == 0, fmt.Sprintf("phase %s, running %v", st.Phase, keys(a.running("job")))
	})
}

// An app container that ignores SIGTERM holds the pod for the grace period
// only: its sidecar then gets what remains (at least 2 s) and the pod is
// gone within grace + 2 s.
func TestSidecarPodStopsWithinGrace(t *testing.T) {
	const grace = 6
	a := startAgent(t)
	a.writeManifest("stubborn.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: stubborn}
spec:
  terminationGracePeriodSeconds: %d
  initContainers:
  - name: side
    image: %s
    imagePullPolicy: IfNotPresent
    restartPolicy: Always
    command: %s
  containers:
  - name: app
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"]
`, grace, testImage, exitsOnTerm, testImage))
	a.waitRunning("stubborn", "side", "app")
	start := time.Now()
	a.removeManifest("stubborn.yaml")
	waitFor(t, 3*grace*time.Second, func() (bool, string) {
		return len(a.running("stubborn")) == 0, fmt.Sprintf("still running: %v", keys(a.running("stubborn")))
	})
	if took := time.Since(start); took > (grace+3)*time.Second {
		t.Errorf("pod gone after %v, want within the grace period (%d s) + 2 s", took, grace)
	}
}
