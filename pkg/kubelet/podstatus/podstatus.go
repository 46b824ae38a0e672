// Package podstatus is the status producer: it builds a pod's status as
// the kubelet reports it (phase, conditions, container statuses with their
// waiting and terminated reasons and termination messages) from the desired
// pod, its containers as the relist last saw them, the probes' results and
// what the agent recorded of the pod (why a container could not start, a
// rejection, an eviction). Each pod worker runs it after its sync, under
// the sync's context; pkg/kubelet/status keeps and serves what it produces
// and stamps the conditions' transition times. It owns the termination
// messages (read once per dead container: the message file, or its logs
// under FallbackToLogsOnError, bounded) and the pod start metrics, recorded
// the first time a produced status shows every container running.
package podstatus

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/allocation"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// Records is what a status reads of the agent's per-pod record (kept by
// pkg/kubelet between syncs), and the termination messages it keeps there.
type Records interface {
	// Waiting is why a container (or "POD", the sandbox) could not start
	// (nil: nothing recorded).
	Waiting(uid types.UID, container string) *kubecontainer.StartError
	// Rejected is why the pod may not run here (nil: admitted).
	Rejected(uid types.UID) *lifecycle.Rejection
	// Termination is why the pod is ending (nil: it is not).
	Termination(uid types.UID) *lifecycle.Termination
	// Message is the termination message kept for a dead container.
	Message(uid types.UID, containerID string) (string, bool)
	// SetMessage keeps a dead container's termination message.
	SetMessage(uid types.UID, containerID, msg string)
	// Resize is what the agent decided of the pod's resources: their
	// allocation, a resize pending, the last resize's failure.
	Resize(uid types.UID) Resize
	// Started records that the pod runs, returning when it was first seen
	// and how long its image pulls took; first is false if this was
	// recorded before (or the config never gave the pod).
	Started(uid types.UID) (seen time.Time, pulling time.Duration, first bool)
}

// Resize is what the agent decided of a pod's resources: what it
// allocated its containers (nil: nothing yet, the spec's), why a resize is
// pending (zero: none), and why the last resize in place failed ("": it
// did not).
type Resize struct {
	Allocated allocation.Resources
	Pending   allocation.Pending
	Error     string
}

// Statuses is the status store (pkg/kubelet/status): the pod's last status,
// and the conditions stamped with their transition times.
type Statuses interface {
	Get(uid types.UID) (v1.PodStatus, bool)
	Stamp(uid types.UID, conds []v1.PodCondition) []v1.PodCondition
}

// Probes is what the prober says of a running container.
type Probes interface {
	Started(c *v1.Container, containerID string) bool
	Ready(c *v1.Container, containerID string) bool
}

// Logs reads a container's logs (the runtime manager's Logs).
type Logs interface {
	Logs(ctx context.Context, id string, o kubecontainer.LogOptions, w io.Writer) error
}

// Config is what the Producer needs.
type Config struct {
	// HostIP is the pods' host IP.
	HostIP string
	// PodDir is a pod's directory, which holds its termination message
	// files.
	PodDir   func(types.UID) string
	Records  Records
	Statuses Statuses
	Probes   Probes
	Logs     Logs
	// Metrics gets the pod start metrics.
	Metrics *metrics.Metrics
	// Clock times the pod starts; nil: the real clock.
	Clock clock.PassiveClock
}

// Producer produces the pods' statuses.
type Producer struct {
	cfg Config
	// logTimeout bounds a read of a container's logs for its
	// termination message.
	logTimeout time.Duration
}

// logReadTimeout bounds a read of a dead container's logs (the message of
// FallbackToLogsOnError).
const logReadTimeout = 5 * time.Second

// New returns a Producer.
func New(cfg Config) *Producer {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Producer{cfg: cfg, logTimeout: logReadTimeout}
}

