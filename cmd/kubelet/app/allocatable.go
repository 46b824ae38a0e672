package app

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodestatus"
)

// nodeAllocatable is what the node keeps from pods, as the kubelet's node
// allocatable: the Node's allocatable is capacity less kube- and
// system-reserved and the hard memory eviction threshold; kubepods is
// bounded to capacity less the reservations alone, so that eviction acts
// before the kernel's OOM killer does in kubepods.
type nodeAllocatable struct {
	kube, system v1.ResourceList
	// evictionHardMemory is the memory.available hard eviction threshold
	// (--eviction-hard; none: zero).
	evictionHardMemory resource.Quantity
	enforcePods        bool // --enforce-node-allocatable=pods
}

func newNodeAllocatable(o *Options) (nodeAllocatable, error) {
	var a nodeAllocatable
	thresholds, err := o.evictionThresholds()
	if err != nil {
		return a, err
	}
	for _, t := range thresholds {
		if t.Signal != eviction.SignalMemoryAvailable || !t.Hard() {
			continue
		}
		if t.Value.Quantity != nil {
			a.evictionHardMemory = t.Value.Quantity.DeepCopy()
		} else {
			capacity := nodestatus.Capacity(0)[v1.ResourceMemory]
			a.evictionHardMemory = *resource.NewQuantity(int64(float64(t.Value.Percentage)*float64(capacity.Value())), resource.BinarySI)
		}
	}
	if a.kube, err = ParseReserved(o.KubeReserved); err != nil {
		return a, fmt.Errorf("--kube-reserved: %w", err)
	}
	if a.system, err = ParseReserved(o.SystemReserved); err != nil {
		return a, fmt.Errorf("--system-reserved: %w", err)
	}
	a.enforcePods, err = o.EnforcePods()
	return a, err
}

// reserved is what the Node's allocatable leaves out of its capacity.
func (a nodeAllocatable) reserved() v1.ResourceList {
	out := sum(a.kube, a.system)
	out[v1.ResourceMemory] = sum(out, v1.ResourceList{v1.ResourceMemory: a.evictionHardMemory})[v1.ResourceMemory]
	return out
}

// podsLimits are kubepods' cpu, memory and pid bounds for the node's
// capacity (its "pid" the kernel's pid_max): capacity itself unless pods
// are enforced, as the kubelet (whose QoS cgroups would otherwise get the
// default, low, CPU shares). A reservation that leaves pods nothing is an
// error.
func (a nodeAllocatable) podsLimits(capacity v1.ResourceList) (v1.ResourceList, error) {
	limits := v1.ResourceList{}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, kuberuntime.PidResource} {
		if q, ok := capacity[name]; ok {
			limits[name] = q
		}
	}
	if !a.enforcePods {
		return limits, nil
	}
	reserved := sum(a.kube, a.system)
	for name, q := range limits {
		if r, ok := reserved[name]; ok && r.Cmp(q) >= 0 {
			return nil, fmt.Errorf("--kube-reserved and --system-reserved reserve %s of %s, the node has %s: nothing is left for pods", r.String(), name, q.String())
		}
	}
	return nodestatus.Allocatable(limits, reserved), nil
}

func sum(lists ...v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for _, l := range lists {
		for name, q := range l {
			t := out[name]
			t.Add(q)
			out[name] = t
		}
	}
	return out
}
