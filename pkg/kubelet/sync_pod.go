package kubelet

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/prober"
)

// messageDeadlineExceeded is the kubelet's message for a pod that outlived
// its activeDeadlineSeconds (its reason is kubecontainer.ReasonDeadlineExceeded).
const messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"

var _ podSyncer = (*Kubelet)(nil)

// observe waits for the pod's containers as a relist that started after the
// worker's last action on the runtime saw them, so no step acts twice on
// stale state (ok false: ctx ended first).
func (k *Kubelet) observe(ctx context.Context, w podWork) (*kubecontainer.PodState, bool) {
	state, err := k.cache.GetNewerThan(ctx, w.UID, w.Record.lastSyncTime())
	return state, err == nil
}

// stepDone records what one step of a pod's worker did: only a step that
// acted (or failed) makes the next one wait for a fresher relist, and asks
// for a relist of its pod at once (events only update what they name, and
// the periodic relist may be seconds away). A new failure is retried at
// once, once that relist has caught up: the first retry of a failure is
// immediate, as after a first crash, and the back-off it recorded spaces
// the later ones (the retry queue wakes the pod when it ends). A failure
// that repeats is retried at the next resync, or when its back-off ends:
// what waits for a back-off of its own (an image pull) would otherwise be
// synced in a loop.
func (k *Kubelet) stepDone(ctx context.Context, w podWork, op string, start time.Time, state *kubecontainer.PodState, acted bool, err error) {
	k.metrics.PodWorkerDuration.WithLabelValues(op).Observe(k.cfg.Clock.Since(start).Seconds())
	if acted || err != nil {
		w.Record.setLastSync(k.cfg.Clock.Now())
		k.relist.RelistPod(w.UID)
	}
	if ctx.Err() != nil {
		return
	}
	if changed := k.logSyncError(w, state, acted, err); err != nil && changed {
		k.dirty.MarkPod(w.UID)
	}
}

// syncPod is the step of a desired pod: it is brought to its spec by the
// runtime manager, or asked to terminate (its deadline passed, its
// admission refused it, it is finished).
func (k *Kubelet) syncPod(ctx context.Context, w podWork) (*lifecycle.Termination, error) {
	state, ok := k.observe(ctx, w)
	if !ok {
		return nil, nil
	}
	start := k.cfg.Clock.Now()
	op := "sync"
	if seen, first := w.Record.workerStarting(); first {
		op = "create"
		k.metrics.PodWorkerStartDuration.Observe(start.Sub(seen).Seconds())
	}
	t, acted, err := k.syncDesired(ctx, w.Pod, state, w.Record)
	if t == nil || t.Cause == lifecycle.Finished {
		// A finished pod's status is produced before it is stopped, as the
		// kubelet's is at the start of the sync that kills it: its app
		// containers' exits show (terminated, never waiting again) while
		// its sidecars stop, the phase Running until they have. A pod
		// ended for another cause shows it once the termination is
		// recorded.
		k.produceStatus(ctx, w, state)
	}
	k.stepDone(ctx, w, op, start, state, acted, err)
	return t, err
}

// syncDesired decides a desired pod's fate, in the kubelet's order: past
// its deadline, refused by admission (the runtime's, then the node's
// resources: kubelet/admission.go), refused under pressure (not yet
// admitted), finished; otherwise the runtime manager syncs it, and its
// Result is recorded here. It reports whether it acted on the runtime.
func (k *Kubelet) syncDesired(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, rec *podRecord) (*lifecycle.Termination, bool, error) {
	if t := k.activeDeadline(pod, state); t != nil {
		return t, false, nil
	}
	if rej := k.runtime.Admit(ctx, pod, state); rej != nil {
		return k.reject(pod, rej), false, nil
	}
	if rej, wait := k.admitFit(pod, rec); rej != nil {
		k.devices.Release(pod.UID) // what the runtime's admission gave it, before this one refused it
		return k.reject(pod, rej), false, nil
	} else if wait {
		return nil, false, nil // nothing of it runs yet; its status is Pending
	}
	if state == nil || len(state.Containers) == 0 {
		// While the node shuts down, no pod starts: it is rejected, as
		// the kubelet's shutdown manager rejects it at admission.
		if rej := k.shutdown.Admit(pod); rej != nil {
			return k.reject(pod, rej), false, nil
		}
		// Under pressure, only pods that have not started yet are refused
		// (a pod with containers was admitted before, by this agent or
		// the one before a restart); they are admitted once it is gone.
		rej := k.eviction.AdmitPod(pod)
		if rec.setRefused(rej) && rej != nil {
			klog.Errorf("Pod %s refused: %s: %s", api.Key(pod), rej.Reason, rej.Message)
			k.events.Event(events.PodRef(pod, ""), true, rej.Reason, "%s", rej.Message)
		}
		if rej != nil {
			return nil, false, nil // nothing of it runs; its status says why
		}
	} else {
		rec.setRefused(nil)
	}
	if kubecontainer.PodFinished(pod, state) {
		return &lifecycle.Termination{Cause: lifecycle.Finished, Grace: kuberuntime.GracePeriod(pod)}, false, nil
	}
	pod = k.allocate(pod, rec)
	res, err := k.runtime.SyncPod(ctx, pod, state, rec.runtime)
	k.recordResize(pod, rec, res.ResizeError)
	if !res.RetryAt.IsZero() {
		k.retries.Add(pod.UID, res.RetryAt) // nothing else may wake the pod when its back-off ends
	}
	rec.addPulling(res.Pulling)
	for name, why := range res.Waiting {
		rec.setWaiting(name, why)
	}
	k.syncProbes(pod, state, res.Stopping)
	return nil, res.Acted, err
}

