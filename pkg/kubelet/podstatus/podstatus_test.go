package podstatus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/status"
)

func TestMain(m *testing.M) {
	// A log read a test cancels must have returned when it ends.
	goleak.VerifyTestMain(m)
}

const infraName = kubecontainer.InfraContainerName

// harness is a Producer over fakes of what it reads (the runtime's in-memory
// fake for the logs), with a real status store on a fake clock.
type harness struct {
	*Producer
	records *fakeRecords
	store   *status.Manager
	clock   *testingclock.FakeClock
	metrics *metrics.Metrics
}

// newHarness returns a harness whose store checkpoints to checkpoint ("":
// a file of its own).
func newHarness(t *testing.T, checkpoint string) *harness {
	if checkpoint == "" {
		checkpoint = filepath.Join(t.TempDir(), "conditions.json")
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	h := &harness{records: newFakeRecords(), store: status.NewManager(checkpoint, clk), clock: clk, metrics: metrics.New("n")}
	podDir := t.TempDir()
	h.Producer = New(Config{PodDir: func(uid types.UID) string { return filepath.Join(podDir, string(uid)) },
		Records: h.records, Statuses: h.store, Probes: probesAsDeclared{}, Logs: containertest.NewFakeClient(),
		Metrics: h.metrics, Clock: clk})
	return h
}

// fakeRecords is the per-pod record as a test sets it.
type fakeRecords struct {
	waiting  map[string]*kubecontainer.StartError // by "uid/container"
	rejected map[types.UID]*lifecycle.Rejection
	ended    map[types.UID]*lifecycle.Termination
	messages map[string]string // by "uid/container ID"
	seen     map[types.UID]time.Time
	pulling  map[types.UID]time.Duration
	observed map[types.UID]bool
	resize   map[types.UID]Resize
}

func (r *fakeRecords) Resize(uid types.UID) Resize { return r.resize[uid] }

func newFakeRecords() *fakeRecords {
	return &fakeRecords{waiting: map[string]*kubecontainer.StartError{}, rejected: map[types.UID]*lifecycle.Rejection{},
		ended: map[types.UID]*lifecycle.Termination{}, messages: map[string]string{}, seen: map[types.UID]time.Time{},
		pulling: map[types.UID]time.Duration{}, observed: map[types.UID]bool{}}
}

func (r *fakeRecords) Waiting(uid types.UID, name string) *kubecontainer.StartError {
	return r.waiting[string(uid)+"/"+name]
}
func (r *fakeRecords) Rejected(uid types.UID) *lifecycle.Rejection { return r.rejected[uid] }
func (r *fakeRecords) Termination(uid types.UID) *lifecycle.Termination {
	return r.ended[uid]
}
func (r *fakeRecords) Message(uid types.UID, id string) (string, bool) {
	msg, ok := r.messages[string(uid)+"/"+id]
	return msg, ok
}
func (r *fakeRecords) SetMessage(uid types.UID, id, msg string) { r.messages[string(uid)+"/"+id] = msg }
func (r *fakeRecords) Started(uid types.UID) (time.Time, time.Duration, bool) {
	seen, ok := r.seen[uid]
	if !ok || r.observed[uid] {
		return time.Time{}, 0, false
	}
	r.observed[uid] = true
	return seen, r.pulling[uid], true
}

// probesAsDeclared is the prober before any probe ran: a container has
// started unless it has a startup probe, and is ready once started unless
// it has a readiness probe.
type probesAsDeclared struct{}

func (probesAsDeclared) Started(c *v1.Container, _ string) bool { return c.StartupProbe == nil }
func (p probesAsDeclared) Ready(c *v1.Container, id string) bool {
	return p.Started(c, id) && c.ReadinessProbe == nil
}

func TestPodStatusPhases(t *testing.T) {
	h := newHarness(t, "")
	cases := []struct {
		name      string
		pod       *v1.Pod
		state     func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState
		phase     v1.PodPhase
		ready     v1.ConditionStatus
		init      v1.ConditionStatus
		appReason string // waiting reason of the first app container, or its state
	}{
		{"not started", containertest.Pod(v1.RestartPolicyAlways, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState { return nil },
			v1.PodPending, v1.ConditionFalse, v1.ConditionTrue, "ContainerCreating"},
		{"running", containertest.Pod(v1.RestartPolicyAlways, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, ""))
		}, v1.PodRunning, v1.ConditionTrue, v1.ConditionTrue, "running"},
		{"crash looping", containertest.Pod(v1.RestartPolicyAlways, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			c := b.C(p, "a", false, 2, "")
			c.RestartCount = 3
			return containertest.State(b.C(p, infraName, true, 0, ""), c)
		}, v1.PodRunning, v1.ConditionFalse, v1.ConditionTrue, "CrashLoopBackOff"},
		{"initializing", containertest.PodWithInit(), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "i1", true, 0, ""))
		}, v1.PodPending, v1.ConditionFalse, v1.ConditionFalse, "PodInitializing"},
		{"job succeeded", containertest.Pod(v1.RestartPolicyOnFailure, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, false, 0, ""), b.C(p, "a", false, 0, ""))
		}, v1.PodSucceeded, v1.ConditionFalse, v1.ConditionTrue, "terminated"},
		{"failed under Never", containertest.Pod(v1.RestartPolicyNever, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, false, 0, ""), b.C(p, "a", false, 1, ""))
		}, v1.PodFailed, v1.ConditionFalse, v1.ConditionTrue, "terminated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
			c.pod.UID = types.UID("uid-" + c.name)
			st := h.Status(context.Background(), c.pod, c.state(b, c.pod))
			if st.Phase != c.phase {
				t.Errorf("phase %s, want %s", st.Phase, c.phase)
			}
			conds := map[v1.PodConditionType]v1.ConditionStatus{}
			for _, cd := range st.Conditions {
				conds[cd.Type] = cd.Status
				if cd.LastTransitionTime.IsZero() {
					t.Errorf("condition %s has no transition time", cd.Type)
				}
			}
			if conds[v1.PodReady] != c.ready || conds[v1.PodInitialized] != c.init {
				t.Errorf("Ready %s Initialized %s, want %s %s", conds[v1.PodReady], conds[v1.PodInitialized], c.ready, c.init)
			}
			cs := st.ContainerStatuses[0]
			got := "running"
			switch {
			case cs.State.Waiting != nil:
				got = cs.State.Waiting.Reason
			case cs.State.Terminated != nil:
				got = "terminated"
			}
			if got != c.appReason {
				t.Errorf("container state %s, want %s", got, c.appReason)
			}
		})
	}
}

