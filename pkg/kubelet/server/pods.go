package server

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// ErrNotFound is returned when a pod or container the API asks for is not
// on this node. Its text is part of the API's error bodies, so it keeps the
// words it had when the agent's core answered these lookups.
var ErrNotFound = errors.New("kubelet: not found")

// errNoInstance marks an ErrNotFound for a desired container that the last
// relist found no instance of.
var errNoInstance = errors.New("no instance")

// DesiredPods are the pods the config wants on this node.
type DesiredPods interface {
	All() []*v1.Pod
}

// PodStatuses are the statuses the pods' workers produced after their last
// sync (none before a pod's first).
type PodStatuses interface {
	Get(uid types.UID) (v1.PodStatus, bool)
}

// PodCache is the pods' containers as the last relist found them.
type PodCache interface {
	Get(uid types.UID) *kubecontainer.PodState
	All() map[types.UID]*kubecontainer.PodState
	// GetNewerThan waits for a relist that started after since.
	GetNewerThan(ctx context.Context, uid types.UID, since time.Time) (*kubecontainer.PodState, error)
}

// Relister relists the node at once when asked.
type Relister interface {
	RelistNow()
}

// PodSources are the parts of the agent the pod view reads. The view only
// reads them; the agent's sync loop and workers write them.
type PodSources struct {
	Desired  DesiredPods
	Statuses PodStatuses
	Cache    PodCache
	Relist   Relister
	// Fallback computes the status of a desired pod whose worker has not
	// produced one yet.
	Fallback func(*v1.Pod) v1.PodStatus
}

// PodView is the agent's pods as the API shows them: the desired pods with
// their produced statuses, the pods found in Docker, and the containers a
// request may read logs from, exec in or report stats of. It is also what
// the status writers of node mode and etcd list.
type PodView struct {
	src PodSources
}

// NewPodView returns a view over src.
func NewPodView(src PodSources) *PodView { return &PodView{src: src} }

// ContainerRef is a container the API may read logs from, exec in or report
// stats of.
type ContainerRef struct {
	ID      string
	Running bool
	Pod     *v1.Pod
}

// GetPods returns the desired pods, sorted by namespace/name, each a copy
// carrying the status its worker produced after its last sync. The copies
// share their metadata and spec with the desired pods: read only.
func (v *PodView) GetPods() []*v1.Pod {
	pods := v.src.Desired.All()
	sort.Slice(pods, func(i, j int) bool { return api.Key(pods[i]) < api.Key(pods[j]) })
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, v.withStatus(p))
	}
	return out
}

// GetPod returns one desired pod with its status.
func (v *PodView) GetPod(namespace, name string) (*v1.Pod, bool) {
	for _, p := range v.src.Desired.All() {
		if p.Namespace == namespace && p.Name == name {
			return v.withStatus(p), true
		}
	}
	return nil, false
}

// RunningPods returns the pods as found in Docker (as of the last relist),
// whether or not the config wants them: each with its running containers'
// names, images and IDs.
func (v *PodView) RunningPods() []*v1.Pod {
	out := []*v1.Pod{}
	for uid, state := range v.src.Cache.All() {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: state.Name, Namespace: state.Namespace, UID: uid}}
		for _, c := range state.Containers {
			if !c.Running || c.Name == kubecontainer.InfraContainerName {
				continue
			}
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c.Name, Image: c.Image})
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{Name: c.Name, Image: c.Image,
				ImageID: c.StatusImageID(), ContainerID: "docker://" + c.ID,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}}})
		}
		if len(pod.Spec.Containers) > 0 {
			out = append(out, pod)
		}
	}
	sort.Slice(out, func(i, j int) bool { return api.Key(out[i]) < api.Key(out[j]) })
	return out
}

// withStatus is a copy of the pod with its status as its worker last
// produced it (computed by the fallback only for a pod whose worker has not
// run yet). The copy is shallow: a pod is never changed once desired, and a
// deep copy of a 10 MiB pod made every GET /pods (and /stats/summary) cost
// its size again.
func (v *PodView) withStatus(p *v1.Pod) *v1.Pod {
	cp := *p
	st, ok := v.src.Statuses.Get(p.UID)
	if !ok {
		st = v.src.Fallback(p)
	}
	cp.Status = st
	return &cp
}

