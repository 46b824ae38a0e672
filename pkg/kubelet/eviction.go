package kubelet

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
)

// newEvictor is the eviction rounds' runner (pkg/kubelet/eviction) on the
// Kubelet's pods, records, cache and managers; New makes it last.
func newEvictor(k *Kubelet) *eviction.Evictor {
	node := k.cfg.EvictionNode
	node.RootDir = k.cfg.RootDir
	cg, _ := k.cfg.Cgroups.(eviction.CgroupUsage)
	return eviction.NewEvictor(eviction.EvictorConfig{Eviction: k.cfg.Eviction, Node: node, Period: housekeepingPeriod},
		eviction.Deps{Pods: evictionPods{k}, States: k.cache, Runtime: k.runtime, Images: k.images, Probes: k.probes,
			Volumes: k.volumes, Disk: k.meter, Cgroups: cg, Events: k.cfg.Events,
			GC: func() gc.Policy { return k.housekeeping().GC }, Clock: k.cfg.Clock})
}

// Pressure reports whether the node is under a pressure condition, as the
// eviction manager sees it (for the Node object).
func (k *Kubelet) Pressure(c v1.NodeConditionType) bool { return k.eviction.Manager().HasCondition(c) }

// evictedPod is what is remembered of a pod the eviction manager evicted:
// it stays Failed, its containers stopped, until its spec changes (a new
// pod) or the agent restarts.
type evictedPod struct {
	message string
	grace   time.Duration
	// deadline marks a pod stopped for its activeDeadlineSeconds rather
	// than evicted (reason DeadlineExceeded, no DisruptionTarget).
	deadline bool
}

// evictionPods are the desired pods and their records as the eviction
// rounds read and mark them.
type evictionPods struct{ k *Kubelet }

var _ eviction.Pods = evictionPods{}

func (p evictionPods) Desired() []*v1.Pod               { return p.k.desired.all() }
func (p evictionPods) DesiredPod(uid types.UID) *v1.Pod { return p.k.desired.get(uid) }
func (p evictionPods) Evicted(uid types.UID) bool       { return p.k.records.evictedFor(uid) != nil }
func (p evictionPods) Sync(uids []types.UID)            { p.k.dirty.mark(uids) }
func (p evictionPods) SetEvicted(uid types.UID, message string, grace time.Duration) {
	p.k.records.setEvicted(uid, &evictedPod{message: message, grace: grace})
}

func (p evictionPods) RefusedUnderPressure(uid types.UID) bool {
	rej := p.k.records.rejectedFor(uid)
	return rej != nil && rej.Reason == eviction.Reason
}
