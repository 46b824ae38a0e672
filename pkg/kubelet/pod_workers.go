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
type podWorkers struct {
	ctx  context.Context
	sync func(ctx context.Context, w podWork) // must not block forever
	wg   sync.WaitGroup

	mu      sync.Mutex // guards the maps
	updates map[types.UID]chan podWork
	busy    map[types.UID]bool
	pending map[types.UID]podWork
}

// newPodWorkers returns workers that live until ctx is cancelled.
func newPodWorkers(ctx context.Context, sync func(context.Context, podWork)) *podWorkers {
	return &podWorkers{
		ctx:     ctx,
		sync:    sync,
		updates: map[types.UID]chan podWork{},
		busy:    map[types.UID]bool{},
		pending: map[types.UID]podWork{},
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
		ch = make(chan podWork, 1)
		p.updates[w.UID] = ch
		p.wg.Add(1)
		go p.loop(w.UID, ch)
	}
	if p.busy[w.UID] {
		p.pending[w.UID] = w
		return
	}
	p.busy[w.UID] = true
	ch <- w // the worker is idle, so the buffer is empty
}

func (p *podWorkers) loop(uid types.UID, ch chan podWork) {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case w, ok := <-ch:
			if !ok {
				return
			}
			p.sync(p.ctx, w)
			p.done(w)
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
		p.updates[w.UID] <- next
		return
	}
	p.busy[w.UID] = false
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
