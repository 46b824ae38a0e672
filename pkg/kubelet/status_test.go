package kubelet

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/dockertools/dockertest"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func TestPodStatusPhases(t *testing.T) {
	k := New(Config{NodeName: "n", RootDir: t.TempDir(), InfraImage: "pause:1"}, dockertest.NewFakeClient(), seenAll{})
	cases := []struct {
		name      string
		pod       *v1.Pod
		state     func(b *builder, p *v1.Pod) *kubecontainer.PodState
		phase     v1.PodPhase
		ready     v1.ConditionStatus
		init      v1.ConditionStatus
		appReason string // waiting reason of the first app container, or its state
	}{
		{"not started", testPod(v1.RestartPolicyAlways, "a"), func(b *builder, p *v1.Pod) *kubecontainer.PodState { return nil },
			v1.PodPending, v1.ConditionFalse, v1.ConditionTrue, "ContainerCreating"},
		{"running", testPod(v1.RestartPolicyAlways, "a"), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "a", true, 0, ""))
		}, v1.PodRunning, v1.ConditionTrue, v1.ConditionTrue, "running"},
		{"crash looping", testPod(v1.RestartPolicyAlways, "a"), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			c := b.c(p, "a", false, 2, "")
			c.RestartCount = 3
			return state(b.c(p, infraName, true, 0, ""), c)
		}, v1.PodRunning, v1.ConditionFalse, v1.ConditionTrue, "CrashLoopBackOff"},
		{"initializing", withInit(), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "i1", true, 0, ""))
		}, v1.PodPending, v1.ConditionFalse, v1.ConditionFalse, "PodInitializing"},
		{"job succeeded", testPod(v1.RestartPolicyOnFailure, "a"), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, false, 0, ""), b.c(p, "a", false, 0, ""))
		}, v1.PodSucceeded, v1.ConditionFalse, v1.ConditionTrue, "terminated"},
		{"failed under Never", testPod(v1.RestartPolicyNever, "a"), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, false, 0, ""), b.c(p, "a", false, 1, ""))
		}, v1.PodFailed, v1.ConditionFalse, v1.ConditionTrue, "terminated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &builder{t0: time.Now().Add(-time.Hour)}
			c.pod.UID = types.UID("uid-" + c.name)
			st := k.podStatus(c.pod, c.state(b, c.pod))
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

// Condition transition times survive an agent restart (a new status manager
// over the same checkpoint) and move only when a condition changes.
func TestConditionTimesPersist(t *testing.T) {
	root := t.TempDir()
	pod := testPod(v1.RestartPolicyAlways, "a")
	b := &builder{t0: time.Now().Add(-time.Hour)}
	running := state(b.c(pod, infraName, true, 0, ""), b.c(pod, "a", true, 0, ""))
	readyTime := func(k *Kubelet, s *kubecontainer.PodState) time.Time {
		for _, c := range k.podStatus(pod, s).Conditions {
			if c.Type == v1.PodReady {
				return c.LastTransitionTime.Time
			}
		}
		return time.Time{}
	}
	k1 := New(Config{NodeName: "n", RootDir: root}, dockertest.NewFakeClient(), seenAll{})
	first := readyTime(k1, running)
	k1.status.SetClock(func() time.Time { return time.Now().Add(time.Hour) })
	if again := readyTime(k1, running); !again.Equal(first) {
		t.Errorf("unchanged condition moved from %v to %v", first, again)
	}
	k1.status.Flush() // what Run does in the background, and at exit
	k2 := New(Config{NodeName: "n", RootDir: root}, dockertest.NewFakeClient(), seenAll{})
	if restored := readyTime(k2, running); !restored.Equal(first) {
		t.Errorf("after restart Ready changed at %v, want %v", restored, first)
	}
	k2.status.SetClock(func() time.Time { return first.Add(time.Hour) })
	if moved := readyTime(k2, nil); !moved.After(first) {
		t.Errorf("a changed condition kept its time %v", moved)
	}
}

// A pod's status is produced by its worker's sync, and its condition times
// are stamped then: a GET only reads it (before, the status was computed on
// each GET, and a transition was dated by the first GET that saw it).
func TestStatusProducedBySync(t *testing.T) {
	k := New(Config{NodeName: "n", RootDir: t.TempDir(), InfraImage: "pause:1"}, dockertest.NewFakeClient(), seenAll{})
	pod := testPod(v1.RestartPolicyAlways, "a")
	k.desired.set(pod)
	b := &builder{t0: time.Now()}
	k.cache.Set(map[types.UID]*kubecontainer.PodState{pod.UID: state(b.c(pod, infraName, true, 0, ""), b.c(pod, "a", true, 0, ""))}, time.Now())
	synced := time.Now().Add(-time.Hour).Truncate(time.Second)
	k.status.SetClock(func() time.Time { return synced })
	k.syncPodWork(context.Background(), podWork{UID: pod.UID, Pod: pod})
	k.probes.RemovePod(pod.UID)

	k.status.SetClock(func() time.Time { return synced.Add(time.Hour) })
	got, ok := k.GetPod(pod.Namespace, pod.Name)
	if !ok || got.Status.Phase != v1.PodRunning {
		t.Fatalf("GET after a sync: %v %+v", ok, got)
	}
	for _, c := range got.Status.Conditions {
		if !c.LastTransitionTime.Time.Equal(synced) {
			t.Errorf("condition %s dated %v, want the sync's time %v", c.Type, c.LastTransitionTime.Time, synced)
		}
	}
}
