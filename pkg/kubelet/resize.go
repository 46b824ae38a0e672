package kubelet

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/allocation"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podstatus"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// allocate is the pod its worker syncs: the desired pod with the resources
// the node allocated its containers. The first sync allocates the spec's;
// a later change of them (an in-place resize) is allocated if the node can
// hold it (allocation.Decide), and else stays pending, the containers
// keeping what they had. The allocation lives in the pod's record; while a
// resize is pending it is also checkpointed in the pod's directory, so a
// restarted agent keeps it (with none, the spec is what was allocated).
func (k *Kubelet) allocate(pod *v1.Pod, rec *podRecord) *v1.Pod {
	want := allocation.Of(pod)
	rec.mu.Lock()
	alloc := rec.allocated
	rec.mu.Unlock()
	if alloc == nil {
		alloc = k.readAllocation(pod)
		rec.mu.Lock()
		rec.checkpointed = alloc
		rec.mu.Unlock()
	}
	if alloc == nil || allocation.Equal(alloc, want) {
		rec.setAllocation(want, allocation.Pending{})
		k.checkpointAllocation(pod, rec, nil)
		return pod
	}
	allocated := allocation.Apply(pod, alloc)
	others, _ := k.admittedPods(pod.UID)
	ok, why := allocation.Decide(pod, allocated, others, k.cfg.Allocatable)
	if !ok {
		if rec.setAllocation(alloc, why) {
			klog.Infof("Pod %s: resize pending (%s): %s", api.Key(pod), why.Reason, why.Message)
		}
		k.checkpointAllocation(pod, rec, alloc)
		return allocated
	}
	klog.Infof("Pod %s: resize allocated", api.Key(pod))
	rec.setAllocation(want, allocation.Pending{})
	k.checkpointAllocation(pod, rec, nil)
	return pod
}

// allocationFile holds, in a pod's directory, its allocation while a
// resize is pending.
const allocationFile = "allocated-resources.json"

// readAllocation is the pod's checkpointed allocation (nil: none).
func (k *Kubelet) readAllocation(pod *v1.Pod) allocation.Resources {
	data, err := os.ReadFile(filepath.Join(k.volumes.PodDir(pod.UID), allocationFile))
	if err != nil {
		return nil
	}
	var alloc allocation.Resources
	if err := json.Unmarshal(data, &alloc); err != nil {
		// A checkpoint that cannot be read never kills a pod: the spec is
		// allocated, as without one.
		klog.Errorf("Pod %s: allocation checkpoint: %v (allocating the spec)", api.Key(pod), err)
		return nil
	}
	return alloc
}

// checkpointAllocation keeps alloc, a pending resize's allocation, in the
// pod's directory once it exists (nil: removes it), writing only on a
// change.
func (k *Kubelet) checkpointAllocation(pod *v1.Pod, rec *podRecord, alloc allocation.Resources) {
	rec.mu.Lock()
	same := allocation.Equal(rec.checkpointed, alloc) && (rec.checkpointed == nil) == (alloc == nil)
	rec.mu.Unlock()
	if same {
		return
	}
	dir := k.volumes.PodDir(pod.UID)
	path := filepath.Join(dir, allocationFile)
	var err error
	switch {
	case alloc == nil:
		if err = os.Remove(path); errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	default:
		if _, statErr := os.Stat(dir); statErr != nil {
			return // no directory yet: nothing runs that a restart could resize
		}
		data, _ := json.Marshal(alloc)
		err = safefile.WriteAtomic(path, data)
	}
	if err != nil {
		klog.Errorf("Pod %s: allocation checkpoint: %v", api.Key(pod), err)
		return
	}
	rec.mu.Lock()
	rec.checkpointed = alloc
	rec.mu.Unlock()
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
		klog.Errorf("Pod %s: resize in place: %s", api.Key(pod), msg)
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
