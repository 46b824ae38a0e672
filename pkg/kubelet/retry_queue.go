package kubelet

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// retryQueue wakes pods whose back-off ends: each pod at the earliest time
// asked for. One goroutine, run by the Kubelet, owns its timer, so nothing
// fires after Run has returned (time.AfterFunc could).
type retryQueue struct {
	kick chan struct{} // cap 1: "the earliest time may have changed"

	mu   sync.Mutex // guards wake
	wake map[types.UID]time.Time
}

func newRetryQueue() *retryQueue {
	return &retryQueue{kick: make(chan struct{}, 1), wake: map[types.UID]time.Time{}}
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
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		uids, next := q.due(time.Now())
		if len(uids) > 0 {
			fire(uids)
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = time.Until(next)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-q.kick:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}