// Status computes a pod's status as the kubelet reports it, from its
// containers (as of the last relist), the probes, and the reasons recorded
// when a container could not start. Only the conditions' transition times
// come from memory (checkpointed), so a restarted agent reports the same;
// the pod's IPs and start time are kept from its last status once its
// sandbox is gone, as the kubelet keeps them for a completed pod. ctx is
// the caller's (a pod worker's sync, or Run's for a pod not synced yet): a
// dead container's logs are read under it.
func (p *Producer) Status(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState) v1.PodStatus {
	st := v1.PodStatus{QOSClass: kubecontainer.QOSClass(pod), HostIP: p.cfg.HostIP, ObservedGeneration: pod.Generation}
	if st.HostIP != "" {
		st.HostIPs = []v1.HostIP{{IP: st.HostIP}}
	}
	if rej := p.cfg.Records.Rejected(pod.UID); rej != nil {
		// As the kubelet reports a pod its admission refused: failed,
		// with the reason, and no container statuses.
		st.Phase, st.Reason, st.Message = v1.PodFailed, rej.Reason, "Pod was rejected: "+rej.Message
		return st
	}
	infra := state.RunningInfra()
	p.addresses(pod, infra, &st)
	// A pod the agent ended (evicted, preempted, past its deadline, the node
	// shutting down) is done: its containers' last exits are final; so is a pod
	// deleted in the API server once nothing of it runs.
	var evicted *lifecycle.Termination
	if t := p.cfg.Records.Termination(pod.UID); t != nil && (t.Cause == lifecycle.Evicted || t.Cause == lifecycle.DeadlineExceeded ||
		t.Cause == lifecycle.Shutdown || t.Cause == lifecycle.Preempted) {
		evicted = t
	}
	deleted := pod.DeletionTimestamp != nil && (state == nil || !kubecontainer.AnyRunning(state))
	finished := state != nil && kubecontainer.PodFinished(pod, state) || evicted != nil || deleted
	resize := p.cfg.Records.Resize(pod.UID)
	allocated := allocation.Apply(pod, resize.Allocated)
	p.containerStatuses(ctx, allocated, state, infra, finished, &st)
	st.Phase = podPhase(pod, st.InitContainerStatuses, st.ContainerStatuses, finished)
	if deleted && st.Phase != v1.PodSucceeded {
		// As the kubelet: a deleted pod ends terminal, Failed unless every
		// container succeeded (one that never ran did not).
		st.Phase = v1.PodFailed
	}
	ready := containersReadyCondition(pod, &st)
	podReady := readinessGates(pod, ready)
	conds := []v1.PodCondition{
		readyToStartContainersCondition(pod, infra),
		initializedCondition(pod, &st),
		podReady,
		ready,
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
	}
	if evicted != nil {
		// Failed even where its containers exited 0 when told to stop:
		// the kubelet sets the phase of a pod it ends so as the stop
		// begins, while it still runs (its shutdown manager leaves only a
		// pod already Succeeded, which here is no longer active).
		st.Phase, st.Reason, st.Message = v1.PodFailed, evicted.Reason, evicted.Message
	}
	switch {
	case evicted != nil && (evicted.Cause == lifecycle.Evicted || evicted.Cause == lifecycle.Shutdown):
		// As the kubelet reports a pod its eviction manager, or its
		// shutdown manager, stopped.
		conds = append(conds, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
			Reason: v1.PodReasonTerminationByKubelet, Message: evicted.Message})
	case evicted != nil && evicted.Cause == lifecycle.Preempted:
		// As the kubelet reports a pod a critical pod preempted.
		conds = append(conds, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue,
			Reason: v1.PodReasonTerminationByKubelet, Message: allocation.MessagePreemptedDisruption})
	}
	if !finished {
		conds = append(conds, resizeConditions(allocated, state, resize)...)
	}
	for i := range conds {
		conds[i].ObservedGeneration = pod.Generation
	}
	st.Conditions = p.cfg.Statuses.Stamp(pod.UID, conds)
	return st
}

// addresses sets the pod's IPs (the sandbox's, the node's with
// hostNetwork, else the last known) and its start time, which never moves
// once set.
func (p *Producer) addresses(pod *v1.Pod, infra *kubecontainer.ContainerState, st *v1.PodStatus) {
	prev, _ := p.cfg.Statuses.Get(pod.UID)
	if infra != nil {
		st.PodIP = infra.IP
		t := metav1.NewTime(infra.StartedAt)
		st.StartTime = &t
	}
	if pod.Spec.HostNetwork {
		st.PodIP = st.HostIP
	}
	if st.PodIP != "" {
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	} else {
		st.PodIP, st.PodIPs = prev.PodIP, prev.PodIPs
	}
	if prev.StartTime != nil {
		st.StartTime = prev.StartTime
	}
}

