package kubelet

import (
	"os"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The kubelet's OOM score adjustments: the kernel kills the process with
// the highest score first when the node runs out of memory.
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
	// infraOOMScoreAdj keeps a pod's network (its infra container) alive
	// longer than any of its containers.
	infraOOMScoreAdj = -998
)

// qosClass is Kubernetes' QoS class: Guaranteed when every container's cpu
// and memory limits equal its requests, BestEffort when none sets any,
// Burstable otherwise. Pod-level resources, when set, decide alone (a
// pod-level request defaults to its limit, as the API server defaults it).
func qosClass(pod *v1.Pod) v1.PodQOSClass {
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

// oomScoreAdj is a container's oom_score_adj as the kubelet sets it:
// node-critical pods (priorityClassName system-node-critical: kubeadm's
// control plane) and Guaranteed ones -997, BestEffort 1000, Burstable
// 1000 less the container's share of the node's memory it requests, per
// mille, kept between 3 (above every Guaranteed container) and 999 (below
// every BestEffort one).
func oomScoreAdj(pod *v1.Pod, c *v1.Container, memoryCapacity int64) int {
	if pod.Spec.PriorityClassName == "system-node-critical" {
		return guaranteedOOMScoreAdj
	}
	switch qosClass(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if memoryCapacity <= 0 {
		return besteffortOOMScoreAdj - 1
	}
	adj := 1000 - 1000*c.Resources.Requests.Memory().Value()/memoryCapacity
	switch {
	case adj < 1000+guaranteedOOMScoreAdj:
		return 1000 + guaranteedOOMScoreAdj
	case adj >= besteffortOOMScoreAdj:
		return besteffortOOMScoreAdj - 1
	}
	return int(adj)
}

// oomScoreFloor is the lowest oom_score_adj containers can be given here:
// lowering it below 0 takes CAP_SYS_RESOURCE, which some hosts (sandboxed
// VMs, rootless daemons) do not grant, and runc then fails every start.
// It is probed on the agent's own process: where the agent may not lower
// its score, Docker's runc may not either, and negative adjustments become
// 0.
func oomScoreFloor() int {
	const path = "/proc/self/oom_score_adj"
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || cur <= -1000 {
		return -1000
	}
	if os.WriteFile(path, []byte(strconv.Itoa(cur-1)), 0) != nil {
		return 0
	}
	_ = os.WriteFile(path, data, 0) // raising it back needs no privilege
	return -1000
}
