package kubelet

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

const (
	// DefaultBackoffInitial and DefaultBackoffMax are Kubernetes' crash-loop
	// back-off: the second restart waits 10 s, doubling up to 5 minutes.
	DefaultBackoffInitial = 10 * time.Second
	DefaultBackoffMax     = 300 * time.Second
	// backoffReset forgets the back-off of a container that ran this long.
	backoffReset = 10 * time.Minute
)

// backoff spaces out the restarts of a crashing container: the first restart
// is immediate, each later one waits twice as long as the one before (from
// the moment the container exited), up to max. Its key includes the spec
// hash, so a changed spec starts afresh.
type backoff struct {
	initial, max time.Duration

	mu      sync.Mutex // guards entries
	entries map[string]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

func newBackoff(initial, max time.Duration) *backoff {
	if initial <= 0 {
		initial = DefaultBackoffInitial
	}
	if max <= 0 {
		max = DefaultBackoffMax
	}
	return &backoff{initial: initial, max: max, entries: map[string]*backoffEntry{}}
}

func backoffKey(uid types.UID, container, hash string) string {
	return string(uid) + "/" + container + "/" + hash
}

// waiting reports whether a container whose last instance is last must wait
// longer before it is restarted, and until when.
func (b *backoff) waiting(key string, last *ContainerState, now time.Time) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return time.Time{}, false
	}
	if !last.StartedAt.IsZero() && last.FinishedAt.Sub(last.StartedAt) >= backoffReset {
		delete(b.entries, key)
		return time.Time{}, false
	}
	until := last.FinishedAt.Add(e.delay)
	return until, now.Before(until)
}

// restarted records a restart, lengthening the next wait.
func (b *backoff) restarted(key string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		b.entries[key] = &backoffEntry{delay: b.initial, lastUpdate: now}
		return
	}
	e.delay = min(2*e.delay, b.max)
	e.lastUpdate = now
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
