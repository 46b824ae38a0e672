package eviction

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestUsageLevels(t *testing.T) {
	for _, tc := range []struct {
		name               string
		flags              Flags
		capacity, inactive int64
		want               []int64
	}{
		// memory.available = capacity - (usage - inactive) < q
		// once usage > capacity - q + inactive.
		{"hard quantity", Flags{Hard: "memory.available<100Mi"}, 1000 * mi, 50 * mi, []int64{950 * mi}},
		{"percentage of the capacity", Flags{Hard: "memory.available<25%"}, 1024 * mi, 0, []int64{768 * mi}},
		{"hard and soft, sorted", Flags{Hard: "memory.available<100Mi", Soft: "memory.available<300Mi",
			SoftGracePeriod: "memory.available=1m"}, 1000 * mi, 20 * mi, []int64{720 * mi, 920 * mi}},
		{"equal levels once", Flags{Hard: "memory.available<256Mi", Soft: "memory.available<25%",
			SoftGracePeriod: "memory.available=1m"}, 1024 * mi, 0, []int64{768 * mi}},
		{"other signals ignored", Flags{Hard: "nodefs.available<10%,pid.available<100"}, 1000 * mi, 0, nil},
		{"met whatever the usage: nothing to wait for", Flags{Hard: "memory.available<2000Mi"}, 1000 * mi, 500 * mi, nil},
		{"minimum reclaim not counted", Flags{Hard: "memory.available<100Mi", MinimumReclaim: "memory.available=500Mi"},
			1000 * mi, 0, []int64{900 * mi}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := usageLevels(mustThresholds(t, tc.flags), tc.capacity, tc.inactive)
			if !slices.Equal(got, tc.want) {
				t.Errorf("levels %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNewMemoryNotifier(t *testing.T) {
	v1Files := map[string]string{"memory/cgroup.event_control": "", "memory/memory.usage_in_bytes": "0\n", "memory/memory.stat": ""}
	for _, tc := range []struct {
		name        string
		flags       Flags
		v2          bool
		files       map[string]string
		wantNil     bool
		wantNoNotif bool
	}{
		{"v1", Flags{Hard: "memory.available<100Mi"}, false, v1Files, false, false},
		{"no memory threshold: no notifier", Flags{Hard: "nodefs.available<10%"}, false, v1Files, true, false},
		{"v2", Flags{Hard: "memory.available<100Mi"}, true, map[string]string{"memory.stat": ""}, true, true},
		{"no cgroup.event_control", Flags{Hard: "memory.available<100Mi"}, false,
			map[string]string{"memory/memory.usage_in_bytes": "0\n", "memory/memory.stat": ""}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			n, err := NewMemoryNotifier(Node{CgroupMount: root, CgroupV2: tc.v2}, mustThresholds(t, tc.flags))
			if got := errors.Is(err, ErrNoMemoryNotification); got != tc.wantNoNotif || (err != nil && !got) {
				t.Errorf("error %v, want ErrNoMemoryNotification: %v", err, tc.wantNoNotif)
			}
			if (n == nil) != tc.wantNil {
				t.Errorf("notifier %v, want nil: %v", n, tc.wantNil)
			}
			if n != nil {
				if n.dir != filepath.Join(root, "memory") || len(n.thresholds) != 1 {
					t.Errorf("notifier on %s for %v, want the root memory cgroup and the memory threshold", n.dir, n.thresholds)
				}
				n.Stop()
			}
		})
	}
}

// fakeArmer arms fakeWatches and records, in order, what is armed and
// closed; its watches' Waits are driven by the test.
type fakeArmer struct {
	mu      sync.Mutex
	calls   []string     // "arm [levels]", "close [levels]"
	watches []*fakeWatch // every watch armed
	armErr  error        // returned by the next arms
}

func (f *fakeArmer) arm(dir string, levels []int64) (usageWatch, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armErr != nil {
		return nil, f.armErr
	}
	w := &fakeWatch{f: f, levels: levels, results: make(chan error), woken: make(chan struct{})}
	f.calls = append(f.calls, fmt.Sprint("arm ", levels))
	f.watches = append(f.watches, w)
	return w, nil
}

func (f *fakeArmer) takeCalls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.calls
	f.calls = nil
	return out
}

func (f *fakeArmer) last() *fakeWatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.watches[len(f.watches)-1]
}

// fakeWatch's Wait returns true for each nil error sent on results (the
// send returns once Wait took it), the error for another, false once
// woken.
type fakeWatch struct {
	f        *fakeArmer
	levels   []int64
	results  chan error
	woken    chan struct{}
	wakeOnce sync.Once
	closed   bool // guarded by f.mu
}

var _ usageWatch = (*fakeWatch)(nil)

func (w *fakeWatch) Wait() (bool, error) {
	select {
	case <-w.woken:
		return false, nil
	case err := <-w.results:
		return err == nil, err
	}
}

func (w *fakeWatch) Wake() { w.wakeOnce.Do(func() { close(w.woken) }) }

func (w *fakeWatch) Close() error {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	if w.closed {
		panic("fakeWatch closed twice")
	}
	w.closed = true
	w.f.calls = append(w.f.calls, fmt.Sprint("close ", w.levels))
	return nil
}

// fire has the watch see a crossing; it returns once its Wait has it.
func (w *fakeWatch) fire(t *testing.T) {
	t.Helper()
	select {
	case w.results <- nil:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter is not waiting on the watch")
	}
}

func receive(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s", what)
	}
}

