// Package lifecycle is the vocabulary of a pod's life on the node, shared by
// the pod workers (pkg/kubelet), the runtime manager, the status producer and
// the eviction manager: the phases a pod's worker walks through, the causes
// of a termination, and an admission's refusal. It imports nothing of the
// agent's, so every part can speak it without depending on another.
//
// A pod's worker walks one way:
//
//	Syncing ──Terminate(cause, grace)──► Terminating ──nothing runs──► Terminated ──not desired──► forgotten
//
// A termination is requested by whoever decides the pod must end: the
// config's removal of a static pod, its deletion in the API server, the
// eviction manager, its activeDeadlineSeconds, a refusal at admission, a
// critical pod's preemption, its containers being done as its restart
// policy says, or the node's shutdown.
// A terminating pod is never started again; a pod given again with the same
// UID while it terminates waits until it is forgotten.
package lifecycle

import "time"

// Phase is where a pod's worker is in the pod's life.
type Phase uint8

const (
	// Syncing: the pod is brought to its spec, containers started and
	// restarted as its restart policy says.
	Syncing Phase = iota
	// Terminating: its running containers are being stopped, preStop
	// hooks first, within the termination's grace period; nothing starts.
	Terminating
	// Terminated: nothing of it runs; its volumes and pod cgroup are torn
	// down and its status is final. Its dead containers stay (for their
	// logs) until the pod leaves the config, when it is forgotten.
	Terminated
)

// String is the phase as the kubelet's kubelet_working_pods metric labels
// it (lifecycle="sync|terminating|terminated").
func (p Phase) String() string {
	switch p {
	case Syncing:
		return "sync"
	case Terminating:
		return "terminating"
	default:
		return "terminated"
	}
}

// Cause is why a pod is terminated.
type Cause uint8

const (
	// Removed: its source no longer gives it (a static pod's manifest
	// removed, a pod unbound from the node).
	Removed Cause = iota + 1
	// Orphaned: found on the node without a spec, after its source
	// delivered a snapshot without it.
	Orphaned
	// Deleted: deleted in the API server (a deletion timestamp); it ends
	// within the deletion's grace period and the API object goes once
	// nothing runs.
	Deleted
	// Evicted by the eviction manager (status reason Evicted).
	Evicted
	// DeadlineExceeded: active longer than its activeDeadlineSeconds.
	DeadlineExceeded
	// Rejected at admission: the node cannot run it as it is.
	Rejected
	// Finished: every container is done as its restart policy says.
	Finished
	// Shutdown: the node is shutting down.
	Shutdown
	// Preempted by a critical pod the node had no room for (status
	// reason Preempting).
	Preempted
)

func (c Cause) String() string {
	switch c {
	case Removed:
		return "removed"
	case Orphaned:
		return "orphaned"
	case Deleted:
		return "deleted"
	case Evicted:
		return "evicted"
	case DeadlineExceeded:
		return "deadline exceeded"
	case Rejected:
		return "rejected"
	case Finished:
		return "finished"
	case Shutdown:
		return "node shutdown"
	case Preempted:
		return "preempted"
	default:
		return "unknown"
	}
}

// Termination is a request that a pod end.
type Termination struct {
	Cause Cause
	// Grace is how long its containers get to stop (preStop hooks
	// included); at least MinStopGrace is given.
	Grace time.Duration
	// Reason and Message are what the pod's status says of the
	// termination, where its cause sets them (Evicted,
	// DeadlineExceeded, a rejection's reason).
	Reason, Message string
}

// MinStopGrace is the shortest stop grace period: even a pod asking for 0
// gets a moment to exit cleanly, as Kubernetes gives it.
const MinStopGrace = 2 * time.Second

// Rejection is why the agent refuses to run a pod, as the kubelet's
// admission reports it: the pod's status and event carry its reason and
// message.
type Rejection struct{ Reason, Message string }
