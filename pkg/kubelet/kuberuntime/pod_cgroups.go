package kuberuntime

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// PodCgroups is what the Manager needs of the QoS and pod cgroups
// (cgroups.Manager and cgroups.Detected).
type PodCgroups interface {
	Ensure(n cgroups.Name, r cgroups.Resources) error
	Remove(n cgroups.Name) error
	Exists(n cgroups.Name) bool
	RuntimeParent(n cgroups.Name) string
	Path(n cgroups.Name) string
	// MemoryWorkingSet is the memory n (containerID "": itself) or a
	// container beneath it uses, as the kubelet counts it.
	MemoryWorkingSet(n cgroups.Name, containerID string) (int64, error)
}

// cgroupParent is where the pod's new containers go ("" for the runtime's
// default, when the agent makes no pod cgroups). Containers made before
// stay where they are: moving them would mean restarting them.
func (m *Manager) cgroupParent(pod *v1.Pod) string {
	if m.cfg.Cgroups == nil {
		return ""
	}
	return m.cfg.Cgroups.RuntimeParent(cgroups.PodName(kubecontainer.QOSClass(pod), pod.UID))
}

// ensurePodCgroup creates the pod's cgroup, or resizes it to the pod's
// current spec, before any of its containers is created.
func (m *Manager) ensurePodCgroup(pod *v1.Pod) error {
	if m.cfg.Cgroups == nil {
		return nil
	}
	n := cgroups.PodName(kubecontainer.QOSClass(pod), pod.UID)
	r := podCgroupResources(pod)
	r.Pids = m.cfg.PodMaxPids
	if err := m.cfg.Cgroups.Ensure(n, r); err != nil {
		return fmt.Errorf("pod cgroup: %w", err)
	}
	return nil
}

// RemovePodCgroup removes the cgroup of a pod whose containers are all
// gone, wherever its QoS class put it (a spec change may have moved it).
// Only pods of this agent come here (their containers bear its owner label,
// or their directory is under its root), so another agent's pods on the
// same host are never touched.
func (m *Manager) RemovePodCgroup(uid types.UID) error {
	if m.cfg.Cgroups == nil {
		return nil
	}
	for _, qos := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		n := cgroups.PodName(qos, uid)
		if !m.cfg.Cgroups.Exists(n) {
			continue
		}
		if err := m.cfg.Cgroups.Remove(n); err != nil {
			return err
		}
		klog.V(2).Infof("Removed pod cgroup %s", m.cfg.Cgroups.Path(n))
	}
	return nil
}

// PodCgroupPath is the pod's cgroup as cAdvisor names it, if it has one
// (its stats are the pod's totals, infra container included).
func (m *Manager) PodCgroupPath(pod *v1.Pod) string {
	if m.cfg.Cgroups == nil {
		return ""
	}
	n := cgroups.PodName(kubecontainer.QOSClass(pod), pod.UID)
	if !m.cfg.Cgroups.Exists(n) {
		return ""
	}
	return m.cfg.Cgroups.Path(n)
}

// PodsCgroupPath is the cgroup that holds every pod, as cAdvisor names it,
// if there is one: sized to node allocatable, its stats are the summary's
// "pods" system container.
func (m *Manager) PodsCgroupPath() string {
	if m.cfg.Cgroups == nil || !m.cfg.Cgroups.Exists(cgroups.Top) {
		return ""
	}
	return m.cfg.Cgroups.Path(cgroups.Top)
}

// podsSizeRetry spaces the attempts to size kubepods that failed.
const podsSizeRetry = time.Minute

// UpdateQoSCgroups sizes the QoS cgroups to the desired pods, as the
// kubelet does: burstable's CPU shares are the sum of its pods' CPU
// requests, besteffort's the minimum; the first call (and, after a
// failure, one a minute later) sizes kubepods too. It writes only on a
// change. The sync loop alone calls it (it owns lastQoS).
func (m *Manager) UpdateQoSCgroups(desired []*v1.Pod) {
	if m.cfg.Cgroups == nil {
		return
	}
	if !m.podsSized && m.cfg.PodsLimits != nil && !m.cfg.Clock.Now().Before(m.podsRetryAt) {
		if err := m.cfg.Cgroups.Ensure(cgroups.Top, podsCgroupResources(m.cfg.PodsLimits)); err != nil {
			// A memory limit below what the pods use now fails (v1) and
			// makes the kernel reclaim their page cache at each try: try
			// again a minute later, as the kubelet does.
			klog.Errorf("Node allocatable: %v (retrying in %v)", err, podsSizeRetry)
			m.podsRetryAt = m.cfg.Clock.Now().Add(podsSizeRetry)
		} else {
			m.podsSized = true
		}
	}
	var burstableMilli int64
	for _, pod := range desired {
		if kubecontainer.QOSClass(pod) == v1.PodQOSBurstable {
			burstableMilli += podCPURequestMilli(pod)
		}
	}
	want := qosShares{burstable: uint64(cpuShares(burstableMilli)), besteffort: minShares}
	if want == m.lastQoS {
		return
	}
	err := m.cfg.Cgroups.Ensure(cgroups.QoSName(v1.PodQOSBurstable), cgroups.Resources{CPUShares: want.burstable, CPUQuota: -1})
	if err == nil {
		err = m.cfg.Cgroups.Ensure(cgroups.QoSName(v1.PodQOSBestEffort), cgroups.Resources{CPUShares: want.besteffort, CPUQuota: -1})
	}
	if err != nil {
		klog.Errorf("QoS cgroups: %v", err)
		return
	}
	m.lastQoS = want
}

// qosShares are the CPU shares last written to the QoS cgroups.
type qosShares struct{ burstable, besteffort uint64 }

// podsCgroupResources are the bounds of kubepods for the node allocatable
// limits (cpu, memory and the kubelet's "pid" amount), as the kubelet's
// enforceNodeAllocatableCgroups sets them: shares for the CPUs, no quota.
func podsCgroupResources(limits v1.ResourceList) cgroups.Resources {
	r := cgroups.Resources{CPUShares: uint64(cpuShares(limits.Cpu().MilliValue())), CPUQuota: -1, Memory: limits.Memory().Value()}
	if pids, ok := limits[PidResource]; ok {
		r.Pids = pids.Value()
	}
	return r
}

// PidResource is the kubelet's name of the node's process IDs in its
// reservations (--kube-reserved pid=1000); the Node object does not list it.
const PidResource v1.ResourceName = "pid"
