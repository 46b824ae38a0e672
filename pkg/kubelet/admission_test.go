package kubelet

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/allocation"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

// oneCPU is the allocatable of the admission tests' node.
var oneCPU = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}

// cpuPod is a pod of one container of img:1 requesting cpu.
func cpuPod(name, cpu string) *v1.Pod {
	p := desiredPod(name, "img:1")
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
	grace := int64(0)
	p.Spec.TerminationGracePeriodSeconds = &grace
	return p
}

// startFitKubelet runs a Kubelet on fake with a node of one cpu, and gives
// it pods, their source seen only then (as the merger marks it once they
// are delivered: until then what runs is not an orphan).
func startFitKubelet(t *testing.T, fake *containertest.FakeClient, rec *events.Recorder, pods ...*v1.Pod) (*Kubelet, chan<- api.PodUpdate, func()) {
	t.Helper()
	seen := &seenAfter{}
	k, parts := newKubelet(t, fake, testOptions{Events: rec, SyncFrequency: 100 * time.Millisecond, RelistPeriod: 20 * time.Millisecond,
		Allocatable: oneCPU, Sources: seen})
	updates, stop := parts.run(k)
	if len(pods) > 0 {
		updates <- api.PodUpdate{Op: api.ADD, Pods: pods}
	}
	seen.Store(true)
	return k, updates, stop
}

// containersOf are the names of the pod's containers on fake (running
// ones only, if running).
func containersOf(fake *containertest.FakeClient, pod string, running bool) []string {
	l, _ := fake.List(context.Background(), kubecontainer.LabelOwner, "n")
	var out []string
	for _, c := range l {
		if c.Labels[kubecontainer.LabelPodName] == pod && (c.Running || !running) {
			out = append(out, c.Labels[kubecontainer.LabelContainerName])
		}
	}
	return out
}

func terminatedIdle(k *Kubelet, pod *v1.Pod) func() bool {
	return func() bool {
		ph, _ := k.workers.Phase(pod.UID)
		return ph == lifecycle.Terminated && !k.workers.Busy(pod.UID)
	}
}

// A pod that does not fit beside the pods admitted before it is refused
// for good, as the kubelet refuses it: Failed, OutOfcpu, the kubelet's
// message, an event, never a container. A critical pod that does not fit
// preempts a pod that is not (Failed, Preempting), and starts once it has
// stopped.
func TestResourceFitAdmission(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	rec := events.New("n")
	k, updates, stop := startFitKubelet(t, fake, rec)
	defer stop()

	a, b := cpuPod("a", "600m"), cpuPod("b", "600m")
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{a}}
	waitUntil(t, func() bool { return len(containersOf(fake, "a", true)) == 2 })
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{b}}
	waitUntil(t, terminatedIdle(k, b))
	if c := containersOf(fake, "b", false); len(c) != 0 {
		t.Errorf("the refused pod got containers %v", c)
	}
	want := "Pod was rejected: Node didn't have enough resource: cpu, requested: 600, used: 600, capacity: 1000"
	if st, _ := k.status.Get(b.UID); st.Phase != v1.PodFailed || st.Reason != allocation.ReasonOutOfCPU || st.Message != want {
		t.Errorf("refused pod's status %s %s %q, want Failed OutOfcpu %q", st.Phase, st.Reason, st.Message, want)
	}
	if r := podEventReasons(rec, "b"); !slices.Contains(r, "OutOfcpu") {
		t.Errorf("refused pod's events %v, want OutOfcpu", r)
	}

	small := cpuPod("small", "300m") // fits beside a

	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{small}}
	waitUntil(t, func() bool { return len(containersOf(fake, "small", true)) == 2 })

	critical := cpuPod("critical", "500m")
	critical.Spec.PriorityClassName = "system-node-critical"
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{critical}}
	waitUntil(t, func() bool { return len(containersOf(fake, "critical", true)) == 2 })
	waitUntil(t, terminatedIdle(k, a))
	if ph, _ := k.workers.Phase(small.UID); ph != lifecycle.Syncing {
		t.Errorf("pod small %v: the closest to the need (pod a) alone should be preempted", ph)
	}
	st, _ := k.status.Get(a.UID)
	if st.Phase != v1.PodFailed || st.Reason != allocation.ReasonPreempting || st.Message != allocation.MessagePreempted {
		t.Errorf("preempted pod's status %s %s %q, want Failed Preempting %q", st.Phase, st.Reason, st.Message, allocation.MessagePreempted)
	}
	if i := slices.IndexFunc(st.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.DisruptionTarget }); i < 0 ||
		st.Conditions[i].Reason != v1.PodReasonTerminationByKubelet || st.Conditions[i].Message != allocation.MessagePreemptedDisruption {
		t.Errorf("preempted pod's conditions %+v, want DisruptionTarget by the kubelet", st.Conditions)
	}
	if r := podEventReasons(rec, "a"); !slices.Contains(r, "Preempting") {
		t.Errorf("preempted pod's events %v, want Preempting", r)
	}
	// Refused for good: the resyncs since never started it.
	if ph, _ := k.workers.Phase(b.UID); ph != lifecycle.Terminated || len(containersOf(fake, "b", false)) != 0 {
		t.Errorf("the refused pod ran later")
	}
	// Its manifest edited, a static pod is a new pod, admitted afresh: it
	// now fits beside small and critical.
	updates <- api.PodUpdate{Op: api.UPDATE, Pods: []*v1.Pod{cpuPod("b", "100m")}}
	waitUntil(t, func() bool { return len(containersOf(fake, "b", true)) == 2 })
}