// A pod the agent refused or stopped is Failed, with the reason and
// message the kubelet gives: a rejected one without container statuses; an
// evicted one (or one past its active deadline) with its containers
// terminated, not waiting to restart whatever the restart policy, and only
// an eviction (or the node's shutdown) with a DisruptionTarget condition.
func TestStatusOfAPodTheAgentStopped(t *testing.T) {
	apparmor := &lifecycle.Rejection{Reason: "AppArmor", Message: "Cannot enforce AppArmor: AppArmor is not enabled on the host"}
	pressure := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
	deadline := "Pod was active on the node longer than the specified deadline"
	shutdown := "Pod was terminated in response to imminent node shutdown."
	for _, tc := range []struct {
		name       string
		rejected   *lifecycle.Rejection
		evicted    *lifecycle.Termination
		reason     string
		message    string
		containers int  // container statuses, each terminated with 137
		disruption bool // a DisruptionTarget condition
	}{
		{"rejected", apparmor, nil, "AppArmor", "Pod was rejected: " + apparmor.Message, 0, false},
		{"evicted", nil, &lifecycle.Termination{Cause: lifecycle.Evicted, Reason: "Evicted", Message: pressure}, "Evicted", pressure, 1, true},
		{"past its active deadline", nil, &lifecycle.Termination{Cause: lifecycle.DeadlineExceeded, Reason: kubecontainer.ReasonDeadlineExceeded, Message: deadline}, kubecontainer.ReasonDeadlineExceeded, deadline, 1, false},
		{"stopped by the node's shutdown", nil, &lifecycle.Termination{Cause: lifecycle.Shutdown, Reason: "Terminated", Message: shutdown}, "Terminated", shutdown, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			if tc.rejected != nil {
				h.records.rejected[pod.UID] = tc.rejected
			}
			if tc.evicted != nil {
				h.records.ended[pod.UID] = tc.evicted
			}
			var state *kubecontainer.PodState
			if tc.containers > 0 {
				b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
				state = containertest.State(b.C(pod, infraName, false, 0, ""), b.C(pod, "a", false, 137, ""))
			}
			st := h.Status(context.Background(), pod, state)
			if st.Phase != v1.PodFailed || st.Reason != tc.reason || st.Message != tc.message {
				t.Errorf("status %s %s %q, want Failed %s %q", st.Phase, st.Reason, st.Message, tc.reason, tc.message)
			}
			if len(st.ContainerStatuses) != tc.containers {
				t.Fatalf("%d container statuses, want %d", len(st.ContainerStatuses), tc.containers)
			}
			for _, cs := range st.ContainerStatuses {
				if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 137 {
					t.Errorf("container state %+v, want terminated with 137", cs.State)
				}
			}
			var dt *v1.PodCondition
			for i := range st.Conditions {
				if st.Conditions[i].Type == v1.DisruptionTarget {
					dt = &st.Conditions[i]
				}
			}
			switch {
			case !tc.disruption && dt != nil:
				t.Errorf("DisruptionTarget %+v, want none", dt)
			case tc.disruption && (dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != v1.PodReasonTerminationByKubelet || dt.Message != tc.message):
				t.Errorf("DisruptionTarget %+v, want True TerminationByKubelet with the message", dt)
			}
		})
	}
}

