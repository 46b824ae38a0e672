package podqueue

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Retries wakes pods whose back-off (or deadline) ends: each pod at the
// earliest time asked for. One goroutine, Run's (the Kubelet runs it), owns
// its timer, so nothing fires after Run has returned (time.AfterFunc
// could).
type Retries struct {
	clock clock.Clock
	kick  chan struct{} // cap 1: "the earliest time may have changed"

	mu   sync.Mutex // guards wake
	wake map[types.UID]time.Time
}

// NewRetries returns an empty queue timed by clk.
func NewRetries(clk clock.Clock) *Retries {
	return &Retries{clock: clk, kick: make(chan struct{}, 1), wake: map[types.UID]time.Time{}}
}

// Add asks for uid to be woken at t (or earlier, if already asked); it
// never blocks.
func (q *Retries) Add(uid types.UID, t time.Time) {
	q.mu.Lock()
	if old, ok := q.wake[uid]; !ok || t.Before(old) {
		q.wake[uid] = t
	}
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// Forget drops a pod that is gone.
func (q *Retries) Forget(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.wake, uid)
}

// due removes and returns the pods due at now, and the next time after.
func (q *Retries) due(now time.Time) ([]types.UID, time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []types.UID
	var next time.Time
	for uid, t := range q.wake {
		if !t.After(now) {
			out = append(out, uid)
			delete(q.wake, uid)
		} else if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return out, next
}

// Run hands due pods to fire until ctx is cancelled.
func (q *Retries) Run(ctx context.Context, fire func([]types.UID)) {
	for {
		uids, next := q.due(q.clock.Now())
		if len(uids) > 0 {
			fire(uids)
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = next.Sub(q.clock.Now())
		}
		if wait <= 0 {
			continue // came due meanwhile
		}
		timer := q.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-q.kick:
		case <-timer.C():
		}
		timer.Stop()
	}
}

// Next is when the pod is to be woken (ok false: it is not).
func (q *Retries) Next(uid types.UID) (t time.Time, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t, ok = q.wake[uid]
	return t, ok
}

// Len is how many pods wait to be woken (kubelet_pod_state_entries).
func (q *Retries) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.wake)
}
