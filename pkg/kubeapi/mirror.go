package kubeapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// Mirrors says how mirror pods are made: every pod of the file, http, api
// and etcd sources gets one in the API server, owned by the Node, carrying
// the static pod's status.
type Mirrors struct {
	// NodeUID is the registered Node's UID ("" before registration: no
	// mirror is made, NodeRestriction wants the owner reference).
	NodeUID func() types.UID
	// SourcesSeen reports whether every static source has delivered: only
	// then is a mirror without a static pod an orphan to delete.
	SourcesSeen func() bool
	// Refused is told, once per pod, why a static pod gets no mirror.
	Refused func(pod *v1.Pod, why string)
}

// mirrorHash identifies the static pod a mirror stands for: a new spec (or
// labels, annotations) makes a new mirror.
func mirrorHash(p *v1.Pod) string {
	data, _ := json.Marshal(struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
		UID         types.UID         `json:"uid"`
		Spec        v1.PodSpec        `json:"spec"`
	}{p.Labels, p.Annotations, p.UID, p.Spec})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// mirrorRefusal says why NodeRestriction would refuse a mirror of p: a
// mirror pod may not name secrets, config maps, service accounts,
// persistent volume claims or ephemeral containers ("" if none).
func mirrorRefusal(p *v1.Pod) string {
	if p.Spec.ServiceAccountName != "" {
		return "it names service account " + p.Spec.ServiceAccountName
	}
	if len(p.Spec.EphemeralContainers) > 0 {
		return "it has ephemeral containers"
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Secret != nil:
			return "volume " + v.Name + " is a secret"
		case v.ConfigMap != nil:
			return "volume " + v.Name + " is a config map"
		case v.PersistentVolumeClaim != nil, v.Ephemeral != nil:
			return "volume " + v.Name + " is a persistent volume claim"
		case v.Projected != nil:
			for _, s := range v.Projected.Sources {
				if s.Secret != nil || s.ConfigMap != nil || s.ServiceAccountToken != nil || s.ClusterTrustBundle != nil {
					return "volume " + v.Name + " projects an API object"
				}
			}
		}
	}
	for _, cs := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				if e.ValueFrom != nil && (e.ValueFrom.SecretKeyRef != nil || e.ValueFrom.ConfigMapKeyRef != nil) {
					return "container " + c.Name + " takes variables from a secret or config map"
				}
			}
			if len(c.EnvFrom) > 0 {
				return "container " + c.Name + " takes variables from a secret or config map"
			}
		}
	}
	return ""
}

// syncMirror keeps one mirror pod: its status written from the static
// pod's; replaced when the static pod changed; deleted when its static pod
// is gone (once the sources have delivered) or when an operator deleted it
// (it is made again).
func (w *StatusWriter) syncMirror(ctx context.Context, remote, static *v1.Pod) {
	switch {
	case static == nil:
		if w.mirrors.SourcesSeen() {
			w.deleteNow(ctx, remote, "its static pod is gone")
		}
	case remote.DeletionTimestamp != nil:
		w.deleteNow(ctx, remote, "deleted in the API server: it is made again")
	case remote.Annotations[api.MirrorAnnotation] != mirrorHash(static):
		w.deleteNow(ctx, remote, "its static pod changed: it is made again")
	default:
		delete(w.creating, api.Key(static))
		if st, ok := w.local.SyncedStatus(static.UID); ok {
			w.write(ctx, remote, merged(remote.Status, st))
		}
	}
}

// deleteNow deletes a mirror pod at once (grace 0, its UID as precondition).
func (w *StatusWriter) deleteNow(ctx context.Context, remote *v1.Pod, why string) {
	if w.deleted[remote.UID] {
		return
	}
	zero := int64(0)
	uid := remote.UID
	err := w.client.CoreV1().Pods(remote.Namespace).Delete(ctx, remote.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		klog.Errorf("Delete mirror pod %s/%s: %v (retried)", remote.Namespace, remote.Name, err)
		return
	}
	klog.V(2).Infof("Mirror pod %s/%s deleted: %s", remote.Namespace, remote.Name, why)
	w.deleted[remote.UID] = true
	delete(w.creating, remote.Namespace+"/"+remote.Name) // made again at once
}

// mirrorCreateSpacing is how long a mirror just created is given to show
// in the watch before it is created again.
const mirrorCreateSpacing = 10 * time.Second

// createMirror makes the static pod's mirror.
func (w *StatusWriter) createMirror(ctx context.Context, static *v1.Pod) {
	key := api.Key(static)
	if why := mirrorRefusal(static); why != "" {
		if !w.refused[static.UID] {
			w.refused[static.UID] = true
			klog.Warningf("Static pod %s gets no mirror pod: %s, which NodeRestriction refuses for mirror pods", key, why)
			w.mirrors.Refused(static, why)
		}
		return
	}
	uid := w.mirrors.NodeUID()
	if uid == "" {
		return // not registered yet
	}
	if at, ok := w.creating[key]; ok && w.clock.Since(at) < mirrorCreateSpacing {
		return
	}
	m := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: static.Name, Namespace: static.Namespace, Labels: static.Labels,
		Annotations: map[string]string{}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node",
			Name: static.Spec.NodeName, UID: uid, Controller: new(bool)}}},
		Spec: *static.Spec.DeepCopy()}
	*m.OwnerReferences[0].Controller = true
	for k, v := range static.Annotations {
		m.Annotations[k] = v
	}
	m.Annotations[api.MirrorAnnotation] = mirrorHash(static)
	_, err := w.client.CoreV1().Pods(static.Namespace).Create(ctx, m, metav1.CreateOptions{})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		w.creating[key] = w.clock.Now()
		delete(w.lastErr, static.UID)
	default:
		if msg := err.Error(); w.lastErr[static.UID] != msg {
			klog.Errorf("Create the mirror pod of %s: %v (retried)", key, err)
			w.lastErr[static.UID] = msg
		}
		w.creating[key] = w.clock.Now() // spaced as a success: no hot loop
	}
}
