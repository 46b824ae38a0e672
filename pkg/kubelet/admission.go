package kubelet

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/allocation"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

// The resource-fit admission: as the kubelet's, a pod is admitted only if
// its requests of cpu and memory fit in the node's allocatable beside what
// the pods admitted before it request (allocation.Fit); one that does not
// is refused for good (OutOfcpu, OutOfmemory), unless it is critical and
// preempting pods that are not makes room for it (allocation.Preempt).
//
// Pods are decided in the order they arrived (the desired set's), each
// once: a decision is kept in the pod's record for its worker's life. The
// worker of whichever pod needs a decision first decides every pod that
// waits for one, under admitMu, so that two pods arriving together never
// both take the last room. Only a relist that saw the node lets pods be
// decided: a pod that runs already (its sandbox or a container running,
// after the agent restarted) is admitted before any other is decided and
// without a check, so that a restart never refuses a running pod.

// fitDecision is a pod's resource-fit admission.
type fitDecision struct {
	decided  bool
	rejected *lifecycle.Rejection // nil: admitted
}

// fitRetry is how soon a pod that waits for its admission (no relist
// yet) or for the pods it preempted to stop takes its step again.
const fitRetry = 500 * time.Millisecond

// admitFit is the pod's resource-fit admission: its refusal, or wait true
// while it cannot be decided or waits for the pods it preempted to stop.
func (k *Kubelet) admitFit(pod *v1.Pod, rec *podRecord) (rej *lifecycle.Rejection, wait bool) {
	d := rec.fitDecision()
	if !d.decided && !k.checksFit() {
		d = fitDecision{decided: true} // every pod fits a node that names no cpu nor memory
		rec.setFit(d, nil)
	}
	if !d.decided {
		k.decidePending()
		if d = rec.fitDecision(); !d.decided {
			k.retries.Add(pod.UID, k.cfg.Clock.Now().Add(fitRetry))
			return nil, true
		}
	}
	if d.rejected != nil {
		return d.rejected, false
	}
	if k.preempting(rec) {
		k.retries.Add(pod.UID, k.cfg.Clock.Now().Add(fitRetry))
		return nil, true
	}
	return nil, false
}

// decidePending decides, in arrival order, every desired pod whose worker
// syncs it and waits for its admission: first those that run already,
// admitted as they are, then the others.
func (k *Kubelet) decidePending() {
	k.admitMu.Lock()
	defer k.admitMu.Unlock()
	if k.cache.LastUpdate().IsZero() {
		return // the node not seen yet: what runs there is not known
	}
	var pending []*v1.Pod
	for _, pod := range k.desired.inOrder() {
		rec := k.workers.Record(pod.UID)
		if phase, _ := k.workers.Phase(pod.UID); rec == nil || phase != lifecycle.Syncing || rec.fitDecision().decided {
			continue
		}
		if runs(k.cache.Get(pod.UID)) {
			rec.setFit(fitDecision{decided: true}, nil)
			continue
		}
		pending = append(pending, pod)
	}
	for _, pod := range pending {
		if rec := k.workers.Record(pod.UID); rec != nil {
			k.decide(pod, rec)
		}
	}
}

// checksFit reports whether the node's allocatable names cpu or memory:
// without, every pod fits.
func (k *Kubelet) checksFit() bool {
	_, cpu := k.cfg.Allocatable[v1.ResourceCPU]
	_, mem := k.cfg.Allocatable[v1.ResourceMemory]
	return cpu || mem
}

// runs reports whether a pod's sandbox or one of its containers runs: it
// was admitted before the agent restarted. (A pod stopped for good, by a
// preemption, say, keeps only dead containers: it is decided again.)
func runs(state *kubecontainer.PodState) bool {
	return state != nil && (state.RunningInfra() != nil || kubecontainer.AnyRunning(state))
}

