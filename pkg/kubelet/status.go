package kubelet

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// GetPods returns the desired pods, sorted by namespace/name, each a copy
// carrying the status known from the last relist.
func (k *Kubelet) GetPods() []*v1.Pod {
	pods := k.desiredPods()
	sort.Slice(pods, func(i, j int) bool { return api.Key(pods[i]) < api.Key(pods[j]) })
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		out = append(out, k.withStatus(p))
	}
	return out
}

// GetPod returns one desired pod with its status.
func (k *Kubelet) GetPod(namespace, name string) (*v1.Pod, bool) {
	for _, p := range k.desiredPods() {
		if p.Namespace == namespace && p.Name == name {
			return k.withStatus(p), true
		}
	}
	return nil, false
}

func (k *Kubelet) withStatus(p *v1.Pod) *v1.Pod {
	cp := p.DeepCopy()
	cp.Status = podStatus(p, k.cache.get(p.UID))
	return cp
}

// podStatus computes a pod's status from its containers, as Kubernetes
// reports it: phase, per-container state, pod IP, start time, QoS class.
func podStatus(pod *v1.Pod, state *PodState) v1.PodStatus {
	st := v1.PodStatus{Phase: v1.PodPending, QOSClass: qosClass(pod)}
	for _, infra := range state.Infra() {
		if infra.Running {
			st.PodIP = infra.IP
			t := metav1.NewTime(infra.StartedAt)
			st.StartTime = &t
			break
		}
	}
	if st.PodIP != "" {
		st.PodIPs = []v1.PodIP{{IP: st.PodIP}}
	}
	running, succeeded, failed, waiting := 0, 0, 0, 0
	for _, c := range pod.Spec.Containers {
		cs := containerStatus(pod, &c, state.Instances(c.Name))
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			succeeded++
		case cs.State.Terminated != nil:
			failed++
		default:
			waiting++
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	n := len(pod.Spec.Containers)
	switch {
	case waiting > 0 && running+succeeded+failed == 0:
		st.Phase = v1.PodPending
	case running > 0 || waiting > 0:
		st.Phase = v1.PodRunning
	case succeeded == n:
		st.Phase = v1.PodSucceeded
	default:
		st.Phase = v1.PodFailed
	}
	ready := v1.ConditionFalse
	if running == n && n > 0 {
		ready = v1.ConditionTrue
	}
	st.Conditions = []v1.PodCondition{
		{Type: v1.ContainersReady, Status: ready},
		{Type: v1.PodReady, Status: ready},
	}
	return st
}

// containerStatus describes a container from its instances, newest first.
func containerStatus(pod *v1.Pod, c *v1.Container, instances []*ContainerState) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	if len(instances) == 0 {
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
		return cs
	}
	last := instances[0]
	cs.ContainerID = "docker://" + last.ID
	cs.ImageID = last.ImageID
	cs.RestartCount = int32(last.RestartCount)
	if len(instances) > 1 {
		cs.LastTerminationState = terminated(instances[1])
	}
	started := last.Running
	cs.Started = &started
	switch {
	case last.Running:
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(last.StartedAt)}
		cs.Ready = true
	case last.Status == "created":
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "ContainerCreating"}
	case shouldRestart(pod.Spec.RestartPolicy, last.ExitCode):
		// Exited and due for a restart: waiting, with the exit as last state.
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}
		cs.LastTerminationState = terminated(last)
	default:
		cs.State = terminated(last)
	}
	return cs
}

func terminated(c *ContainerState) v1.ContainerState {
	reason := "Completed"
	if c.ExitCode != 0 {
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

// qosClass is Kubernetes' QoS class: Guaranteed when every container's cpu
// and memory limits equal its requests, BestEffort when none sets any,
// Burstable otherwise.
func qosClass(pod *v1.Pod) v1.PodQOSClass {
	any, guaranteed := false, true
	for _, c := range pod.Spec.Containers {
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if hasReq || hasLim {
				any = true
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	default:
		return v1.PodQOSBurstable
	}
}
