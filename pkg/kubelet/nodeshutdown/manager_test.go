package nodeshutdown

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

// fakeLogind is logind as the manager sees it: an inhibit delay, the
// inhibitors taken and released, and a signal channel the test feeds.
type fakeLogind struct {
	mu         sync.Mutex
	delay      time.Duration
	applyDelay bool // an override takes effect
	overridden time.Duration
	held       int // inhibitors held
	taken      int // inhibitors ever taken
	closed     bool
	signals    chan bool
}

type fakeLock struct{ l *fakeLogind }

func (f fakeLock) Close() error {
	f.l.mu.Lock()
	defer f.l.mu.Unlock()
	f.l.held--
	return nil
}

func (l *fakeLogind) InhibitDelayMax(context.Context) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delay, nil
}

func (l *fakeLogind) OverrideInhibitDelayMax(_ context.Context, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.overridden = d
	if l.applyDelay {
		l.delay = d
	}
	return nil
}

func (l *fakeLogind) InhibitShutdown(_ context.Context, who, why string) (io.Closer, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held++
	l.taken++
	return fakeLock{l}, nil
}

func (l *fakeLogind) WatchShutdown(context.Context) (<-chan bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.signals, nil
}

func (l *fakeLogind) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	return nil
}

func (l *fakeLogind) state() (held, taken int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held, l.taken
}

// fakePods records each termination on a channel; a pod stops when the
// test closes its channel.
type fakePods struct {
	pods       []*v1.Pod
	terminated chan termination
	mu         sync.Mutex
	stopped    map[types.UID]chan struct{}
}

type termination struct {
	uid types.UID
	t   lifecycle.Termination
}

func newFakePods(pods ...*v1.Pod) *fakePods {
	p := &fakePods{pods: pods, terminated: make(chan termination, 16), stopped: map[types.UID]chan struct{}{}}
	for _, pod := range pods {
		p.stopped[pod.UID] = make(chan struct{})
	}
	return p
}

func (p *fakePods) ActivePods() []*v1.Pod { return p.pods }

func (p *fakePods) TerminatePod(uid types.UID, t lifecycle.Termination) <-chan struct{} {
	p.terminated <- termination{uid, t}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped[uid]
}

func (p *fakePods) stop(uid types.UID) { close(p.stopped[uid]) }

type fakeGauges struct {
	mu         sync.Mutex
	start, end time.Time
}

func (g *fakeGauges) SetShutdownTimes(start, end time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.start, g.end = start, end
}

func (g *fakeGauges) get() (time.Time, time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.start, g.end
}

// next is the next termination asked for; none within a while fails.
func (p *fakePods) next(t *testing.T) termination {
	t.Helper()
	select {
	case got := <-p.terminated:
		return got
	case <-time.After(10 * time.Second):
		t.Fatal("no termination")
		return termination{}
	}
}

// none checks that no termination is pending now.
func (p *fakePods) none(t *testing.T) {
	t.Helper()
	select {
	case got := <-p.terminated:
		t.Fatalf("unexpected termination of %s", got.uid)
	default:
	}
}

// until yields until cond holds (the manager's goroutine runs meanwhile).
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

type harness struct {
	m      *Manager
	bus    *fakeLogind
	pods   *fakePods
	gauges *fakeGauges
	clock  *clocktesting.FakeClock
	dials  int
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t *testing.T, bus *fakeLogind, pods *fakePods, dialErr error) *harness {
	t.Helper()
	h := &harness{bus: bus, pods: pods, gauges: &fakeGauges{}, clock: clocktesting.NewFakeClock(time.Unix(1000, 0)), done: make(chan struct{})}
	var mu sync.Mutex
	h.m = New(Config{Table: Table(10*time.Second, 4*time.Second, nil), Node: "n", StateFile: filepath.Join(t.TempDir(), "state"), Clock: h.clock},
		Deps{Dial: func() (Logind, error) {
			mu.Lock()
			defer mu.Unlock()
			h.dials++
			if dialErr != nil {
				return nil, dialErr
			}
			return bus, nil
		}, Pods: pods, Gauges: h.gauges})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { defer close(h.done); h.m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-h.done })
	return h
}

