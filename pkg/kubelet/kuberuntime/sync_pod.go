package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// Waiting reasons of a pod's sandbox, as Kubernetes reports them.
const (
	reasonCreateSandbox = "CreatePodSandboxError"
	reasonVolumeSetup   = "FailedMount"
)

// Result is what a SyncPod did, for the Kubelet to record: the Manager
// keeps no per-pod state of the Kubelet's.
type Result struct {
	// Acted reports whether the sync acted on the runtime: only then must
	// the next sync wait for a fresher relist.
	Acted bool
	// RetryAt is when the pod must be synced again because a back-off
	// ends (zero: nothing waits): nothing of the runtime's will change
	// then to wake it.
	RetryAt time.Time
	// Waiting are the reasons, by container name, why containers wait (as
	// their status shows them); a nil reason clears the one recorded
	// before (the container started, or its dead instance says why).
	// Containers not named keep theirs.
	Waiting map[string]*kubecontainer.StartError
	// Stopping are the IDs of the running containers the sync stopped or
	// meant to: they are no longer probed.
	Stopping map[string]bool
	// Pulling is the time the sync spent pulling the pod's images (the
	// pod start metrics leave it out).
	Pulling time.Duration
	// ResizeError is why a resize in place could not be applied (nil:
	// none was due, or it was): the resize stays in progress, retried at
	// the next sync.
	ResizeError error
}

// retry asks for the pod to be synced again at t (the earliest asked wins).
func (r *Result) retry(t time.Time) {
	if !t.IsZero() && (r.RetryAt.IsZero() || t.Before(r.RetryAt)) {
		r.RetryAt = t
	}
}

// SyncPod brings an admitted pod to its spec: it decides what to do
// (computePodActions, pure) and does it. rec is the pod's record, which its
// worker owns and passes to each of its syncs: the decisions read its
// back-off and the actions update it. The Result says what happened even
// when err says the sync failed.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, rec *PodRecord) (Result, error) {
	m.warnPullSecrets(pod, rec)
	rec.backoff.gc(m.cfg.Clock.Now())
	a := computePodActions(pod, state, m.cfg.Clock.Now(), rec.backoff, podChecks{
		unhealthy:   m.probes.Unhealthy,
		started:     m.probes.Started,
		pullBackOff: func(c *v1.Container) (time.Time, *kubecontainer.StartError) { return m.images.BackOff(pod, c) },
	})
	r := Result{
		Acted:    a.createInfra || a.startInit >= 0 || len(a.start) > 0 || len(a.ephemeral) > 0 || len(a.kill) > 0 || len(a.resize) > 0,
		Waiting:  map[string]*kubecontainer.StartError{},
		Stopping: map[string]bool{},
	}
	for _, k := range a.kill {
		r.Stopping[k.c.ID] = true
	}
	r.retry(a.retryAt) // nothing else may wake the pod when its back-off ends
	err := m.applyActions(ctx, pod, state, a, rec, &r)
	return r, err
}

// applyActions carries out what computePodActions decided, recording in r
// what the Kubelet must know of it: stops first, then the sandbox, then the
// starts.
func (m *Manager) applyActions(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, a podActions, rec *PodRecord, r *Result) error {
	if !a.createInfra && state.RunningInfra() != nil {
		// A running pod's downwardAPI, config map, secret and projected
		// volumes follow its metadata and their objects (from a cache: a
		// sync with nothing due asks the API server nothing) and their
		// tokens are renewed when due.
		if err := m.volumes.Refresh(ctx, pod); err != nil {
			klog.V(2).Infof("Pod %s: refresh volumes: %v", api.Key(pod), err)
		}
	}
	m.reportBackOff(pod, state, a, r)
	if err := m.stopContainers(ctx, pod, state, a); err != nil {
		return err
	}
	if r.ResizeError = m.resizeContainers(ctx, pod, a.resize); r.ResizeError != nil {
		klog.V(2).Infof("Pod %s: resize: %v", api.Key(pod), r.ResizeError)
	}
	if !a.createInfra && a.startInit < 0 && len(a.start) == 0 && len(a.ephemeral) == 0 {
		return nil
	}
	sb, err := m.prepareSandbox(ctx, pod, state, a, rec, r)
	if err != nil {
		return err
	}
	return m.startContainers(ctx, pod, sb, a, r)
}

// reportBackOff tells why containers wait: their waiting reason when their
// image is in pull back-off, and the kubelet's BackOff event.
func (m *Manager) reportBackOff(pod *v1.Pod, state *kubecontainer.PodState, a podActions, r *Result) {
	if len(a.waiting) == 0 {
		return
	}
	klog.V(2).Infof("Pod %s: %s in back-off", api.Key(pod), strings.Join(a.waiting, ", "))
	for _, name := range a.waiting {
		if why := a.pullWaits[name]; why != nil {
			r.Waiting[name] = why
			m.cfg.Events.Event(events.PodRef(pod, name), false, "BackOff", "Back-off pulling image %q", imageOf(pod, name))
		} else if name != infraName && len(state.Instances(name)) > 0 {
			// One never created was not restarted: its failure's own
			// event (ErrImageNeverPull, Failed, ...) says why it waits.
			m.cfg.Events.Event(events.PodRef(pod, name), true, "BackOff", "Back-off restarting failed container %s", name)
		}
	}
}

