// Package podqueue holds the pods whose workers are due a step: those
// marked now (Dirty: the relist saw their containers change, a probe
// result changed, the eviction manager asks, a back-off ended) and those to
// wake at a time (Retries: a back-off or a deadline ends). Neither blocks
// whoever marks a pod: the sync loop takes them when it comes to it.
//
// They are built before the parts that mark pods (the relist, the prober,
// the image manager) and given to each, and to the Kubelet, whose sync loop
// takes them.
package podqueue

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Dirty collects the pods the relist (or a retry, a probe, the eviction
// manager) saw change, for the sync loop to take. Mark never blocks: the
// relist never waits for the sync loop, and a pod marked twice is synced
// once.
type Dirty struct {
	ch chan struct{} // cap 1: "uids is not empty"

	mu   sync.Mutex // guards uids
	uids map[types.UID]bool
}

// NewDirty returns an empty set.
func NewDirty() *Dirty {
	return &Dirty{ch: make(chan struct{}, 1), uids: map[types.UID]bool{}}
}

// Mark adds pods to the set; it never blocks.
func (d *Dirty) Mark(uids []types.UID) {
	d.mu.Lock()
	for _, uid := range uids {
		d.uids[uid] = true
	}
	d.mu.Unlock()
	select {
	case d.ch <- struct{}{}:
	default:
	}
}

// MarkPod adds one pod to the set (the prober's change signal).
func (d *Dirty) MarkPod(uid types.UID) { d.Mark([]types.UID{uid}) }

// Ready is poked when pods were marked since the last Take.
func (d *Dirty) Ready() <-chan struct{} { return d.ch }

// Take empties the set and returns what it held.
func (d *Dirty) Take() []types.UID {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]types.UID, 0, len(d.uids))
	for uid := range d.uids {
		out = append(out, uid)
	}
	d.uids = map[types.UID]bool{}
	return out
}

// Len is how many pods are marked (kubelet_pod_state_entries).
func (d *Dirty) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.uids)
}
