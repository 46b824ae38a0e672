package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// podStatusFull is the part of a pod's status these tests read, conditions
// with their reasons and messages.
type podStatusFull struct {
	Phase      string `json:"phase"`
	PodIP      string `json:"podIP"`
	StartTime  string `json:"startTime"`
	Conditions []struct {
		Type, Status, Reason, Message string
	} `json:"conditions"`
	ContainerStatuses []struct {
		Name  string `json:"name"`
		State struct {
			Waiting *struct{ Reason, Message string } `json:"waiting"`
			Running *struct{}                         `json:"running"`
		} `json:"state"`
	} `json:"containerStatuses"`
}

func (a *agent) fullStatus(pod string) podStatusFull {
	a.t.Helper()
	var p struct {
		Status podStatusFull `json:"status"`
	}
	if code, body := httpGet(a.api(true) + "/pods/default/" + pod); code == 200 {
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			a.t.Fatalf("decode pod %s: %v", pod, err)
		}
	}
	return p.Status
}

// condition returns the status, reason and message of one condition
// ("absent" when the pod has none of that type).
func (s podStatusFull) condition(typ string) string {
	for _, c := range s.Conditions {
		if c.Type == typ {
			return fmt.Sprintf("%s %s %q", c.Status, c.Reason, c.Message)
		}
	}
	return "absent"
}

type eventJSON struct {
	Reason, Message, Type string
	Count                 int
	InvolvedObject        struct {
		Name      string `json:"name"`
		FieldPath string `json:"fieldPath"`
	} `json:"involvedObject"`
}

// events returns the agent's events about one pod.
func (a *agent) events(pod string) []eventJSON {
	a.t.Helper()
	var list struct{ Items []eventJSON }
	if code, body := httpGet(a.api(true) + "/events"); code == 200 {
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			a.t.Fatalf("decode events: %v", err)
		}
	}
	var out []eventJSON
	for _, e := range list.Items {
		if e.InvolvedObject.Name == pod {
			out = append(out, e)
		}
	}
	return out
}

// findEvent returns the first event about pod with reason, if any.
func (a *agent) findEvent(pod, reason string) (eventJSON, bool) {
	for _, e := range a.events(pod) {
		if e.Reason == reason {
			return e, true
		}
	}
	return eventJSON{}, false
}

// A pod with one container running and one that never started (its image
// absent under imagePullPolicy Never) is Pending, as the kubelet's phase
// says while any container waits without having run; Ready names the
// unready container; and the one never started gets no "Back-off restarting
// failed container" (nothing of it was ever restarted).
func TestPhasePendingWhileAContainerNeverStarted(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--backoff-initial", "1s", "--backoff-max", "2s")
	a.writeManifest("halfup.yaml", lifecyclePod("halfup", "Always", `  containers:
  - name: up
    image: `+testImage+`
    command: `+sleeper+`
  - name: never
    image: classic-kubelet/absent-image:1
    imagePullPolicy: Never
`))
	a.waitRunning("halfup", "up")
	waitFor(t, 20*time.Second, func() (bool, string) {
		reason, _ := a.waitingReason("halfup", "never")
		return reason == "ErrImageNeverPull", "never waits with " + reason
	})
	a.waitRounds(4) // several back-off rounds of never
	st := a.fullStatus("halfup")
	if st.Phase != "Pending" {
		t.Errorf("phase %s with a container that never started, want Pending", st.Phase)
	}
	want := `False ContainersNotReady "containers with unready status: [never]"`
	if got := st.condition("Ready"); got != want {
		t.Errorf("Ready %s, want %s", got, want)
	}
	if e, ok := a.findEvent("halfup", "BackOff"); ok {
		t.Errorf("event %q %q for a container that never started", e.Reason, e.Message)
	}
	if _, ok := a.findEvent("halfup", "ErrImageNeverPull"); !ok {
		t.Errorf("no ErrImageNeverPull event: %+v", a.events("halfup"))
	}
}

// A pod that completed keeps the IP it ran with (its infra container is
// stopped), and its conditions say PodCompleted as the kubelet's do; its
// PodReadyToStartContainers is False once the sandbox is gone.
func TestCompletedPodStatus(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("done.yaml", lifecyclePod("done", "Never", `  containers:
  - name: job
    image: `+testImage+`
    command: ["sh", "-c", "sleep 3"]
`))
	var ip string
	waitFor(t, 30*time.Second, func() (bool, string) {
		st := a.fullStatus("done")
		if ip == "" && st.Phase == "Running" {
			ip = st.PodIP
		}
		return ip != "" && st.condition("PodReadyToStartContainers") == `True  ""`, fmt.Sprintf("phase %s ip %q ReadyToStart %s", st.Phase, st.PodIP, st.condition("PodReadyToStartContainers"))
	})
	// The sandbox stops after the phase turns Succeeded, and the status
	// says so after the relist that sees it stopped: the conditions are
	// waited for, as a client would.
	var st podStatusFull
	waitFor(t, 30*time.Second, func() (bool, string) {
		st = a.fullStatus("done")
		if st.Phase != "Succeeded" || len(a.running("done")) != 0 {
			return false, "phase " + st.Phase
		}
		var wrong []string
		for typ, want := range map[string]string{
			"Ready":                     `False PodCompleted ""`,
			"ContainersReady":           `False PodCompleted ""`,
			"Initialized":               `True PodCompleted ""`,
			"PodReadyToStartContainers": `False  ""`,
			"PodScheduled":              `True  ""`,
		} {
			if got := st.condition(typ); got != want {
				wrong = append(wrong, fmt.Sprintf("%s %s, want %s", typ, got, want))
			}
		}
		return len(wrong) == 0, strings.Join(wrong, "; ")
	})
	if st.PodIP != ip || st.StartTime == "" {
		t.Errorf("completed pod has podIP %q startTime %q, want %s as it ran, and its start time", st.PodIP, st.StartTime, ip)
	}
}

