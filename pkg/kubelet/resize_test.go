package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/allocation"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

// A pod's worker syncs its allocated pod: the spec's resources at first,
// a resize once the node holds it; one past the node's allocatable, or
// beyond what the other pods leave, stays pending with the old allocation
// synced, until the spec fits again.
func TestAllocateResize(t *testing.T) {
	k, _ := newKubelet(t, containertest.NewFakeClient(), testOptions{})
	k.cfg.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}
	pod := func(uid, cpu string) *v1.Pod {
		p := containertest.Pod(v1.RestartPolicyAlways, "a")
		p.UID, p.Name = types.UID(uid), uid
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		return p
	}
	other := pod("other", "1")
	k.desired.set(other)
	admitted(k, other)
	if err := os.MkdirAll(k.volumes.PodDir("p"), 0o750); err != nil {
		t.Fatal(err)
	}
	rec := newPodRecord(time.Now(), nil)
	for _, step := range []struct {
		name    string
		cpu     string // the spec's request
		synced  string // the request of the pod synced
		pending string
	}{
		{"first sync: the spec", "500m", "500m", ""},
		{"resize that fits", "800m", "800m", ""},
		{"past the node", "3", "800m", allocation.ReasonInfeasible},
		{"beside the other pod, too much", "1500m", "800m", allocation.ReasonDeferred},
		{"back within", "900m", "900m", ""},
		{"a shrink", "100m", "100m", ""},
		{"past the node again", "3", "100m", allocation.ReasonInfeasible},
		{"the agent restarted: still pending on the checkpoint", "3", "100m", allocation.ReasonInfeasible},
		{"fits again: the checkpoint goes", "200m", "200m", ""},
	} {
		t.Run(step.name, func(t *testing.T) {
			if strings.HasPrefix(step.name, "the agent restarted") {
				rec = newPodRecord(time.Now(), nil)
			}
			desired := pod("p", step.cpu)
			k.desired.set(desired)
			got := k.allocate(desired, rec)
			if req := got.Spec.Containers[0].Resources.Requests.Cpu(); req.Cmp(resource.MustParse(step.synced)) != 0 {
				t.Errorf("synced cpu request %s, want %s", req, step.synced)
			}
			if rec.resizePending.Reason != step.pending {
				t.Errorf("pending %+v, want reason %q", rec.resizePending, step.pending)
			}
			_, err := os.Stat(filepath.Join(k.volumes.PodDir("p"), allocationFile))
			if checkpointed := err == nil; checkpointed != (step.pending != "") {
				t.Errorf("checkpoint kept %v, want it while a resize is pending", checkpointed)
			}
		})
	}
}

// A terminated pod (finished, rejected, evicted) holds none of the node's
// resources: a resize beside it is not deferred for what it once asked.
func TestAllocateResizeBesideATerminatedPod(t *testing.T) {
	k, _ := newKubelet(t, containertest.NewFakeClient(), testOptions{})
	k.cfg.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	pod := func(uid, cpu string) *v1.Pod {
		p := containertest.Pod(v1.RestartPolicyAlways, "a")
		p.UID, p.Name = types.UID(uid), uid
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		return p
	}
	done := pod("done", "1500m")
	k.desired.set(done)
	k.workers.pods[done.UID] = &podState{phase: lifecycle.Terminated, pod: done, desired: true, record: k.workers.newRecord()}
	rec := newPodRecord(time.Now(), nil)
	for _, cpu := range []string{"100m", "1"} {
		desired := pod("p", cpu)
		k.desired.set(desired)
		got := k.allocate(desired, rec)
		if req := got.Spec.Containers[0].Resources.Requests.Cpu(); req.Cmp(resource.MustParse(cpu)) != 0 || rec.resizePending.Reason != "" {
			t.Errorf("cpu %s: synced %s, pending %+v; want it allocated", cpu, req, rec.resizePending)
		}
	}
}

// admitted gives pod a syncing worker state its admission admitted, as
// its worker would leave it (without a goroutine).
func admitted(k *Kubelet, pod *v1.Pod) {
	rec := k.workers.newRecord()
	rec.setFit(fitDecision{decided: true}, nil)
	k.workers.mu.Lock()
	defer k.workers.mu.Unlock()
	k.workers.pods[pod.UID] = &podState{pod: pod, desired: true, record: rec}
}
