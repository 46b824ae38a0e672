package allocation

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Preemption's words, as the kubelet's critical-pod admission handler
// says them: the preempted pods' status reason and message, their
// DisruptionTarget condition's message, and the reason of a critical pod
// no set of pods could make room for.
const (
	ReasonPreempting               = "Preempting"
	MessagePreempted               = "Preempted in order to admit critical pod"
	MessagePreemptedDisruption     = "Pod was preempted by Kubelet to accommodate a critical pod."
	ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"
)

// SystemCriticalPriority is the lowest priority of a critical pod
// (system-cluster-critical's; system-node-critical is above it).
const SystemCriticalPriority = 2000000000

// Preemptable reports whether preemptor may preempt victim, as the
// kubelet judges it: a critical pod may preempt any pod that is not, and
// a pod preempts one of lower priority when both have one.
func Preemptable(preemptor, victim *v1.Pod, critical func(*v1.Pod) bool) bool {
	if critical(preemptor) && !critical(victim) {
		return true
	}
	p, q := preemptor.Spec.Priority, victim.Spec.Priority
	return p != nil && q != nil && *p > *q
}

// UnexpectedAdmissionMessage is the message of a critical pod refused
// because preemption could not make room for it (err is Preempt's).
func UnexpectedAdmissionMessage(err error) string {
	return fmt.Sprintf("Unexpected error while attempting to recover from admission failure: preemption: error finding a set of pods to preempt: %v", err)
}

// need is what is left to free of one resource.
type need struct {
	resource v1.ResourceName
	quantity int64
}

type needs []need

// String is the kubelet's rendering of what could not be freed.
func (n needs) String() string {
	var b strings.Builder
	b.WriteString("[")
	for _, x := range n {
		fmt.Fprintf(&b, "(res: %s, q: %d), ", x.resource, x.quantity)
	}
	b.WriteString("]")
	return b.String()
}

// without is what n still needs once pods are gone.
func (n needs) without(pods ...*v1.Pod) needs {
	var out needs
	for _, x := range n {
		left := x.quantity
		for _, p := range pods {
			if left <= 0 {
				break
			}
			left -= Request(p).of(x.resource)
		}
		if left > 0 {
			out = append(out, need{x.resource, left})
		}
	}
	return out
}

// distance is how far freeing pod leaves n from met: the squares of the
// fractions of each resource it leaves needed, so that each resource
// weighs the same whatever its unit.
func (n needs) distance(pod *v1.Pod) float64 {
	var d float64
	r := Request(pod)
	for _, x := range n {
		if left := x.quantity - r.of(x.resource); left > 0 {
			f := float64(left) / float64(x.quantity)
			d += f * f
		}
	}
	return d
}

// errNoVictims is wrapped by Preempt's error when no set of pods frees
// enough.
var errNoVictims = errors.New("no set of running pods found to reclaim resources")

// Preempt chooses which of candidates (the admitted pods, in admission
// order, as allocated) pod must preempt to make up short, as the kubelet's
// critical-pod admission handler does: only pods preemptable allows, the
// fewest and least important — Guaranteed pods only as far as all the
// Burstable and BestEffort ones do not free enough, then Burstable ones as
// far as the BestEffort ones do not; within a class, the pod that leaves
// the least to free first (on a tie the smaller request, memory before
// cpu; on a full tie the later admitted). The error says what no set of
// pods could free.
func Preempt(short []Shortfall, candidates []*v1.Pod, preemptable func(victim *v1.Pod) bool) ([]*v1.Pod, error) {
	var n needs
	for _, s := range short {
		n = append(n, need{s.Resource, s.Missing()})
	}
	var bestEffort, burstable, guaranteed []*v1.Pod
	for _, p := range candidates {
		if !preemptable(p) {
			continue
		}
		switch kubecontainer.QOSClass(p) {
		case v1.PodQOSBestEffort:
			bestEffort = append(bestEffort, p)
		case v1.PodQOSBurstable:
			burstable = append(burstable, p)
		default:
			guaranteed = append(guaranteed, p)
		}
	}
	if left := n.without(concat(bestEffort, burstable, guaranteed)...); len(left) > 0 {
		return nil, fmt.Errorf("%w: %s", errNoVictims, left)
	}
	// Each class frees what the others cannot: all of the less important
	// ones, and what was chosen of the more important ones.
	g, err := closest(guaranteed, n.without(concat(bestEffort, burstable)...))
	if err != nil {
		return nil, err
	}
	b, err := closest(burstable, n.without(concat(bestEffort, g)...))
	if err != nil {
		return nil, err
	}
	be, err := closest(bestEffort, n.without(concat(b, g)...))
	if err != nil {
		return nil, err
	}
	return concat(be, b, g), nil
}

// closest picks pods one by one, each time the one that leaves the least
// of n to free, until n is met.
func closest(pods []*v1.Pod, n needs) ([]*v1.Pod, error) {
	pods = concat(pods) // picked pods are taken out of a copy
	var out []*v1.Pod
	for len(n) > 0 {
		if len(pods) == 0 {
			return nil, fmt.Errorf("%w: %s", errNoVictims, n)
		}
		best, bestDist := 0, n.distance(pods[0])
		for i := 1; i < len(pods); i++ {
			if d := n.distance(pods[i]); d < bestDist || d == bestDist && !larger(pods[i], pods[best]) {
				best, bestDist = i, d
			}
		}
		out = append(out, pods[best])
		n = n.without(pods[best])
		pods = append(pods[:best], pods[best+1:]...)
	}
	return out, nil
}

// larger reports whether a requests more than b: memory first, then cpu.
func larger(a, b *v1.Pod) bool {
	ra, rb := Request(a), Request(b)
	if ra.Memory != rb.Memory {
		return ra.Memory > rb.Memory
	}
	return ra.MilliCPU > rb.MilliCPU
}

func concat(lists ...[]*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
