// Package allocation decides what a pod's containers are allocated: the
// cpu and memory the node has accepted to give them, as the kubelet's
// allocation manager. A pod gets its spec's resources when the agent first
// runs it; a later change of them (an in-place resize: an edited manifest,
// or the API server's resize subresource) is allocated only if the node
// can hold it, and else stays pending (PodResizePending: Infeasible when
// the node could never hold it, Deferred while other pods hold what it
// needs). The runtime manager resizes the containers to the allocation,
// never to a spec it has not accepted.
//
// It also decides whether the node accepts a pod at all (fit.go, the
// kubelet's resource-fit admission: OutOfcpu, OutOfmemory), and which pods
// a critical pod that does not fit preempts (preempt.go, the kubelet's
// critical-pod admission handler). Both count what the admitted pods
// request the same way as a resize does (Sum).
//
// It is pure: the caller keeps the allocations and admissions (the pods'
// records) and supplies the other pods.
package allocation

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// Reasons of the PodResizePending condition, as the kubelet's.
const (
	ReasonInfeasible = v1.PodReasonInfeasible
	ReasonDeferred   = v1.PodReasonDeferred
)

// Resources are the resources of a pod's containers (init and app), by
// container name.
type Resources map[string]v1.ResourceRequirements

// Of is the resources pod's spec asks for its containers.
func Of(pod *v1.Pod) Resources {
	out := Resources{}
	for _, c := range pod.Spec.InitContainers {
		out[c.Name] = *c.Resources.DeepCopy()
	}
	for _, c := range pod.Spec.Containers {
		out[c.Name] = *c.Resources.DeepCopy()
	}
	return out
}

// Equal reports whether a and b allocate the same (quantities compared
// by value: "1" and "1000m" are one CPU).
func Equal(a, b Resources) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}

// Apply is pod with its containers' resources those of alloc (a container
// alloc does not name keeps its spec's); pod itself when alloc is nil or
// already the spec's.
func Apply(pod *v1.Pod, alloc Resources) *v1.Pod {
	if alloc == nil || Equal(alloc, Of(pod)) {
		return pod
	}
	out := pod.DeepCopy()
	for i := range out.Spec.InitContainers {
		if r, ok := alloc[out.Spec.InitContainers[i].Name]; ok {
			out.Spec.InitContainers[i].Resources = *r.DeepCopy()
		}
	}
	for i := range out.Spec.Containers {
		if r, ok := alloc[out.Spec.Containers[i].Name]; ok {
			out.Spec.Containers[i].Resources = *r.DeepCopy()
		}
	}
	return out
}

// Pending is why a resize is not allocated (the PodResizePending
// condition's reason and message); the zero value: none is pending.
type Pending struct {
	Reason, Message string
}

// Decide allocates pod's spec, whose resources differ from allocated (the
// pod as allocated now), if the node can hold it: the pod's requests
// within allocatable (else Infeasible), and each request that grows within
// what the others (the other admitted pods, as allocated) leave of it
// (else Deferred). The messages are the kubelet's. A request that does not
// grow is never deferred: a shrink is taken even where the others hold
// more than the node has (pods admitted by an agent that did not yet sum
// its pods' requests, or resized while they ran).
func Decide(pod, allocated *v1.Pod, others []*v1.Pod, allocatable v1.ResourceList) (ok bool, why Pending) {
	want := Request(pod)
	// Memory first: the kubelet's order for an infeasible resize.
	for _, name := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		if c, known := capacity(allocatable, name); known && want.of(name) > c {
			return false, Pending{ReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: %s, requested: %d, capacity: %d", name, want.of(name), c)}
		}
	}
	had, used := Request(allocated), Sum(others)
	for _, name := range fitResources {
		c, known := capacity(allocatable, name)
		if known && want.of(name) > had.of(name) && want.of(name)+used.of(name) > c {
			short := Shortfall{Resource: name, Requested: want.of(name), Used: used.of(name), Capacity: c}
			return false, Pending{ReasonDeferred, short.Message()}
		}
	}
	return true, Pending{}
}
