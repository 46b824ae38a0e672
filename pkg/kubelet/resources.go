package kubelet

import (
	v1 "k8s.io/api/core/v1"

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
