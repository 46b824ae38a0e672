package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// containerResize is a running container whose cpu or memory bounds
// differ from its spec's: it is updated in place (docker update).
type containerResize struct {
	c    *kubecontainer.ContainerState
	spec *v1.Container
	want kubecontainer.Resources // what the spec asks of Docker
}

// resizeNeed is what becomes of a running container whose resources
// changed.
type resizeNeed int

const (
	resizeNone    resizeNeed = iota // its bounds are the spec's
	resizeInPlace                   // updated in place
	resizeRestart                   // restarted with the new bounds
)

// resizeDecision compares running instance inst of container c (made from
// its spec as it is now, resources aside) with the spec's resources, as
// the kubelet's computePodResizeAction: a changed resource whose
// resizePolicy is RestartContainer restarts the container; otherwise it
// is resized in place. A memory limit lifted also restarts it: Docker
// cannot lift one in place. An instance whose applied bounds are not known
// is left alone.
func resizeDecision(c *v1.Container, inst *kubecontainer.ContainerState) (resizeNeed, kubecontainer.Resources) {
	want := containerResources(c)
	have := inst.Resources
	if have == nil || inst.SpecHash == "" {
		return resizeNone, want
	}
	cpuChanged := want.CPUShares != have.CPUShares || want.CPUQuota != have.CPUQuota ||
		(want.CPUQuota > 0 && want.CPUPeriod != have.CPUPeriod)
	memChanged := want.Memory != have.Memory
	switch {
	case !cpuChanged && !memChanged:
		return resizeNone, want
	case memChanged && want.Memory == 0,
		cpuChanged && resizePolicy(c, v1.ResourceCPU) == v1.RestartContainer,
		memChanged && resizePolicy(c, v1.ResourceMemory) == v1.RestartContainer:
		return resizeRestart, want
	}
	return resizeInPlace, want
}

// resizePolicy is container c's resize policy for resource name; without
// one, NotRequired (the API's default).
func resizePolicy(c *v1.Container, name v1.ResourceName) v1.ResourceResizeRestartPolicy {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy
		}
	}
	return v1.NotRequired
}

// resizeRunning decides for running instance inst of container c, which
// is kept: a resize in place is recorded; it reports whether the
// container must instead restart (it is then stopped, and started again
// by the caller's start decision).
func (p *planner) resizeRunning(c *specContainer, inst *kubecontainer.ContainerState) (restart bool) {
	need, want := resizeDecision(c.spec, inst)
	switch need {
	case resizeInPlace:
		p.a.resize = append(p.a.resize, containerResize{c: inst, spec: c.spec, want: want})
	case resizeRestart:
		p.kill(inst, killReason{kind: killResizeRestart})
		return true
	}
	return false
}

// errMemoryInUse: a memory limit would go below what is in use.
var errMemoryInUse = errors.New("memory in use")

// resizeContainers applies the in-place resizes computePodActions decided,
// in the kubelet's order: the pod cgroup grows before its containers do,
// containers that shrink go before those that grow, and the pod cgroup
// shrinks after them. A memory limit is not lowered below what the pod
// (or the container) uses now: the resize stays in progress, retried at
// the next sync, with the kubelet's error.
func (m *Manager) resizeContainers(ctx context.Context, pod *v1.Pod, resizes []containerResize) error {
	if len(resizes) == 0 {
		return nil
	}
	var podName cgroups.Name
	var before, after cgroups.Resources
	if m.cfg.Cgroups != nil {
		podName = cgroups.PodName(kubecontainer.QOSClass(pod), pod.UID)
		before, after = podCgroupResources(appliedPod(pod, resizes)), podCgroupResources(pod)
		before.Pids, after.Pids = m.cfg.PodMaxPids, m.cfg.PodMaxPids
		if shrinks(before.Memory, after.Memory) {
			used, err := m.cfg.Cgroups.MemoryWorkingSet(podName, "")
			if err == nil && used >= after.Memory {
				return fmt.Errorf("%w: aborting attempt to set pod memory limit less than current memory usage for pod %s", errMemoryInUse, pod.Name)
			}
		}
		for _, r := range resizes {
			if !shrinks(r.c.Resources.Memory, r.want.Memory) {
				continue
			}
			used, err := m.cfg.Cgroups.MemoryWorkingSet(podName, r.c.ID)
			if err == nil && used >= r.want.Memory {
				return fmt.Errorf("%w: aborting attempt to set container %s memory limit less than current memory usage for pod %s", errMemoryInUse, r.spec.Name, pod.Name)
			}
		}
		if grown := widest(before, after); grown != before {
			if err := m.cfg.Cgroups.Ensure(podName, grown); err != nil {
				return fmt.Errorf("resize pod cgroup: %w", err)
			}
		}
	}
	ordered := slices.Clone(resizes)
	slices.SortStableFunc(ordered, func(a, b containerResize) int { return grows(a) - grows(b) })
	for _, r := range ordered {
		klog.Infof("Pod %s: resizing container %s (%s) in place: cpu shares %d, quota %d, memory %d", api.Key(pod), r.spec.Name,
			kubecontainer.ShortID(r.c.ID), r.want.CPUShares, r.want.CPUQuota, r.want.Memory)
		err := m.runtime.Update(ctx, r.c.ID, r.want)
		// Inspected afresh at the pod's next relist, which the sync that
		// acted asks for: Docker's "update" event may come after it, and a
		// sync that saw the old bounds would update again.
		m.relist.Refresh(r.c.ID)
		if err != nil {
			return err
		}
	}
	if m.cfg.Cgroups != nil && after != widest(before, after) {
		if err := m.cfg.Cgroups.Ensure(podName, after); err != nil {
			return fmt.Errorf("resize pod cgroup: %w", err)
		}
	}
	return nil
}

