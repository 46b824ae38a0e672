package kubelet

import (
	"bytes"
	"context"
	"io"
	"net"
	"sort"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// GetPods returns the desired pods, sorted by namespace/name, each a copy
// carrying the status its worker produced after its last sync.
func (k *Kubelet) GetPods() []*v1.Pod {
	pods := k.desired.all()
	sort.Slice(pods, func(i, j int) bool { return api.Key(pods[i]) < api.Key(pods[j]) })
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, k.withStatus(p))
	}
	return out
}

// GetPod returns one desired pod with its status.
func (k *Kubelet) GetPod(namespace, name string) (*v1.Pod, bool) {
	for _, p := range k.desired.all() {
		if p.Namespace == namespace && p.Name == name {
			return k.withStatus(p), true
		}
	}
	return nil, false
}

// RunningPods returns the pods as found in Docker (as of the last relist),
// whether or not the config wants them: each with its running containers'
// names, images and IDs.
func (k *Kubelet) RunningPods() []*v1.Pod {
	out := []*v1.Pod{}
	for uid, state := range k.cache.All() {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: state.Name, Namespace: state.Namespace, UID: uid}}
		for _, c := range state.Containers {
			if !c.Running || c.Name == infraName {
				continue
			}
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: c.Name, Image: c.Image})
			pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, v1.ContainerStatus{Name: c.Name, Image: c.Image,
				ImageID: c.ImageID, ContainerID: "docker://" + c.ID,
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
// produced it (computed here only for a pod whose worker has not run yet).
func (k *Kubelet) withStatus(p *v1.Pod) *v1.Pod {
	cp := p.DeepCopy()
	st, ok := k.status.Get(p.UID)
	if !ok {
		st = k.podStatus(p, k.cache.Get(p.UID))
	}
	cp.Status = st
	return cp
}

// podStatus computes a pod's status as Kubernetes reports it, from its
// containers (as of the last relist), the probes, and the reasons recorded
// when a container could not start. Only the conditions' transition times
// come from memory (checkpointed), so a restarted agent reports the same.
func (k *Kubelet) podStatus(pod *v1.Pod, state *kubecontainer.PodState) v1.PodStatus {
	st := v1.PodStatus{QOSClass: qosClass(pod), HostIP: k.hostIP}
	if st.HostIP != "" {
		st.HostIPs = []v1.HostIP{{IP: st.HostIP}}
	}
	if rej := k.records.rejectedFor(pod.UID); rej != nil {
		// As the kubelet reports a pod its admission refused: failed,
		// with the reason, and no container statuses.
		st.Phase, st.Reason, st.Message = v1.PodFailed, rej.reason, "Pod was rejected: "+rej.message
		return st
	}
	infra := state.RunningInfra()
	if infra != nil {
		st.PodIP = infra.IP
		if pod.Spec.HostNetwork {
			st.PodIP = st.HostIP
		}
		t := metav1.NewTime(infra.StartedAt)
		st.StartTime = &t
	}
	if st.PodIP != "" {
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	}
	finished := state != nil && podFinished(pod, state)
	current := func(c *kubecontainer.ContainerState) bool {
		return infra != nil && !c.CreatedAt.Before(infra.CreatedAt)
	}

	initDone := true
	sidecars, sidecarsReady := 0, 0
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		var instances []*kubecontainer.ContainerState
		for _, inst := range state.Instances(c.Name) {
			if current(inst) || finished {
				instances = append(instances, inst)
			}
		}
		cs := k.containerStatus(pod, c, instances, finished, !api.IsSidecar(c), reasonCreating)
		if api.IsSidecar(c) {
			// A sidecar initializes the pod once started; its readiness
			// counts in the pod's, as its probe (or running) says.
			sidecarStarted := cs.State.Running != nil && cs.Started != nil && *cs.Started
			if !sidecarStarted && !initializedBefore(pod, state, current) {
				initDone = false
			}
			sidecars++
			if cs.State.Running != nil && cs.Ready {
				sidecarsReady++
			}
		} else {
			if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 {
				initDone = false
			}
			cs.Ready = cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		}
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}

	running, ready, succeeded, waiting := 0, 0, 0, 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		fresh := reasonCreating
		if !initDone {
			fresh = reasonInitializing
		}
		cs := k.containerStatus(pod, c, state.Instances(c.Name), finished, false, fresh)
		switch {
		case cs.State.Running != nil:
			running++
			if cs.Ready {
				ready++
			}
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			succeeded++
		case cs.State.Waiting != nil && cs.RestartCount == 0 && cs.LastTerminationState.Terminated == nil:
			waiting++
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	n := len(pod.Spec.Containers)
	switch {
	case finished && succeeded == n:
		st.Phase = v1.PodSucceeded
	case finished:
		st.Phase = v1.PodFailed
	case !initDone || waiting == n:
		st.Phase = v1.PodPending
	default:
		st.Phase = v1.PodRunning
	}

	cond := func(t v1.PodConditionType, ok bool, reason string) v1.PodCondition {
		if ok {
			return v1.PodCondition{Type: t, Status: v1.ConditionTrue}
		}
		return v1.PodCondition{Type: t, Status: v1.ConditionFalse, Reason: reason}
	}
	allReady := n > 0 && ready == n && sidecarsReady == sidecars
	st.Conditions = k.status.Stamp(pod.UID, []v1.PodCondition{
		cond(v1.PodInitialized, initDone, "ContainersNotInitialized"),
		cond(v1.ContainersReady, allReady, "ContainersNotReady"),
		cond(v1.PodReady, allReady, "ContainersNotReady"),
		cond(v1.PodScheduled, true, ""),
	})
	return st
}

// containerStatus describes a container from its instances, newest first.
// fresh is the waiting reason of a container with no instance yet. An init
// container that exited 0 has completed, whatever the restart policy.
func (k *Kubelet) containerStatus(pod *v1.Pod, c *v1.Container, instances []*kubecontainer.ContainerState, finished, init bool, fresh string) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	started := false
	cs.Started = &started
	waitErr := k.records.waiting(pod.UID, c.Name)
	if waitErr == nil && len(instances) == 0 {
		waitErr = k.records.waiting(pod.UID, infraName) // the sandbox it waits for failed
	}
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
	cs.ImageID = last.ImageID
	cs.RestartCount = int32(last.RestartCount)
	if len(instances) > 1 {
		cs.LastTerminationState = terminated(instances[1])
	}
	switch {
	case last.Running:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(last.StartedAt)}
		started = k.probes.Started(c, last.ID)
		cs.Ready = k.probes.Ready(c, last.ID)
	case last.Status == "created" && !last.FailedToStart():
		cs.State.Waiting = waitingFor(reasonCreating)
	case !finished && last.Hash == dockertools.HashContainer(pod, c) && shouldRestart(restartPolicyOf(pod, c), last.ExitCode) &&
		!(init && last.ExitCode == 0):
		// Exited and due for a restart: waiting, the exit as last state.
		cs.State.Waiting = waitingFor(reasonCrashLoop)
		cs.LastTerminationState = terminated(last)
	default:
		cs.State = terminated(last)
		cs.State.Terminated.Message = k.exitMessage(pod, c, last)
	}
	if t := cs.LastTerminationState.Terminated; t != nil && t.ContainerID == "docker://"+last.ID {
		t.Message = k.exitMessage(pod, c, last)
	}
	return cs
}

