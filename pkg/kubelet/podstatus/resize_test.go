package podstatus

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/allocation"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
)

// The status of a resize: a container's allocatedResources (a limit
// standing for a request not written) and, while it runs, the resources
// Docker enforces; PodResizePending with the allocation's reason while a
// resize is not accepted, PodResizeInProgress while a running container's
// bounds are not its allocation's (reason Error with the last failure);
// observedGeneration on the status and each condition.
func TestResizeStatus(t *testing.T) {
	limits := func(cpu, mem string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}}
	}
	small, big := limits("500m", "64Mi"), limits("1", "128Mi")
	withRes := func(r v1.ResourceRequirements) *v1.Pod {
		p := containertest.Pod(v1.RestartPolicyAlways, "a")
		p.Generation = 4
		p.Spec.Containers[0].Resources = r
		return p
	}
	for _, tc := range []struct {
		name           string
		spec, applied  v1.ResourceRequirements // the desired pod's; what the container runs with
		resize         Resize
		wantPending    string // reason; "" none
		wantInProgress string // "-" none, else its reason
		wantMemLimit   string
		wantAllocCPU   string
	}{
		{"steady", small, small, Resize{}, "", "-", "64Mi", "500m"},
		{"allocated, not yet applied", big, small, Resize{}, "", "", "64Mi", "1"},
		{"applied", big, big, Resize{}, "", "-", "128Mi", "1"},
		{"failed to apply", big, small, Resize{Error: "aborting attempt"}, "", "Error", "64Mi", "1"},
		{"infeasible: the allocation is the old one", big, small,
			Resize{Allocated: allocation.Resources{"a": small}, Pending: allocation.Pending{Reason: allocation.ReasonInfeasible, Message: "Node didn't have enough capacity"}},
			"Infeasible", "-", "64Mi", "500m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "")
			pod := withRes(tc.spec)
			h.records.resize = map[types.UID]Resize{pod.UID: tc.resize}
			b := &containertest.Builder{T0: time.Unix(1e9, 0)}
			was := withRes(tc.applied)
			inst := b.C(was, "a", true, 0, "")
			inst.SpecHash = kubecontainer.HashContainerSpec(was, &was.Spec.Containers[0])
			inst.Resources = &kubecontainer.Resources{CPUShares: tc.applied.Limits.Cpu().MilliValue() * 1024 / 1000,
				CPUQuota: tc.applied.Limits.Cpu().MilliValue() * 100, CPUPeriod: 100000, Memory: tc.applied.Limits.Memory().Value()}
			st := h.Status(context.Background(), pod, containertest.State(b.C(pod, infraName, true, 0, ""), inst))
			cs := st.ContainerStatuses[0]
			if cs.Resources == nil || cs.Resources.Limits.Memory().String() != tc.wantMemLimit {
				t.Errorf("resources %v, want memory limit %s", cs.Resources, tc.wantMemLimit)
			}
			if got := cs.AllocatedResources.Cpu().String(); got != tc.wantAllocCPU {
				t.Errorf("allocatedResources %v, want cpu %s", cs.AllocatedResources, tc.wantAllocCPU)
			}
			find := func(ct v1.PodConditionType) *v1.PodCondition {
				for i := range st.Conditions {
					if st.Conditions[i].Type == ct {
						return &st.Conditions[i]
					}
				}
				return nil
			}
			pending, inProgress := find(v1.PodResizePending), find(v1.PodResizeInProgress)
			switch {
			case tc.wantPending == "" && pending != nil, tc.wantPending != "" && (pending == nil || pending.Reason != tc.wantPending):
				t.Errorf("PodResizePending %+v, want reason %q", pending, tc.wantPending)
			case tc.wantInProgress == "-" && inProgress != nil, tc.wantInProgress != "-" && (inProgress == nil || inProgress.Reason != tc.wantInProgress):
				t.Errorf("PodResizeInProgress %+v, want %q", inProgress, tc.wantInProgress)
			}
			if st.ObservedGeneration != 4 {
				t.Errorf("observedGeneration %d, want 4", st.ObservedGeneration)
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != 4 {
					t.Errorf("condition %s: observedGeneration %d, want 4", c.Type, c.ObservedGeneration)
				}
			}
		})
	}
}