// containerStatuses sets the statuses of the init, app and ephemeral
// containers. Only an init container's instances of the current sandbox
// count, unless the pod is finished.
func (p *Producer) containerStatuses(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, infra *kubecontainer.ContainerState, finished bool, st *v1.PodStatus) {
	current := func(c *kubecontainer.ContainerState) bool {
		return infra != nil && !c.CreatedAt.Before(infra.CreatedAt)
	}
	// A container not created yet waits as the kubelet's default says: for
	// the init containers of the pod, and for its app containers too.
	fresh := reasonCreating
	if len(pod.Spec.InitContainers) > 0 {
		fresh = reasonInitializing
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var instances []*kubecontainer.ContainerState
		for _, inst := range state.Instances(c.Name) {
			if current(inst) || finished {
				instances = append(instances, inst)
			}
		}
		cs := p.containerStatus(ctx, pod, c, instances, finished, !api.IsSidecar(c), fresh)
		if !api.IsSidecar(c) {
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		st.ContainerStatuses = append(st.ContainerStatuses, p.containerStatus(ctx, pod, c, state.Instances(c.Name), finished, false, fresh))
	}
	for i := range pod.Spec.EphemeralContainers {
		// Never restarted: an ephemeral container that exited is
		// terminated, whatever the restart policy, as if finished.
		c := kubecontainer.EphemeralSpec(pod, i)
		st.EphemeralContainerStatuses = append(st.EphemeralContainerStatuses, p.containerStatus(ctx, pod, c, state.Instances(c.Name), true, false, fresh))
	}
}

// podPhase is the kubelet's getPhase over the statuses produced: Pending
// while an init container has not completed (or a sidecar has not started,
// before any app container ran) or any container waits without having run
// before; Running while one runs and every one has started; once none
// runs, the restart policy (and whether the pod is finished) decides.
func podPhase(pod *v1.Pod, init, app []v1.ContainerStatus, finished bool) v1.PodPhase {
	pendingInit, pendingSidecars, failedInit := 0, 0, 0
	running, waiting, stopped, succeeded := 0, 0, 0, 0
	for i, cs := range init {
		ranBefore := cs.LastTerminationState.Terminated != nil
		if api.IsSidecar(&pod.Spec.InitContainers[i]) {
			// A sidecar counts while it runs, and while it waits to run
			// for the first time; one that stopped counts for nothing.
			switch {
			case cs.State.Running != nil:
				running++
				if cs.Started == nil || !*cs.Started {
					pendingSidecars++
				}
			case cs.State.Waiting != nil && !ranBefore:
				pendingSidecars++
				waiting++
			}
			continue
		}
		switch {
		case cs.State.Terminated != nil:
			if cs.State.Terminated.ExitCode != 0 {
				failedInit++
			}
		case cs.State.Waiting != nil && ranBefore:
			if cs.LastTerminationState.Terminated.ExitCode != 0 {
				failedInit++
			}
		default: // running, or waiting to run for the first time
			pendingInit++
		}
	}
	for _, cs := range app {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.LastTerminationState.Terminated != nil:
			stopped++ // waiting to restart
		default:
			waiting++
		}
	}
	policy := pod.Spec.RestartPolicy
	switch {
	case failedInit > 0 && policy == v1.RestartPolicyNever:
		return v1.PodFailed
	case (pendingInit > 0 || pendingSidecars > 0) && !anyAppStarted(app), waiting > 0:
		// An app container that ran means the pod was initialized: init
		// containers running again in a new sandbox do not make it Pending.
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped == 0:
		return v1.PodPending
	case finished && stopped == succeeded:
		return v1.PodSucceeded
	case finished:
		return v1.PodFailed
	case kubecontainer.ContainerPolicies(pod):
		return v1.PodRunning // not finished: a container will restart
	case policy == v1.RestartPolicyAlways:
		return v1.PodRunning // every container is restarting
	case stopped == succeeded:
		return v1.PodSucceeded
	case policy == v1.RestartPolicyNever:
		return v1.PodFailed
	default:
		return v1.PodRunning // OnFailure, restarting what failed
	}
}

