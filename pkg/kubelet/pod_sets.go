package kubelet

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podstatus"
)

// desiredSet is the pods the config wants on this node, by UID. The sync
// loop writes it; workers, the API and GC read it.
type desiredSet struct {
	mu   sync.Mutex // guards pods
	pods map[types.UID]*v1.Pod
}

func newDesiredSet() *desiredSet { return &desiredSet{pods: map[types.UID]*v1.Pod{}} }

func (d *desiredSet) get(uid types.UID) *v1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pods[uid]
}

func (d *desiredSet) all() []*v1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*v1.Pod, 0, len(d.pods))
	for _, p := range d.pods {
		out = append(out, p)
	}
	return out
}

func (d *desiredSet) set(pod *v1.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pods[pod.UID] = pod
}

func (d *desiredSet) remove(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pods, uid)
}

// dirtySet collects the pods the relist (or a retry, or a probe) saw
// change, for the sync loop to take. mark never blocks: the relist never
// waits for the sync loop, and a pod marked twice is synced once.
type dirtySet struct {
	ch chan struct{} // cap 1: "uids is not empty"

	mu   sync.Mutex // guards uids
	uids map[types.UID]bool
}

func newDirtySet() *dirtySet {
	return &dirtySet{ch: make(chan struct{}, 1), uids: map[types.UID]bool{}}
}

func (d *dirtySet) mark(uids []types.UID) {
	d.mu.Lock()
	for _, uid := range uids {
		d.uids[uid] = true
	}
	d.mu.Unlock()
	select {
	case d.ch <- struct{}{}:
	default:
	}
}

func (d *dirtySet) take() []types.UID {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]types.UID, 0, len(d.uids))
	for uid := range d.uids {
		out = append(out, uid)
	}
	d.uids = map[types.UID]bool{}
	return out
}

// podRecords is what the agent remembers of each pod between syncs, in one
// place: forget drops it when the pod goes (but for the time of its last
// sync, kept until prune sees a relist newer than it).
type podRecords struct {
	mu sync.Mutex // guards m
	m  map[types.UID]*podRecord
}

// podRecord is what the agent remembers of one pod between syncs.
type podRecord struct {
	lastSync time.Time                            // the last sync that acted on the runtime
	waiting  map[string]*kubecontainer.StartError // why a container (or "POD", the sandbox) could not start
	lastErr  string                               // the last sync error, logged once
	messages map[string]string                    // termination messages of dead containers, by ID
	rejected *kuberuntime.Rejection               // why the pod may not run here (nil: admitted)
	evicted  *evictedPod                          // the eviction manager evicted it
	secrets  string                               // the imagePullSecrets last warned of

	// For the kubelet's pod start metrics.
	firstSeen     time.Time     // when the config first gave the pod
	removed       bool          // the config removed it; it is still being killed
	workerStarted bool          // its worker has synced it once
	startObserved bool          // its start has been recorded
	pulling       time.Duration // time spent pulling its images before it started
}

func newPodRecords() *podRecords { return &podRecords{m: map[types.UID]*podRecord{}} }

// get returns the pod's record, made if absent; callers hold mu.
func (r *podRecords) get(uid types.UID) *podRecord {
	rec := r.m[uid]
	if rec == nil {
		rec = &podRecord{waiting: map[string]*kubecontainer.StartError{}, messages: map[string]string{}}
		r.m[uid] = rec
	}
	return rec
}

func (r *podRecords) lastSync(uid types.UID) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.get(uid).lastSync
}

func (r *podRecords) setLastSync(uid types.UID, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(uid).lastSync = t
}

// setWaiting records why a container could not start (nil: it started).
func (r *podRecords) setWaiting(uid types.UID, name string, e *kubecontainer.StartError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e == nil {
		delete(r.get(uid).waiting, name)
		return
	}
	r.get(uid).waiting[name] = e
}

func (r *podRecords) waiting(uid types.UID, name string) *kubecontainer.StartError {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.m[uid]; rec != nil {
		return rec.waiting[name]
	}
	return nil
}

// syncError records the outcome of a sync: msg its error ("" none), acted
// whether it did anything. It returns the error as it was before and as it
// stands now (a sync that tried nothing leaves a failure standing).
func (r *podRecords) syncError(uid types.UID, msg string, acted bool) (before, now string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.get(uid)
	before = rec.lastErr
	switch {
	case msg != "":
		rec.lastErr = msg
	case acted:
		rec.lastErr = ""
	}
	return before, rec.lastErr
}

