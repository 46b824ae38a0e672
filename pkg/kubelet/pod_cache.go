package kubelet

import (
	"context"
	"sync"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"

	"k8s.io/apimachinery/pkg/types"
)

// podCache holds the result of the last relist. A pod worker that has just
// acted waits for a relist that started after it finished (GetNewerThan), so
// it never acts twice on a stale picture.
type podCache struct {
	mu        sync.Mutex // guards the fields below
	pods      map[types.UID]*kubecontainer.PodState
	timestamp time.Time     // start of the last successful relist
	updated   chan struct{} // closed and replaced at each update
}

func newPodCache() *podCache {
	return &podCache{pods: map[types.UID]*kubecontainer.PodState{}, updated: make(chan struct{})}
}

// set replaces the cache with a relist that started at ts.
func (c *podCache) set(pods map[types.UID]*kubecontainer.PodState, ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = pods
	c.timestamp = ts
	close(c.updated)
	c.updated = make(chan struct{})
}

// get returns the pod's state (nil if it has no containers).
func (c *podCache) get(uid types.UID) *kubecontainer.PodState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[uid]
}

// all returns every pod with containers.
func (c *podCache) all() map[types.UID]*kubecontainer.PodState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods
}

// lastUpdate is when the last successful relist started (zero if none).
func (c *podCache) lastUpdate() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timestamp
}

// getNewerThan waits for a relist that started after t, then returns the
// pod's state from it.
func (c *podCache) getNewerThan(ctx context.Context, uid types.UID, t time.Time) (*kubecontainer.PodState, error) {
	for {
		c.mu.Lock()
		if c.timestamp.After(t) {
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
