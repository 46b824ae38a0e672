// Package await lets a unit test wait for evidence that the code under test
// got somewhere, rather than for some time: a fake clock that tells when the
// code starts waiting on it (FakeClock), a goroutine parked in a function
// (Parked), and, where nothing better tells, a condition polled (True).
// None of them sleeps a fixed time; each gives up after Timeout, far longer
// than any step takes, so a test that would hang fails instead.
package await

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
)

// Timeout bounds every wait: what a test awaits is there in milliseconds,
// unless the code is wrong.
const Timeout = 10 * time.Second

// pollInterval spaces the checks of a polled condition.
const pollInterval = time.Millisecond

// True waits until cond holds, checking it every millisecond: for evidence
// nothing signals (a file written in the background, a peer's state). It
// fails the test with what after Timeout.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Timeout, what)
		}
		time.Sleep(pollInterval) // the one poll of the tests that use this package
	}
}

// Parked waits until n goroutines are blocked (in a channel operation, a
// select, a lock, a sync.Cond or a WaitGroup) with every one of frames in
// their stacks, as runtime.Stack prints them (e.g.
// "singleflight.(*Group).Do("). A goroutine woken by a send is runnable
// until it runs, so it no longer counts: Parked is evidence that the
// goroutines waiting there have nothing left to do.
func Parked(t testing.TB, n int, frames ...string) {
	t.Helper()
	True(t, fmt.Sprintf("%d goroutines parked in %s", n, strings.Join(frames, " under ")),
		func() bool { return ParkedIn(frames...) >= n })
}

// ParkedIn counts the blocked goroutines with every one of frames in their
// stacks.
func ParkedIn(frames ...string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
next:
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if !blocked(header) {
			continue
		}
		for _, f := range frames {
			if !strings.Contains(g, f) {
				continue next
			}
		}
		count++
	}
	return count
}

// blocked reports whether a goroutine header ("goroutine 7 [chan
// receive]:") shows it waiting for another goroutine.
func blocked(header string) bool {
	for _, state := range []string{"[chan receive", "[chan send", "[select", "[sync.Mutex.Lock", "[sync.RWMutex",
		"[sync.Cond.Wait", "[sync.WaitGroup.Wait", "[semacquire"} {
		if strings.Contains(header, state) {
			return true
		}
	}
	return false
}

// FakeClock is k8s.io/utils/clock/testing's fake clock that also records
// every wait the code under test starts on it (After, Tick, NewTimer,
// Timer.Reset, NewTicker, AfterFunc), so a test steps it once the code
// waits, and knows for how long it waits, without polling.
type FakeClock struct {
	*testingclock.FakeClock

	mu      sync.Mutex      // guards waits
	waits   []time.Duration // every wait started, in order
	changed chan struct{}   // cap 1: a wait was started
}

var _ clock.WithTicker = (*FakeClock)(nil)

// NewFakeClock returns a fake clock at t.
func NewFakeClock(t time.Time) *FakeClock {
	return &FakeClock{FakeClock: testingclock.NewFakeClock(t), changed: make(chan struct{}, 1)}
}

func (c *FakeClock) note(d time.Duration) {
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.mu.Unlock()
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// After implements clock.Clock, recording the wait.
func (c *FakeClock) After(d time.Duration) <-chan time.Time {
	ch := c.FakeClock.After(d)
	c.note(d)
	return ch
}

// Tick implements clock.Clock, recording the wait.
func (c *FakeClock) Tick(d time.Duration) <-chan time.Time {
	ch := c.FakeClock.Tick(d)
	c.note(d)
	return ch
}

// NewTimer implements clock.Clock, recording the wait and each Reset.
func (c *FakeClock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.note(d)
	return &timer{Timer: t, c: c}
}

// AfterFunc implements clock.WithDelayedExecution, recording the wait.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := c.FakeClock.AfterFunc(d, f)
	c.note(d)
	return &timer{Timer: t, c: c}
}

// NewTicker implements clock.WithTicker, recording the wait.
func (c *FakeClock) NewTicker(d time.Duration) clock.Ticker {
	t := c.FakeClock.NewTicker(d)
	c.note(d)
	return t
}

type timer struct {
	clock.Timer
	c *FakeClock
}

func (t *timer) Reset(d time.Duration) bool {
	active := t.Timer.Reset(d)
	t.c.note(d)
	return active
}

// Waits is how many waits the code has started on the clock so far.
func (c *FakeClock) Waits() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waits)
}

// AwaitWait waits until the code has started its nth wait on the clock
// (counting from 1 since the clock was made; Waits tells how many there
// were) and returns for how long that one waits.
func (c *FakeClock) AwaitWait(t testing.TB, n int) time.Duration {
	t.Helper()
	timeout := time.After(Timeout)
	for {
		c.mu.Lock()
		if len(c.waits) >= n {
			d := c.waits[n-1]
			c.mu.Unlock()
			return d
		}
		c.mu.Unlock()
		select {
		case <-c.changed:
		case <-timeout:
			t.Fatalf("timed out after %v waiting for wait %d on the clock (%d started)", Timeout, n, c.Waits())
		}
	}
}

// AwaitWaiters waits until something waits on the clock (HasWaiters): a
// timer, a ticker or an After not yet fired.
func (c *FakeClock) AwaitWaiters(t testing.TB) {
	t.Helper()
	timeout := time.After(Timeout)
	for !c.HasWaiters() {
		select {
		case <-c.changed:
		case <-timeout:
			t.Fatalf("timed out after %v waiting for a waiter on the clock", Timeout)
		}
	}
}
