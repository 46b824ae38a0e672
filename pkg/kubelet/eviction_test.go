package kubelet

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

const infraName = kubecontainer.InfraContainerName

// An evicted pod reports as the kubelet's: Failed, Evicted, the eviction's
// message, a DisruptionTarget condition, its containers terminated (not
// waiting to restart, whatever the restart policy).
func TestEvictedPodStatus(t *testing.T) {
	k, _ := newKubelet(t, containertest.NewFakeClient(), testOptions{})
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
	st := containertest.State(b.C(pod, infraName, false, 0, ""), b.C(pod, "a", false, 137, ""))
	msg := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
	terminated(k, pod, &lifecycle.Termination{Cause: lifecycle.Evicted, Reason: eviction.Reason, Message: msg})
	got := k.producer.Status(context.Background(), pod, st)
	if got.Phase != v1.PodFailed || got.Reason != "Evicted" || got.Message != msg {
		t.Errorf("status %s %s %q, want Failed Evicted %q", got.Phase, got.Reason, got.Message, msg)
	}
	if cs := got.ContainerStatuses[0]; cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 137 {
		t.Errorf("container state %+v, want terminated with 137", cs.State)
	}
	var dt *v1.PodCondition
	for i := range got.Conditions {
		if got.Conditions[i].Type == v1.DisruptionTarget {
			dt = &got.Conditions[i]
		}
	}
	if dt == nil || dt.Status != v1.ConditionTrue || dt.Reason != v1.PodReasonTerminationByKubelet || dt.Message != msg {
		t.Errorf("DisruptionTarget %+v, want True TerminationByKubelet with the message", dt)
	}
}

// Under memory pressure a BestEffort pod that has not started is refused
// (and shown so) until the pressure goes, a Burstable one is not.
func TestSyncUnderPressure(t *testing.T) {
	fake := containertest.NewFakeClient("img:1", "pause:1")
	th, err := eviction.ParseThresholds(eviction.Flags{Hard: "memory.available<100Mi"})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := newKubelet(t, fake, testOptions{Clock: clocktesting.NewFakeClock(time.Now()),
		Eviction: eviction.Config{Thresholds: th, PressureTransitionPeriod: time.Minute}})
	k.eviction.Manager().Observe(eviction.Observations{eviction.SignalMemoryAvailable: {Available: 50 << 20, Capacity: 1 << 30}})

	be := containertest.Pod(v1.RestartPolicyAlways, "a")
	rec := newPodRecord(time.Now(), k.runtime.NewPodRecord())
	k.workers.pods[be.UID] = &podState{pod: be, desired: true, record: rec}
	if term, _, err := k.syncDesired(context.Background(), be, nil, rec); term != nil || err != nil {
		t.Fatalf("sync of a refused pod: %+v, %v; want it kept waiting for admission", term, err)
	}
	st := k.producer.Status(context.Background(), be, nil)
	if want := "Pod was rejected: The node had condition: [MemoryPressure]. "; st.Phase != v1.PodFailed || st.Reason != "Evicted" || st.Message != want {
		t.Errorf("BestEffort pod: %s %s %q, want Failed Evicted %q", st.Phase, st.Reason, st.Message, want)
	}
	if n := fake.CountCalls("create"); n != 0 {
		t.Errorf("%d containers created for a refused pod", n)
	}
	burstable := containertest.Pod(v1.RestartPolicyAlways, "a")
	burstable.UID = "uid2"
	burstable.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("10Mi")}
	if rej := k.eviction.AdmitPod(burstable); rej != nil {
		t.Errorf("Burstable pod refused under memory pressure: %+v", rej)
	}

}

// terminated gives pod a worker state terminated by t, as its worker would
// leave it (without a goroutine).
func terminated(k *Kubelet, pod *v1.Pod, t *lifecycle.Termination) {
	k.workers.mu.Lock()
	defer k.workers.mu.Unlock()
	k.workers.pods[pod.UID] = &podState{phase: lifecycle.Terminated, pod: pod, desired: true, termination: t, record: k.workers.newRecord()}
}

// An evicted pod stays evicted when the agent restarts: the restarted
// Kubelet (same runtime, same checkpoint) creates none of its containers
// and shows it Failed, Evicted, with the eviction's message. Given with
// another manifest, it runs again.
func TestEvictionRememberedAcrossRestart(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	path := filepath.Join(t.TempDir(), "evictions.json")
	pod := desiredPod("web", "img:1")
	// start starts a Kubelet and gives it the pod, its source seen only
	// then, as the merger marks it once the pods are delivered: until
	// then the remembered eviction is kept.
	start := func() (*Kubelet, chan<- api.PodUpdate, func()) {
		seen := &seenAfter{}
		k, parts := newKubelet(t, fake, testOptions{SyncFrequency: 100 * time.Millisecond, RelistPeriod: 20 * time.Millisecond,
			Sources: seen, Evictions: eviction.LoadRemembered(path)})
		updates, stop := parts.run(k)
		updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{pod}}
		seen.Store(true)
		return k, updates, stop
	}
	msg := "The node was low on resource: ephemeral-storage. "
	k, updates, stop := start()
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 2 })
	evictionPods{k}.Evict(pod.UID, msg, 0)
	waitUntil(t, func() bool {
		ph, _ := k.workers.Phase(pod.UID)
		return ph == lifecycle.Terminated && !k.workers.Busy(pod.UID)
	})
	stop()
	created := fake.CountCalls("create")

	k, updates, stop = start()
	waitUntil(t, func() bool {
		ph, _ := k.workers.Phase(pod.UID)
		return ph == lifecycle.Terminated && !k.workers.Busy(pod.UID)
	})
	if n := fake.CountCalls("create"); n != created || len(fake.RunningNames()) != 0 {
		t.Errorf("after the restart %d creates (before %d), running %v: the evicted pod started again", n, created, fake.RunningNames())
	}
	if st, ok := k.status.Get(pod.UID); !ok || st.Phase != v1.PodFailed || st.Reason != eviction.Reason || st.Message != msg {
		t.Errorf("status after the restart %s %s %q (%v), want Failed Evicted %q", st.Phase, st.Reason, st.Message, ok, msg)
	}

	edited := pod.DeepCopy()
	edited.Spec.Containers[0].Args = []string{"--quiet"}
	updates <- api.PodUpdate{Op: api.UPDATE, Pods: []*v1.Pod{edited}}
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 2 })
	stop()
	if n := eviction.LoadRemembered(path).Len(); n != 0 {
		t.Errorf("%d evictions remembered once the pod runs again with another manifest", n)
	}
}

// seenAfter is a config whose sources count as seen once set.
type seenAfter struct{ atomic.Bool }

func (s *seenAfter) Seen(string) bool { return s.Load() }