// FindContainer returns the newest instance of a desired pod's container,
// or, with previous, the one before it (whose logs kubectl shows with
// --previous). uid, when not empty, must be the pod's.
func (v *PodView) FindContainer(namespace, pod, uid, container string, previous bool) (ContainerRef, error) {
	var p *v1.Pod
	for _, d := range v.src.Desired.All() {
		if d.Namespace == namespace && d.Name == pod && (uid == "" || string(d.UID) == uid) {
			p = d
		}
	}
	if p == nil {
		return ContainerRef{}, fmt.Errorf("%w: pod %s/%s", ErrNotFound, namespace, pod)
	}
	if container == "" && len(p.Spec.Containers) == 1 {
		container = p.Spec.Containers[0].Name
	}
	if kubecontainer.ContainerSpec(p, container) == nil && container != kubecontainer.InfraContainerName {
		return ContainerRef{}, fmt.Errorf("%w: container %q in pod %s/%s", ErrNotFound, container, namespace, pod)
	}
	instances := v.src.Cache.Get(p.UID).Instances(container)
	i := 0
	if previous {
		i = 1
	}
	if len(instances) <= i {
		if previous {
			return ContainerRef{}, fmt.Errorf("%w: %w: no previous instance of container %q in pod %s/%s", ErrNotFound, errNoInstance, container, namespace, pod)
		}
		return ContainerRef{}, fmt.Errorf("%w: %w of container %q in pod %s/%s", ErrNotFound, errNoInstance, container, namespace, pod)
	}
	return ContainerRef{ID: instances[i].ID, Running: instances[i].Running, Pod: p}, nil
}

// freshLookupTimeout bounds how long FindRunningContainer waits for the
// relist it asks for.
const freshLookupTimeout = 3 * time.Second

// FindRunningContainer is FindContainer for a request that needs the
// container running (exec, attach, port-forward). When the last relist
// shows no running instance it relists at once and looks again: a container
// started a moment ago is running in Docker before the periodic relist
// sees it, and a client that just saw it start must not be told otherwise.
func (v *PodView) FindRunningContainer(ctx context.Context, namespace, pod, uid, container string) (ContainerRef, error) {
	ref, err := v.FindContainer(namespace, pod, uid, container, false)
	if (err == nil && ref.Running) || (err != nil && !errors.Is(err, errNoInstance)) {
		return ref, err
	}
	if !v.relistNow(ctx) {
		return ref, err
	}
	return v.FindContainer(namespace, pod, uid, container, false)
}

// FindLoggedContainer is FindContainer for a container's logs. When the
// last relist lacks the instance asked for it relists at once and looks
// again: the status a client read (say restartCount 1, then kubectl logs
// --previous) comes from the pod's worker, which may have started the new
// instance since the periodic relist.
func (v *PodView) FindLoggedContainer(ctx context.Context, namespace, pod, container string, previous bool) (ContainerRef, error) {
	ref, err := v.FindContainer(namespace, pod, "", container, previous)
	if err == nil || !errors.Is(err, errNoInstance) || !v.relistNow(ctx) {
		return ref, err
	}
	return v.FindContainer(namespace, pod, "", container, previous)
}

// relistNow asks for a relist and waits (at most freshLookupTimeout) for
// the cache it produces; false when none came.
func (v *PodView) relistNow(ctx context.Context) bool {
	since := time.Now()
	v.src.Relist.RelistNow()
	ctx, cancel := context.WithTimeout(ctx, freshLookupTimeout)
	defer cancel()
	_, err := v.src.Cache.GetNewerThan(ctx, "", since)
	return err == nil
}

// IsContainerLogFile reports whether path is the log file of a container of
// this agent (so /logs may follow a symlink to it).
func (v *PodView) IsContainerLogFile(path string) bool {
	clean := filepath.Clean(path)
	for _, p := range v.src.Cache.All() {
		for _, c := range p.Containers {
			if c.LogPath != "" && filepath.Clean(c.LogPath) == clean {
				return true
			}
		}
	}
	return false
}
