package runtimeevents

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/classic-kubelet/kubelet/pkg/await"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// The hub's goroutine ends with its context; a reader has none.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeSource is the runtime's event stream: each subscription fails with
// the next error of fail, else hands the test its stream, which the test
// feeds (unbuffered: a send returns once the hub took the event) and
// closes to break it.
type fakeSource struct {
	mu      sync.Mutex
	calls   int
	fail    []error
	streams chan chan kubecontainer.Event
}

func newFakeSource() *fakeSource {
	return &fakeSource{streams: make(chan chan kubecontainer.Event, 1)}
}

func (s *fakeSource) failNext(errs ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = append(s.fail, errs...)
}

func (s *fakeSource) Events(ctx context.Context) (<-chan kubecontainer.Event, error) {
	s.mu.Lock()
	s.calls++
	if len(s.fail) > 0 {
		err := s.fail[0]
		s.fail = s.fail[1:]
		s.mu.Unlock()
		return nil, err
	}
	s.mu.Unlock()
	ch := make(chan kubecontainer.Event)
	s.streams <- ch
	return ch, nil
}

// start runs a hub over src on a fake clock until the test ends.
func start(t *testing.T, src *fakeSource) (*Hub, *await.FakeClock) {
	t.Helper()
	clk := await.NewFakeClock(time.Unix(1000, 0))
	h := NewHub(src, clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(await.Timeout):
			t.Error("the hub did not stop with its context")
		}
	})
	return h, clk
}

func containerEvent(id, owner, action string) kubecontainer.Event {
	return kubecontainer.Event{Type: kubecontainer.ContainerEvent, ContainerID: id, Action: action,
		Labels: map[string]string{kubecontainer.LabelOwner: owner}}
}

func imageEvent(action string) kubecontainer.Event {
	return kubecontainer.Event{Type: kubecontainer.ImageEvent, Image: "img:1", Action: action}
}

func describe(ev kubecontainer.Event) string {
	if ev.Type == kubecontainer.ImageEvent {
		return "image " + ev.Action
	}
	return fmt.Sprintf("%s %s", ev.ContainerID, ev.Action)
}

// awaitResync takes a reader's resync signal and says where the stream
// stands.
func awaitResync(t *testing.T, r *Reader) bool {
	t.Helper()
	select {
	case <-r.Resync():
		return r.Live()
	case <-time.After(await.Timeout):
		t.Fatalf("%s was never told to resync", r.name)
		return false
	}
}

func next(t *testing.T, r *Reader) string {
	t.Helper()
	select {
	case ev := <-r.Events():
		return describe(ev)
	case <-time.After(await.Timeout):
		t.Fatalf("%s got no event", r.name)
		return ""
	}
}

// One subscription, each event to the readers whose filter wants it, in
// the stream's order.
func TestHubFansEventsOutThroughFilters(t *testing.T) {
	src := newFakeSource()
	h, _ := start(t, src)
	mine := h.Subscribe("relist", func(ev kubecontainer.Event) bool {
		return ev.Type == kubecontainer.ContainerEvent && ev.Labels[kubecontainer.LabelOwner] == "n"
	})
	defer mine.Close()
	images := h.Subscribe("images", func(ev kubecontainer.Event) bool { return ev.Type == kubecontainer.ImageEvent })
	defer images.Close()
	all := h.Subscribe("cadvisor", func(kubecontainer.Event) bool { return true })
	defer all.Close()
	stream := <-src.streams
	for _, r := range []*Reader{mine, images, all} {
		if !awaitResync(t, r) {
			t.Fatalf("%s: the stream is connected, Live says not", r.name)
		}
	}
	for _, ev := range []kubecontainer.Event{containerEvent("c1", "n", "start"), containerEvent("x1", "other", "start"),
		imageEvent("load"), containerEvent("c1", "n", "die"), imageEvent("pull")} {
		stream <- ev
	}
	want := map[*Reader][]string{
		mine:   {"c1 start", "c1 die"},
		images: {"image load", "image pull"},
		all:    {"c1 start", "x1 start", "image load", "c1 die", "image pull"},
	}
	for r, evs := range want {
		for i, w := range evs {
			if got := next(t, r); got != w {
				t.Errorf("%s: event %d is %q, want %q", r.name, i, got, w)
			}
		}
	}
	if src.subscriptions() != 1 {
		t.Errorf("%d subscriptions for three readers, want one", src.subscriptions())
	}
}