// Condition transition times survive an agent restart (a new status store
// over the same checkpoint) and move only when a condition changes.
func TestConditionTimesPersist(t *testing.T) {
	checkpoint := filepath.Join(t.TempDir(), "conditions.json")
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
	running := containertest.State(b.C(pod, infraName, true, 0, ""), b.C(pod, "a", true, 0, ""))
	readyTime := func(h *harness, s *kubecontainer.PodState) time.Time {
		for _, c := range h.Status(context.Background(), pod, s).Conditions {
			if c.Type == v1.PodReady {
				return c.LastTransitionTime.Time
			}
		}
		return time.Time{}
	}
	h1 := newHarness(t, checkpoint)
	first := readyTime(h1, running)
	h1.clock.Step(time.Hour)
	if again := readyTime(h1, running); !again.Equal(first) {
		t.Errorf("unchanged condition moved from %v to %v", first, again)
	}
	h1.store.Flush() // what Run does in the background, and at exit
	h2 := newHarness(t, checkpoint)
	h2.clock.SetTime(first.Add(2 * time.Hour))
	if restored := readyTime(h2, running); !restored.Equal(first) {
		t.Errorf("after restart Ready changed at %v, want %v", restored, first)
	}
	if moved := readyTime(h2, nil); !moved.Equal(first.Add(2 * time.Hour)) {
		t.Errorf("a changed condition dated %v, want now (%v)", moved, first.Add(2*time.Hour))
	}
}

