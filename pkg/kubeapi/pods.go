package kubeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// LocalPods is the agent's view: the desired pods, the statuses their
// workers produced, and a signal when one changes.
type LocalPods interface {
	GetPods() []*v1.Pod
	SyncedStatus(uid types.UID) (v1.PodStatus, bool)
	SubscribeStatus() <-chan struct{}
}

// RemotePods is the API server's view of the pods bound to the node, as
// last listed or watched.
type RemotePods interface {
	Pods() []*v1.Pod
	Invalid(uid types.UID) (string, bool)
	Changed() <-chan struct{}
}

// statusResync bounds how long a status that could not be written waits
// for its next attempt when nothing changes.
const statusResync = 10 * time.Second

// StatusWriter writes the statuses of the API server's pods to
// pods/<name>/status: a strategic-merge patch with the pod's UID (so a pod
// recreated under the same name is never written), only when the status
// differs from what the API server holds, coalesced (one round per
// change signal, rate-limited by the client's QPS). A pod deleted in the
// API server is deleted for good (grace 0, UID precondition) once its
// status is terminal, so `kubectl delete` finishes.
type StatusWriter struct {
	client kubernetes.Interface
	local  LocalPods
	remote RemotePods
	clock  clock.WithTicker

	mirrors *Mirrors // nil: no mirror pods

	// Owned by Run.
	written  map[types.UID]writtenStatus // the status last written, until the API server's view catches up
	deleted  map[types.UID]bool
	lastErr  map[types.UID]string
	creating map[string]time.Time // mirrors created, by namespace/name, until the watch shows them
	refused  map[types.UID]bool   // static pods told they get no mirror
}

// NewStatusWriter writes local statuses to the API server.
// With mirrors, the pods of the other sources get mirror pods.
func NewStatusWriter(client kubernetes.Interface, local LocalPods, remote RemotePods, mirrors *Mirrors) *StatusWriter {
	return &StatusWriter{client: client, local: local, remote: remote, clock: clock.RealClock{}, mirrors: mirrors,
		written: map[types.UID]writtenStatus{}, deleted: map[types.UID]bool{}, lastErr: map[types.UID]string{},
		creating: map[string]time.Time{}, refused: map[types.UID]bool{}}
}

// Run writes until ctx ends.
func (w *StatusWriter) Run(ctx context.Context) {
	changed := w.local.SubscribeStatus()
	t := w.clock.NewTicker(statusResync)
	defer t.Stop()
	for {
		w.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-w.remote.Changed():
		case <-t.C():
		}
	}
}

// sync writes one round.
func (w *StatusWriter) sync(ctx context.Context) {
	local := map[types.UID]*v1.Pod{}
	static := map[string]*v1.Pod{} // by namespace/name
	for _, p := range w.local.GetPods() {
		if p.Annotations[api.ConfigSourceAnnotation] == api.SourceAPIServer {
			local[p.UID] = p
		} else if w.mirrors != nil {
			static[api.Key(p)] = p
		}
	}
	seen := map[types.UID]bool{}
	taken := map[string]bool{} // names an API object holds
	for _, remote := range w.remote.Pods() {
		seen[remote.UID] = true
		key := remote.Namespace + "/" + remote.Name
		taken[key] = true
		if _, mirror := remote.Annotations[api.MirrorAnnotation]; mirror {
			if w.mirrors != nil {
				w.syncMirror(ctx, remote, static[key])
			}
			continue
		}
		var want v1.PodStatus
		if _, ok := local[remote.UID]; ok {
			st, synced := w.local.SyncedStatus(remote.UID)
			if !synced {
				continue
			}
			want = merged(remote.Status, st)
		} else if msg, bad := w.remote.Invalid(remote.UID); bad {
			// As the kubelet reports a pod its admission refused.
			want = remote.Status
			want.Phase, want.Reason, want.Message = v1.PodFailed, "UnsupportedPodSpec", "Pod cannot run on this node: "+msg
		} else {
			continue // not admitted (yet): nothing to say
		}
		w.write(ctx, remote, want)
		if remote.DeletionTimestamp != nil && terminal(want.Phase) {
			w.delete(ctx, remote)
		}
	}
	for key, p := range static {
		if !taken[key] {
			w.createMirror(ctx, p)
		}
	}
	for uid := range w.refused {
		if _, ok := local[uid]; !ok && !isStatic(static, uid) {
			delete(w.refused, uid)
		}
	}
	for key := range w.creating {
		if _, ok := static[key]; !ok {
			delete(w.creating, key)
		}
	}
	for uid := range w.written {
		if !seen[uid] {
			delete(w.written, uid)
			delete(w.deleted, uid)
			delete(w.lastErr, uid)
		}
	}
}