// A pod whose volume cannot be set up waits in ContainerCreating, as the
// kubelet's; why is the FailedMount event.
func TestVolumeFailureIsAnEvent(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	missing := "/nonexistent-" + a.node
	a.writeManifest("novol.yaml", lifecyclePod("novol", "Always", `  containers:
  - name: app
    image: `+testImage+`
    command: `+sleeper+`
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    hostPath: {path: `+missing+`, type: Directory}
`))
	waitFor(t, 20*time.Second, func() (bool, string) {
		e, ok := a.findEvent("novol", "FailedMount")
		return ok && e.Type == "Warning" && strings.Contains(e.Message, missing), fmt.Sprintf("events %+v", a.events("novol"))
	})
	reason, msg := a.waitingReason("novol", "app")
	if reason != "ContainerCreating" || msg != "" {
		t.Errorf("app waits with %q %q, want ContainerCreating", reason, msg)
	}
}

// A privileged container is made on the default flags, as under the kubelet
// (which has no --allow-privileged since 1.15). Whether it then starts is
// Docker's: a daemon whose own capabilities are bounded (as on this test
// machine, without CAP_SYS_RESOURCE) cannot start any privileged container.
func TestPrivilegedAllowedByDefault(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("priv.yaml", lifecyclePod("priv", "Always", `  containers:
  - name: agent
    image: `+testImage+`
    command: `+sleeper+`
    securityContext: {privileged: true}
`))
	// Where the host cannot start a privileged container (as here), its
	// failed instances are replaced as the back-off says: one may be gone
	// between the list and the inspect, so an instance that vanished is
	// looked for again.
	var made *docker.Container
	waitFor(t, 20*time.Second, func() (bool, string) {
		reason, msg := a.waitingReason("priv", "agent")
		for _, c := range a.containers("priv") {
			if c.Labels["io.kubernetes.container.name"] != "agent" {
				continue
			}
			if d, err := dockerc.InspectContainerWithOptions(docker.InspectContainerOptions{ID: c.ID}); err == nil {
				made = d
				return true, ""
			}
		}
		return false, fmt.Sprintf("agent waits with %q %q", reason, msg)
	})
	if !made.HostConfig.Privileged {
		t.Errorf("container made unprivileged")
	}
}

// A pod naming imagePullSecrets runs, its images pulled with the node's
// credentials; that the secrets cannot be read is said once: one warning
// event, one log line.
func TestImagePullSecretsWarnOnce(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--sync-frequency", "1s")
	a.writeManifest("secrets.yaml", lifecyclePod("secrets", "Always", `  imagePullSecrets: [{name: regcred}, {name: other}]
  containers:
  - name: app
    image: `+testImage+`
    command: `+sleeper+`
`))
	a.waitRunning("secrets", "app")
	a.waitRounds(3) // syncs every second
	e, ok := a.findEvent("secrets", "FailedToRetrieveImagePullSecret")
	want := "Unable to retrieve some image pull secrets (regcred, other); attempting to pull the image may not succeed."
	if !ok || e.Type != "Warning" || e.Message != want || e.Count != 1 {
		t.Errorf("event %+v, want one Warning %q", e, want)
	}
	if n := strings.Count(a.log(), "unable to retrieve image pull secrets"); n != 1 {
		t.Errorf("the secrets were warned of in %d log lines, want 1", n)
	}
}

// The kubelet's events for failed hooks and probes: FailedPostStartHook
// (the container killed with it), FailedPreStopHook, and a liveness kill
// that says why and that the container will be restarted.
func TestHookAndProbeEvents(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--backoff-initial", "1s", "--backoff-max", "2s")
	a.writeManifest("hooks.yaml", lifecyclePod("hooks", "Always", `  containers:
  - name: post
    image: `+testImage+`
    command: `+sleeper+`
    lifecycle:
      postStart: {exec: {command: ["false"]}}
  - name: live
    image: `+testImage+`
    command: `+sleeper+`
    lifecycle:
      preStop: {exec: {command: ["false"]}}
    livenessProbe:
      exec: {command: ["false"]}
      periodSeconds: 1
      failureThreshold: 1
`))
	for _, w := range []struct{ reason, container, message, typ string }{
		{"FailedPostStartHook", "post", "PostStartHook failed", "Warning"},
		{"Killing", "post", "FailedPostStartHook", "Normal"},
		{"Killing", "live", "Container live failed liveness probe, will be restarted", "Normal"},
		{"FailedPreStopHook", "live", "PreStopHook failed", "Warning"},
	} {
		waitFor(t, 30*time.Second, func() (bool, string) {
			for _, e := range a.events("hooks") {
				if e.Reason == w.reason && e.Message == w.message && e.Type == w.typ &&
					e.InvolvedObject.FieldPath == "spec.containers{"+w.container+"}" {
					return true, ""
				}
			}
			return false, fmt.Sprintf("no %s %s %q of %s in %+v", w.typ, w.reason, w.message, w.container, a.events("hooks"))
		})
	}
	for _, e := range a.events("hooks") {
		if e.Reason == "Failed" && e.InvolvedObject.FieldPath == "spec.containers{post}" {
			t.Errorf("a failed postStart hook gave a Failed event too: %q", e.Message)
		}
	}
}