// reject is the termination of a pod refused at admission, logged and
// told in an event once: its status is Failed with the refusal's reason
// and message, and it never runs.
func (k *Kubelet) reject(pod *v1.Pod, rej *lifecycle.Rejection) *lifecycle.Termination {
	klog.Errorf("Pod %s rejected: %s: %s", api.Key(pod), rej.Reason, rej.Message)
	k.events.Event(events.PodRef(pod, ""), true, rej.Reason, "%s", rej.Message)
	return &lifecycle.Termination{Cause: lifecycle.Rejected, Grace: kuberuntime.GracePeriod(pod), Reason: rej.Reason, Message: rej.Message}
}

// activeDeadline asks for a pod active longer than its
// activeDeadlineSeconds (counted from its start time, as the kubelet) to
// terminate; before then the retry queue wakes the pod at the deadline.
// The start is the status's, or, before a status has reported it, the
// running sandbox's (the status the sync that started it produced came
// from the relist before the start, and no later sync may come to set the
// timer until the sync period).
func (k *Kubelet) activeDeadline(pod *v1.Pod, state *kubecontainer.PodState) *lifecycle.Termination {
	secs := pod.Spec.ActiveDeadlineSeconds
	if secs == nil {
		return nil
	}
	var start time.Time
	if st, _ := k.status.Get(pod.UID); st.StartTime != nil {
		start = st.StartTime.Time
	} else if infra := state.RunningInfra(); infra != nil {
		start = infra.StartedAt
	} else {
		return nil // not started: the deadline counts from the start
	}
	deadline := start.Add(time.Duration(*secs) * time.Second)
	if k.cfg.Clock.Now().Before(deadline) {
		k.retries.Add(pod.UID, deadline)
		return nil
	}
	klog.Infof("Pod %s: %s", api.Key(pod), messageDeadlineExceeded)
	k.events.Event(events.PodRef(pod, ""), true, kubecontainer.ReasonDeadlineExceeded, "%s", messageDeadlineExceeded)
	return &lifecycle.Termination{Cause: lifecycle.DeadlineExceeded, Grace: kuberuntime.GracePeriod(pod),
		Reason: kubecontainer.ReasonDeadlineExceeded, Message: messageDeadlineExceeded}
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
			FieldPath: events.FieldPath(pod, c.Name), ContainerID: inst[0].ID, StartedAt: inst[0].StartedAt, PodIP: podIP})
	}
	k.probes.Sync(k.lifetime(), pod.UID, targets)
}

// syncTerminatingPod is the step of a pod asked to terminate, whatever the
// cause: its probes stop and every running container is stopped, preStop
// hooks first, within the termination's grace period. Nothing is started:
// a terminating pod is never synced again.
func (k *Kubelet) syncTerminatingPod(ctx context.Context, w podWork) error {
	state, ok := k.observe(ctx, w)
	if !ok {
		return ctx.Err()
	}
	start := k.cfg.Clock.Now()
	k.probes.RemovePod(w.UID)
	if state != nil && kubecontainer.AnyRunning(state) {
		klog.Infof("Pod %s %s: stopping it (grace %v)", k.podName(w, state), w.Termination.Cause, w.Termination.Grace)
	}
	acted, err := k.runtime.StopPod(ctx, w.Pod, state, w.Termination.Grace)
	k.produceStatus(ctx, w, state)
	k.stepDone(ctx, w, "kill", start, state, acted, err)
	return err
}

