package allocation

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// Admission reasons, as the kubelet's predicate admission names them.
const (
	ReasonOutOfCPU    = "OutOfcpu"
	ReasonOutOfMemory = "OutOfmemory"
)

// fitResources are the resources admission sums, in the order the
// kubelet checks them (the scheduler's fit: cpu, then memory). Pods are
// capped by the config's merger (--max-pods, OutOfpods); extended
// resources by the device manager; the node reports no ephemeral-storage.
var fitResources = []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory}

// Used is what pods request of the node, summed: millicores of cpu and
// bytes of memory, each pod counted as the kubelet's resource helpers
// count it (api.PodRequests: app containers and sidecars summed, an init
// container alone if larger, plus the pod's overhead).
type Used struct {
	MilliCPU, Memory int64
}

// Sum is what pods request, summed.
func Sum(pods []*v1.Pod) Used {
	var u Used
	for _, p := range pods {
		u = u.add(Request(p))
	}
	return u
}

// Request is what one pod requests.
func Request(pod *v1.Pod) Used {
	r := api.PodRequests(pod)
	return Used{MilliCPU: r.Cpu().MilliValue(), Memory: r.Memory().Value()}
}

func (u Used) add(o Used) Used { return Used{u.MilliCPU + o.MilliCPU, u.Memory + o.Memory} }

// of is u's amount of name, in the unit the kubelet's messages give it.
func (u Used) of(name v1.ResourceName) int64 {
	if name == v1.ResourceCPU {
		return u.MilliCPU
	}
	return u.Memory
}

// capacity is allocatable's amount of name in the same unit (ok false:
// the node does not say, and nothing is checked against it).
func capacity(allocatable v1.ResourceList, name v1.ResourceName) (int64, bool) {
	q, ok := allocatable[name]
	if !ok {
		return 0, false
	}
	if name == v1.ResourceCPU {
		return q.MilliValue(), true
	}
	return q.Value(), true
}

// Shortfall is one resource a pod does not fit in beside the pods admitted
// before it: the kubelet's InsufficientResourceError.
type Shortfall struct {
	Resource                  v1.ResourceName
	Requested, Used, Capacity int64
}

// Reason is the pod's status reason when admission refuses it for s:
// OutOf<resource>.
func (s Shortfall) Reason() string { return "OutOf" + string(s.Resource) }

// Message is the kubelet's message for s.
func (s Shortfall) Message() string {
	return fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
		s.Resource, s.Requested, s.Used, s.Capacity)
}

// Missing is how much of the resource must be freed for the pod to fit.
func (s Shortfall) Missing() int64 { return s.Requested - (s.Capacity - s.Used) }

// Fit is what pod lacks to join the admitted pods (each as allocated) on
// a node with allocatable, resource by resource in the kubelet's order;
// none: it fits. As the scheduler's fit the kubelet runs at admission, a
// resource the pod does not request is never short, even on a node
// already over its allocatable, and one allocatable does not name is not
// checked.
func Fit(pod *v1.Pod, admitted []*v1.Pod, allocatable v1.ResourceList) []Shortfall {
	want := Request(pod)
	if want == (Used{}) {
		return nil
	}
	used := Sum(admitted)
	var out []Shortfall
	for _, name := range fitResources {
		c, ok := capacity(allocatable, name)
		if req := want.of(name); ok && req > 0 && req > c-used.of(name) {
			out = append(out, Shortfall{Resource: name, Requested: req, Used: used.of(name), Capacity: c})
		}
	}
	return out
}

// ReasonNodePorts and MessageNodePorts are the kubelet's rejection of a
// pod whose host ports admitted pods hold (its NodePorts predicate).
const (
	ReasonNodePorts  = "NodePorts"
	MessageNodePorts = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
)

// HostPortConflict reports whether a host port of pod is held by one of
// the admitted pods (the same port and protocol on the same host IP, or on
// any address where either side binds them all), as the merger decides it
// for the node's own pods (api.HostPort.Conflicts).
func HostPortConflict(pod *v1.Pod, admitted []*v1.Pod) bool {
	want := api.HostPorts(pod)
	if len(want) == 0 {
		return false
	}
	for _, other := range admitted {
		for _, held := range api.HostPorts(other) {
			for _, w := range want {
				if w.Conflicts(held) {
					return true
				}
			}
		}
	}
	return false
}
