// Package pleg is the kubelet's pod lifecycle event generator: the relist
// that turns the runtime's containers into the pod cache (one list per
// period, inspects only for what changed; the containers Docker's events
// name inspected at once) and tells the sync loop which pods changed. It
// never blocks on its consumer.
package pleg

import (
	"context"
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Cache holds the result of the last relist, with the pods relisted by
// themselves or named by Docker's events since then updated. A pod worker
// that has just acted waits for a relist of the node or of its pod that
// started after it finished (GetNewerThan), so it never acts twice on a
// stale picture.
type Cache struct {
	mu        sync.Mutex // guards the fields below
	pods      map[types.UID]*kubecontainer.PodState
	timestamp time.Time // start of the last successful relist
	// relisted holds the pods relisted by themselves since then (SetPods),
	// each with the start of its list.
	relisted map[types.UID]time.Time
	updated  chan struct{} // closed and replaced at each relist
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{pods: map[types.UID]*kubecontainer.PodState{}, updated: make(chan struct{})}
}

// Set replaces the cache with a relist that started at ts.
func (c *Cache) Set(pods map[types.UID]*kubecontainer.PodState, ts time.Time) {
	if pods == nil { // never nil, so Update's copy is a map to write to
		pods = map[types.UID]*kubecontainer.PodState{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = pods
	c.timestamp = ts
	// Every pod relisted by itself was before this relist began (one
	// relist runs at a time): the node's timestamp is newer.
	c.relisted = nil
	c.wake()
}

// SetPods replaces the entries of the given pods (a nil state removes one)
// with lists of those pods alone, each of which started at started[uid]: to
// GetNewerThan on such a pod it is a relist. The node's timestamp stays.
func (c *Cache) SetPods(pods map[types.UID]*kubecontainer.PodState, started map[types.UID]time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.update(pods)
	if c.relisted == nil {
		c.relisted = make(map[types.UID]time.Time, len(started))
	}
	maps.Copy(c.relisted, started)
	c.wake()
}

// wake tells every GetNewerThan waiting that a relist landed; c.mu is held.
func (c *Cache) wake() {
	close(c.updated)
	c.updated = make(chan struct{})
}

// Update replaces the entries of the given pods (a nil state removes one)
// without advancing the timestamp: the pods are as Docker's events since the
// last relist left them, and the rest of the node is not newer. The map is
// copied, not changed: All's callers keep reading the one they got.
func (c *Cache) Update(pods map[types.UID]*kubecontainer.PodState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.update(pods)
}

// update replaces the given pods' entries in a copy of the map; c.mu is held.
func (c *Cache) update(pods map[types.UID]*kubecontainer.PodState) {
	next := maps.Clone(c.pods)
	for uid, p := range pods {
		if p == nil {
			delete(next, uid)
		} else {
			next[uid] = p
		}
	}
	c.pods = next
}

// Get returns the pod's state (nil if it has no containers).
func (c *Cache) Get(uid types.UID) *kubecontainer.PodState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[uid]
}

// All returns every pod with containers.
func (c *Cache) All() map[types.UID]*kubecontainer.PodState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods
}

// LastUpdate is when the last successful relist started (zero if none).
func (c *Cache) LastUpdate() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timestamp
}

// GetNewerThan waits for a relist (of the node, or of the pod by itself)
// that started after t, then returns the pod's state from it.
func (c *Cache) GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*kubecontainer.PodState, error) {
	for {
		c.mu.Lock()
		if c.timestamp.After(t) || c.relisted[uid].After(t) {
			s := c.pods[uid]
			c.mu.Unlock()
			return s, nil
		}
		ch := c.updated
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// RelistedLen is the number of pods relisted by themselves since the last
// relist of the node.
func (c *Cache) RelistedLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.relisted)
}

// Len is the number of pods in the cache.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pods)
}
