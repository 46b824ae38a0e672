// Package runtimeevents holds the agent's one subscription to the container
// runtime's event stream and fans its events out to the parts that follow
// them, each through its own filter: the relist (state changes of this
// node's containers), the image manager (images that may have appeared) and
// cAdvisor's inspect cache (any change of any container). Docker sends each
// event once, the agent decodes it once.
package runtimeevents

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/backoff"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Source is the runtime's event stream (kubecontainer.Runtime's Events):
// one subscription, until ctx ends or the stream breaks (the channel is
// then closed).
type Source interface {
	Events(ctx context.Context) (<-chan kubecontainer.Event, error)
}

// reconnect is the back-off between attempts to subscribe again after the
// stream broke or a subscription failed: the relist's, which is the reader
// in most of a hurry (the image manager's was 1 s doubling to 30 s,
// cAdvisor's inspect cache's a second each time). A subscription that works
// starts it over.
var reconnect = backoff.Policy{Initial: 500 * time.Millisecond, Max: 30 * time.Second}

// ReaderBuffer is how many events a reader may fall behind by before it
// loses events (and is told to resync). A burst of 100 pods makes some
// 400 (a create and a start of two containers each); a reader's own work
// per event is a map update.
const ReaderBuffer = 1024

// Hub keeps one subscription to a Source and hands each event to every
// reader whose filter wants it.
//
// A reader is never waited for: each has a buffer of ReaderBuffer events,
// and an event that finds its reader's buffer full is dropped for that
// reader alone, which is then told to resync, as after a reconnection. So a
// slow reader costs the others nothing, and no reader loses an event
// without knowing it: what it can no longer learn from events it learns by
// looking again (a relist, dropping a cache).
//
// Readers are told to resync (Reader.Resync) when the stream connects,
// when it breaks, and when they fell behind; Live then says whether events
// flow. Between a break and the next connection no event comes, and the
// hub reconnects with back-off until its context ends.
type Hub struct {
	source Source
	clock  clock.Clock
	retry  *backoff.Backoff[backoff.One]
	live   atomic.Bool

	mu      sync.Mutex // guards readers and each reader's behind
	readers map[*Reader]struct{}
}

// NewHub returns a hub over source, whose reconnections wait on clk. Run
// subscribes.
func NewHub(source Source, clk clock.Clock) *Hub {
	return &Hub{source: source, clock: clk, retry: backoff.New[backoff.One](reconnect, clk), readers: map[*Reader]struct{}{}}
}

// Live reports whether the stream is connected: events flow.
func (h *Hub) Live() bool { return h.live.Load() }

// Subscribe returns a reader of the events filter wants (called on the
// hub's goroutine, for every event: it must be quick and must not block);
// name says who reads, in logs. A reader that subscribes while the stream
// is connected is told to resync at once: what happened before it
// subscribed it has to look at. Close it when done.
func (h *Hub) Subscribe(name string, filter func(kubecontainer.Event) bool) *Reader {
	r := &Reader{name: name, hub: h, filter: filter,
		events: make(chan kubecontainer.Event, ReaderBuffer), resync: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readers[r] = struct{}{}
	if h.live.Load() {
		signal(r.resync)
	}
	return r
}

// Run keeps the subscription until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	for {
		events, err := h.source.Events(ctx)
		if err == nil {
			h.retry.Reset(backoff.One{})
			h.setLive(true)
			h.follow(ctx, events)
			h.setLive(false)
		}
		if ctx.Err() != nil {
			return
		}
		delay := h.retry.Next(backoff.One{}, h.clock.Now())
		if err != nil {
			klog.V(2).Infof("Subscribe to runtime events: %v (retry in %v)", err, delay)
		} else {
			klog.V(2).Infof("Runtime event stream ended; subscribing again in %v", delay)
		}
		select {
		case <-ctx.Done():
			return
		case <-h.clock.After(delay):
		}
	}
}

// follow hands out the stream's events until it ends or ctx does.
func (h *Hub) follow(ctx context.Context, events <-chan kubecontainer.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			h.dispatch(ev)
		}
	}
}

func (h *Hub) dispatch(ev kubecontainer.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for r := range h.readers {
		if !r.filter(ev) {
			continue
		}
		select {
		case r.events <- ev:
			r.behind = false
		default:
			if !r.behind {
				klog.V(2).Infof("Runtime events: %s fell %d events behind; it resyncs", r.name, ReaderBuffer)
			}
			r.behind = true
			signal(r.resync)
		}
	}
}

// setLive records whether events flow and tells every reader to resync.
func (h *Hub) setLive(live bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live.Store(live)
	for r := range h.readers {
		signal(r.resync)
	}
}

// Reader is one reader's share of the stream.
type Reader struct {
	name   string
	hub    *Hub
	filter func(kubecontainer.Event) bool
	events chan kubecontainer.Event
	resync chan struct{} // cap 1
	behind bool          // an event was dropped since the last one delivered; guarded by hub.mu
}

// Events delivers the events the reader's filter wants, in the stream's
// order. An event's Labels are shared with the other readers: read only.
func (r *Reader) Events() <-chan kubecontainer.Event { return r.events }

// Resync is signalled when the reader must no longer trust what events
// told it: the stream connected (what happened while it was not, or before
// the reader subscribed, came as no event), broke (until it is back no
// events come), or the reader fell behind and lost some. Signals that come
// before the reader takes one are one signal; Live says where the stream
// stands now. Events already buffered stay deliverable.
func (r *Reader) Resync() <-chan struct{} { return r.resync }

// Live reports whether the stream is connected.
func (r *Reader) Live() bool { return r.hub.Live() }

// Close ends the subscription: no more events or signals come.
func (r *Reader) Close() {
	r.hub.mu.Lock()
	defer r.hub.mu.Unlock()
	delete(r.hub.readers, r)
}

// signal sends on a channel of capacity 1 unless a send is already pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