// anyAppStarted reports whether an app container runs or has run to its
// end: the pod got past its init containers, and a sidecar restarting since
// does not make it pending or uninitialized again.
func anyAppStarted(app []v1.ContainerStatus) bool {
	for _, cs := range app {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// Reasons of containers waiting or terminated, as Kubernetes reports them.
const (
	reasonCreating     = "ContainerCreating"
	reasonCrashLoop    = "CrashLoopBackOff"
	reasonInitializing = "PodInitializing"
	// reasonCannotRun is the terminated reason of a container Docker
	// created but could not start, as dockershim reported it.
	reasonCannotRun = "ContainerCannotRun"
)

// Reasons of the kubelet's pod conditions.
const (
	reasonPodCompleted   = "PodCompleted"
	reasonPodFailed      = "PodFailed"
	reasonNotReady       = "ContainersNotReady"
	reasonNotInitialized = "ContainersNotInitialized"
)

// resizeConditions are the kubelet's resize conditions, present only while
// they are True: PodResizePending while a resize is not allocated (its
// reason and message), PodResizeInProgress while a running container of
// the allocated pod does not yet run with its allocation (reason Error and
// the failure when the last attempt failed).
func resizeConditions(allocated *v1.Pod, state *kubecontainer.PodState, r Resize) []v1.PodCondition {
	var out []v1.PodCondition
	if r.Pending.Reason != "" {
		out = append(out, v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: r.Pending.Reason, Message: r.Pending.Message})
	}
	if state != nil && kuberuntime.ResizeInProgress(allocated, state) {
		c := v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue}
		if r.Error != "" {
			c.Reason, c.Message = v1.PodReasonError, r.Error
		}
		out = append(out, c)
	}
	return out
}

// readyToStartContainersCondition is True while the pod's sandbox runs and
// need not be made again (its network is set up).
func readyToStartContainersCondition(pod *v1.Pod, infra *kubecontainer.ContainerState) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse}
	if infra != nil && infra.Hash == kubecontainer.HashInfra(pod) {
		c.Status = v1.ConditionTrue
	}
	return c
}

// initializedCondition is True once every init container has completed (a
// sidecar: started), or an app container has started; a succeeded pod says
// PodCompleted.
func initializedCondition(pod *v1.Pod, st *v1.PodStatus) v1.PodCondition {
	c := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	if st.Phase == v1.PodSucceeded {
		c.Reason = reasonPodCompleted
		return c
	}
	if anyAppStarted(st.ContainerStatuses) {
		return c
	}
	var incomplete []string
	for i, cs := range st.InitContainerStatuses {
		done := cs.Ready
		if api.IsSidecar(&pod.Spec.InitContainers[i]) {
			done = cs.Started != nil && *cs.Started
		}
		if !done {
			incomplete = append(incomplete, cs.Name)
		}
	}
	if len(incomplete) > 0 {
		c.Status, c.Reason = v1.ConditionFalse, reasonNotInitialized
		c.Message = fmt.Sprintf("containers with incomplete status: %s", incomplete)
	}
	return c
}

// containersReadyCondition is True when every app container and sidecar is
// ready; a finished pod's is False with PodCompleted or PodFailed, and an
// unready one names the containers that are not.
func containersReadyCondition(pod *v1.Pod, st *v1.PodStatus) v1.PodCondition {
	c := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse}
	switch st.Phase {
	case v1.PodSucceeded:
		c.Reason = reasonPodCompleted
		return c
	case v1.PodFailed:
		c.Reason = reasonPodFailed
		return c
	}
	var unready []string
	for i, cs := range st.InitContainerStatuses {
		if api.IsSidecar(&pod.Spec.InitContainers[i]) && !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	for _, cs := range st.ContainerStatuses {
		if !cs.Ready {
			unready = append(unready, cs.Name)
		}
	}
	if len(unready) == 0 {
		c.Status = v1.ConditionTrue
		return c
	}
	c.Reason = reasonNotReady
	c.Message = fmt.Sprintf("containers with unready status: %s", unready)
	return c
}

