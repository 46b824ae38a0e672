package container

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// ReasonDeadlineExceeded is the kubelet's reason for a pod that outlived its
// activeDeadlineSeconds.
const ReasonDeadlineExceeded = "DeadlineExceeded"

// QOSClass is Kubernetes' QoS class: Guaranteed when every container's cpu
// and memory limits equal its requests, BestEffort when none sets any,
// Burstable otherwise. Pod-level resources, when set, decide alone (a
// pod-level request defaults to its limit, as the API server defaults it).
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	any, guaranteed := false, true
	judge := func(reqs, limits v1.ResourceList, defaultReqs bool) {
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			req, hasReq := reqs[r]
			lim, hasLim := limits[r]
			if !hasReq && hasLim && defaultReqs {
				req, hasReq = lim, true
			}
			if hasReq || hasLim {
				any = true
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	if pr := pod.Spec.Resources; pr != nil && (len(pr.Requests) > 0 || len(pr.Limits) > 0) {
		judge(pr.Requests, pr.Limits, true)
	} else {
		for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
			judge(c.Resources.Requests, c.Resources.Limits, false)
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

// PodFinished reports whether a pod will run nothing again: under
// OnFailure or Never every app container's last instance exited and is not
// to be restarted, or under Never an init container failed.
func PodFinished(pod *v1.Pod, state *PodState) bool {
	if (pod.Spec.RestartPolicy == v1.RestartPolicyAlways && !ContainerPolicies(pod)) || len(pod.Spec.Containers) == 0 {
		return false
	}
	appStarted := false
	for _, c := range pod.Spec.Containers {
		if len(state.Instances(c.Name)) > 0 {
			appStarted = true
		}
	}
	if pod.Spec.RestartPolicy == v1.RestartPolicyNever && !appStarted {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if inst := state.Instances(c.Name); !api.IsSidecar(c) && len(inst) > 0 && !inst[0].Running && inst[0].ExitCode != 0 {
				return true
			}
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		inst := state.Instances(c.Name)
		if len(inst) == 0 || inst[0].Running || !SameSpec(pod, c, inst[0]) ||
			Restarts(pod, c, inst[0].ExitCode) {
			return false
		}
	}
	return true
}

// RestartPolicyOf is the restart policy of one container: its own
// (restartPolicy of an app container, ContainerRestartRules), else the
// pod's; a sidecar restarts whatever the pod's policy.
func RestartPolicyOf(pod *v1.Pod, c *v1.Container) v1.RestartPolicy {
	if api.IsSidecar(c) {
		return v1.RestartPolicyAlways
	}
	if c.RestartPolicy != nil {
		return v1.RestartPolicy(*c.RestartPolicy)
	}
	return pod.Spec.RestartPolicy
}

// Restarts says whether a container that exited with exitCode starts
// again: the first of its restartPolicyRules whose exit codes match
// restarts it; without a match, its restart policy decides. An ephemeral
// container never restarts.
func Restarts(pod *v1.Pod, c *v1.Container, exitCode int) bool {
	if Ephemeral(pod, c.Name) != nil {
		return false
	}
	for _, r := range c.RestartPolicyRules {
		if r.Action == v1.ContainerRestartRuleActionRestart && r.ExitCodes != nil &&
			slices.Contains(r.ExitCodes.Values, int32(exitCode)) == (r.ExitCodes.Operator == v1.ContainerRestartRuleOnExitCodesOpIn) {
			return true
		}
	}
	return ShouldRestart(RestartPolicyOf(pod, c), exitCode)
}

// ContainerPolicies reports whether an app container has a restart policy
// or rules of its own: then the pod's policy alone does not say whether it
// is finished.
func ContainerPolicies(pod *v1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if c.RestartPolicy != nil || len(c.RestartPolicyRules) > 0 {
			return true
		}
	}
	return false
}

// ShouldRestart says whether a restart policy starts a container that
// exited with exitCode again.
func ShouldRestart(policy v1.RestartPolicy, exitCode int) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// ContainerSpec finds a container (app, init or ephemeral) of the pod by
// name.
func ContainerSpec(pod *v1.Pod, name string) *v1.Container {
	if pod == nil {
		return nil
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	if ec := Ephemeral(pod, name); ec != nil {
		return asContainer(ec)
	}
	return nil
}

// EphemeralSpec is the pod's i-th ephemeral container as a container: the
// fields they share are the same (the API server forbids the rest).
func EphemeralSpec(pod *v1.Pod, i int) *v1.Container {
	return asContainer(&pod.Spec.EphemeralContainers[i])
}

// asContainer is an ephemeral container's fields as a container's (the
// same struct).
func asContainer(ec *v1.EphemeralContainer) *v1.Container {
	return (*v1.Container)(&ec.EphemeralContainerCommon)
}

// Ephemeral is the pod's ephemeral container name, nil if name is not
// one: they run once and are never restarted.
func Ephemeral(pod *v1.Pod, name string) *v1.EphemeralContainer {
	for i := range pod.Spec.EphemeralContainers {
		if pod.Spec.EphemeralContainers[i].Name == name {
			return &pod.Spec.EphemeralContainers[i]
		}
	}
	return nil
}

// AnyRunning reports whether any of a pod's containers runs.
func AnyRunning(state *PodState) bool {
	for _, c := range state.Containers {
		if c.Running {
			return true
		}
	}
	return false
}