// exitMessage is a dead container's message: why Docker could not start it,
// or what it left as its termination message.
func (k *Kubelet) exitMessage(pod *v1.Pod, c *v1.Container, inst *kubecontainer.ContainerState) string {
	if inst.FailedToStart() {
		return inst.Error
	}
	return k.terminationMessage(pod, c, inst)
}

// terminationMessage is what a dead container left in its termination
// message file (or, under FallbackToLogsOnError, the tail of its logs when
// it failed without one). It is read once per container: it cannot change.
func (k *Kubelet) terminationMessage(pod *v1.Pod, c *v1.Container, inst *kubecontainer.ContainerState) string {
	msg, ok := k.records.message(pod.UID, inst.ID)
	if ok {
		return msg
	}
	if f, err := safefile.OpenBeneath(k.podDir(pod.UID), volumes.TerminationMessageFile(c.Name, inst.RestartCount), unix.O_RDONLY|unix.O_NONBLOCK, 0); err == nil {
		data, _ := io.ReadAll(io.LimitReader(f, volumes.MaxTerminationMessage))
		f.Close()
		msg = string(data)
	}
	if msg == "" && inst.ExitCode != 0 && c.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError {
		var buf bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := k.docker.Logs(ctx, inst.ID, kubecontainer.LogOptions{TailLines: fallbackLogLines}, &buf); err == nil {
			msg = buf.String()
			if len(msg) > fallbackLogBytes {
				msg = msg[len(msg)-fallbackLogBytes:]
			}
		}
		cancel()
	}
	k.records.setMessage(pod.UID, inst.ID, msg)
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

// nodeIP is the node's first non-loopback IPv4 address (the pods' host IP).
func nodeIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return ""
}

// initializedBefore reports whether an app container of the pod has started
// in its current incarnation: the pod got past its init containers, and a
// sidecar restarting since does not make it uninitialized.
func initializedBefore(pod *v1.Pod, state *kubecontainer.PodState, current func(*kubecontainer.ContainerState) bool) bool {
	for _, c := range pod.Spec.Containers {
		for _, inst := range state.Instances(c.Name) {
			if current(inst) {
				return true
			}
		}
	}
	return false
}

// observeStart records the pod's start in the kubelet's metrics the first
// time all its containers run: from when the config gave it, and (the SLI)
// without the time its image pulls and init containers took.
func (k *Kubelet) observeStart(pod *v1.Pod, st *v1.PodStatus, state *kubecontainer.PodState) {
	if len(st.ContainerStatuses) != len(pod.Spec.Containers) {
		return
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State.Running == nil {
			return
		}
	}
	seen, pulling, first := k.records.started(pod.UID)
	if !first {
		return
	}
	now := time.Now()
	k.metrics.PodStartDuration.Observe(now.Sub(seen).Seconds())
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
	k.metrics.PodStartSLIDuration.WithLabelValues("false").Observe(max(now.Sub(from)-pulling, 0).Seconds())
}