// readinessGates is the pod's Ready condition: its containers' readiness,
// and then every readiness gate's condition True (as the API server's
// status carries them: the apiserver source keeps those conditions on the
// desired pod; a static pod's gates are never set), with the kubelet's
// reason and messages.
func readinessGates(pod *v1.Pod, containersReady v1.PodCondition) v1.PodCondition {
	c := containersReady
	c.Type = v1.PodReady
	if c.Status != v1.ConditionTrue {
		return c
	}
	var msgs []string
	for _, g := range pod.Spec.ReadinessGates {
		var found *v1.PodCondition
		for i := range pod.Status.Conditions {
			if pod.Status.Conditions[i].Type == g.ConditionType {
				found = &pod.Status.Conditions[i]
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", g.ConditionType))
		case found.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", g.ConditionType, found.Status))
		}
	}
	if len(msgs) > 0 {
		c.Status, c.Reason, c.Message = v1.ConditionFalse, "ReadinessGatesNotReady", strings.Join(msgs, ", ")
	}
	return c
}

// containerStatus describes a container from its instances, newest first.
// fresh is the waiting reason of a container with no instance yet. An init
// container that exited 0 has completed, whatever the restart policy.
func (p *Producer) containerStatus(ctx context.Context, pod *v1.Pod, c *v1.Container, instances []*kubecontainer.ContainerState, finished, init bool, fresh string) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, VolumeMounts: volumeMounts(c)}
	cs.AllocatedResources = allocatedRequests(c)
	started := false
	cs.Started = &started
	// A sandbox that could not be made leaves the default reason, as the
	// kubelet's: why is in the pod's events (FailedMount, ...).
	waitErr := p.cfg.Records.Waiting(pod.UID, c.Name)
	waitingFor := func(reason string) *v1.ContainerStateWaiting {
		if waitErr != nil {
			return &v1.ContainerStateWaiting{Reason: waitErr.Reason, Message: waitErr.Message}
		}
		return &v1.ContainerStateWaiting{Reason: reason}
	}
	if len(instances) == 0 {
		cs.State.Waiting = waitingFor(fresh)
		return cs
	}
	last := instances[0]
	cs.ContainerID = "docker://" + last.ID
	cs.ImageID = last.StatusImageID()
	cs.User = containerUser(last.User)
	cs.RestartCount = int32(last.RestartCount)
	if len(instances) > 1 {
		cs.LastTerminationState = terminated(instances[1])
	}
	switch {
	case last.Running:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(last.StartedAt)}
		if last.Resources != nil {
			r := kuberuntime.AppliedResources(c, *last.Resources)
			cs.Resources = &r
		}
		started = p.cfg.Probes.Started(c, last.ID)
		cs.Ready = p.cfg.Probes.Ready(c, last.ID)
	case last.Status == "created" && !last.FailedToStart():
		cs.State.Waiting = waitingFor(reasonCreating)
	case !finished && kubecontainer.SameSpec(pod, c, last) && kubecontainer.Restarts(pod, c, last.ExitCode) &&
		!(init && last.ExitCode == 0):
		// Exited and due for a restart: waiting, the exit as last state.
		cs.State.Waiting = waitingFor(reasonCrashLoop)
		cs.LastTerminationState = terminated(last)
	default:
		cs.State = terminated(last)
		cs.State.Terminated.Message = p.exitMessage(ctx, pod, c, last)
	}
	if t := cs.LastTerminationState.Terminated; t != nil && t.ContainerID == "docker://"+last.ID {
		t.Message = p.exitMessage(ctx, pod, c, last)
	}
	return cs
}

// volumeMounts are a container's mounts as the kubelet's status lists them
// (pkg/kubelet/kubelet_pods.go, convertToAPIContainerStatuses): each of
// the spec's, a read-only one saying whether it is recursively read-only.
// The agent mounts none recursively read-only (a manifest asking for it is
// refused): Disabled.
func volumeMounts(c *v1.Container) []v1.VolumeMountStatus {
	var out []v1.VolumeMountStatus
	for _, m := range c.VolumeMounts {
		vs := v1.VolumeMountStatus{Name: m.Name, MountPath: m.MountPath, ReadOnly: m.ReadOnly}
		if m.ReadOnly {
			rro := v1.RecursiveReadOnlyDisabled
			vs.RecursiveReadOnly = &rro
		}
		out = append(out, vs)
	}
	return out
}

// containerUser is the identity a container's process runs with, as the
// kubelet reports what its runtime gives (nil: not known).
func containerUser(u *kubecontainer.ContainerUser) *v1.ContainerUser {
	if u == nil {
		return nil
	}
	return &v1.ContainerUser{Linux: &v1.LinuxContainerUser{UID: u.UID, GID: u.GID,
		SupplementalGroups: append([]int64(nil), u.SupplementalGroups...)}}
}