// podPhase against the kubelet's getPhase, case by case, over container
// statuses as produced.
func TestPodPhaseAsTheKubelet(t *testing.T) {
	waiting := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	yes := true
	running := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}, Started: &yes}
	unstarted := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	exited := func(code int32) v1.ContainerStatus {
		return v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
	}
	restarting := func(code int32) v1.ContainerStatus {
		return v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
	}
	two := func(policy v1.RestartPolicy) *v1.Pod { return containertest.Pod(policy, "a", "b") }
	initPod := func(policy v1.RestartPolicy) *v1.Pod {
		p := containertest.PodWithInit(policy)
		p.Spec.InitContainers = p.Spec.InitContainers[:1]
		return p
	}
	sidecarPod := func(policy v1.RestartPolicy) *v1.Pod {
		p := containertest.PodWithSidecar(policy)
		p.Spec.InitContainers = p.Spec.InitContainers[:1]
		return p
	}
	cs := func(s ...v1.ContainerStatus) []v1.ContainerStatus { return s }
	cases := []struct {
		name     string
		pod      *v1.Pod
		init     []v1.ContainerStatus
		app      []v1.ContainerStatus
		finished bool
		want     v1.PodPhase
	}{
		{"nothing started", two(v1.RestartPolicyAlways), nil, cs(waiting, waiting), false, v1.PodPending},
		{"one running, one never started", two(v1.RestartPolicyAlways), nil, cs(running, waiting), false, v1.PodPending},
		{"one running, one restarting", two(v1.RestartPolicyAlways), nil, cs(running, restarting(1)), false, v1.PodRunning},
		{"all running", two(v1.RestartPolicyAlways), nil, cs(running, running), false, v1.PodRunning},
		{"one running, one completed", two(v1.RestartPolicyOnFailure), nil, cs(running, exited(0)), false, v1.PodRunning},
		{"Always: every one restarting", two(v1.RestartPolicyAlways), nil, cs(restarting(0), restarting(1)), false, v1.PodRunning},
		{"OnFailure: one restarting after a failure", two(v1.RestartPolicyOnFailure), nil, cs(exited(0), restarting(1)), false, v1.PodRunning},
		{"OnFailure: all succeeded", two(v1.RestartPolicyOnFailure), nil, cs(exited(0), exited(0)), true, v1.PodSucceeded},
		{"Never: all succeeded", two(v1.RestartPolicyNever), nil, cs(exited(0), exited(0)), true, v1.PodSucceeded},
		{"Never: one failed", two(v1.RestartPolicyNever), nil, cs(exited(0), exited(2)), true, v1.PodFailed},
		{"Never: one failed, one never started", two(v1.RestartPolicyNever), nil, cs(exited(2), waiting), false, v1.PodPending},
		{"init running", initPod(v1.RestartPolicyAlways), cs(running), cs(waiting), false, v1.PodPending},
		{"init not started", initPod(v1.RestartPolicyAlways), cs(waiting), cs(waiting), false, v1.PodPending},
		{"init restarting after a failure", initPod(v1.RestartPolicyAlways), cs(restarting(1)), cs(waiting), false, v1.PodPending},
		{"init failed under Never", initPod(v1.RestartPolicyNever), cs(exited(1)), cs(waiting), true, v1.PodFailed},
		{"init done, app running", initPod(v1.RestartPolicyAlways), cs(exited(0)), cs(running), false, v1.PodRunning},
		{"init running again in a new sandbox, the app ran before", initPod(v1.RestartPolicyAlways), cs(running), cs(exited(0)), false, v1.PodRunning},
		{"init running again, the app exited", initPod(v1.RestartPolicyOnFailure), cs(running), cs(exited(1)), false, v1.PodRunning},
		{"sidecar not started yet", sidecarPod(v1.RestartPolicyAlways), cs(unstarted), cs(waiting), false, v1.PodPending},
		{"sidecar waiting to start", sidecarPod(v1.RestartPolicyAlways), cs(waiting), cs(waiting), false, v1.PodPending},
		{"sidecar restarting beside a running app", sidecarPod(v1.RestartPolicyAlways), cs(restarting(1)), cs(running), false, v1.PodRunning},
		{"sidecar unstarted after a restart, app running", sidecarPod(v1.RestartPolicyAlways), cs(unstarted), cs(running), false, v1.PodRunning},
		{"sidecar running, app completed", sidecarPod(v1.RestartPolicyNever), cs(running), cs(exited(0)), true, v1.PodRunning},
		{"sidecar stopped, app completed", sidecarPod(v1.RestartPolicyNever), cs(exited(137)), cs(exited(0)), true, v1.PodSucceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := podPhase(c.pod, c.init, c.app, c.finished); got != c.want {
				t.Errorf("phase %s, want %s", got, c.want)
			}
		})
	}
}

