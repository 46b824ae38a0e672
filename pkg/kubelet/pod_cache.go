package kubelet

import (
	"context"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ContainerState is what the agent knows of one Docker container of a pod,
// as of the last relist.
type ContainerState struct {
	ID           string
	DockerName   string
	Name         string // container name in the pod; "POD" for the infra container
	Hash         string
	RestartCount int
	Running      bool
	Status       string
	ExitCode     int
	Error        string
	OOMKilled    bool
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	Image        string
	ImageID      string
	IP           string
	LogPath      string
	Labels       map[string]string
}

// failedToStart reports a container Docker created but could not start: its
// exit code and error say why (a mistyped command, a bad working dir).
func (c *ContainerState) failedToStart() bool {
	return !c.Running && c.Status == "created" && (c.ExitCode != 0 || c.Error != "")
}

// exitedAt is when the container stopped running: for one that never ran,
// when it was created.
func (c *ContainerState) exitedAt() time.Time {
	if c.FinishedAt.IsZero() {
		return c.CreatedAt
	}
	return c.FinishedAt
}

// PodState is the Docker containers of one pod, newest first.
type PodState struct {
	UID        types.UID
	Name       string
	Namespace  string
	Containers []*ContainerState
}

// Infra returns the pod's infra containers, newest first.
func (p *PodState) Infra() []*ContainerState { return p.named(infraName) }

// Instances returns the instances of the named container, newest first.
func (p *PodState) Instances(name string) []*ContainerState { return p.named(name) }

func (p *PodState) named(name string) []*ContainerState {
	if p == nil {
		return nil
	}
	var out []*ContainerState
	for _, c := range p.Containers {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// containers returns the pod's containers (none for a nil state).
func (p *PodState) containers() []*ContainerState {
	if p == nil {
		return nil
	}
	return p.Containers
}

func sortNewestFirst(cs []*ContainerState) {
	sort.SliceStable(cs, func(i, j int) bool {
		if !cs[i].CreatedAt.Equal(cs[j].CreatedAt) {
			return cs[i].CreatedAt.After(cs[j].CreatedAt)
		}
		return cs[i].RestartCount > cs[j].RestartCount
	})
}

// podCache holds the result of the last relist. A pod worker that has just
// acted waits for a relist that started after it finished (GetNewerThan), so
// it never acts twice on a stale picture.
type podCache struct {
	mu        sync.Mutex // guards the fields below
	pods      map[types.UID]*PodState
	timestamp time.Time     // start of the last successful relist
	updated   chan struct{} // closed and replaced at each update
}

func newPodCache() *podCache {
	return &podCache{pods: map[types.UID]*PodState{}, updated: make(chan struct{})}
}

// set replaces the cache with a relist that started at ts.
func (c *podCache) set(pods map[types.UID]*PodState, ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pods = pods
	c.timestamp = ts
	close(c.updated)
	c.updated = make(chan struct{})
}

// get returns the pod's state (nil if it has no containers).
func (c *podCache) get(uid types.UID) *PodState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pods[uid]
}

// all returns every pod with containers.
func (c *podCache) all() map[types.UID]*PodState {
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
func (c *podCache) getNewerThan(ctx context.Context, uid types.UID, t time.Time) (*PodState, error) {
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
