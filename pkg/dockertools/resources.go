package dockertools

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
	// QuotaPeriod is the CFS period in microseconds (100 ms), Kubernetes'.
	QuotaPeriod = 100000
	// minQuota is the smallest CFS quota the kernel accepts: 1 ms.
	minQuota = 1000
)

// CPUShares converts a CPU request in milliCPU to cgroup shares. Zero means
// no request, which gets the minimum.
func CPUShares(milliCPU int64) int64 {
	if milliCPU == 0 {
		return minShares
	}
	shares := milliCPU * sharesPerCPU / 1000
	return min(max(shares, minShares), maxShares)
}

// CPUQuota converts a CPU limit in milliCPU to a CFS quota over QuotaPeriod.
// Zero means no limit (no quota).
func CPUQuota(milliCPU int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	quota := milliCPU * QuotaPeriod / 1000
	if quota < minQuota {
		return minQuota
	}
	return quota
}

// ContainerResources computes a container's Docker resources as Kubernetes
// does: requests default to limits when only a limit is written; shares come
// from the CPU request, the quota only from the CPU limit.
func ContainerResources(c *v1.Container) kubecontainer.Resources {
	var r kubecontainer.Resources
	cpuReq, hasReq := c.Resources.Requests[v1.ResourceCPU]
	cpuLim, hasLim := c.Resources.Limits[v1.ResourceCPU]
	switch {
	case hasReq:
		r.CPUShares = CPUShares(cpuReq.MilliValue())
	case hasLim:
		r.CPUShares = CPUShares(cpuLim.MilliValue())
	default:
		r.CPUShares = CPUShares(0)
	}
	if hasLim && !cpuLim.IsZero() {
		r.CPUQuota = CPUQuota(cpuLim.MilliValue())
		r.CPUPeriod = QuotaPeriod
	}
	if mem, ok := c.Resources.Limits[v1.ResourceMemory]; ok {
		r.Memory = mem.Value()
	}
	return r
}