// Every condition the kubelet sets, by phase: type, status, reason and
// message, in the kubelet's order.
func TestPodConditionsAsTheKubelet(t *testing.T) {
	h := newHarness(t, "")
	cases := []struct {
		name  string
		pod   *v1.Pod
		state func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState
		want  []string // type status reason "message"
	}{
		{"no sandbox yet", containertest.Pod(v1.RestartPolicyAlways, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState { return nil }, []string{
			`PodReadyToStartContainers False  ""`, `Initialized True  ""`,
			`Ready False ContainersNotReady "containers with unready status: [a]"`,
			`ContainersReady False ContainersNotReady "containers with unready status: [a]"`, `PodScheduled True  ""`}},
		{"running", containertest.Pod(v1.RestartPolicyAlways, "a", "b"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, ""), b.C(p, "b", true, 0, ""))
		}, []string{`PodReadyToStartContainers True  ""`, `Initialized True  ""`, `Ready True  ""`, `ContainersReady True  ""`, `PodScheduled True  ""`}},
		{"one never started", containertest.Pod(v1.RestartPolicyAlways, "a", "b"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, ""))
		}, []string{`PodReadyToStartContainers True  ""`, `Initialized True  ""`,
			`Ready False ContainersNotReady "containers with unready status: [b]"`,
			`ContainersReady False ContainersNotReady "containers with unready status: [b]"`, `PodScheduled True  ""`}},
		{"initializing", containertest.PodWithInit(), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "i1", true, 0, ""))
		}, []string{`PodReadyToStartContainers True  ""`,
			`Initialized False ContainersNotInitialized "containers with incomplete status: [i1 i2]"`,
			`Ready False ContainersNotReady "containers with unready status: [a]"`,
			`ContainersReady False ContainersNotReady "containers with unready status: [a]"`, `PodScheduled True  ""`}},
		{"sidecar running", containertest.PodWithSidecar(v1.RestartPolicyAlways), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "s1", true, 0, ""), b.C(p, "i2", false, 0, ""), b.C(p, "a", true, 0, ""))
		}, []string{`PodReadyToStartContainers True  ""`, `Initialized True  ""`, `Ready True  ""`, `ContainersReady True  ""`, `PodScheduled True  ""`}},
		{"sidecar restarting", containertest.PodWithSidecar(v1.RestartPolicyAlways), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "s1", false, 1, ""), b.C(p, "i2", false, 0, ""), b.C(p, "a", true, 0, ""))
		}, []string{`PodReadyToStartContainers True  ""`, `Initialized True  ""`,
			`Ready False ContainersNotReady "containers with unready status: [s1]"`,
			`ContainersReady False ContainersNotReady "containers with unready status: [s1]"`, `PodScheduled True  ""`}},
		{"succeeded", containertest.Pod(v1.RestartPolicyNever, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, false, 0, ""), b.C(p, "a", false, 0, ""))
		}, []string{`PodReadyToStartContainers False  ""`, `Initialized True PodCompleted ""`, `Ready False PodCompleted ""`,
			`ContainersReady False PodCompleted ""`, `PodScheduled True  ""`}},
		{"failed", containertest.Pod(v1.RestartPolicyNever, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, false, 0, ""), b.C(p, "a", false, 1, ""))
		}, []string{`PodReadyToStartContainers False  ""`, `Initialized True  ""`, `Ready False PodFailed ""`,
			`ContainersReady False PodFailed ""`, `PodScheduled True  ""`}},
		{"sandbox of an older spec", containertest.Pod(v1.RestartPolicyAlways, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, "old"), b.C(p, "a", true, 0, ""))
		}, []string{`PodReadyToStartContainers False  ""`, `Initialized True  ""`, `Ready True  ""`, `ContainersReady True  ""`, `PodScheduled True  ""`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
			c.pod.UID = types.UID("uid-" + c.name)
			var got []string
			for _, cd := range h.Status(context.Background(), c.pod, c.state(b, c.pod)).Conditions {
				got = append(got, fmt.Sprintf("%s %s %s %q", cd.Type, cd.Status, cd.Reason, cd.Message))
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("conditions\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// The pod's IPs and start time outlive its sandbox, as the kubelet keeps
// them for a completed pod; a new sandbox brings its own IP.
func TestPodIPKeptOnceTheSandboxIsGone(t *testing.T) {
	h := newHarness(t, "")
	pod := containertest.Pod(v1.RestartPolicyNever, "a")
	b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
	infra, app := b.C(pod, infraName, true, 0, ""), b.C(pod, "a", true, 0, "")
	infra.IP = "172.17.0.9"
	running := h.Status(context.Background(), pod, containertest.State(infra, app))
	h.store.Set(pod.UID, running)
	if running.PodIP != "172.17.0.9" || running.StartTime == nil {
		t.Fatalf("running pod: IP %q start %v", running.PodIP, running.StartTime)
	}
	stopped, done := *infra, *app
	stopped.Running, stopped.IP, done.Running = false, "", false
	st := h.Status(context.Background(), pod, containertest.State(&stopped, &done))
	if st.Phase != v1.PodSucceeded || st.PodIP != "172.17.0.9" || len(st.PodIPs) != 1 || !st.StartTime.Equal(running.StartTime) {
		t.Errorf("completed pod: phase %s IP %q %v start %v, want Succeeded with the IP and start time it ran with", st.Phase, st.PodIP, st.PodIPs, st.StartTime)
	}
	again := b.C(pod, infraName, true, 0, "")
	again.IP = "172.17.0.10"
	if st := h.Status(context.Background(), containertest.Pod(v1.RestartPolicyAlways, "a"), containertest.State(again)); st.PodIP != "172.17.0.10" {
		t.Errorf("new sandbox: IP %q, want its own", st.PodIP)
	}
}

// Ephemeral containers have statuses of their own, not counted in the
// pod's phase or readiness: waiting before they start, running, and
// terminated once exited, never waiting to restart whatever the pod's
// restart policy.
func TestEphemeralContainerStatuses(t *testing.T) {
	h := newHarness(t, "")
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	for _, n := range []string{"new", "up", "done"} {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "busybox:1"}})
	}
	b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
	st := h.Status(context.Background(), pod, containertest.State(b.C(pod, infraName, true, 0, ""), b.C(pod, "a", true, 0, ""),
		b.C(pod, "up", true, 0, ""), b.C(pod, "done", false, 2, "")))
	var got []string
	for _, cs := range st.EphemeralContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			got = append(got, cs.Name+":"+cs.State.Waiting.Reason)
		case cs.State.Running != nil:
			got = append(got, cs.Name+":running")
		case cs.State.Terminated != nil:
			got = append(got, fmt.Sprintf("%s:exited %d", cs.Name, cs.State.Terminated.ExitCode))
		}
	}
	if want := "new:ContainerCreating up:running done:exited 2"; strings.Join(got, " ") != want {
		t.Errorf("ephemeral statuses %q, want %q", strings.Join(got, " "), want)
	}
	if st.Phase != v1.PodRunning || len(st.ContainerStatuses) != 1 {
		t.Errorf("phase %s with %d container statuses, want Running with the app container's alone", st.Phase, len(st.ContainerStatuses))
	}
}