// syncTerminatedPod tears down what a stopped pod still holds of the node,
// once: its volumes (emptyDirs on disk or tmpfs, API volumes), its pod
// cgroup and its devices, as the kubelet does for a terminated pod; its dead containers
// stay for their logs (until the GC, or the pod's removal). Later calls
// only refresh its status, which is final.
func (k *Kubelet) syncTerminatedPod(ctx context.Context, w podWork) error {
	state, ok := k.observe(ctx, w)
	if !ok {
		return ctx.Err()
	}
	w.Record.mu.Lock()
	cleaned := w.Record.cleaned
	w.Record.mu.Unlock()
	if !cleaned {
		if err := k.volumes.TearDown(ctx, w.UID); err != nil {
			err = fmt.Errorf("tear down the volumes of terminated pod %s: %w", k.podName(w, state), err)
			k.stepDone(ctx, w, "kill", k.cfg.Clock.Now(), state, false, err)
			return err
		}
		// The pod cgroup is empty once its containers stopped; should it
		// not be yet, the pod's removal (or the GC) removes it.
		if err := k.runtime.RemovePodCgroup(w.UID); err != nil {
			klog.V(2).Infof("Pod %s terminated: %v (removed with the pod)", k.podName(w, state), err)
		}
		// Its devices are free for other pods, as the kubelet frees
		// those of pods no longer active.
		k.devices.Release(w.UID)
		w.Record.mu.Lock()
		w.Record.cleaned = true
		w.Record.mu.Unlock()
	}
	k.produceStatus(ctx, w, state)
	return nil
}

// forgetPod removes what is left of a terminated pod that is no longer
// desired: its containers, then what the agent's caches keep of it (each
// once, here), then its cgroup and directory. The directory goes last: it
// marks the pod as this agent's for the GC that finishes what a crash
// interrupts.
func (k *Kubelet) forgetPod(ctx context.Context, w podWork) error {
	state, ok := k.observe(ctx, w)
	if !ok {
		return ctx.Err()
	}
	start := k.cfg.Clock.Now()
	acted, err := k.runtime.RemovePod(ctx, state)
	if err == nil {
		for _, forget := range k.forgetters {
			forget(w.UID)
		}
		ns, name := k.podNames(w, state)
		k.metrics.ForgetPod(w.UID, ns, name)
		if err = k.runtime.RemovePodCgroup(w.UID); err == nil {
			if err = k.volumes.RemovePodDir(ctx, w.UID); err != nil {
				err = fmt.Errorf("remove pod directory: %w", err)
			}
		}
	}
	k.stepDone(ctx, w, "kill", start, state, acted, err)
	return err
}

// produceStatus produces the status of a pod the config still wants, once
// per step, with the reasons the step recorded: GET /pods only reads it.
func (k *Kubelet) produceStatus(ctx context.Context, w podWork, state *kubecontainer.PodState) {
	if w.Pod == nil || ctx.Err() != nil || k.desired.get(w.UID) == nil {
		return
	}
	st := k.producer.Status(ctx, w.Pod, state)
	k.status.Set(w.UID, st)
	k.producer.ObserveStart(w.Pod, &st, state)
}

// podName names a pod in the log: by its spec, or by what its containers
// say of it, or by UID.
func (k *Kubelet) podName(w podWork, state *kubecontainer.PodState) string {
	ns, name := k.podNames(w, state)
	if name == "" {
		return string(w.UID)
	}
	return ns + "/" + name
}

func (k *Kubelet) podNames(w podWork, state *kubecontainer.PodState) (namespace, name string) {
	switch {
	case w.Pod != nil:
		return w.Pod.Namespace, w.Pod.Name
	case state != nil:
		return state.Namespace, state.Name
	}
	return "", ""
}

// logSyncError logs a pod's step error when it appears or changes, and once
// when a step that acted succeeds: a pod failing the same way on every
// back-off retry (and idle between them) does not fill the log. It reports
// whether the pod's standing error changed.
func (k *Kubelet) logSyncError(w podWork, state *kubecontainer.PodState, acted bool, err error) bool {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	prev, msg := w.Record.syncError(msg, acted)
	name := k.podName(w, state)
	switch {
	case msg == prev:
		if msg != "" {
			klog.V(4).Infof("Sync pod %s: %v (as before)", name, err)
		}
	case msg == "":
		klog.Infof("Sync pod %s: no longer failing", name)
	default:
		klog.Errorf("Sync pod %s: %v", name, err)
	}
	return msg != prev
}
