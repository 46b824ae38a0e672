package kubelet

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/allocation"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podstatus"
)

// podRecord is everything the agent remembers of one pod between its
// worker's steps, in one place. The pod's worker makes it when it starts
// and it goes with the worker when the pod is forgotten: nothing has to be
// forgotten by hand. The worker's steps write it (the time its pulls took
// among what a runtime sync returns); the status producer (also run by the
// API for a pod not synced yet) reads it, hence the lock.
type podRecord struct {
	mu sync.Mutex

	lastSync time.Time                            // the last step that acted on the runtime
	waiting  map[string]*kubecontainer.StartError // why a container (or "POD", the sandbox) could not start
	lastErr  string                               // the last step's error, logged once
	messages map[string]string                    // termination messages of dead containers, by ID
	refused  *lifecycle.Rejection                 // refused under node pressure, until admitted
	cleaned  bool                                 // its terminated step tore down volumes and cgroup
	// fit is the resource-fit admission's decision (kubelet/admission.go);
	// preempted are the pods its admission preempted, which it waits to
	// see stopped (until preemptWait) before it starts.
	fit         fitDecision
	preempted   []types.UID
	preemptWait time.Time
	// allocated are the resources the node accepted for its containers
	// (nil: none yet); resizePending is why a resize is not allocated,
	// resizeErr why the last resize in place failed (kubelet/resize.go).
	allocated     allocation.Resources
	resizePending allocation.Pending
	resizeErr     string
	checkpointed  allocation.Resources // the allocation in the pod's directory (nil: none)
	// runtime is what the runtime manager remembers of the pod (its
	// containers' back-off), handed to each of its syncs.
	runtime *kuberuntime.PodRecord

	// For the kubelet's pod start metrics.
	firstSeen     time.Time     // when the config first gave the pod
	workerStarted bool          // its worker has synced it once
	startObserved bool          // its start has been recorded
	pulling       time.Duration // time spent pulling its images before it started
}

func newPodRecord(now time.Time, runtime *kuberuntime.PodRecord) *podRecord {
	return &podRecord{firstSeen: now, runtime: runtime, waiting: map[string]*kubecontainer.StartError{}, messages: map[string]string{}}
}

func (r *podRecord) lastSyncTime() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastSync
}

func (r *podRecord) setLastSync(t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSync = t
}

// setWaiting records why a container could not start (nil: it started).
func (r *podRecord) setWaiting(name string, e *kubecontainer.StartError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e == nil {
		delete(r.waiting, name)
		return
	}
	r.waiting[name] = e
}

// syncError records the outcome of a step: msg its error ("" none), acted
// whether it did anything. It returns the error as it was before and as it
// stands now (a step that tried nothing leaves a failure standing).
func (r *podRecord) syncError(msg string, acted bool) (before, now string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before = r.lastErr
	switch {
	case msg != "":
		r.lastErr = msg
	case acted:
		r.lastErr = ""
	}
	return before, r.lastErr
}

// setRefused records whether the pod was refused under pressure (nil:
// admitted); it reports whether that changed.
func (r *podRecord) setRefused(rej *lifecycle.Rejection) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := (r.refused == nil) != (rej == nil)
	r.refused = rej
	return changed
}

func (r *podRecord) refusal() *lifecycle.Rejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

// workerStarting reports whether this is the worker's first sync of the
// pod, and when the config first gave it.
func (r *podRecord) workerStarting() (seen time.Time, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	first, r.workerStarted = !r.workerStarted, true
	return r.firstSeen, first
}

// addPulling adds time spent pulling one of the pod's images.
func (r *podRecord) addPulling(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pulling += d
}

// statusRecords is the pods' records and terminations as the status
// producer reads them. A pod without a worker has no record: nothing is
// remembered of it.
type statusRecords struct{ w *podWorkers }

var _ podstatus.Records = statusRecords{}

func (s statusRecords) Waiting(uid types.UID, name string) *kubecontainer.StartError {
	r := s.w.Record(uid)
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waiting[name]
}

// Rejected is why the pod may not run here: its admission's refusal (a
// termination), or the node's pressure until it is admitted.
func (s statusRecords) Rejected(uid types.UID) *lifecycle.Rejection {
	if t := s.w.Termination(uid); t != nil && t.Cause == lifecycle.Rejected {
		return &lifecycle.Rejection{Reason: t.Reason, Message: t.Message}
	}
	if r := s.w.Record(uid); r != nil {
		return r.refusal()
	}
	return nil
}

func (s statusRecords) Termination(uid types.UID) *lifecycle.Termination { return s.w.Termination(uid) }

func (s statusRecords) Message(uid types.UID, id string) (string, bool) {
	r := s.w.Record(uid)
	if r == nil {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	msg, ok := r.messages[id]
	return msg, ok
}

func (s statusRecords) SetMessage(uid types.UID, id, msg string) {
	if r := s.w.Record(uid); r != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.messages[id] = msg
	}
}

// Started records that the pod runs, returning when it was first seen and
// how long its pulls took; first is false if this was recorded before.
func (s statusRecords) Started(uid types.UID) (seen time.Time, pulling time.Duration, first bool) {
	r := s.w.Record(uid)
	if r == nil {
		return time.Time{}, 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.startObserved || r.firstSeen.IsZero() {
		return time.Time{}, 0, false
	}
	r.startObserved = true
	return r.firstSeen, r.pulling, true
}