// decide admits pod, refuses it, or admits it after preempting pods to
// make room; k.admitMu is held.
func (k *Kubelet) decide(pod *v1.Pod, rec *podRecord) {
	holding, preemptable := k.admittedPods(pod.UID)
	// Host ports first, as the kubelet's predicates: no preemption frees
	// them.
	if allocation.HostPortConflict(pod, holding) {
		rec.setFit(fitDecision{decided: true, rejected: &lifecycle.Rejection{Reason: allocation.ReasonNodePorts, Message: allocation.MessageNodePorts}}, nil)
		return
	}
	short := allocation.Fit(pod, holding, k.cfg.Allocatable)
	if len(short) == 0 {
		rec.setFit(fitDecision{decided: true}, nil)
		return
	}
	if !k.critical(pod) {
		rec.setFit(fitDecision{decided: true, rejected: &lifecycle.Rejection{Reason: short[0].Reason(), Message: short[0].Message()}}, nil)
		return
	}
	victims, err := allocation.Preempt(short, preemptable, func(v *v1.Pod) bool { return allocation.Preemptable(pod, v, k.critical) })
	if err != nil {
		rec.setFit(fitDecision{decided: true, rejected: &lifecycle.Rejection{Reason: allocation.ReasonUnexpectedAdmissionError,
			Message: allocation.UnexpectedAdmissionMessage(err)}}, nil)
		return
	}
	uids := make([]types.UID, 0, len(victims))
	var grace time.Duration
	for _, v := range victims {
		grace = max(grace, kuberuntime.GracePeriod(v))
		klog.Infof("Pod %s preempted to admit critical pod %s (%s)", api.Key(v), api.Key(pod), short[0].Message())
		k.events.Event(events.PodRef(v, ""), true, allocation.ReasonPreempting, "%s", allocation.MessagePreempted)
		k.metrics.Preemptions.WithLabelValues(string(short[0].Resource)).Inc()
		k.workers.Terminate(v.UID, lifecycle.Termination{Cause: lifecycle.Preempted, Grace: kuberuntime.GracePeriod(v),
			Reason: allocation.ReasonPreempting, Message: allocation.MessagePreempted})
		uids = append(uids, v.UID)
	}
	rec.setFit(fitDecision{decided: true}, uids)
	rec.mu.Lock()
	rec.preemptWait = k.cfg.Clock.Now().Add(preemptionTimeout(grace))
	rec.mu.Unlock()
}

// preemptionTimeout is how long a critical pod waits for the pods it
// preempted, with the longest grace period among them, to stop: as long
// as the kubelet's kill of a preempted pod waits (one and a half grace
// periods and 10 s), after which it starts anyway.
func preemptionTimeout(grace time.Duration) time.Duration {
	return grace + grace/2 + 10*time.Second
}

// critical reports whether a pod may preempt others to be admitted, and
// is never preempted by one that is not: a critical priority (or class),
// and, as the kubelet, a static pod where an API server also gives pods
// (in standalone every pod is static: the rule would make them all
// critical, and none could be refused or preempted).
func (k *Kubelet) critical(pod *v1.Pod) bool {
	return eviction.IsCritical(pod) || k.cfg.StaticPodsCritical && isStatic(pod)
}

// admittedPods are the desired pods, other than except, that hold
// resources of the node: admitted and not yet terminated (a terminating
// one still runs), or running and about to be admitted as they are, as
// allocated, in arrival order; preemptable are the admitted ones not
// already terminating. A resize is decided against the same pods.
func (k *Kubelet) admittedPods(except types.UID) (holding, preemptable []*v1.Pod) {
	for _, p := range k.desired.inOrder() {
		if p.UID == except {
			continue
		}
		rec := k.workers.Record(p.UID)
		phase, known := k.workers.Phase(p.UID)
		if known && phase == lifecycle.Terminated {
			continue
		}
		var d fitDecision
		var alloc allocation.Resources
		if rec != nil {
			d = rec.fitDecision()
			rec.mu.Lock()
			alloc = rec.allocated
			rec.mu.Unlock()
		}
		admitted := d.decided && d.rejected == nil
		if !admitted && (d.decided || !runs(k.cache.Get(p.UID))) {
			continue
		}
		p = allocation.Apply(p, alloc)
		holding = append(holding, p)
		if admitted && phase == lifecycle.Syncing {
			preemptable = append(preemptable, p)
		}
	}
	return holding, preemptable
}

// preempting reports whether a pod admitted by preempting others waits
// for any of them to stop; once none runs (or it waited long enough), it
// forgets them.
func (k *Kubelet) preempting(rec *podRecord) bool {
	rec.mu.Lock()
	uids, until := rec.preempted, rec.preemptWait
	rec.mu.Unlock()
	for _, uid := range uids {
		if phase, ok := k.workers.Phase(uid); ok && phase != lifecycle.Terminated && k.cfg.Clock.Now().Before(until) {
			return true
		}
	}
	if len(uids) > 0 {
		rec.mu.Lock()
		rec.preempted = nil
		rec.mu.Unlock()
	}
	return false
}

func (r *podRecord) fitDecision() fitDecision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fit
}

func (r *podRecord) setFit(d fitDecision, preempted []types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fit, r.preempted = d, preempted
}
