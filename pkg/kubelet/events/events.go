// Package events records what the agent does to pods (Pulling, Started,
// Killing, BackOff, Unhealthy, ...) in a bounded in-memory ring served at
// GET /events, and, when etcd is configured, writes them there under a
// 48-hour lease, and in node mode to the API server, without ever blocking
// the agent's work.
package events

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientrecord "k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

const (
	// ringSize bounds the events kept in memory.
	ringSize = 1000
	// queueSize bounds the events waiting to be written to etcd; beyond
	// it they are dropped (and counted): pod work never waits for etcd.
	queueSize = 1000
	// leasePeriod: one lease is shared by the events of a minute (so the
	// live leases stay bounded: TTL / leasePeriod of them).
	leasePeriod = time.Minute
	// dedupWindow folds repeats of one event into its count.
	dedupWindow = 10 * time.Minute
)

// Ref names the object an event is about.
type Ref struct {
	// Kind is the object's kind: "" for a Pod, "Node" for the node.
	Kind            string
	Namespace, Name string
	UID             types.UID
	FieldPath       string // spec.containers{name} (or initContainers, ephemeralContainers), when about a container
}

// kind is the Ref's object kind as the API spells it.
func (r Ref) kind() string {
	if r.Kind == "" {
		return "Pod"
	}
	return r.Kind
}

// NodeRef refers to the node, as the kubelet names it in events: its UID is
// its name.
func NodeRef(name string) Ref {
	return Ref{Kind: "Node", Name: name, UID: types.UID(name)}
}

// PodRef refers to a pod, or one of its containers.
func PodRef(pod *v1.Pod, container string) Ref {
	r := Ref{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
	if container != "" {
		r.FieldPath = FieldPath(pod, container)
	}
	return r
}

// FieldPath is how an event names one of a pod's containers, as the
// kubelet's container references do: by the list of the spec that holds
// it (spec.initContainers{x} for an init container or a sidecar,
// spec.ephemeralContainers{x} for an ephemeral one). A name in none of
// them (the infra container) is named as an app container's.
func FieldPath(pod *v1.Pod, container string) string {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == container {
			return fmt.Sprintf("spec.initContainers{%s}", container)
		}
	}
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == container {
			return fmt.Sprintf("spec.ephemeralContainers{%s}", container)
		}
	}
	return fmt.Sprintf("spec.containers{%s}", container)
}

// Recorder keeps and ships events. It is safe for concurrent use; a nil
// *Recorder records nothing.
type Recorder struct {
	node string

	mu   sync.Mutex // guards ring
	ring []*record  // oldest first, at most ringSize

	queue   chan *v1.Event
	writing atomic.Bool // an etcd writer drains queue (see EtcdWriter)
	dropped atomic.Int64

	api atomic.Pointer[clientrecord.EventRecorder] // the API server's (node mode), see SendToAPI
}

// SendToAPI sends every pod event to an API server too, through client-go's
// recorder (its broadcaster folds repeats and never blocks the caller).
func (r *Recorder) SendToAPI(rec clientrecord.EventRecorder) { r.api.Store(&rec) }

// record is a kept event: what varies between events, some 250 bytes
// where a v1.Event takes 700 (the ring is the agent's largest history of
// pods that may be gone).
type record struct {
	ref             Ref
	uid             types.UID
	reason, message string
	warning         bool
	count           int32
	first, last     time.Time
}

// event is rec as the Kubernetes Event the kubelet would have sent.
func (r *Recorder) event(rec *record) v1.Event {
	typ := v1.EventTypeNormal
	if rec.warning {
		typ = v1.EventTypeWarning
	}
	return v1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", rec.ref.Name, rec.first.UnixNano()),
			Namespace: rec.ref.Namespace, UID: rec.uid},
		InvolvedObject: v1.ObjectReference{Kind: rec.ref.kind(), APIVersion: "v1", Namespace: rec.ref.Namespace, Name: rec.ref.Name,
			UID: rec.ref.UID, FieldPath: rec.ref.FieldPath},
		Reason: rec.reason, Message: rec.message, Type: typ, Count: rec.count,
		FirstTimestamp: metav1.NewTime(rec.first), LastTimestamp: metav1.NewTime(rec.last),
		Source: v1.EventSource{Component: "kubelet", Host: r.node},
	}
}

