package kuberuntime

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

const (
	// DefaultBackoffInitial and DefaultBackoffMax are Kubernetes' crash-loop
	// back-off: the second restart waits 10 s, doubling up to 5 minutes.
	DefaultBackoffInitial = 10 * time.Second
	DefaultBackoffMax     = 300 * time.Second
	// backoffReset forgets the back-off of a container that ran this long.
	backoffReset = 10 * time.Minute
)

// backoff spaces out the attempts to run a pod's container that keeps
// failing (one backoff per pod, in its PodRecord): it
// crashed, Docker could not start it, or it could not even be created (bad
// config, image never pulled, infra or volume setup failed). The first retry
// is immediate, each later one waits twice as long as the one before (from
// the moment of the failure), up to max. Its key includes the spec hash, so
// a changed spec starts afresh. It goes with the pod's record.
type backoff struct {
	initial, max time.Duration

	mu      sync.Mutex // guards entries
	entries map[string]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration // wait before the next attempt
	lastUpdate time.Time     // the last attempt
	// failedAt is when the last attempt failed before a container existed
	// (zero once one was made): there is no dead instance to date it by.
	failedAt time.Time
}

func newBackoff(initial, max time.Duration) *backoff {
	initial, max = BackoffBounds(initial, max)
	return &backoff{initial: initial, max: max, entries: map[string]*backoffEntry{}}
}

// BackoffBounds are the back-off's first and longest delays for the ones
// asked for: 0 (or less) is the default.
func BackoffBounds(initial, max time.Duration) (time.Duration, time.Duration) {
	if initial <= 0 {
		initial = DefaultBackoffInitial
	}
	if max <= 0 {
		max = DefaultBackoffMax
	}
	return initial, max
}

func backoffKey(uid types.UID, container, hash string) string {
	return string(uid) + "/" + container + "/" + hash
}

// waiting reports whether a container must wait longer before its next
// attempt, and until when. last is its newest instance with the key's hash,
// nil if there is none.
func (b *backoff) waiting(key string, last *kubecontainer.ContainerState, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return time.Time{}, false
	}
	var failed time.Time
	switch {
	case !e.failedAt.IsZero() && (last == nil || e.failedAt.After(last.CreatedAt)):
		failed = e.failedAt
	case last == nil:
		return time.Time{}, false
	case !last.StartedAt.IsZero() && last.FinishedAt.Sub(last.StartedAt) >= backoffReset:
		delete(b.entries, key)
		return time.Time{}, false
	default:
		failed = last.ExitedAt()
	}
	until := failed.Add(e.delay)
	return until, now.Before(until)
}

// pending reports whether the last attempt under key failed before a
// container existed: the next attempt is a retry.
func (b *backoff) pending(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	return ok && !e.failedAt.IsZero()
}

// restarted records a retry, lengthening the next wait.
func (b *backoff) restarted(key string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		b.entries[key] = &backoffEntry{delay: b.initial, lastUpdate: now}
		return
	}
	if e.delay == 0 {
		e.delay = b.initial
	} else {
		e.delay = min(2*e.delay, b.max)
	}
	e.lastUpdate = now
}

// failed records an attempt that failed before a container existed, and
// returns when the next may be made: nothing of Docker's will change to
// wake the pod then, so its caller returns it in Result.RetryAt, for the
// Kubelet's retry queue. The first such
// failure is retried at once, as a first crash is.
func (b *backoff) failed(key string, now time.Time) (next time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		e = &backoffEntry{}
		b.entries[key] = e
	}
	e.failedAt, e.lastUpdate = now, now
	return now.Add(e.delay)
}

// created records that an attempt made its container: from now on the
// instance dates the failures.
func (b *backoff) created(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		e.failedAt = time.Time{}
	}
}

// gc forgets entries not used for twice the longest delay.
func (b *backoff) gc(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, e := range b.entries {
		if now.Sub(e.lastUpdate) > 2*b.max {
			delete(b.entries, k)
		}
	}
}
