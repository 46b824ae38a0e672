package kuberuntime

import (
	"context"
	"sync"
)

// startSlots bounds the containers being created and started at once.
// Waiting starts of a pod's own containers (init and app) take a freed slot
// before waiting infra starts, each kind in arrival order: a pod whose infra
// runs is finished before another pod is begun, so when Docker is the
// bottleneck pods come up one after another, as with a slot per pod. First
// come first served had every infra of a burst start before any app
// container (on a slow node, each of 50 pods ran only at the burst's end).
type startSlots struct {
	mu      sync.Mutex
	free    int
	waiting [2][]chan struct{} // by kind: pods' own containers, then infra
}

func newStartSlots(n int) *startSlots { return &startSlots{free: n} }

// acquire takes a slot, waiting until one is free or ctx ends; infra says
// the start is a pod's infra container. Call release to give the slot back.
func (s *startSlots) acquire(ctx context.Context, infra bool) (release func(), err error) {
	kind := 0
	if infra {
		kind = 1
	}
	s.mu.Lock()
	if s.free > 0 && len(s.waiting[0]) == 0 && (kind == 0 || len(s.waiting[1]) == 0) {
		s.free--
		s.mu.Unlock()
		return s.release, nil
	}
	granted := make(chan struct{})
	s.waiting[kind] = append(s.waiting[kind], granted)
	s.mu.Unlock()
	select {
	case <-granted:
		return s.release, nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, ch := range s.waiting[kind] {
		if ch == granted {
			s.waiting[kind] = append(s.waiting[kind][:i], s.waiting[kind][i+1:]...)
			return nil, ctx.Err()
		}
	}
	// Granted as ctx ended: pass the slot on.
	s.releaseLocked()
	return nil, ctx.Err()
}

func (s *startSlots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked()
}

// releaseLocked hands the slot to the first waiter of the first kind that
// has one, or frees it.
func (s *startSlots) releaseLocked() {
	for kind, q := range s.waiting {
		if len(q) > 0 {
			close(q[0])
			s.waiting[kind] = q[1:]
			return
		}
	}
	s.free++
}
