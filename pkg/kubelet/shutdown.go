package kubelet

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodeshutdown"
)

// ShutdownErr is why the node is not Ready because the machine shuts down
// (nil: it does not), for the Node's Ready condition.
func (k *Kubelet) ShutdownErr() error { return k.shutdown.Err() }

// shutdownPods are the pods as the graceful node shutdown stops them: the
// active ones (static and standalone pods alike, as the kubelet stops all
// its active pods), each through its worker's Terminate.
type shutdownPods struct{ k *Kubelet }

var _ nodeshutdown.Pods = shutdownPods{}

func (p shutdownPods) ActivePods() []*v1.Pod { return p.k.ActivePods() }

func (p shutdownPods) TerminatePod(uid types.UID, t lifecycle.Termination) <-chan struct{} {
	p.k.workers.Terminate(uid, t)
	return p.k.workers.Stopped(uid)
}
