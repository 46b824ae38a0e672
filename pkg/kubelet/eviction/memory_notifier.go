package eviction

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
)

// The memory threshold notification, as the kubelet's
// memory_threshold_notifier.go: on cgroup v1 the kernel signals an eventfd
// when the root memory cgroup's memory.usage_in_bytes crosses a level
// registered through cgroup.event_control. A level is set where a
// memory.available threshold is met, so a fast allocation starts a round
// when it crosses the threshold rather than at the next housekeeping
// period. The levels depend on the inactive file pages, which move: they
// are re-armed after every round.

// ErrNoMemoryNotification is wrapped by NewMemoryNotifier's error where the
// kernel offers no memory threshold notification: cgroup v2 (which has no
// cgroup.event_control; the kubelet, too, goes without it there) or a root
// memory cgroup without the files it needs.
var ErrNoMemoryNotification = errors.New("eviction: no memory threshold notification")

// usageWatch is a set of usage levels registered with the kernel: the
// system-call part of the notifier, behind an interface so that the
// notifier's arm/notify/stop logic is tested with a fake.
type usageWatch interface {
	// Wait blocks until the usage crossed one of the levels, in either
	// direction, and returns true; or until Wake was called, and returns
	// false. An error means the watch is broken: no more Waits.
	Wait() (bool, error)
	// Wake makes the Wait in progress, or the next one, return false. It
	// may be called while Wait blocks in another goroutine, not after
	// Close.
	Wake()
	// Close unregisters the levels and releases what the watch holds;
	// called once, after the last Wait returned.
	Close() error
}

// armFunc registers levels (bytes) of memory.usage_in_bytes of the memory
// cgroup directory dir.
type armFunc func(dir string, levels []int64) (usageWatch, error)

// MemoryNotifier sends on Crossed when the node's memory usage crosses a
// level where a memory.available threshold is met (or unmet: the kernel
// signals both directions, the round that follows sorts it out).
//
// It has one owner, the eviction loop, which calls Rearm after each round
// and Stop when it ends; they are not safe for concurrent use. The one
// goroutine it runs, the waiter of the armed watch, is stopped (woken,
// waited for, its file descriptors closed) by the next Rearm that arms
// other levels and by Stop; a notifier whose owner does not call Stop
// leaks it.
type MemoryNotifier struct {
	dir        string      // the root memory cgroup
	thresholds []Threshold // those on memory.available
	arm        armFunc
	// crossed has a buffer of one: a notification pending is enough, the
	// round it starts reads the memory anew; the waiter never blocks on it.
	crossed chan struct{}
	armed   *armedWatch // nil: nothing armed
}

// armedWatch is a watch, the levels it was armed at, and its waiter.
type armedWatch struct {
	watch  usageWatch
	levels []int64
	done   chan struct{} // closed when the waiter returned
}

// NewMemoryNotifier returns the notifier of the memory.available
// thresholds among ts, nil if there is none. Nothing is armed before the
// first Rearm. Its error wraps ErrNoMemoryNotification on cgroup v2 or
// when the root memory cgroup lacks cgroup.event_control,
// memory.usage_in_bytes or memory.stat.
func NewMemoryNotifier(n Node, ts []Threshold) (*MemoryNotifier, error) {
	var mem []Threshold
	for _, t := range ts {
		if t.Signal == SignalMemoryAvailable {
			mem = append(mem, t)
		}
	}
	if len(mem) == 0 {
		return nil, nil
	}
	if n.CgroupV2 {
		return nil, fmt.Errorf("%w: cgroup v2 has no cgroup.event_control", ErrNoMemoryNotification)
	}
	dir := filepath.Join(n.CgroupMount, "memory")
	for _, f := range []string{"cgroup.event_control", "memory.usage_in_bytes", "memory.stat"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoMemoryNotification, err)
		}
	}
	return newMemoryNotifier(dir, mem, armEventfd), nil
}

func newMemoryNotifier(dir string, mem []Threshold, arm armFunc) *MemoryNotifier {
	return &MemoryNotifier{dir: dir, thresholds: mem, arm: arm, crossed: make(chan struct{}, 1)}
}

// Crossed receives when a level was crossed since the last receive.
func (m *MemoryNotifier) Crossed() <-chan struct{} { return m.crossed }

// Rearm sets the levels from a round's observations and the root cgroup's
// inactive file pages now (memory.stat's total_inactive_file), and
// registers them unless they are those armed. They move with the inactive
// file pages nearly every round, and are armed anew each time (a few
// syscalls) rather than every 10 s as the kubelet's: a level left stale
// for longer would let a periodic round, not the notification, see a fast
// allocation first. The new levels are armed
// before the old are disarmed, so no crossing falls between the two; if
// arming fails the old levels stay armed. A round that did not observe
// memory.available changes nothing.
func (m *MemoryNotifier) Rearm(obs Observations) error {
	o, ok := obs[SignalMemoryAvailable]
	if !ok {
		return nil
	}
	stat, err := cgroups.ReadStat(filepath.Join(m.dir, "memory.stat"))
	if err != nil {
		return fmt.Errorf("memory threshold notification: %w", err)
	}
	levels := usageLevels(m.thresholds, o.Capacity, stat["total_inactive_file"])
	if m.armed != nil && slices.Equal(m.armed.levels, levels) && !isClosed(m.armed.done) {
		return nil
	}
	if len(levels) == 0 {
		m.disarm()
		return nil
	}
	w, err := m.arm(m.dir, levels)
	if err != nil {
		return fmt.Errorf("arm memory threshold notification at usage %v: %w", levels, err)
	}
	if m.armed == nil {
		klog.Infof("Eviction: memory threshold notification armed on %s at usage %v bytes", m.dir, levels)
	} else {
		klog.V(4).Infof("Eviction: memory threshold notification re-armed at usage %v bytes", levels)
	}
	m.disarm()
	m.armed = &armedWatch{watch: w, levels: levels, done: make(chan struct{})}
	go m.wait(m.armed)
	return nil
}

// Stop disarms the notification and waits for its goroutine to return.
// Idempotent.
func (m *MemoryNotifier) Stop() { m.disarm() }

func (m *MemoryNotifier) disarm() {
	a := m.armed
	if a == nil {
		return
	}
	m.armed = nil
	a.watch.Wake()
	<-a.done
	if err := a.watch.Close(); err != nil {
		klog.V(2).Infof("Eviction: close memory threshold notification: %v", err)
	}
}

// wait is the armed watch's waiter: it forwards each crossing until the
// watch is woken or breaks. A broken watch is re-armed by the next Rearm.
func (m *MemoryNotifier) wait(a *armedWatch) {
	defer close(a.done)
	for {
		crossed, err := a.watch.Wait()
		if err != nil {
			klog.Warningf("Eviction: memory threshold notification at usage %v: %v; re-armed after the next round", a.levels, err)
			return
		}
		if !crossed {
			return
		}
		select {
		case m.crossed <- struct{}{}:
		default: // one already pending
		}
	}
}

// usageLevels are the root memory cgroup usages at which the
// memory.available thresholds ts are met: memory.available is capacity
// minus the working set, usage minus the inactive file pages, so a
// threshold of q is met above capacity - q + inactiveFile. Sorted, without
// duplicates. A level not above 0 (a threshold met whatever the usage)
// has nothing to wait for and is left out; so are other signals.
func usageLevels(ts []Threshold, capacity, inactiveFile int64) []int64 {
	var out []int64
	for _, t := range ts {
		if t.Signal != SignalMemoryAvailable {
			continue
		}
		if l := capacity - t.Value.of(capacity) + inactiveFile; l > 0 {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
