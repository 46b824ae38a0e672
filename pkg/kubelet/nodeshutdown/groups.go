package nodeshutdown

import (
	"cmp"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Priorities of the built-in priority classes, as the API server resolves
// them into spec.priority (scheduling.k8s.io's constants).
const (
	// SystemCriticalPriority is system-cluster-critical's priority, the
	// lowest one a critical pod has: shutdownGracePeriodCriticalPods is
	// for pods from it up.
	SystemCriticalPriority int32 = 2000000000
	// systemNodeCriticalPriority is system-node-critical's.
	systemNodeCriticalPriority int32 = SystemCriticalPriority + 1000
)

// Group is one row of the shutdown table (the kubelet's
// ShutdownGracePeriodByPodPriority): pods of Priority and up, to the next
// row's priority, get Grace to stop, and the next row waits for them that
// long at most.
type Group struct {
	Priority int32
	Grace    time.Duration
}

// Table is the shutdown table the configuration asks for, lowest priority
// first: shutdownGracePeriodByPodPriority as given, or else the two rows
// shutdownGracePeriod and shutdownGracePeriodCriticalPods stand for (every
// pod, then critical pods from SystemCriticalPriority up, with
// criticalPods of the period and the rest before them). Nil: graceful
// shutdown is off (no period, or criticalPods longer than the period).
func Table(period, criticalPods time.Duration, byPriority []Group) []Group {
	if len(byPriority) > 0 {
		out := slices.Clone(byPriority)
		slices.SortStableFunc(out, func(a, b Group) int { return cmp.Compare(a.Priority, b.Priority) })
		return out
	}
	if period <= 0 || criticalPods < 0 || criticalPods > period {
		return nil
	}
	// Whole seconds, as the kubelet's table holds them.
	rest := (period - criticalPods).Truncate(time.Second)
	return []Group{{Priority: 0, Grace: rest}, {Priority: SystemCriticalPriority, Grace: criticalPods.Truncate(time.Second)}}
}

// Requested is how long the table may hold the shutdown back: every row's
// grace, one after the other. logind's InhibitDelayMaxSec must be at least
// this.
func Requested(table []Group) time.Duration {
	var sum time.Duration
	for _, g := range table {
		sum += g.Grace
	}
	return sum
}

// Priority is the pod's priority as the shutdown ranks it: spec.priority,
// else the priority of the built-in class it names (what the API server's
// admission would have set; a pod from a manifest has none), else 0.
func Priority(pod *v1.Pod) int32 {
	if p := pod.Spec.Priority; p != nil {
		return *p
	}
	switch pod.Spec.PriorityClassName {
	case "system-node-critical":
		return systemNodeCriticalPriority
	case "system-cluster-critical":
		return SystemCriticalPriority
	}
	return 0
}

// Assign sorts pods into the table's rows (table sorted, lowest first): a
// pod goes to the row of the highest priority not above its own; one
// below every row goes to the first, one above every row to the last.
// Pods keep their order within a row.
func Assign(table []Group, pods []*v1.Pod) [][]*v1.Pod {
	out := make([][]*v1.Pod, len(table))
	if len(table) == 0 {
		return out
	}
	for _, pod := range pods {
		prio := Priority(pod)
		row := 0
		for i, g := range table {
			if g.Priority <= prio {
				row = i
			}
		}
		out[row] = append(out[row], pod)
	}
	return out
}

// PodGrace is how long a pod of the row gets to stop: the row's grace, or
// the pod's terminationGracePeriodSeconds where that is shorter.
func PodGrace(g Group, pod *v1.Pod) time.Duration {
	grace := g.Grace
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil && time.Duration(*s)*time.Second < grace {
		grace = time.Duration(*s) * time.Second
	}
	return max(grace, 0)
}
