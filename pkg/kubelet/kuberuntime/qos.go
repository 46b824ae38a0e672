package kuberuntime

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// The kubelet's OOM score adjustments: the kernel kills the process with
// the highest score first when the node runs out of memory.
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
	// infraOOMScoreAdj keeps a pod's network (its infra container) alive
	// longer than any of its containers.
	infraOOMScoreAdj = -998
	// agentOOMScoreAdj is the agent's own, the kubelet's: killed after
	// every pod.
	agentOOMScoreAdj = -999
)

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
	switch kubecontainer.QOSClass(pod) {
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

// lowerOOMScoreAdj sets the oom_score_adj file at path to want unless it
// is lower already (an operator's -1000 is kept). Lowering it takes
// CAP_SYS_RESOURCE: without it the write fails and the error says so.
func lowerOOMScoreAdj(path string, want int) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("oom_score_adj: %w", err)
	}
	if cur, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && cur <= want {
		return nil
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(want)), 0); err != nil {
		return fmt.Errorf("set oom_score_adj to %d: %w", want, err)
	}
	return nil
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