// stopContainers stops the containers computePodActions let go, each
// Killing event saying why in the kubelet's words: within the pod's grace
// period, at once if the sandbox is gone, and a container killed by a probe
// with a grace period of its own within that one (at least MinStopGrace, as
// the kubelet's minimum), beside the others.
func (m *Manager) stopContainers(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, a podActions) error {
	if len(a.kill) == 0 {
		return nil
	}
	grace := GracePeriod(pod)
	if a.sandboxGone {
		grace = 0
	}
	why := map[string]string{} // by container ID: the Killing event's message, if not the plain one
	var own []containerKill
	var rest []*kubecontainer.ContainerState
	for _, k := range a.kill {
		klog.Infof("Pod %s: stopping container %s (%s): %s", api.Key(pod), k.c.Name, kubecontainer.ShortID(k.c.ID), k.reason.describe(k.c.Name))
		if msg := k.reason.event(k.c.Name); msg != "" {
			why[k.c.ID] = msg
		}
		if k.ownGrace && grace > 0 {
			own = append(own, k)
		} else {
			rest = append(rest, k.c)
		}
	}
	return errors.Join(parallel(own, func(k containerKill) error {
		return m.StopAll(ctx, pod, state, []*kubecontainer.ContainerState{k.c}, why, max(k.grace, MinStopGrace))
	}), m.StopAll(ctx, pod, state, rest, why, grace))
}

