package kubelet

import (
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// desiredSet is the pods the config wants on this node, by UID, and the
// order they arrived in (admission's order). The sync loop writes it;
// workers, the API and GC read it.
type desiredSet struct {
	mu      sync.Mutex // guards what follows
	pods    map[types.UID]*v1.Pod
	arrival map[types.UID]int64 // when each pod was first set, as a sequence number
	next    int64
}

func newDesiredSet() *desiredSet {
	return &desiredSet{pods: map[types.UID]*v1.Pod{}, arrival: map[types.UID]int64{}}
}

// inOrder is the pods in the order they arrived.
func (d *desiredSet) inOrder() []*v1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*v1.Pod, 0, len(d.pods))
	for _, p := range d.pods {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return d.arrival[out[i].UID] < d.arrival[out[j].UID] })
	return out
}

func (d *desiredSet) get(uid types.UID) *v1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.pods[uid]
}

func (d *desiredSet) all() []*v1.Pod {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*v1.Pod, 0, len(d.pods))
	for _, p := range d.pods {
		out = append(out, p)
	}
	return out
}

func (d *desiredSet) set(pod *v1.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.pods[pod.UID]; !ok {
		d.arrival[pod.UID] = d.next
		d.next++
	}
	d.pods[pod.UID] = pod
}

func (d *desiredSet) remove(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pods, uid)
	delete(d.arrival, uid)
}
