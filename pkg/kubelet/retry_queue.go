package kubelet

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// retryQueue wakes pods whose back-off ends: each pod at the earliest time
// asked for. One goroutine, run by the Kubelet, owns its timer, so nothing
// fires after Run has returned (time.AfterFunc could).
type retryQueue struct {
	clock clock.Clock
	kick  chan struct{} // cap 1: "the earliest time may have changed"

	mu   sync.Mutex // guards wake
	wake map[types.UID]time.Time
}

func newRetryQueue(clk clock.Clock) *retryQueue {
	return &retryQueue{clock: clk, kick: make(chan struct{}, 1), wake: map[types.UID]time.Time{}}
}

// add asks for uid to be woken at t (or earlier, if already asked).
func (q *retryQueue) add(uid types.UID, t time.Time) {
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

// forget drops a pod that is gone.
func (q *retryQueue) forget(uid types.UID) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.wake, uid)
}

// due removes and returns the pods due at now, and the next time after.
func (q *retryQueue) due(now time.Time) ([]types.UID, time.Time) {
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

// run hands due pods to fire until ctx is cancelled.
func (q *retryQueue) run(ctx context.Context, fire func([]types.UID)) {
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
