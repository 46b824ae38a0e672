package kubelet

import (
	"context"
	"fmt"
	"time"

	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/prober"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// messageDeadlineExceeded is the kubelet's message for a pod that outlived
// its activeDeadlineSeconds (its reason is kubecontainer.ReasonDeadlineExceeded).
const messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"

// checkActiveDeadline stops a pod active longer than its
// activeDeadlineSeconds (counted from its start time, as the kubelet), as
// an eviction stops one; before then the retry queue wakes the pod at the
// deadline. The start is the status's, or, before a status has reported it,
// the running sandbox's (the status the sync that started it produced came
// from the relist before the start, and no later sync may come to set the
// timer until the sync period).
func (k *Kubelet) checkActiveDeadline(pod *v1.Pod, state *kubecontainer.PodState) {
	secs := pod.Spec.ActiveDeadlineSeconds
	if secs == nil || k.records.evictedFor(pod.UID) != nil {
		return
	}
	var start time.Time
	if st, _ := k.status.Get(pod.UID); st.StartTime != nil {
		start = st.StartTime.Time
	} else if infra := state.RunningInfra(); infra != nil {
		start = infra.StartedAt
	} else {
		return // not started: the deadline counts from the start
	}
	deadline := start.Add(time.Duration(*secs) * time.Second)
	if k.cfg.Clock.Now().Before(deadline) {
		k.retries.add(pod.UID, deadline)
		return
	}
	glog.Infof("Pod %s: %s", api.Key(pod), messageDeadlineExceeded)
	k.cfg.Events.Event(events.PodRef(pod, ""), true, kubecontainer.ReasonDeadlineExceeded, "%s", messageDeadlineExceeded)
	k.records.setEvicted(pod.UID, &evictedPod{message: messageDeadlineExceeded, grace: kuberuntime.GracePeriod(pod), deadline: true})
}

// syncPod brings one desired pod to its spec: a pod past its deadline,
// evicted or deleted is stopped; one the node cannot run is rejected (and
// gets no probes); any other is synced by the runtime manager, whose Result
// is recorded here. It reports whether it acted on Docker: only then must
// the next sync wait for a fresher relist.
func (k *Kubelet) syncPod(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState) (bool, error) {
	k.checkActiveDeadline(pod, state)
	if ev := k.records.evictedFor(pod.UID); ev != nil {
		return k.eviction.StopEvicted(ctx, pod, state, ev.grace)
	}
	if pod.DeletionTimestamp != nil {
		// Deleted in the API server: stopped within the deletion's grace
		// period, nothing started again; the API object is removed once
		// the status says nothing runs (pkg/kubeapi), and the pod then
		// leaves the desired set.
		return k.stopDeleted(ctx, pod, state)
	}
	rej := k.runtime.Admit(pod)
	if rej == nil && (state == nil || len(state.Containers) == 0) {
		// Under pressure, only pods that have not started yet are refused
		// (a pod with containers was admitted before, by this agent or
		// the one before a restart).
		rej = k.eviction.AdmitPod(pod)
	}
	if rej != nil {
		if k.records.rejectedFor(pod.UID) == nil {
			glog.Errorf("Pod %s rejected: %s: %s", api.Key(pod), rej.Reason, rej.Message)
			k.cfg.Events.Event(events.PodRef(pod, ""), true, rej.Reason, "%s", rej.Message)
		}
		k.records.setRejected(pod.UID, rej)
		return false, nil // nothing of it runs; its status says why
	}
	k.records.setRejected(pod.UID, nil)
	res, err := k.runtime.SyncPod(ctx, pod, state)
	if !res.RetryAt.IsZero() {
		k.retries.add(pod.UID, res.RetryAt) // nothing else may wake the pod when its back-off ends
	}
	for name, why := range res.Waiting {
		k.records.setWaiting(pod.UID, name, why)
	}
	k.syncProbes(pod, state, res.Stopping)
	return res.Acted, err
}

// syncProbes points the pod's probe workers at its running app containers
// and sidecars, but for those being stopped (killed, by ID).
func (k *Kubelet) syncProbes(pod *v1.Pod, state *kubecontainer.PodState, killed map[string]bool) {
	podIP := ""
	if infra := state.RunningInfra(); infra != nil {
		podIP = infra.IP
	}
	if pod.Spec.HostNetwork {
		podIP = kuberuntime.HostNetworkIP
	}
	var targets []prober.Target
	probed := pod.Spec.Containers
	for _, c := range pod.Spec.InitContainers {
		if api.IsSidecar(&c) {
			probed = append(probed[:len(probed):len(probed)], c)
		}
	}
	for _, c := range probed {
		inst := state.Instances(c.Name)
		if len(inst) == 0 || !inst[0].Running || killed[inst[0].ID] {
			continue
		}
		targets = append(targets, prober.Target{PodUID: pod.UID, PodKey: api.Key(pod), Container: c,
			ContainerID: inst[0].ID, StartedAt: inst[0].StartedAt, PodIP: podIP})
	}
	k.probes.Sync(k.lifetime(), pod.UID, targets)
}

// podDir is the pod's directory under the root dir.
func (k *Kubelet) podDir(uid types.UID) string { return k.volumes.PodDir(uid) }

// killPod stops and removes every container of a pod that is no longer
// desired, then forgets the pod and removes its cgroup and directory. pod
// is its last spec, if known (for preStop hooks). It reports whether it
// acted on Docker.
func (k *Kubelet) killPod(ctx context.Context, uid types.UID, pod *v1.Pod, state *kubecontainer.PodState) (bool, error) {
	k.probes.RemovePod(uid)
	switch {
	case pod != nil:
		k.metrics.ForgetPod(uid, pod.Namespace, pod.Name)
	case state != nil:
		k.metrics.ForgetPod(uid, state.Namespace, state.Name)
	}
	acted, err := k.runtime.KillPod(ctx, uid, pod, state)
	if err != nil {
		return acted, err
	}
	// Only once its containers are gone is the pod forgotten: its
	// back-off, retries, status and volumes' state stay while any of it
	// may still run.
	k.forgetPod(uid)
	// The pod cgroup before the directory: the directory marks the pod as
	// this agent's for the GC that finishes what a crash interrupts.
	if err := k.runtime.RemovePodCgroup(uid); err != nil {
		return acted, err
	}
	if err := volumes.CleanupPodDir(k.podDir(uid)); err != nil {
		return acted, fmt.Errorf("remove pod directory: %w", err)
	}
	return acted, nil
}

// stopDeleted stops every running container of a pod deleted in the API
// server, preStop hooks first, within the deletion's grace period.
func (k *Kubelet) stopDeleted(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState) (bool, error) {
	k.probes.RemovePod(pod.UID)
	if state == nil || !kubecontainer.AnyRunning(state) {
		return false, nil
	}
	var running []*kubecontainer.ContainerState
	for _, c := range state.Containers {
		if c.Running {
			running = append(running, c)
		}
	}
	glog.Infof("Pod %s deleted in the API server: stopping it (grace %v)", api.Key(pod), kuberuntime.GracePeriod(pod))
	return true, k.runtime.StopAll(ctx, pod, state, running, nil, kuberuntime.GracePeriod(pod))
}