func notPending(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
		t.Fatalf("%s pending", what)
	default:
	}
}

// newFakeNotifier is a notifier of memory.available<100Mi on a temporary
// root cgroup whose total_inactive_file is set by the returned function.
func newFakeNotifier(t *testing.T) (*MemoryNotifier, *fakeArmer, func(inactive int64)) {
	t.Helper()
	dir := t.TempDir()
	f := &fakeArmer{}
	n := newMemoryNotifier(dir, mustThresholds(t, Flags{Hard: "memory.available<100Mi"}), f.arm)
	t.Cleanup(n.Stop)
	setInactive := func(inactive int64) {
		writeFiles(t, dir, map[string]string{"memory.stat": fmt.Sprintf("cache 1\ninactive_file 2\ntotal_inactive_file %d\n", inactive)})
	}
	setInactive(0)
	return n, f, setInactive
}

func rearm(t *testing.T, n *MemoryNotifier, obs Observations) {
	t.Helper()
	if err := n.Rearm(obs); err != nil {
		t.Fatal(err)
	}
}

func checkCalls(t *testing.T, f *fakeArmer, want ...string) {
	t.Helper()
	if got := f.takeCalls(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
}

func TestMemoryNotifierArms(t *testing.T) {
	n, f, setInactive := newFakeNotifier(t)
	rearm(t, n, Observations{SignalNodeFsAvailable: {Available: 1, Capacity: 2}})
	checkCalls(t, f) // memory not observed: nothing to arm from

	setInactive(50 * mi)
	rearm(t, n, memObs(500*mi))
	checkCalls(t, f, fmt.Sprint("arm ", []int64{950 * mi}))
	rearm(t, n, memObs(400*mi)) // what is available does not move the levels
	checkCalls(t, f)

	// The inactive file pages moved: the new level armed before the old
	// is released, so no crossing falls between the two.
	setInactive(60 * mi)
	rearm(t, n, memObs(400*mi))
	checkCalls(t, f, fmt.Sprint("arm ", []int64{960 * mi}), fmt.Sprint("close ", []int64{950 * mi}))

	// Arming fails: the old level stays armed, the error is returned, the
	// next round tries again.
	setInactive(70 * mi)
	f.armErr = errors.New("EBADF")
	if err := n.Rearm(memObs(400 * mi)); err == nil {
		t.Error("Rearm: no error from a failed arm")
	}
	checkCalls(t, f)
	f.last().fire(t)
	receive(t, n.Crossed(), "notification from the level still armed")
	f.armErr = nil
	rearm(t, n, memObs(400*mi))
	checkCalls(t, f, fmt.Sprint("arm ", []int64{970 * mi}), fmt.Sprint("close ", []int64{960 * mi}))

	// Levels met whatever the usage (a capacity below the threshold):
	// nothing to wait for, disarmed.
	rearm(t, n, Observations{SignalMemoryAvailable: {Available: 10 * mi, Capacity: 20 * mi}})
	checkCalls(t, f, fmt.Sprint("close ", []int64{970 * mi}))

	n.Stop()
	n.Stop()
	checkCalls(t, f)
}

func TestMemoryNotifierNotifies(t *testing.T) {
	n, f, _ := newFakeNotifier(t)
	rearm(t, n, memObs(500*mi))
	w := f.last()
	notPending(t, n.Crossed(), "notification before a crossing")
	w.fire(t)
	receive(t, n.Crossed(), "notification of a crossing")

	// Crossings while a round runs are coalesced into one pending
	// notification, and never block the waiter: the third fire returns
	// only once the waiter is back in Wait.
	w.fire(t)
	w.fire(t)
	w.fire(t)
	n.Stop() // waits for the waiter, so its last send is done
	checkCalls(t, f, fmt.Sprint("arm ", []int64{900 * mi}), fmt.Sprint("close ", []int64{900 * mi}))
	receive(t, n.Crossed(), "pending notification")
	notPending(t, n.Crossed(), "second notification")
}

func TestMemoryNotifierBrokenWatchRearmed(t *testing.T) {
	n, f, _ := newFakeNotifier(t)
	rearm(t, n, memObs(500*mi))
	w := f.last()
	done := n.armed.done
	w.results <- errors.New("epoll_wait: EBADF")
	receive(t, done, "waiter exit after the watch broke")
	notPending(t, n.Crossed(), "notification from a broken watch")

	// Same levels, but the watch is broken: armed anew, the broken one
	// released.
	rearm(t, n, memObs(500*mi))
	checkCalls(t, f, fmt.Sprint("arm ", []int64{900 * mi}), fmt.Sprint("arm ", []int64{900 * mi}), fmt.Sprint("close ", []int64{900 * mi}))
	if !w.closed || f.last() == w {
		t.Errorf("the broken watch is closed: %v, replaced: %v", w.closed, f.last() != w)
	}
	f.last().fire(t)
	receive(t, n.Crossed(), "notification from the new watch")
}
