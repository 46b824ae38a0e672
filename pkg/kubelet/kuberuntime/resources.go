package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

const (
	// minShares is the smallest CPU shares value the kernel accepts; it is
	// also what a container without a CPU request gets, as in Kubernetes.
	minShares = 2
	// sharesPerCPU is the cgroup weight of one full CPU.
	sharesPerCPU = 1024
	// maxShares is the largest CPU shares value the kernel accepts; larger
	// requests are clamped to it, as in Kubernetes.
	maxShares = 262144
	// quotaPeriod is the CFS period in microseconds (100 ms), Kubernetes'.
	quotaPeriod = 100000
	// minQuota is the smallest CFS quota the kernel accepts: 1 ms.
	minQuota = 1000
)

// cpuShares converts a CPU request in milliCPU to cgroup shares. Zero means
// no request, which gets the minimum.
func cpuShares(milliCPU int64) int64 {
	if milliCPU == 0 {
		return minShares
	}
	shares := milliCPU * sharesPerCPU / 1000
	return min(max(shares, minShares), maxShares)
}

// cpuQuota converts a CPU limit in milliCPU to a CFS quota over quotaPeriod.
// Zero means no limit (no quota).
func cpuQuota(milliCPU int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	quota := milliCPU * quotaPeriod / 1000
	if quota < minQuota {
		return minQuota
	}
	return quota
}

// containerResources computes a container's resources as Kubernetes
// does: requests default to limits when only a limit is written; shares come
// from the CPU request, the quota only from the CPU limit.
func containerResources(c *v1.Container) kubecontainer.Resources {
	var r kubecontainer.Resources
	cpuReq, hasReq := c.Resources.Requests[v1.ResourceCPU]
	cpuLim, hasLim := c.Resources.Limits[v1.ResourceCPU]
	switch {
	case hasReq:
		r.CPUShares = cpuShares(cpuReq.MilliValue())
	case hasLim:
		r.CPUShares = cpuShares(cpuLim.MilliValue())
	default:
		r.CPUShares = cpuShares(0)
	}
	if hasLim && !cpuLim.IsZero() {
		r.CPUQuota = cpuQuota(cpuLim.MilliValue())
		r.CPUPeriod = quotaPeriod
	}
	if mem, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		r.Memory = mem.Value()
	}
	return r
}

// podCPURequestMilli is the pod's effective CPU request in milliCPU (init
// containers as a maximum, sidecars added, pod-level resources winning,
// its RuntimeClass's overhead added), as the scheduler and the kubelet
// count it.
func podCPURequestMilli(pod *v1.Pod) int64 {
	reqs := resourcehelper.PodRequests(api.WithDefaultRequests(pod), resourcehelper.PodResourcesOptions{})
	return reqs.Cpu().MilliValue()
}

// podCgroupResources are the pod cgroup's bounds as the kubelet computes
// them (its ResourceConfigForPod): CPU shares from the pod's requests;
// Guaranteed pods get their CPU quota and memory limit, Burstable ones each
// only when every container (or the pod-level resources) sets that limit —
// a container without one could use all the node has, and the pod with it;
// BestEffort pods the minimum shares and no bounds. The pod's overhead
// (spec.overhead, its RuntimeClass's, which the API server's admission
// copies there) is added to the requests and to each limit that is set:
// what the runtime handler itself uses is charged to the pod, as the
// kubelet's ResourceConfigForPod does.
func podCgroupResources(pod *v1.Pod) cgroups.Resources {
	pod = api.WithDefaultRequests(pod)
	var opts resourcehelper.PodResourcesOptions
	reqs := resourcehelper.PodRequests(pod, opts)
	limits := resourcehelper.PodLimits(pod, opts)
	r := cgroups.Resources{CPUShares: uint64(cpuShares(reqs.Cpu().MilliValue())), CPUQuota: -1, CPUPeriod: quotaPeriod}
	quota := cpuQuota(limits.Cpu().MilliValue())
	memory := limits.Memory().Value()
	cpuDeclared, memDeclared := true, true
	for _, c := range pod.Spec.Containers {
		cpuDeclared = cpuDeclared && !c.Resources.Limits.Cpu().IsZero()
		memDeclared = memDeclared && !c.Resources.Limits.Memory().IsZero()
	}
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		cpuDeclared = cpuDeclared || !pod.Spec.Resources.Limits.Cpu().IsZero()
		memDeclared = memDeclared || !pod.Spec.Resources.Limits.Memory().IsZero()
	}
	switch kubecontainer.QOSClass(pod) {
	case v1.PodQOSBestEffort:
		r.CPUShares = minShares
	case v1.PodQOSGuaranteed:
		r.CPUQuota, r.Memory = quota, memory
	default:
		if cpuDeclared && quota > 0 {
			r.CPUQuota = quota
		}
		if memDeclared {
			r.Memory = memory
		}
	}
	return r
}
