package kubelet

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
)

// podWork is what a pod's worker hands its syncer for one step: the pod as
// the worker knows it at that moment.
type podWork struct {
	UID types.UID
	// Pod is the latest spec (nil for a pod found on the node without
	// one: its containers' labels say what is needed to stop it).
	Pod *v1.Pod
	// Termination is the request the pod ends by, once one was made.
	Termination *lifecycle.Termination
	// Record is what is remembered of the pod between steps; only the
	// worker's steps write it.
	Record *podRecord
}

// podSyncer is what a pod's worker does at each phase of the pod's life
// (the Kubelet implements it). Each step may fail; the worker then waits to
// be poked again (a retry, the relist, a resync) and repeats it.
type podSyncer interface {
	// syncPod brings a desired pod to its spec. A termination returned
	// asks for the pod to end (its deadline passed, it was refused, it is
	// finished): the worker moves it to terminating.
	syncPod(ctx context.Context, w podWork) (*lifecycle.Termination, error)
	// syncTerminatingPod stops what runs of the pod within the
	// termination's grace period; it succeeds once nothing runs.
	syncTerminatingPod(ctx context.Context, w podWork) error
	// syncTerminatedPod tears down what a stopped pod still holds of the
	// node (volumes, pod cgroup) the first time, and produces its final
	// status; it is called again on every later poke of a terminated pod
	// that is still desired, and must then only refresh the status.
	syncTerminatedPod(ctx context.Context, w podWork) error
	// forgetPod removes what is left of a terminated pod that is no longer
	// desired (its containers, its directory) and drops what the agent's
	// caches keep of it: the pod leaves the node.
	forgetPod(ctx context.Context, w podWork) error
}

// podWorkers runs one goroutine per pod UID, each walking its pod through
// the phases of lifecycle: syncing, terminating, terminated, then forgotten.
// Every way a pod ends is one request, Terminate; a terminating pod is never
// synced (started) again.
//
// A request that arrives while the worker is busy is kept: the worker's
// state holds the latest spec and termination, and a pending flag, so none
// is dropped and the next step sees everything asked meanwhile. A
// termination cancels the sync in hand, as the kubelet's pod workers do:
// what it would still create or start would only be stopped again.
type podWorkers struct {
	syncer    podSyncer
	newRecord func() *podRecord
	// evicted is the termination of a pod evicted before a restart (nil:
	// none); its worker starts it terminating.
	evicted func(pod *v1.Pod) *lifecycle.Termination
	wg      sync.WaitGroup

	mu  sync.Mutex      // guards what follows and every podState
	ctx context.Context // Start's: the workers' lifetime (nil before Start)
	// pods are the workers, by pod UID.
	pods map[types.UID]*podState
	// forgotten keeps, for a while, when each forgotten pod's worker last
	// acted on the runtime: until a relist newer than that has run, the
	// relist's cache may still show what its removal took away, and a
	// worker started afresh for its UID must wait for a newer one.
	forgotten map[types.UID]time.Time
}

// podState is one pod's worker: where the pod is in its life and what waits
// for the worker.
type podState struct {
	phase lifecycle.Phase
	pod   *v1.Pod
	// desired: the config wants the pod here. A pod removed from the config
	// is forgotten once terminated; one only found on the node
	// (runtimeOnly) never was desired.
	desired     bool
	runtimeOnly bool
	termination *lifecycle.Termination
	// restart is a pod given again with this UID while the one before
	// terminates: it starts afresh once that one is forgotten, so it never
	// adopts the old one's containers.
	restart *v1.Pod
	record  *podRecord

	// stopped, once asked for (Stopped), closes when the pod leaves
	// terminating: nothing of it runs.
	stopped chan struct{}

	pending bool               // a step is due
	working bool               // a step is in hand
	cancel  context.CancelFunc // of the step in hand, if a termination may cancel it
	wake    chan struct{}      // cap 1: pending became true
}