func isStatic(static map[string]*v1.Pod, uid types.UID) bool {
	for _, p := range static {
		if p.UID == uid {
			return true
		}
	}
	return false
}

func terminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// merged is the agent's status with what others own kept from the API
// server's: conditions of other types (PodScheduled, a readiness gate's),
// and the scheduler's nominated node.
func merged(remote, local v1.PodStatus) v1.PodStatus {
	out := local
	out.NominatedNodeName = remote.NominatedNodeName
	out.Conditions = nil
	theirs := map[v1.PodConditionType]bool{}
	for _, c := range remote.Conditions {
		if !kubeletCondition(c.Type) {
			theirs[c.Type] = true
			out.Conditions = append(out.Conditions, c)
		}
	}
	for _, c := range local.Conditions {
		if !theirs[c.Type] {
			out.Conditions = append(out.Conditions, c)
		}
	}
	return out
}

// kubeletCondition says whether the kubelet owns a pod condition: the
// resize conditions too, which it removes once they no longer hold.
func kubeletCondition(t v1.PodConditionType) bool {
	switch t {
	case v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady,
		v1.PodResizePending, v1.PodResizeInProgress:
		return true
	}
	return false
}

// write patches the pod's status if it differs from the API server's.
func (w *StatusWriter) write(ctx context.Context, remote *v1.Pod, want v1.PodStatus) {
	have, _ := json.Marshal(remote.Status)
	next, _ := json.Marshal(want)
	if bytes.Equal(have, next) {
		delete(w.written, remote.UID) // caught up: a later difference is written again
		return
	}
	if last, ok := w.written[remote.UID]; ok && bytes.Equal(last.status, next) && last.over == remote.ResourceVersion {
		return // written; the watch has not brought it back yet
	}
	if terminal(remote.Status.Phase) && !terminal(want.Phase) {
		// Never regress a finished pod (an agent restarted without its
		// containers would otherwise report it Pending again).
		return
	}
	patch, err := statusPatch(remote.UID, remote.Status, want)
	if err == nil {
		_, err = w.client.CoreV1().Pods(remote.Namespace).Patch(ctx, remote.Name, types.StrategicMergePatchType, patch,
			metav1.PatchOptions{}, "status")
	}
	key := remote.Namespace + "/" + remote.Name
	switch {
	case err == nil:
		w.written[remote.UID] = writtenStatus{status: next, over: remote.ResourceVersion}
		if w.lastErr[remote.UID] != "" {
			klog.Infof("Status of pod %s written to the API server again", key)
		}
		delete(w.lastErr, remote.UID)
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Gone, or recreated under the same name: the watch says next.
		klog.V(2).Infof("Status of pod %s not written: %v", key, err)
	default:
		if msg := err.Error(); w.lastErr[remote.UID] != msg {
			klog.Errorf("Status of pod %s: %v (retried)", key, err)
			w.lastErr[remote.UID] = msg
		}
	}
}

// writtenStatus is a status written to the API server (its JSON) and the
// version of the pod its patch was computed from. Once the watch brings a
// newer version that still differs, the status is written again: a patch
// computed from a stale copy (one before the agent's previous write came
// back) cannot remove what that write added, a condition that came and
// went (PodResizeInProgress) say.
type writtenStatus struct {
	status []byte
	over   string // resourceVersion of the pod the patch was computed from
}

// statusPatch is the strategic-merge patch from old to new, carrying the
// pod's UID: the API server refuses it for another pod of that name.
func statusPatch(uid types.UID, old, new v1.PodStatus) ([]byte, error) {
	oldData, err := json.Marshal(v1.Pod{Status: old})
	if err != nil {
		return nil, err
	}
	newData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: new})
	if err != nil {
		return nil, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, v1.Pod{})
	if err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	return patch, nil
}

// delete removes a deleted pod whose containers are stopped.
func (w *StatusWriter) delete(ctx context.Context, remote *v1.Pod) {
	if w.deleted[remote.UID] {
		return
	}
	zero := int64(0)
	uid := remote.UID
	err := w.client.CoreV1().Pods(remote.Namespace).Delete(ctx, remote.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.Errorf("Delete pod %s/%s: %v (retried)", remote.Namespace, remote.Name, err)
		return
	}
	klog.V(2).Infof("Pod %s/%s stopped and deleted from the API server", remote.Namespace, remote.Name)
	w.deleted[remote.UID] = true
}