// allocatedRequests are the requests the node allocated container c (its
// allocated spec), a cpu or memory limit standing for a request not
// written, as the API server defaults it (nil: none).
func allocatedRequests(c *v1.Container) v1.ResourceList {
	out := c.Resources.Requests.DeepCopy()
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if lim, ok := c.Resources.Limits[name]; ok {
			if _, asked := out[name]; !asked {
				if out == nil {
					out = v1.ResourceList{}
				}
				out[name] = lim.DeepCopy()
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// exitMessage is a dead container's message: why Docker could not start it,
// or what it left as its termination message.
func (p *Producer) exitMessage(ctx context.Context, pod *v1.Pod, c *v1.Container, inst *kubecontainer.ContainerState) string {
	if inst.FailedToStart() {
		return inst.Error
	}
	return p.terminationMessage(ctx, pod, c, inst)
}

// terminationMessage is what a dead container left in its termination
// message file (or, under FallbackToLogsOnError, the tail of its logs when
// it failed without one). It is read once per container: it cannot change.
// The logs are read under ctx, the caller's (a pod worker's sync), bounded
// by logReadTimeout; a read the caller cancelled keeps nothing, so the next
// status reads them again.
func (p *Producer) terminationMessage(ctx context.Context, pod *v1.Pod, c *v1.Container, inst *kubecontainer.ContainerState) string {
	msg, ok := p.cfg.Records.Message(pod.UID, inst.ID)
	if ok {
		return msg
	}
	if f, err := safefile.OpenBeneath(p.cfg.PodDir(pod.UID), volumes.TerminationMessageFile(c.Name, inst.RestartCount), unix.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
		data, _ := io.ReadAll(io.LimitReader(f, volumes.MaxTerminationMessage))
		f.Close()
		msg = string(data)
	}
	if msg == "" && inst.ExitCode != 0 && c.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError {
		var buf bytes.Buffer
		lctx, cancel := context.WithTimeout(ctx, p.logTimeout)
		err := p.cfg.Logs.Logs(lctx, inst.ID, kubecontainer.LogOptions{TailLines: fallbackLogLines}, &buf)
		cancel()
		switch {
		case err == nil:
			msg = buf.String()
			if len(msg) > fallbackLogBytes {
				msg = msg[len(msg)-fallbackLogBytes:]
			}
		case ctx.Err() != nil:
			return "" // the caller went away: read them the next time
		}
	}
	p.cfg.Records.SetMessage(pod.UID, inst.ID, msg)
	return msg
}

// Kubernetes' limits for FallbackToLogsOnError.
const (
	fallbackLogLines = 80
	fallbackLogBytes = 2048
)

func terminated(c *kubecontainer.ContainerState) v1.ContainerState {
	reason := "Completed"
	switch {
	case c.FailedToStart():
		reason = reasonCannotRun
	case c.OOMKilled:
		reason = "OOMKilled"
	case c.ExitCode != 0:
		reason = "Error"
	}
	return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		ExitCode:    int32(c.ExitCode),
		Reason:      reason,
		Message:     c.Error,
		StartedAt:   metav1.NewTime(c.StartedAt),
		FinishedAt:  metav1.NewTime(c.FinishedAt),
		ContainerID: "docker://" + c.ID,
	}}
}

// ObserveStart records the pod's start in the kubelet's metrics the first
// time all its containers run: from when the config gave it, and (the SLI)
// without the time its image pulls and init containers took.
func (p *Producer) ObserveStart(pod *v1.Pod, st *v1.PodStatus, state *kubecontainer.PodState) {
	if len(st.ContainerStatuses) != len(pod.Spec.Containers) {
		return
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil {
			return
		}
	}
	seen, pulling, first := p.cfg.Records.Started(pod.UID)
	if !first {
		return
	}
	now := p.cfg.Clock.Now()
	p.cfg.Metrics.PodStartDuration.Observe(now.Sub(seen).Seconds())
	from := seen
	if state != nil {
		for _, c := range pod.Spec.InitContainers {
			for _, cs := range state.Containers {
				if cs.Name == c.Name && cs.FinishedAt.After(from) {
					from = cs.FinishedAt
				}
			}
		}
	}
	p.cfg.Metrics.PodStartSLIDuration.WithLabelValues("false").Observe(max(now.Sub(from)-pulling, 0).Seconds())
}