// newPodWorkers returns the pod workers; newRecord makes the record of a
// pod whose worker starts; evicted (nil: none) tells the termination of a
// pod evicted before the agent restarted. Workers start once Start has
// been called.
func newPodWorkers(syncer podSyncer, newRecord func() *podRecord, evicted func(*v1.Pod) *lifecycle.Termination) *podWorkers {
	return &podWorkers{syncer: syncer, newRecord: newRecord, evicted: evicted, pods: map[types.UID]*podState{}, forgotten: map[types.UID]time.Time{}}
}

// Start lets workers start, each living until ctx ends; before Start, and
// once ctx ended, nothing starts or acts. Pods are left as they are when
// ctx ends: nothing is stopped on the way out.
func (p *podWorkers) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctx = ctx
}

// Wait blocks until every worker has exited (once Start's context ended).
func (p *podWorkers) Wait() { p.wg.Wait() }

// stopped reports whether no worker may start or act (before Start, or once
// its context ended); p.mu is held.
func (p *podWorkers) stopped() bool { return p.ctx == nil || p.ctx.Err() != nil }

// UpdatePod hands the worker the pod's latest desired spec, starting a
// worker if needed. A pod with a deletion timestamp is terminated within
// the deletion's grace period. It never blocks. It reports whether the pod
// was given again while the one before with its UID still ends (removed
// and recreated, or evicted and given with another manifest): it starts
// afresh once that one is forgotten.
func (p *podWorkers) UpdatePod(pod *v1.Pod) (recreated bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped() {
		return false
	}
	st := p.pods[pod.UID]
	switch {
	case st == nil:
		st = p.start(pod.UID, pod, true)
	case !st.desired && st.phase != lifecycle.Syncing:
		recreated = st.restart == nil
		st.restart = pod
		return recreated
	case evictedManifestChanged(st, pod):
		// An evicted pod given with another manifest is a new pod, as a
		// kubelet's static pod is (its UID hashes its manifest; ours
		// stays with its name): the evicted one is forgotten, then this
		// one starts afresh. So is a static pod refused at admission or
		// preempted: its new manifest is admitted afresh.
		st.desired, st.restart = false, pod
		p.poke(st)
		return true
	default:
		st.pod, st.desired, st.runtimeOnly = pod, true, false
	}
	if pod.DeletionTimestamp != nil {
		p.terminate(st, lifecycle.Termination{Cause: lifecycle.Deleted, Grace: kuberuntime.GracePeriod(pod)})
	}
	p.poke(st)
	return false
}

// evictedManifestChanged reports whether the pod's worker ends it by an
// eviction (or, a static pod, by a refusal at admission or a preemption)
// and pod is another manifest than the one it ends; p.mu is held.
func evictedManifestChanged(st *podState, pod *v1.Pod) bool {
	if !st.desired || st.termination == nil || st.pod == nil || st.pod == pod {
		return false
	}
	switch st.termination.Cause {
	case lifecycle.Evicted:
	case lifecycle.Rejected, lifecycle.Preempted:
		if !isStatic(pod) {
			return false // an API server's pod that ended stays ended, as the kubelet's
		}
	default:
		return false
	}
	return eviction.ManifestHash(st.pod) != eviction.ManifestHash(pod)
}

// RemovePod says the config no longer wants the pod: it is terminated
// (within its spec's grace period), then forgotten.
func (p *podWorkers) RemovePod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.pods[uid]
	if st == nil || p.stopped() {
		return
	}
	st.desired, st.restart = false, nil
	grace := lifecycle.MinStopGrace
	if st.pod != nil {
		grace = kuberuntime.GracePeriod(st.pod)
	}
	p.terminate(st, lifecycle.Termination{Cause: lifecycle.Removed, Grace: grace})
	p.poke(st)
}

// Terminate asks for the pod to end, as t says. A pod the workers do not
// know (found on the node without a spec) gets a worker that terminates it
// and forgets it. A second request never lengthens the grace period, and
// keeps the first one's cause.
func (p *podWorkers) Terminate(uid types.UID, t lifecycle.Termination) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped() {
		return
	}
	st := p.pods[uid]
	if st == nil {
		st = p.start(uid, nil, false)
		st.runtimeOnly = true
	}
	p.terminate(st, t)
	p.poke(st)
}