// A container waiting for a sandbox that could not be made, or not created
// yet, waits with the kubelet's default reason: PodInitializing in a pod
// with init containers (for them too), else ContainerCreating.
func TestWaitingDefaultReasons(t *testing.T) {
	h := newHarness(t, "")
	plain, withInits := containertest.Pod(v1.RestartPolicyAlways, "a"), containertest.PodWithInit()
	withInits.UID = "uid2"
	b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
	done := withInits
	initsDone := containertest.State(b.C(done, infraName, true, 0, ""), b.C(done, "i1", false, 0, ""), b.C(done, "i2", false, 0, ""))
	for _, c := range []struct {
		name  string
		pod   *v1.Pod
		state *kubecontainer.PodState
		init  []string
		app   string
	}{
		{"no init containers", plain, nil, nil, "ContainerCreating"},
		{"init containers not started", withInits, nil, []string{"PodInitializing", "PodInitializing"}, "PodInitializing"},
		{"init containers done", withInits, initsDone, []string{"", ""}, "PodInitializing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := h.Status(context.Background(), c.pod, c.state)
			reason := func(cs v1.ContainerStatus) string {
				if cs.State.Waiting != nil {
					return cs.State.Waiting.Reason
				}
				return ""
			}
			for i, want := range c.init {
				if got := reason(st.InitContainerStatuses[i]); got != want {
					t.Errorf("init container %d waits with %q, want %q", i, got, want)
				}
			}
			if got := reason(st.ContainerStatuses[0]); got != c.app {
				t.Errorf("app container waits with %q, want %q", got, c.app)
			}
		})
	}
}

// blockingLogs is a runtime whose log reads last until their context
// ends; each read hands its context to the test first.
type blockingLogs chan context.Context

func (b blockingLogs) Logs(ctx context.Context, _ string, _ kubecontainer.LogOptions, _ io.Writer) error {
	b <- ctx
	<-ctx.Done()
	return ctx.Err()
}

