package kubelet

import (
	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/allocation"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podstatus"
)

// allocate is the pod its worker syncs: the desired pod with the resources
// the node allocated its containers. The first sync allocates the spec's;
// a later change of them (an in-place resize) is allocated if the node can
// hold it (allocation.Decide), and else stays pending, the containers
// keeping what they had. The allocation lives in the pod's record: an
// agent restarted with a resize pending allocates the spec afresh (the
// kubelet checkpoints it; the agent does not yet).
func (k *Kubelet) allocate(pod *v1.Pod, rec *podRecord) *v1.Pod {
	want := allocation.Of(pod)
	rec.mu.Lock()
	alloc := rec.allocated
	rec.mu.Unlock()
	if alloc == nil || allocation.Equal(alloc, want) {
		rec.setAllocation(want, allocation.Pending{})
		return pod
	}
	allocated := allocation.Apply(pod, alloc)
	ok, why := allocation.Decide(pod, allocated, k.allocatedOthers(pod.UID), k.cfg.Allocatable)
	if !ok {
		if rec.setAllocation(alloc, why) {
			glog.Infof("Pod %s: resize pending (%s): %s", api.Key(pod), why.Reason, why.Message)
		}
		return allocated
	}
	glog.Infof("Pod %s: resize allocated", api.Key(pod))
	rec.setAllocation(want, allocation.Pending{})
	return pod
}

// allocatedOthers are the desired pods other than uid, as allocated.
func (k *Kubelet) allocatedOthers(uid types.UID) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range k.desired.all() {
		if p.UID == uid {
			continue
		}
		if r := k.workers.Record(p.UID); r != nil {
			r.mu.Lock()
			alloc := r.allocated
			r.mu.Unlock()
			p = allocation.Apply(p, alloc)
		}
		out = append(out, p)
	}
	return out
}

// setAllocation records the pod's allocation and its pending resize; it
// reports whether the pending resize changed.
func (r *podRecord) setAllocation(alloc allocation.Resources, pending allocation.Pending) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.allocated = alloc
	changed := r.resizePending != pending
	r.resizePending = pending
	return changed
}

// setResizeError records why the last resize in place failed ("": it did
// not), and reports whether that changed.
func (r *podRecord) setResizeError(msg string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	changed := r.resizeErr != msg
	r.resizeErr = msg
	return changed
}

// recordResize keeps what the runtime said of the pod's resize in place:
// its failure is the PodResizeInProgress condition's Error, logged once
// when it appears or changes.
func (k *Kubelet) recordResize(pod *v1.Pod, rec *podRecord, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if rec.setResizeError(msg) && msg != "" {
		glog.Errorf("Pod %s: resize in place: %s", api.Key(pod), msg)
	}
}

// Resize is what the status reports of the pod's resize.
func (s statusRecords) Resize(uid types.UID) podstatus.Resize {
	r := s.w.Record(uid)
	if r == nil {
		return podstatus.Resize{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return podstatus.Resize{Allocated: r.allocated, Pending: r.resizePending, Error: r.resizeErr}
}