func (s *fakeSource) subscriptions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// A broken stream, or a failed subscription, is retried with back-off
// (0.5 s doubling to 30 s, started over once a subscription works); the
// readers hear of the break and of the reconnection, and a reader that
// subscribes while the stream is connected hears at once.
func TestHubReconnectsWithBackoff(t *testing.T) {
	src := newFakeSource()
	src.failNext(errors.New("daemon down"), errors.New("daemon down"))
	h, clk := start(t, src)
	r := h.Subscribe("relist", func(kubecontainer.Event) bool { return true })
	defer r.Close()
	// Two failed subscriptions: 0.5 s, then 1 s.
	for i, want := range []time.Duration{500 * time.Millisecond, time.Second} {
		if got := clk.AwaitWait(t, i+1); got != want {
			t.Fatalf("wait %d after a failed subscription: %v, want %v", i+1, got, want)
		}
		clk.Step(want)
	}
	stream := <-src.streams
	if !awaitResync(t, r) {
		t.Fatal("connected, Live says not")
	}
	late := h.Subscribe("late", func(kubecontainer.Event) bool { return true })
	defer late.Close()
	if !awaitResync(t, late) {
		t.Fatal("a reader subscribing while the stream is connected was not told to resync, or told it is down")
	}
	stream <- containerEvent("c1", "n", "start")
	if got := next(t, r); got != "c1 start" {
		t.Fatalf("event %q", got)
	}
	close(stream) // the daemon restarts
	if awaitResync(t, r) {
		t.Fatal("the stream broke, Live says connected")
	}
	// The working subscription started the back-off over.
	if got := clk.AwaitWait(t, 3); got != 500*time.Millisecond {
		t.Fatalf("wait after a break: %v, want 500ms", got)
	}
	select {
	case <-src.streams:
		t.Fatal("subscribed again before the back-off ended")
	default:
	}
	clk.Step(500 * time.Millisecond)
	stream = <-src.streams
	if !awaitResync(t, r) {
		t.Fatal("reconnected, Live says not")
	}
	stream <- containerEvent("c2", "n", "start")
	if got := next(t, r); got != "c2 start" {
		t.Fatalf("event after the reconnection %q", got)
	}
}

// A reader that does not keep up never holds the hub or the other readers
// up: past its buffer its events are dropped and it is told to resync; the
// events it had still come, and later ones again once it has room.
func TestHubSlowReaderLosesEventsKnowingly(t *testing.T) {
	src := newFakeSource()
	h, _ := start(t, src)
	// Not closed: under a hub that blocks on them, Close would wait too.
	slow := h.Subscribe("slow", func(kubecontainer.Event) bool { return true })
	fast := h.Subscribe("fast", func(kubecontainer.Event) bool { return true })
	stream := <-src.streams
	awaitResync(t, slow)
	awaitResync(t, fast)
	for i := range ReaderBuffer + 10 {
		select {
		case stream <- containerEvent(fmt.Sprint("c", i), "n", "start"):
		case <-time.After(await.Timeout):
			t.Fatalf("the hub stopped reading the stream at event %d: it waits for the slow reader", i)
		}
		// The fast reader keeps up: it takes each event before the next
		// is sent (a goroutine reading beside the sender may not be
		// scheduled in time on a loaded machine, and fall behind too).
		select {
		case ev := <-fast.Events():
			if ev.ContainerID != fmt.Sprint("c", i) {
				t.Fatalf("the reader that kept up got %s as event %d", ev.ContainerID, i)
			}
		case <-time.After(await.Timeout):
			t.Fatalf("the reader that kept up did not get event %d", i)
		}
	}
	select {
	case <-slow.Resync():
	default:
		t.Fatal("the slow reader lost events and was not told to resync")
	}
	if !slow.Live() {
		t.Error("a reader that fell behind is told the stream is down")
	}
	for i := range ReaderBuffer {
		if ev := <-slow.Events(); ev.ContainerID != fmt.Sprint("c", i) {
			t.Fatalf("slow reader's event %d is %s", i, ev.ContainerID)
		}
	}
	stream <- containerEvent("after", "n", "die")
	if got := next(t, slow); got != "after die" {
		t.Errorf("once it had room the slow reader got %q", got)
	}
}

// Cancelling the hub's context ends its goroutine (TestMain checks none is
// left) and the subscription; readers are told the stream is down. A
// closed reader gets nothing more.
func TestHubStopsWithItsContext(t *testing.T) {
	src := newFakeSource()
	clk := await.NewFakeClock(time.Unix(1000, 0))
	h := NewHub(src, clk)
	r := h.Subscribe("relist", func(kubecontainer.Event) bool { return true })
	closed := h.Subscribe("gone", func(kubecontainer.Event) bool { return true })
	closed.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.Run(ctx) }()
	stream := <-src.streams
	awaitResync(t, r)
	cancel()
	<-done
	if h.Live() || awaitResync(t, r) {
		t.Error("the hub stopped, Live says connected")
	}
	select {
	case stream <- containerEvent("c1", "n", "start"):
		t.Error("the stopped hub still reads its stream")
	default:
	}
	select {
	case <-closed.Resync():
		t.Error("a closed reader was signalled")
	case <-closed.Events():
		t.Error("a closed reader got an event")
	default:
	}
}
