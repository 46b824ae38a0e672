// Package backoff spaces out the retries of what keeps failing: each
// failure of a key doubles the wait before its next attempt, from an
// initial delay up to a maximum, until the key is reset (it succeeded) or,
// if the policy says so, its last failure is old enough to be forgotten.
//
// It is the agent's one exponential back-off: reconnecting to Docker's
// event stream, registering the Node, rereading the etcd source, retrying
// checkpoints, relisting while Docker fails and pulling an image again all
// use it, each with its own policy. Its shape is client-go's
// flowcontrol.Backoff (Next, Get, IsInBackOffSince, Reset, GC), with three
// differences the agent needs: keys are any comparable type (a struct of
// pod UID, container name and spec hash, so a pod's keys are dropped with
// ResetFunc rather than by scanning string prefixes), forgetting an idle
// key is the policy's choice rather than always twice the maximum (a loop
// that resets on success never forgets; a pull back-off keeps doubling
// however long the pull took), and Next returns the delay it set.
package backoff

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Policy is how a back-off grows.
type Policy struct {
	// Initial is the delay after a key's first failure, and after each
	// failure that starts it over.
	Initial time.Duration
	// Max caps the delay: each later failure doubles it up to Max.
	Max time.Duration
	// ForgetAfter, if positive, forgets a key whose last failure is older
	// than this: its next failure starts over at Initial, IsInBackOffSince
	// reports it free, and GC drops it. Zero: a key lasts until Reset.
	// (client-go's flowcontrol.Backoff forgets after 2 × Max.)
	ForgetAfter time.Duration
}

// One is the key of a back-off that spaces a single sequence of attempts,
// such as a reconnect loop.
type One struct{}

// Backoff holds the delays of the keys that failed. It is safe for
// concurrent use.
type Backoff[K comparable] struct {
	policy Policy
	clock  clock.PassiveClock

	mu      sync.Mutex // guards entries
	entries map[K]*entry
}

type entry struct {
	delay time.Duration // before the next attempt
	last  time.Time     // of the last failure (Next)
}

// New returns an empty back-off under p, which reads the time from clk
// (IsInBackOffSince, GC).
func New[K comparable](p Policy, clk clock.PassiveClock) *Backoff[K] {
	return &Backoff[K]{policy: p, clock: clk, entries: map[K]*entry{}}
}

// Policy is the back-off's policy.
func (b *Backoff[K]) Policy() Policy { return b.policy }

// forgotten reports whether e's last failure is too old to count at now;
// callers hold mu.
func (b *Backoff[K]) forgotten(e *entry, now time.Time) bool {
	return b.policy.ForgetAfter > 0 && now.Sub(e.last) > b.policy.ForgetAfter
}

// Next records a failure of key at the time at and returns the delay before
// its next attempt: Initial for its first failure (or the first after it
// was reset or forgotten), twice the previous delay up to Max after that.
func (b *Backoff[K]) Next(key K, at time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	switch {
	case !ok:
		e = &entry{delay: b.policy.Initial}
		b.entries[key] = e
	case b.forgotten(e, at):
		e.delay = b.policy.Initial
	default:
		e.delay = min(2*e.delay, b.policy.Max)
	}
	e.last = at
	return e.delay
}

// Get is key's current delay: 0 if it has not failed since it was last
// reset.
func (b *Backoff[K]) Get(key K) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return 0
}

// Until is when key's next attempt is due (its last failure plus its
// delay), and false if key is not backing off.
func (b *Backoff[K]) Until(key K) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return time.Time{}, false
	}
	return e.last.Add(e.delay), true
}

// IsInBackOffSince reports whether an attempt of key must still wait,
// counting its delay from eventTime (for a crashed container: when it
// exited) rather than from the recorded failure.
func (b *Backoff[K]) IsInBackOffSince(key K, eventTime time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.forgotten(e, eventTime) {
		return false
	}
	return b.clock.Since(eventTime) < e.delay
}

// Reset forgets key: its next failure starts over at Initial.
func (b *Backoff[K]) Reset(key K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, key)
}

// ResetFunc forgets every key for which match is true (a pod's, when it is
// gone).
func (b *Backoff[K]) ResetFunc(match func(K) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range b.entries {
		if match(k) {
			delete(b.entries, k)
		}
	}
}

// GC drops the keys the policy forgets (none without ForgetAfter).
func (b *Backoff[K]) GC() {
	if b.policy.ForgetAfter <= 0 {
		return
	}
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, e := range b.entries {
		if b.forgotten(e, now) {
			delete(b.entries, k)
		}
	}
}

// Len is the number of keys backing off.
func (b *Backoff[K]) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries)
}