// reading runs read in the background; the function it returns waits for
// its message, failing the test if the read does not end (a read that is
// not stopped would block the test forever).
func reading(t *testing.T, read func() string) func() string {
	msg := make(chan string, 1)
	go func() { msg <- read() }()
	return func() string {
		select {
		case m := <-msg:
			return m
		case <-time.After(time.Minute): // only when failing
			t.Fatal("the log read did not stop")
			return ""
		}
	}
}

// Under FallbackToLogsOnError the message is read from the logs under the
// caller's context, bounded: a sync cancelled before or during the read (a
// kill) gets no message and keeps none, so the next status reads them; a
// read that outlives its bound gives up, and its empty message is kept (as
// any failed read's: later syncs do not wait on it again).
func TestFallbackLogsReadUnderTheCallersContext(t *testing.T) {
	pod := containertest.Pod(v1.RestartPolicyNever, "a")
	c := &pod.Spec.Containers[0]
	c.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	inst := &kubecontainer.ContainerState{ID: "dead1", Name: "a", ExitCode: 1}
	for _, tc := range []struct {
		name  string
		first func(t *testing.T, h *harness) string // the first read's message
		kept  bool                                  // the first read's message is kept
	}{
		{"caller cancelled before the read", func(t *testing.T, h *harness) string {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return h.terminationMessage(ctx, pod, c, inst)
		}, false},
		{"caller cancelled during the read", func(t *testing.T, h *harness) string {
			logs := make(blockingLogs)
			h.cfg.Logs = logs
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			msg := reading(t, func() string { return h.terminationMessage(ctx, pod, c, inst) })
			read := <-logs // the read has started
			if dl, ok := read.Deadline(); !ok || time.Until(dl) > logReadTimeout {
				t.Errorf("the read's deadline is %v (set: %v), want one within %v", dl, ok, logReadTimeout)
			}
			cancel()
			m := msg()
			if err := read.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("the read ended with %v, want the caller's cancel", err)
			}
			return m
		}, false},
		{"read outlives its bound", func(t *testing.T, h *harness) string {
			h.cfg.Logs = make(blockingLogs, 1)
			h.logTimeout = time.Nanosecond
			return reading(t, func() string { return h.terminationMessage(context.Background(), pod, c, inst) })()
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			if msg := tc.first(t, h); msg != "" {
				t.Errorf("first read: message %q, want none", msg)
			}
			if _, kept := h.records.Message(pod.UID, inst.ID); kept != tc.kept {
				t.Errorf("message kept: %v, want %v", kept, tc.kept)
			}
			h.cfg.Logs, h.logTimeout = containertest.NewFakeClient(), logReadTimeout
			want := "log of dead1\n" // the logs' tail, read again
			if tc.kept {
				want = ""
			}
			if msg := h.terminationMessage(context.Background(), pod, c, inst); msg != want {
				t.Errorf("next read: message %q, want %q", msg, want)
			}
		})
	}
}

// A pod's start is recorded once, when every app container runs: from when
// the config gave it, and (the SLI) from when its last init container
// finished, less its image pulls.
func TestObserveStart(t *testing.T) {
	h := newHarness(t, "")
	pod := containertest.PodWithInit()
	seen := h.clock.Now()
	h.records.seen[pod.UID], h.records.pulling[pod.UID] = seen, 2*time.Second
	b := &containertest.Builder{T0: seen}
	infra, i1, i2 := b.C(pod, infraName, true, 0, ""), b.C(pod, "i1", false, 0, ""), b.C(pod, "i2", false, 0, "") // i2 finished at seen+4s
	running := containertest.State(infra, i1, i2, b.C(pod, "a", true, 0, ""))
	observed := func() (count uint64, sum, sli float64) {
		var m, s dto.Metric
		_ = h.metrics.PodStartDuration.(prometheus.Metric).Write(&m)
		_ = h.metrics.PodStartSLIDuration.WithLabelValues("false").(prometheus.Metric).Write(&s)
		return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum(), s.GetHistogram().GetSampleSum()
	}
	for _, step := range []struct {
		name  string
		state *kubecontainer.PodState
		count uint64
	}{
		{"initializing", containertest.State(infra, i1), 0},
		{"running", running, 1},
		{"running, again", running, 1},
	} {
		h.clock.SetTime(seen.Add(10 * time.Second))
		st := h.Status(context.Background(), pod, step.state)
		h.ObserveStart(pod, &st, step.state)
		if count, sum, sli := observed(); count != step.count || count > 0 && (sum != 10 || sli != 4) {
			t.Errorf("%s: %d starts observed, %vs (SLI %vs), want %d, 10s (SLI 4s)", step.name, count, sum, sli, step.count)
		}
	}
}