// startContainers starts what computePodActions asked for in sandbox sb:
// ephemeral containers first, as the kubelet's (they are how a failing init
// container is debugged), then the init container (the app containers wait
// if it fails), then the app containers.
func (m *Manager) startContainers(ctx context.Context, pod *v1.Pod, sb sandbox, a podActions, r *Result) error {
	var errs []error
	for _, i := range a.ephemeral {
		if err := m.startBackedOff(ctx, pod, kubecontainer.EphemeralSpec(pod, i), sb, a, r); err != nil {
			errs = append(errs, err)
		}
	}
	if a.startInit >= 0 {
		if err := m.startBackedOff(ctx, pod, &pod.Spec.InitContainers[a.startInit], sb, a, r); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	for _, i := range a.start {
		if err := m.startBackedOff(ctx, pod, &pod.Spec.Containers[i], sb, a, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// startBackedOff starts container c under its back-off: a restart lengthens
// it, a failure before the container was made asks for a retry when it
// ends.
func (m *Manager) startBackedOff(ctx context.Context, pod *v1.Pod, c *v1.Container, sb sandbox, a podActions, r *Result) error {
	bkey := backoffKey(c.Name, kubecontainer.HashContainerSpec(pod, c))
	if _, ok := a.crashed[c.Name]; ok {
		sb.record.backoff.restarted(bkey, m.cfg.Clock.Now())
		m.cfg.Metrics.ContainerRestarts.Inc()
	}
	err := m.startContainer(ctx, pod, c, sb, a.restarts[c.Name], r)
	var ce *kubecontainer.StartError
	switch {
	case err == nil || (errors.As(err, &ce) && containerMade(ce)):
		sb.record.backoff.created(bkey) // a failed start or hook: the instance dates the failure
	case ownBackOff(err):
	default:
		r.retry(sb.record.backoff.failed(bkey, m.cfg.Clock.Now()))
	}
	return err
}

// sandbox is what a pod's containers join: its infra container (and the
// pod's IP, when known), its volumes' host paths, and its containers as
// the relist saw them (an ephemeral container joins its target's PID
// namespace).
type sandbox struct {
	infraID, podIP string
	handler        string // the runtime handler of its containers
	hostPaths      map[string]string
	state          *kubecontainer.PodState
	record         *PodRecord
}

// prepareSandbox sets up the pod's volumes and, if asked, its infra
// container, and returns what its app containers join. A failure is the
// pod's (an event; its containers wait with the default reason) and backs
// off.
func (m *Manager) prepareSandbox(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, a podActions, rec *PodRecord, r *Result) (sandbox, error) {
	sb := sandbox{state: state, record: rec}
	bkey := backoffKey(infraName, kubecontainer.HashInfra(pod))
	if _, ok := a.crashed[infraName]; ok {
		rec.backoff.restarted(bkey, m.cfg.Clock.Now())
	}
	if a.createInfra {
		m.cfg.Metrics.StartedPods.Inc()
	}
	var mountErr *volumes.SetupError
	var err error
	sb.hostPaths, err = m.volumes.Setup(ctx, pod)
	if err != nil {
		errors.As(err, &mountErr)
		err = &kubecontainer.StartError{Reason: reasonVolumeSetup, Message: err.Error()}
	} else if sb.handler, err = m.classes.Handler(ctx, pod); err != nil {
		// As the kubelet, whose sandbox creation looks the handler up
		// first: the sandbox fails, and backs off.
		err = &kubecontainer.StartError{Reason: reasonCreateSandbox, Message: err.Error()}
	} else if err = m.ensurePodCgroup(pod); err != nil {
		err = &kubecontainer.StartError{Reason: reasonCreateSandbox, Message: err.Error()}
	} else if a.createInfra {
		sb.infraID, sb.podIP, err = m.startInfra(ctx, pod, sb.handler)
	} else {
		infra := state.RunningInfra()
		sb.infraID, sb.podIP = infra.ID, infra.IP
	}
	if err != nil {
		var ce *kubecontainer.StartError
		if !errors.As(err, &ce) {
			ce = &kubecontainer.StartError{Reason: reasonCreateSandbox, Message: err.Error()}
		}
		if a.createInfra {
			m.cfg.Metrics.StartedPodErrors.Inc()
		}
		if !ownBackOff(err) {
			r.retry(rec.backoff.failed(bkey, m.cfg.Clock.Now()))
			// As the kubelet: the containers keep waiting with the
			// default reason, and the failure is the pod's event, at each
			// failed try (repeats fold into its count).
			switch {
			case mountErr != nil:
				m.cfg.Events.Event(events.PodRef(pod, ""), true, reasonVolumeSetup, "%s", mountErr.Event())
			case ce.Reason == reasonVolumeSetup:
				m.cfg.Events.Event(events.PodRef(pod, ""), true, reasonVolumeSetup, "%s", ce.Message)
			default:
				m.cfg.Events.Event(events.PodRef(pod, ""), true, "FailedCreatePodSandBox", "Failed to create pod sandbox: %s", ce.Message)
			}
		}
		return sandbox{}, err
	}
	rec.backoff.created(bkey)
	if pod.Spec.HostNetwork {
		sb.podIP = HostNetworkIP
	}
	return sb, nil
}

// ownBackOff reports failures that are not the pod's fault and have a
// back-off of their own: Docker not answering (the relist backs off and
// every pod is retried once it answers) and image pulls (the image manager
// backs off per image).
func ownBackOff(err error) bool {
	var ce *kubecontainer.StartError
	if errors.As(err, &ce) && (ce.Reason == reasonImagePull || ce.Reason == reasonImagePullBackOff) {
		return true
	}
	return errors.Is(err, kubecontainer.ErrRuntimeUnavailable) || errors.Is(err, context.Canceled)
}

// imageOf is the image of the pod's container name.
func imageOf(pod *v1.Pod, name string) string {
	if c := kubecontainer.ContainerSpec(pod, name); c != nil {
		return c.Image
	}
	return ""
}

// StopPod stops every running container of a pod, preStop hooks first,
// within grace: the one way a pod's containers are stopped when it ends
// (its worker's terminating step). pod is its spec, if known (for its
// hooks; nil for a pod found on the node without one). It reports whether
// it acted on the runtime.
func (m *Manager) StopPod(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, grace time.Duration) (bool, error) {
	var running []*kubecontainer.ContainerState
	if state != nil {
		for _, c := range state.Containers {
			if c.Running {
				running = append(running, c)
			}
		}
	}
	if len(running) == 0 {
		return false, nil
	}
	return true, m.StopAll(ctx, pod, state, running, nil, max(grace, MinStopGrace))
}

// RemovePod removes every container of a pod that has left the node (they
// are stopped). It reports whether it acted on the runtime.
func (m *Manager) RemovePod(ctx context.Context, state *kubecontainer.PodState) (bool, error) {
	if state == nil || len(state.Containers) == 0 {
		return false, nil
	}
	for _, c := range state.Containers {
		if err := m.RemoveContainer(ctx, c); err != nil {
			return true, err
		}
	}
	return true, nil
}

// GracePeriod is the pod's grace period: the deletion's, once the API
// server set one (kubectl delete --grace-period), else the spec's.
func GracePeriod(pod *v1.Pod) time.Duration {
	g := time.Duration(api.DefaultTerminationGracePeriod) * time.Second
	if p := pod.Spec.TerminationGracePeriodSeconds; p != nil {
		g = time.Duration(*p) * time.Second
	}
	if p := pod.DeletionGracePeriodSeconds; p != nil {
		g = time.Duration(*p) * time.Second
	}
	return max(g, MinStopGrace)
}

// LabelGrace is the grace period recorded on a pod's containers, for pods
// whose spec is gone.
func LabelGrace(state *kubecontainer.PodState) time.Duration {
	for _, c := range state.Containers {
		var secs int64
		if _, err := fmt.Sscan(c.Labels[kubecontainer.LabelGracePeriod], &secs); err == nil {
			return max(time.Duration(secs)*time.Second, MinStopGrace)
		}
	}
	return time.Duration(api.DefaultTerminationGracePeriod) * time.Second
}