// New returns a recorder for node.
func New(node string) *Recorder {
	return &Recorder{node: node, queue: make(chan *v1.Event, queueSize)}
}

// Event records one event. warning marks a failure.
func (r *Recorder) Event(ref Ref, warning bool, reason, format string, args ...any) {
	if r == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if api := r.api.Load(); api != nil && ref.UID != "" {
		typ := v1.EventTypeNormal
		if warning {
			typ = v1.EventTypeWarning
		}
		(*api).Event(&v1.ObjectReference{Kind: ref.kind(), APIVersion: "v1", Namespace: ref.Namespace, Name: ref.Name,
			UID: ref.UID, FieldPath: ref.FieldPath}, typ, reason, msg)
	}
	now := time.Now()
	r.mu.Lock()
	for i := len(r.ring) - 1; i >= 0 && i >= len(r.ring)-50; i-- {
		e := r.ring[i]
		if e.ref.UID == ref.UID && e.ref.FieldPath == ref.FieldPath && e.reason == reason &&
			e.message == msg && now.Sub(e.last) < dedupWindow {
			e.count++
			e.last = now
			r.mu.Unlock()
			return
		}
	}
	rec := &record{ref: ref, uid: uuid.NewUUID(), reason: reason, message: msg, warning: warning, count: 1, first: now, last: now}
	if len(r.ring) == ringSize {
		copy(r.ring, r.ring[1:])
		r.ring = r.ring[:ringSize-1]
	}
	r.ring = append(r.ring, rec)
	e := r.event(rec)
	r.mu.Unlock()
	if warning {
		klog.V(1).Infof("Event %s %s/%s %s: %s", reason, ref.Namespace, ref.Name, ref.FieldPath, msg)
	}
	if !r.writing.Load() {
		return
	}
	select {
	case r.queue <- &e:
	default:
		r.dropped.Add(1)
	}
}

// List returns the kept events, oldest first.
func (r *Recorder) List() v1.EventList {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := v1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}, Items: make([]v1.Event, 0, len(r.ring))}
	for _, rec := range r.ring {
		l.Items = append(l.Items, r.event(rec))
	}
	return l
}

// Dropped counts events not written to etcd because it was slow or down.
func (r *Recorder) Dropped() int64 { return r.dropped.Load() }

// EtcdWriter returns the loop that writes queued events to
// /events/<node>/<namespace>/<pod>/<id> until ctx is cancelled, each kept
// at least ttl (under a lease shared by the events of a minute). Events
// are queued from this call until the loop ends: with no etcd, a full
// queue of copies nobody reads would be a megabyte kept for nothing.
func (r *Recorder) EtcdWriter(c *clientv3.Client, ttl time.Duration) func(ctx context.Context) {
	r.writing.Store(true)
	return func(ctx context.Context) {
		defer r.writing.Store(false)
		r.writeEtcd(ctx, c, ttl)
	}
}

func (r *Recorder) writeEtcd(ctx context.Context, c *clientv3.Client, ttl time.Duration) {
	var lease clientv3.LeaseID
	var leaseAt time.Time
	for {
		var e *v1.Event
		select {
		case <-ctx.Done():
			return
		case e = <-r.queue:
		}
		if lease == 0 || time.Since(leaseAt) > leasePeriod {
			gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			// The last event put under the lease lives at least ttl.
			resp, err := c.Grant(gctx, int64((ttl+leasePeriod)/time.Second))
			cancel()
			if err != nil {
				r.dropped.Add(1)
				klog.V(2).Infof("Events: etcd lease: %v", err)
				continue
			}
			lease, leaseAt = resp.ID, time.Now()
		}
		data, err := json.Marshal(e)
		if err != nil {
			continue
		}
		key := fmt.Sprintf("/events/%s/%s/%s/%s", r.node, e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.UID)
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := c.Put(pctx, key, string(data), clientv3.WithLease(lease)); err != nil {
			r.dropped.Add(1)
			klog.V(2).Infof("Events: etcd put: %v", err)
		}
		cancel()
	}
}
