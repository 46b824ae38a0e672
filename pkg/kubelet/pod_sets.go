package kubelet

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// desiredSet is the pods the config wants on this node, by UID. The sync
// loop writes it; workers, the API and GC read it.
type desiredSet struct {
	mu   sync.Mutex // guards pods
	pods map[types.UID]*v1.Pod
}

func newDesiredSet() *desiredSet { return &desiredSet{pods: map[types.UID]*v1.Pod{}} }

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
	d.pods[pod.UID] = pod
}

func (d *desiredSet) remove(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pods, uid)
}
