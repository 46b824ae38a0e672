package app

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/etcdnode"
	"github.com/classic-kubelet/kubelet/pkg/kubeapi"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/server"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/status"
)

// localPods are the agent's pods as its status writers read them: the
// API's pod view, and the produced statuses with their change signals.
type localPods struct {
	*server.PodView
	statuses *status.Manager
}

var (
	_ kubeapi.LocalPods  = localPods{}
	_ etcdnode.PodSource = localPods{}
)

// SyncedStatus returns the status a pod's worker produced after its last
// sync; none before the first (a status computed before the first relist
// would report a running pod Pending).
func (l localPods) SyncedStatus(uid types.UID) (v1.PodStatus, bool) { return l.statuses.Get(uid) }

// StatusChanged is poked when a pod's status changes or a pod is gone (a
// single reader: the etcd status writer).
func (l localPods) StatusChanged() <-chan struct{} { return l.statuses.Changed() }

// SubscribeStatus returns a channel poked as StatusChanged is, for another
// reader (the API server's status writer).
func (l localPods) SubscribeStatus() <-chan struct{} { return l.statuses.Subscribe() }