// An agent restart never refuses a pod that runs: running pods are
// admitted as they are before a new pod is decided, even one that
// arrives before them.
func TestResourceFitAdmissionAcrossRestart(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	r1, r2 := cpuPod("r1", "400m"), cpuPod("r2", "400m")
	_, _, stop := startFitKubelet(t, fake, nil, r1, r2)
	waitUntil(t, func() bool {
		return len(containersOf(fake, "r1", true)) == 2 && len(containersOf(fake, "r2", true)) == 2
	})
	stop()
	created := fake.CountCalls("create")

	newcomer := cpuPod("newcomer", "400m")
	k, _, stop := startFitKubelet(t, fake, nil, newcomer, r1, r2)
	defer stop()
	waitUntil(t, terminatedIdle(k, newcomer))
	for _, p := range []*v1.Pod{r1, r2} {
		if ph, _ := k.workers.Phase(p.UID); ph != lifecycle.Syncing {
			t.Errorf("running pod %s %v after the restart, want it kept", p.Name, ph)
		}
		if d := k.workers.Record(p.UID).fitDecision(); !d.decided || d.rejected != nil {
			t.Errorf("running pod %s: admission %+v, want admitted", p.Name, d)
		}
	}
	if n := fake.CountCalls("create"); n != created {
		t.Errorf("%d containers created after the restart, want none", n-created)
	}
	if st, _ := k.status.Get(newcomer.UID); st.Reason != allocation.ReasonOutOfCPU ||
		!strings.Contains(st.Message, "requested: 400, used: 800, capacity: 1000") {
		t.Errorf("newcomer's status %s %s %q, want refused beside the two running pods", st.Phase, st.Reason, st.Message)
	}
}

// Whether a pod is critical: by its priority (or class) always, by being
// static only where an API server also gives pods.
func TestCriticalPod(t *testing.T) {
	static := desiredPod("s", "img:1")
	fromAPI := desiredPod("p", "img:1")
	fromAPI.Annotations[api.ConfigSourceAnnotation] = api.SourceAPIServer
	prio := int32(allocation.SystemCriticalPriority)
	byPriority := desiredPod("c", "img:1")
	byPriority.Spec.Priority = &prio
	for _, tc := range []struct {
		name       string
		pod        *v1.Pod
		nodeMode   bool
		isCritical bool
	}{
		{"standalone: a static pod is not", static, false, false},
		{"node mode: a static pod is", static, true, true},
		{"node mode: an API server's pod is not", fromAPI, true, false},
		{"a critical priority", byPriority, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := &Kubelet{cfg: Config{StaticPodsCritical: tc.nodeMode}}
			if got := k.critical(tc.pod); got != tc.isCritical {
				t.Errorf("critical = %v, want %v", got, tc.isCritical)
			}
		})
	}
}

// A pod whose host port an admitted pod holds is refused, as the
// kubelet's NodePorts predicate refuses it (a StatefulSet's controller
// makes it again, elsewhere or once the port is free).
func TestHostPortAdmission(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	rec := events.New("n")
	k, updates, stop := startFitKubelet(t, fake, rec)
	defer stop()
	withPort := func(name string) *v1.Pod {
		p := cpuPod(name, "100m")
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 21017}}
		return p
	}
	a, b := withPort("a"), withPort("b")
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{a}}
	waitUntil(t, func() bool { return len(containersOf(fake, "a", true)) == 2 })
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{b}}
	waitUntil(t, terminatedIdle(k, b))
	if c := containersOf(fake, "b", false); len(c) != 0 {
		t.Errorf("the refused pod got containers %v", c)
	}
	if st, _ := k.status.Get(b.UID); st.Phase != v1.PodFailed || st.Reason != allocation.ReasonNodePorts ||
		st.Message != "Pod was rejected: "+allocation.MessageNodePorts {
		t.Errorf("refused pod's status %s %s %q, want Failed NodePorts", st.Phase, st.Reason, st.Message)
	}
}
