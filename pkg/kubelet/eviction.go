package kubelet

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

// Pressure reports whether the node is under a pressure condition, as the
// eviction manager sees it (for the Node object).
func (k *Kubelet) Pressure(c v1.NodeConditionType) bool { return k.eviction.Manager().HasCondition(c) }

// evictionPods are the desired pods and their records as the eviction
// rounds read and mark them: what New gives the eviction manager's runner
// it makes (Deps.NewEvictor).
type evictionPods struct{ k *Kubelet }

var _ eviction.Pods = evictionPods{}

func (p evictionPods) Desired() []*v1.Pod               { return p.k.desired.all() }
func (p evictionPods) DesiredPod(uid types.UID) *v1.Pod { return p.k.desired.get(uid) }
func (p evictionPods) Evicted(uid types.UID) bool       { return p.k.workers.Termination(uid) != nil }
func (p evictionPods) Sync(uids []types.UID)            { p.k.dirty.Mark(uids) }

// Evict terminates the pod as the kubelet's eviction manager does: its
// status is Failed, reason Evicted, with the eviction's message. The
// eviction is remembered first, so that the pod stays evicted if the agent
// restarts (even before its worker stopped it).
func (p evictionPods) Evict(uid types.UID, message string, grace time.Duration) {
	if pod := p.k.desired.get(uid); pod != nil {
		if err := p.k.evictions.Remember(pod, message, p.k.cfg.Clock.Now()); err != nil {
			klog.Errorf("Eviction: pod %s: %v; it runs again if the agent restarts", api.Key(pod), err)
		}
	}
	p.k.workers.Terminate(uid, evictedBy(message, grace))
}

// evictedBy is the termination of a pod the eviction manager evicted.
func evictedBy(message string, grace time.Duration) lifecycle.Termination {
	return lifecycle.Termination{Cause: lifecycle.Evicted, Grace: grace, Reason: eviction.Reason, Message: message}
}

// rememberedEviction is the termination of a pod evicted before the agent
// restarted, with the manifest it has now (nil: none): its worker starts
// it terminated, so that it is never started again, as the kubelet never
// starts an evicted pod again.
func (k *Kubelet) rememberedEviction(pod *v1.Pod) *lifecycle.Termination {
	msg, ok := k.evictions.Lookup(pod)
	if !ok {
		return nil
	}
	klog.Infof("Pod %s was evicted before the agent restarted: it stays evicted until its manifest changes", api.Key(pod))
	t := evictedBy(msg, 0)
	return &t
}

// RefusedUnderPressure reports whether the pod was refused under pressure
// and waits to be admitted.
func (p evictionPods) RefusedUnderPressure(uid types.UID) bool {
	r := p.k.workers.Record(uid)
	if r == nil {
		return false
	}
	rej := r.refusal()
	return rej != nil && rej.Reason == eviction.Reason
}
