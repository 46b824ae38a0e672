package kuberuntime

import (
	"sync"
	"time"

	"k8s.io/utils/clock"

	pkgbackoff "github.com/classic-kubelet/kubelet/pkg/backoff"
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
// failing (one backoff per pod, in its PodRecord): it crashed, Docker could
// not start it, or it could not even be created (bad config, image never
// pulled, infra or volume setup failed). The first retry is immediate, each
// later one waits twice as long as the one before (from the moment of the
// failure), up to max. Its key includes the spec hash, so a changed spec
// starts afresh. The delays are the agent's one back-off type
// (pkg/backoff); what it adds is the date of a failure that left no
// container to date it by.
type backoff struct {
	delays *pkgbackoff.Backoff[containerKey]

	mu sync.Mutex // guards failedAt
	// failedAt is when the last attempt of a key failed before a container
	// existed (absent once one was made): there is no dead instance to
	// date it by.
	failedAt map[containerKey]time.Time
}

// containerKey is a container (or "POD", the sandbox) of one spec: a
// changed spec is another key.
type containerKey struct{ container, hash string }

func newBackoff(initial, max time.Duration, clk clock.PassiveClock) *backoff {
	initial, max = BackoffBounds(initial, max)
	return &backoff{delays: pkgbackoff.New[containerKey](pkgbackoff.Policy{Initial: initial, Max: max, ForgetAfter: 2 * max}, clk),
		failedAt: map[containerKey]time.Time{}}
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

func backoffKey(container, hash string) containerKey { return containerKey{container, hash} }

// waiting reports whether a container must wait longer before its next
// attempt, and until when. last is its newest instance with the key's hash,
// nil if there is none.
func (b *backoff) waiting(key containerKey, last *kubecontainer.ContainerState, now time.Time) (time.Time, bool) {
	delay := b.delays.Get(key)
	b.mu.Lock()
	failedAt, failed := b.failedAt[key]
	b.mu.Unlock()
	if delay == 0 && !failed {
		return time.Time{}, false
	}
	var from time.Time
	switch {
	case failed && (last == nil || failedAt.After(last.CreatedAt)):
		from = failedAt
	case last == nil:
		return time.Time{}, false
	case !last.StartedAt.IsZero() && last.FinishedAt.Sub(last.StartedAt) >= backoffReset:
		b.delays.Reset(key)
		return time.Time{}, false
	default:
		from = last.ExitedAt()
	}
	until := from.Add(delay)
	return until, now.Before(until)
}

// pending reports whether the last attempt under key failed before a
// container existed: the next attempt is a retry.
func (b *backoff) pending(key containerKey) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.failedAt[key]
	return ok
}

// restarted records a retry, lengthening the next wait.
func (b *backoff) restarted(key containerKey, now time.Time) { b.delays.Next(key, now) }

// failed records an attempt that failed before a container existed, and
// returns when the next may be made: nothing of Docker's will change to
// wake the pod then, so its caller returns it in Result.RetryAt, for the
// Kubelet's retry queue. The first such failure is retried at once, as a
// first crash is.
func (b *backoff) failed(key containerKey, now time.Time) (next time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failedAt[key] = now
	return now.Add(b.delays.Get(key))
}

// created records that an attempt made its container: from now on the
// instance dates the failures.
func (b *backoff) created(key containerKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.failedAt, key)
}

// gc forgets the keys whose last failure is older than twice the longest
// delay.
func (b *backoff) gc(now time.Time) {
	b.delays.GC()
	forget := b.delays.Policy().ForgetAfter
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, t := range b.failedAt {
		if now.Sub(t) > forget {
			delete(b.failedAt, k)
		}
	}
}

// len is the number of keys the back-off holds.
func (b *backoff) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.delays.Len()
	for k := range b.failedAt {
		if b.delays.Get(k) == 0 {
			n++
		}
	}
	return n
}
