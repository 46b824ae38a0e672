package kubelet

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podWork is one request to a pod's worker: sync the pod to its spec, or,
// with Kill, stop everything it has on the node (Pod is then its last known
// spec, if any, for preStop hooks and grace periods).
type podWork struct {
	UID  types.UID
	Pod  *v1.Pod
	Kill bool
}

// podWorkers runs one goroutine per pod UID. A request that arrives while the
// worker is busy is kept as the pod's single pending request (the latest one
// wins: every request carries the full desired state, so an older one has
// nothing the newer lacks). Requests are therefore never dropped, and a
// channel buffer of one suffices: a worker is sent to only when it is idle,
// or by itself when it finishes.
//
// A kill that arrives while the pod's worker syncs it cancels that sync, as
// the kubelet's pod workers do: what it would still create or start (on a
// busy node, after waiting seconds for a start slot) would only be stopped
// again, and would delay every other pod's starts meanwhile.
type podWorkers struct {
	ctx  context.Context
	sync func(ctx context.Context, w podWork) // must not block forever
	wg   sync.WaitGroup

	mu      sync.Mutex // guards the maps
	updates map[types.UID]chan job
	busy    map[types.UID]bool
	pending map[types.UID]podWork
	// A sync that arrives while a kill is pending waits for it instead of
	// replacing it: its UID was given up by one pod and taken by another
	// (the merger removes one, then adds the other), and the second must
	// not adopt the first's containers.
	afterKill map[types.UID]podWork
	cancel    map[types.UID]context.CancelFunc // of the sync in hand, unless it is a kill
}

// job is a request handed to a worker, with the context it runs under.
type job struct {
	podWork
	ctx    context.Context
	cancel context.CancelFunc
}

// newPodWorkers returns workers that live until ctx is cancelled.
func newPodWorkers(ctx context.Context, sync func(context.Context, podWork)) *podWorkers {
	return &podWorkers{
		ctx:       ctx,
		sync:      sync,
		updates:   map[types.UID]chan job{},
		busy:      map[types.UID]bool{},
		pending:   map[types.UID]podWork{},
		afterKill: map[types.UID]podWork{},
		cancel:    map[types.UID]context.CancelFunc{},
	}
}

// Update hands w to its pod's worker, starting one if needed. It never blocks.
func (p *podWorkers) Update(w podWork) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		return
	}
	ch, ok := p.updates[w.UID]
	if !ok {
		ch = make(chan job, 1)
		p.updates[w.UID] = ch
		p.wg.Add(1)
		go p.loop(ch)
	}
	if p.busy[w.UID] {
		if prev, ok := p.pending[w.UID]; ok && prev.Kill && !w.Kill {
			p.afterKill[w.UID] = w
			return
		}
		delete(p.afterKill, w.UID)
		p.pending[w.UID] = w
		if cancel := p.cancel[w.UID]; w.Kill && cancel != nil {
			cancel()
		}
		return
	}
	p.hand(ch, w) // the worker is idle, so the buffer is empty
}

// hand sends w to its pod's idle worker; p.mu is held.
func (p *podWorkers) hand(ch chan job, w podWork) {
	ctx, cancel := context.WithCancel(p.ctx)
	p.busy[w.UID] = true
	delete(p.cancel, w.UID)
	if !w.Kill {
		p.cancel[w.UID] = cancel
	}
	ch <- job{podWork: w, ctx: ctx, cancel: cancel}
}

func (p *podWorkers) loop(ch chan job) {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case j, ok := <-ch:
			if !ok {
				return
			}
			p.sync(j.ctx, j.podWork)
			j.cancel()
			p.done(j.podWork)
		}
	}
}

// done hands the worker its pending request, or marks it idle. A worker that
// has just killed its pod, with nothing pending, goes away.
func (p *podWorkers) done(w podWork) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if next, ok := p.pending[w.UID]; ok {
		delete(p.pending, w.UID)
		p.hand(p.updates[w.UID], next)
		return
	}
	if next, ok := p.afterKill[w.UID]; ok {
		delete(p.afterKill, w.UID)
		p.hand(p.updates[w.UID], next)
		return
	}
	p.busy[w.UID] = false
	delete(p.cancel, w.UID)
	if w.Kill {
		close(p.updates[w.UID])
		delete(p.updates, w.UID)
		delete(p.busy, w.UID)
	}
}

// Busy reports whether the pod's worker has work in hand or pending.
func (p *podWorkers) Busy(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.busy[uid]
}

// Wait blocks until every worker has exited (after ctx is cancelled).
func (p *podWorkers) Wait() { p.wg.Wait() }