func TestReadinessGates(t *testing.T) {
	ready := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
	gate := []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	for _, tc := range []struct {
		name  string
		gates []v1.PodReadinessGate
		conds []v1.PodCondition
		cr    v1.PodCondition
		want  v1.ConditionStatus
		msg   string
	}{
		{"no gates", nil, nil, ready, v1.ConditionTrue, ""},
		{"gate missing", gate, nil, ready, v1.ConditionFalse, `corresponding condition of pod readiness gate "example.com/lb" does not exist.`},
		{"gate false", gate, []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionFalse}}, ready, v1.ConditionFalse,
			`the status of pod readiness gate "example.com/lb" is not "True", but False`},
		{"gate true", gate, []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionTrue}}, ready, v1.ConditionTrue, ""},
		{"containers not ready", gate, []v1.PodCondition{{Type: "example.com/lb", Status: v1.ConditionTrue}},
			v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse, Reason: reasonNotReady}, v1.ConditionFalse, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{ReadinessGates: tc.gates}, Status: v1.PodStatus{Conditions: tc.conds}}
			got := readinessGates(pod, tc.cr)
			if got.Type != v1.PodReady || got.Status != tc.want || got.Message != tc.msg {
				t.Errorf("got %+v, want %s %q", got, tc.want, tc.msg)
			}
		})
	}
}

// The fields of a container's status the kubelet fills from its spec and
// its runtime: volumeMounts (from the spec, whatever the state; a
// read-only mount recursiveReadOnly Disabled), imageID (the runtime's
// reference; docker://<ID> without one) and user (the process's identity,
// as the runtime saw it; none before it ran).
func TestContainerStatusFields(t *testing.T) {
	h := newHarness(t, "")
	disabled := v1.RecursiveReadOnlyDisabled
	wantMounts := []v1.VolumeMountStatus{
		{Name: "data", MountPath: "/data"},
		{Name: "conf", MountPath: "/etc/conf", ReadOnly: true, RecursiveReadOnly: &disabled},
	}
	user := &kubecontainer.ContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}
	for _, tc := range []struct {
		name      string
		state     func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState
		wantImage string
		wantUser  *v1.ContainerUser
	}{
		{"not created", func(*containertest.Builder, *v1.Pod) *kubecontainer.PodState { return nil }, "", nil},
		{"running, pulled image", func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			c := b.C(p, "a", true, 0, "")
			c.ImageID, c.ImageRef, c.User = "sha256:1a2b", "docker-pullable://img@sha256:9f8e", user
			return containertest.State(b.C(p, infraName, true, 0, ""), c)
		}, "docker-pullable://img@sha256:9f8e", &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000}}}},
		{"exited, no reference from the runtime", func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			c := b.C(p, "a", false, 1, "")
			c.ImageID = "sha256:1a2b"
			return containertest.State(b.C(p, infraName, true, 0, ""), c)
		}, "docker://sha256:1a2b", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := containertest.Pod(v1.RestartPolicyNever, "a")
			pod.UID = types.UID("uid-fields-" + tc.name)
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "conf", MountPath: "/etc/conf", ReadOnly: true}}
			b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
			st := h.Status(context.Background(), pod, tc.state(b, pod))
			cs := st.ContainerStatuses[0]
			if !reflect.DeepEqual(cs.VolumeMounts, wantMounts) {
				t.Errorf("volumeMounts %+v, want %+v", cs.VolumeMounts, wantMounts)
			}
			if cs.ImageID != tc.wantImage {
				t.Errorf("imageID %q, want %q", cs.ImageID, tc.wantImage)
			}
			if !reflect.DeepEqual(cs.User, tc.wantUser) {
				t.Errorf("user %+v, want %+v", cs.User, tc.wantUser)
			}
		})
	}
}