func TestRunWithoutLogindReturns(t *testing.T) {
	h := start(t, nil, newFakePods(), errors.New("no system bus"))
	select {
	case <-h.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return without a bus")
	}
	if h.m.ShuttingDown() || h.m.Err() != nil {
		t.Error("shutting down without a bus")
	}
}

func TestRunRaisesInhibitDelay(t *testing.T) {
	for _, tc := range []struct {
		name    string
		delay   time.Duration
		applies bool
		held    int
	}{
		{"long enough: left alone", 30 * time.Second, false, 1},
		{"raised", 5 * time.Second, true, 1},
		{"cannot be raised: off", 5 * time.Second, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bus := &fakeLogind{delay: tc.delay, applyDelay: tc.applies, signals: make(chan bool)}
			h := start(t, bus, newFakePods(), nil)
			if tc.held == 0 {
				// The re-reads wait on the clock: step through them.
				for {
					select {
					case <-h.done:
					default:
						if h.clock.HasWaiters() {
							h.clock.Step(2 * time.Second)
						}
						runtime.Gosched()
						continue
					}
					break
				}
				if held, _ := bus.state(); held != 0 || !bus.closed {
					t.Errorf("held %d inhibitors, closed %v; want none, closed", held, bus.closed)
				}
				return
			}
			if tc.applies {
				until(t, "the re-read", h.clock.HasWaiters)
				h.clock.Step(100 * time.Millisecond)
			}
			until(t, "the inhibitor", func() bool { held, _ := bus.state(); return held == tc.held })
			if tc.applies && bus.overridden != 10*time.Second {
				t.Errorf("overridden to %v, want 10s", bus.overridden)
			}
			if !tc.applies && bus.overridden != 0 {
				t.Errorf("overridden to %v, want left alone", bus.overridden)
			}
		})
	}
}

// A shutdown stops the non-critical pods first, within the table's 6 s
// (or their own shorter grace), then the critical ones within 4 s; the
// node is shutting down throughout and refuses new pods; the inhibitor is
// released at the end. A cancellation takes it again.
func TestShutdownStopsPodsByPriorityThenReleases(t *testing.T) {
	app := pod("app", nil, "", nil)
	quick := pod("quick", nil, "", ptr.To[int64](1))
	agent := pod("agent", nil, "system-node-critical", nil)
	pods := newFakePods(app, agent, quick)
	bus := &fakeLogind{delay: 30 * time.Second, signals: make(chan bool)}
	h := start(t, bus, pods, nil)
	until(t, "the inhibitor", func() bool { held, _ := bus.state(); return held == 1 })

	bus.signals <- true
	got := map[types.UID]lifecycle.Termination{}
	for range 2 {
		tt := pods.next(t)
		got[tt.uid] = tt.t
	}
	want := map[types.UID]time.Duration{app.UID: 6 * time.Second, quick.UID: time.Second}
	for uid, grace := range want {
		tt, ok := got[uid]
		if !ok || tt.Grace != grace || tt.Cause != lifecycle.Shutdown || tt.Reason != "Terminated" ||
			tt.Message != "Pod was terminated in response to imminent node shutdown." {
			t.Errorf("%s: termination %+v, want grace %v, cause shutdown, the kubelet's reason and message", uid, tt, grace)
		}
	}
	if !h.m.ShuttingDown() || h.m.Err() == nil || h.m.Err().Error() != "node is shutting down" {
		t.Errorf("not shutting down: %v", h.m.Err())
	}
	if rej := h.m.Admit(pod("new", nil, "", nil)); rej == nil || rej.Reason != "NodeShutdown" || rej.Message != "Pod was rejected as the node is shutting down." {
		t.Errorf("admission while shutting down: %+v", rej)
	}
	if start, end := h.gauges.get(); !start.Equal(time.Unix(1000, 0)) || !end.IsZero() {
		t.Errorf("gauges %v %v, want the start and no end", start, end)
	}
	// The critical pod waits for both to stop.
	pods.stop(app.UID)
	pods.none(t)
	pods.stop(quick.UID)
	if tt := pods.next(t); tt.uid != agent.UID || tt.t.Grace != 4*time.Second {
		t.Errorf("second row: %+v, want agent within 4s", tt)
	}
	if held, _ := bus.state(); held != 1 {
		t.Errorf("inhibitor released before the critical pods stopped")
	}
	h.clock.Step(3 * time.Second)
	pods.stop(agent.UID)
	until(t, "the release", func() bool { held, _ := bus.state(); return held == 0 })
	if start, end := h.gauges.get(); !start.Equal(time.Unix(1000, 0)) || !end.Equal(time.Unix(1003, 0)) {
		t.Errorf("gauges %v %v, want 1000 and 1003", start, end)
	}
	if s, e := h.m.LastShutdown(); !s.Equal(time.Unix(1000, 0)) || !e.Equal(time.Unix(1003, 0)) {
		t.Errorf("state %v %v", s, e)
	}

	// Cancelled: Ready again, the inhibitor taken again.
	bus.signals <- false
	until(t, "the inhibitor again", func() bool { held, taken := bus.state(); return held == 1 && taken == 2 })
	if h.m.ShuttingDown() || h.m.Admit(app) != nil {
		t.Error("still shutting down after the cancellation")
	}
}