// Stopped returns a channel closed once nothing of the pod runs: it is
// terminated (or forgotten, or has no worker). A pod that is still syncing
// closes it only after a termination.
func (p *podWorkers) Stopped(uid types.UID) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.pods[uid]
	if st == nil || st.phase == lifecycle.Terminated {
		return closedChan
	}
	if st.stopped == nil {
		st.stopped = make(chan struct{})
	}
	return st.stopped
}

// closedChan is a closed channel: what Stopped returns for a pod that is
// already stopped.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// markStopped closes the pod's stopped channel, if one was asked for; p.mu
// is held.
func markStopped(st *podState) {
	if st.stopped != nil {
		close(st.stopped)
		st.stopped = nil
	}
}

// Sync pokes the pod's worker to take its step again (its containers
// changed, a back-off ended); it does nothing for a pod without a worker.
func (p *podWorkers) Sync(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.pods[uid]; st != nil && !p.stopped() {
		p.poke(st)
	}
}

// SyncUndesired pokes every worker whose pod the config no longer wants:
// their terminations and removals are retried by the resync, as the
// desired pods' syncs are.
func (p *podWorkers) SyncUndesired() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped() {
		return
	}
	for _, st := range p.pods {
		if !st.desired {
			p.poke(st)
		}
	}
}

// start makes the worker of a pod; p.mu is held. A desired pod evicted
// before the agent restarted starts terminating, by its eviction: it is
// never synced (started) again.
func (p *podWorkers) start(uid types.UID, pod *v1.Pod, desired bool) *podState {
	st := &podState{pod: pod, desired: desired, record: p.newRecord(), wake: make(chan struct{}, 1)}
	if pod != nil && desired && p.evicted != nil {
		if t := p.evicted(pod); t != nil {
			p.terminate(st, *t)
		}
	}
	st.record.setLastSync(p.forgotten[uid])
	p.pods[uid] = st
	p.wg.Add(1)
	go p.loop(p.ctx, uid, st)
	return st
}

// terminate moves the pod to terminating, or shortens its termination;
// p.mu is held. The step in hand is cancelled if it is a sync, or a
// termination whose grace is now shorter.
func (p *podWorkers) terminate(st *podState, t lifecycle.Termination) {
	t.Grace = max(t.Grace, lifecycle.MinStopGrace)
	switch {
	case st.termination == nil:
		st.termination = &t
		st.phase = lifecycle.Terminating
	case st.phase == lifecycle.Terminating && t.Grace < st.termination.Grace:
		shorter := *st.termination
		shorter.Grace = t.Grace
		st.termination = &shorter
	default:
		return
	}
	if st.cancel != nil {
		st.cancel()
	}
}

// poke marks a step due and wakes the worker; p.mu is held.
func (p *podWorkers) poke(st *podState) {
	st.pending = true
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// loop is one pod's worker: it takes a step whenever one is due, until the
// pod is forgotten or the workers' context ends.
func (p *podWorkers) loop(ctx context.Context, uid types.UID, st *podState) {
	defer p.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.wake:
		}
		next, done := p.step(ctx, uid, st)
		if done {
			if next == nil {
				return
			}
			st = next
		}
	}
}