// setRejected records whether the pod was refused (nil: admitted).
func (r *podRecords) setRejected(uid types.UID, rej *kuberuntime.Rejection) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(uid).rejected = rej
}

func (r *podRecords) rejectedFor(uid types.UID) *kuberuntime.Rejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.m[uid]; rec != nil {
		return rec.rejected
	}
	return nil
}

// setEvicted records that the pod was evicted.
func (r *podRecords) setEvicted(uid types.UID, e *evictedPod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(uid).evicted = e
}

func (r *podRecords) evictedFor(uid types.UID) *evictedPod {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.m[uid]; rec != nil {
		return rec.evicted
	}
	return nil
}

// warnSecrets records that the pod's imagePullSecrets (names) are warned
// of; it reports whether they were not already.
func (r *podRecords) warnSecrets(uid types.UID, names string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.get(uid)
	if rec.secrets == names {
		return false
	}
	rec.secrets = names
	return true
}

func (r *podRecords) message(uid types.UID, id string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	msg, ok := r.get(uid).messages[id]
	return msg, ok
}

func (r *podRecords) setMessage(uid types.UID, id, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(uid).messages[id] = msg
}

// seen records that the config gives the pod (now) and says whether it
// was removed and given again while its containers were still known: a
// pod deleted and recreated with the same UID, which starts over.
func (r *podRecords) seen(uid types.UID, now time.Time) (recreated bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.get(uid)
	recreated, rec.removed = rec.removed, false
	if rec.firstSeen.IsZero() || recreated {
		rec.firstSeen, rec.workerStarted, rec.startObserved, rec.pulling = now, false, false, 0
	}
	return recreated
}

// setRemoved records that the config removed the pod.
func (r *podRecords) setRemoved(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.m[uid]; rec != nil {
		rec.removed = true
	}
}

// workerStarting returns when the pod was first seen and whether this is
// its worker's first sync (seen is zero for a pod the config never gave).
func (r *podRecords) workerStarting(uid types.UID) (seen time.Time, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.get(uid)
	first, rec.workerStarted = !rec.workerStarted, true
	return rec.firstSeen, first
}

// addPulling adds time spent pulling one of the pod's images.
func (r *podRecords) addPulling(uid types.UID, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.get(uid).pulling += d
}

// started records that the pod runs, returning when it was first seen and
// how long its pulls took; first is false if this was recorded before.
func (r *podRecords) started(uid types.UID) (seen time.Time, pulling time.Duration, first bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.get(uid)
	if rec.startObserved || rec.firstSeen.IsZero() {
		return time.Time{}, 0, false
	}
	rec.startObserved = true
	return rec.firstSeen, rec.pulling, true
}

// forget drops what is remembered of a pod that is gone, but the time of
// its last sync.
func (r *podRecords) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.m[uid]; rec != nil {
		r.m[uid] = &podRecord{lastSync: rec.lastSync, waiting: map[string]*kubecontainer.StartError{}, messages: map[string]string{}}
	}
}

// prune forgets the records of pods gone for good: gone(uid) says the pod
// is neither desired nor has containers, and the relist that says so
// (at relisted) is newer than the pod's last sync — so a pod re-added at
// once still waits for a relist that shows what its removal did.
func (r *podRecords) prune(relisted time.Time, gone func(types.UID) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, rec := range r.m {
		if relisted.After(rec.lastSync) && gone(uid) {
			delete(r.m, uid)
		}
	}
}

// statusRecords is the pods' records as the status producer reads them.
type statusRecords struct{ r *podRecords }

var _ podstatus.Records = statusRecords{}

func (s statusRecords) Waiting(uid types.UID, name string) *kubecontainer.StartError {
	return s.r.waiting(uid, name)
}

func (s statusRecords) Rejected(uid types.UID) *kuberuntime.Rejection { return s.r.rejectedFor(uid) }

func (s statusRecords) Evicted(uid types.UID) *podstatus.Eviction {
	e := s.r.evictedFor(uid)
	if e == nil {
		return nil
	}
	return &podstatus.Eviction{Message: e.message, Deadline: e.deadline}
}

func (s statusRecords) Message(uid types.UID, id string) (string, bool) { return s.r.message(uid, id) }

func (s statusRecords) SetMessage(uid types.UID, id, msg string) { s.r.setMessage(uid, id, msg) }

func (s statusRecords) Started(uid types.UID) (time.Time, time.Duration, bool) {
	return s.r.started(uid)
}