// A row whose pods do not stop within its grace does not hold the next
// one back longer.
func TestShutdownRowTimesOut(t *testing.T) {
	app := pod("app", nil, "", nil)
	agent := pod("agent", ptr.To(SystemCriticalPriority), "", nil)
	pods := newFakePods(app, agent)
	bus := &fakeLogind{delay: 30 * time.Second, signals: make(chan bool)}
	h := start(t, bus, pods, nil)
	until(t, "the inhibitor", func() bool { held, _ := bus.state(); return held == 1 })
	bus.signals <- true
	if tt := pods.next(t); tt.uid != app.UID {
		t.Fatalf("first %s, want app", tt.uid)
	}
	until(t, "the row's timer", h.clock.HasWaiters)
	h.clock.Step(5 * time.Second)
	pods.none(t)
	h.clock.Step(time.Second)
	if tt := pods.next(t); tt.uid != agent.UID {
		t.Fatalf("second %s, want agent", tt.uid)
	}
	until(t, "the second row's timer", h.clock.HasWaiters)
	h.clock.Step(4 * time.Second)
	until(t, "the release", func() bool { held, _ := bus.state(); return held == 0 })
}

// A lost bus is dialled again after a second; the inhibitor is held again.
func TestRunReconnects(t *testing.T) {
	bus := &fakeLogind{delay: 30 * time.Second, signals: make(chan bool)}
	h := start(t, bus, newFakePods(), nil)
	until(t, "the inhibitor", func() bool { held, _ := bus.state(); return held == 1 })
	bus.mu.Lock()
	old := bus.signals
	bus.signals = make(chan bool)
	bus.mu.Unlock()
	close(old)
	until(t, "the release", func() bool { held, _ := bus.state(); return held == 0 })
	until(t, "the reconnect timer", h.clock.HasWaiters)
	h.clock.Step(time.Second)
	until(t, "the inhibitor again", func() bool { held, taken := bus.state(); return held == 1 && taken == 2 })
}

func TestDisabledManager(t *testing.T) {
	var m *Manager
	if m.Enabled() || m.ShuttingDown() || m.Err() != nil || m.Admit(nil) != nil {
		t.Error("a nil manager acts")
	}
	m = New(Config{}, Deps{Dial: func() (Logind, error) { t.Fatal("dialled without a table"); return nil, nil }})
	m.Run(context.Background()) // returns at once
}