// step takes the pod's due step. done reports that the pod was forgotten;
// next is then the worker of the pod given again with its UID, if any,
// which this goroutine goes on with.
func (p *podWorkers) step(life context.Context, uid types.UID, st *podState) (next *podState, done bool) {
	p.mu.Lock()
	if !st.pending {
		p.mu.Unlock()
		return nil, false
	}
	st.pending, st.working = false, true
	phase, desired := st.phase, st.desired
	w := podWork{UID: uid, Pod: st.pod, Record: st.record}
	if st.termination != nil {
		t := *st.termination
		w.Termination = &t
	}
	ctx, cancel := context.WithCancel(life)
	if phase != lifecycle.Terminated {
		st.cancel = cancel
	}
	p.mu.Unlock()
	defer cancel()

	var err error
	switch phase {
	case lifecycle.Syncing:
		var t *lifecycle.Termination
		if t, err = p.syncer.syncPod(ctx, w); t != nil && err == nil {
			p.Terminate(uid, *t)
		}
	case lifecycle.Terminating:
		if err = p.syncer.syncTerminatingPod(ctx, w); err == nil && ctx.Err() == nil {
			p.setPhase(st, lifecycle.Terminated)
		}
	case lifecycle.Terminated:
		if err = p.syncer.syncTerminatedPod(ctx, w); err == nil && !desired {
			err = p.syncer.forgetPod(ctx, w)
			if err == nil {
				return p.forget(uid, st), true
			}
		}
	}
	p.mu.Lock()
	st.working, st.cancel = false, nil
	p.mu.Unlock()
	return nil, false
}

// setPhase moves the pod on and has its next step taken at once.
func (p *podWorkers) setPhase(st *podState, phase lifecycle.Phase) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st.phase = phase
	if phase == lifecycle.Terminated {
		markStopped(st)
	}
	p.poke(st)
}

// forget drops the worker of a forgotten pod; a pod given again with its
// UID meanwhile gets a fresh worker state, returned for the same goroutine
// to go on with.
func (p *podWorkers) forget(uid types.UID, st *podState) *podState {
	last := st.record.lastSyncTime()
	p.mu.Lock()
	defer p.mu.Unlock()
	markStopped(st)
	delete(p.pods, uid)
	p.forgotten[uid] = last
	if st.restart == nil || p.stopped() {
		return nil
	}
	// Its first sync waits for a relist that shows the removal.
	next := &podState{pod: st.restart, desired: true, record: p.newRecord(), wake: st.wake}
	next.record.setLastSync(last)
	p.pods[uid] = next
	p.poke(next)
	return next
}

// Forgotten reports whether the pod was forgotten after relisted: the
// relist's cache may still show the containers its removal took away.
func (p *podWorkers) Forgotten(uid types.UID, relisted time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.forgotten[uid]
	return ok && !relisted.After(t)
}

// PruneForgotten drops what is kept of pods forgotten before a relist that
// started at relisted: that relist showed what their removal did.
func (p *podWorkers) PruneForgotten(relisted time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid, t := range p.forgotten {
		if relisted.After(t) {
			delete(p.forgotten, uid)
		}
	}
}

// Known reports whether the pod has a worker.
func (p *podWorkers) Known(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods[uid] != nil
}

// Busy reports whether the pod's worker has a step in hand or due.
func (p *podWorkers) Busy(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.pods[uid]
	return st != nil && (st.working || st.pending)
}

// Phase is where the pod is in its life (ok false: it has no worker).
func (p *podWorkers) Phase(uid types.UID) (phase lifecycle.Phase, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.pods[uid]; st != nil {
		return st.phase, true
	}
	return 0, false
}

// Termination is the request the pod ends by (nil: none was made, or the
// pod has no worker).
func (p *podWorkers) Termination(uid types.UID) *lifecycle.Termination {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.pods[uid]; st != nil && st.termination != nil {
		t := *st.termination
		return &t
	}
	return nil
}

// Record is the pod's record (nil: the pod has no worker).
func (p *podWorkers) Record(uid types.UID) *podRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.pods[uid]; st != nil {
		return st.record
	}
	return nil
}

// WorkingPods counts the workers by phase and by how the config knows
// their pod (desired; orphan: removed from it; runtime_only: never in it)
// and whether it is static, for kubelet_working_pods.
func (p *podWorkers) WorkingPods() []metrics.WorkingPods {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]metrics.WorkingPods, 0, len(p.pods))
	for _, st := range p.pods {
		w := metrics.WorkingPods{Lifecycle: st.phase.String(), Config: "desired", Static: st.pod == nil || isStatic(st.pod), Count: 1}
		switch {
		case st.runtimeOnly:
			w.Config = "runtime_only"
		case !st.desired:
			w.Config = "orphan"
		}
		out = append(out, w)
	}
	return out
}