// grows is the sort key of a resize: 0 for one that lowers any of the
// container's bounds (it goes first, making room), else 1.
func grows(r containerResize) int {
	have := r.c.Resources
	if r.want.Memory < have.Memory || r.want.CPUShares < have.CPUShares || (r.want.CPUQuota > 0 && (have.CPUQuota == 0 || r.want.CPUQuota < have.CPUQuota)) {
		return 0
	}
	return 1
}

// shrinks reports a memory bound (0: none) that goes down.
func shrinks(from, to int64) bool {
	return to > 0 && (from == 0 || to < from)
}

// widest is the larger of each of a's and b's bounds (a CPU quota below 0
// and a memory limit of 0 are unbounded).
func widest(a, b cgroups.Resources) cgroups.Resources {
	w := a
	w.CPUShares = max(a.CPUShares, b.CPUShares)
	if a.CPUQuota < 0 || b.CPUQuota < 0 {
		w.CPUQuota = -1
	} else {
		w.CPUQuota = max(a.CPUQuota, b.CPUQuota)
	}
	if a.Memory == 0 || b.Memory == 0 {
		w.Memory = 0
	} else {
		w.Memory = max(a.Memory, b.Memory)
	}
	return w
}

// appliedPod is pod with the resources its resized containers have now,
// as read back from the runtime (AppliedResources): the pod cgroup as it
// was sized for them.
func appliedPod(pod *v1.Pod, resizes []containerResize) *v1.Pod {
	out := pod.DeepCopy()
	for _, r := range resizes {
		for i := range out.Spec.Containers {
			if out.Spec.Containers[i].Name == r.spec.Name {
				out.Spec.Containers[i].Resources = AppliedResources(r.spec, *r.c.Resources)
			}
		}
		for i := range out.Spec.InitContainers {
			if out.Spec.InitContainers[i].Name == r.spec.Name {
				out.Spec.InitContainers[i].Resources = AppliedResources(r.spec, *r.c.Resources)
			}
		}
	}
	return out
}

// AppliedResources are the requests and limits container c (its spec: the
// resources the node allocated it) runs with, read back from what the
// runtime enforces (have), as the kubelet reports them in
// status.containerStatuses[].resources: a value that maps to the same
// bound as the spec's is the spec's as written; the memory request, which
// no cgroup carries, is the spec's.
func AppliedResources(c *v1.Container, have kubecontainer.Resources) v1.ResourceRequirements {
	spec := containerResources(c)
	out := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	cpuReq, hasReq := c.Resources.Requests[v1.ResourceCPU]
	if !hasReq {
		cpuReq, hasReq = c.Resources.Limits[v1.ResourceCPU]
	}
	switch {
	case have.CPUShares == spec.CPUShares && hasReq:
		out.Requests[v1.ResourceCPU] = cpuReq
	case have.CPUShares != spec.CPUShares:
		out.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(have.CPUShares*1000/sharesPerCPU, resource.DecimalSI)
	}
	if q, ok := c.Resources.Requests[v1.ResourceMemory]; ok {
		out.Requests[v1.ResourceMemory] = q
	} else if q, ok := c.Resources.Limits[v1.ResourceMemory]; ok && have.Memory == spec.Memory {
		out.Requests[v1.ResourceMemory] = q
	}
	if lim, ok := c.Resources.Limits[v1.ResourceCPU]; ok && have.CPUQuota == spec.CPUQuota {
		out.Limits[v1.ResourceCPU] = lim
	} else if have.CPUQuota > 0 && have.CPUPeriod > 0 {
		out.Limits[v1.ResourceCPU] = *resource.NewMilliQuantity(have.CPUQuota*1000/have.CPUPeriod, resource.DecimalSI)
	}
	if lim, ok := c.Resources.Limits[v1.ResourceMemory]; ok && have.Memory == spec.Memory {
		out.Limits[v1.ResourceMemory] = lim
	} else if have.Memory > 0 {
		out.Limits[v1.ResourceMemory] = *resource.NewQuantity(have.Memory, resource.BinarySI)
	}
	if len(out.Requests) == 0 {
		out.Requests = nil
	}
	if len(out.Limits) == 0 {
		out.Limits = nil
	}
	return out
}

// ResizeInProgress reports whether a running container of pod (its spec:
// the resources the node allocated) does not yet run with its spec's
// bounds: the PodResizeInProgress condition.
func ResizeInProgress(pod *v1.Pod, state *kubecontainer.PodState) bool {
	check := func(c *v1.Container) bool {
		for _, inst := range state.Instances(c.Name) {
			if inst.Running && inst.Resources != nil && inst.SpecHash != "" && kubecontainer.SameSpec(pod, c, inst) {
				if need, _ := resizeDecision(c, inst); need != resizeNone {
					return true
				}
				return false
			}
		}
		return false
	}
	for i := range pod.Spec.Containers {
		if check(&pod.Spec.Containers[i]) {
			return true
		}
	}
	for i := range pod.Spec.InitContainers {
		if api.IsSidecar(&pod.Spec.InitContainers[i]) && check(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}
