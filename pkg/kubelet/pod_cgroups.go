package kubelet

import (
	"fmt"

	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
)

// PodCgroups is what the Kubelet needs of the QoS and pod cgroups
// (cgroups.Manager and cgroups.Detected).
type PodCgroups interface {
	Ensure(n cgroups.Name, r cgroups.Resources) error
	Remove(n cgroups.Name) error
	Exists(n cgroups.Name) bool
	RuntimeParent(n cgroups.Name) string
	Path(n cgroups.Name) string
}

// cgroupParent is where the pod's new containers go ("" for the runtime's
// default, when the agent makes no pod cgroups). Containers made before
// stay where they are: moving them would mean restarting them.
func (k *Kubelet) cgroupParent(pod *v1.Pod) string {
	if k.cfg.Cgroups == nil {
		return ""
	}
	return k.cfg.Cgroups.RuntimeParent(cgroups.PodName(qosClass(pod), pod.UID))
}

// ensurePodCgroup creates the pod's cgroup, or resizes it to the pod's
// current spec, before any of its containers is created.
func (k *Kubelet) ensurePodCgroup(pod *v1.Pod) error {
	if k.cfg.Cgroups == nil {
		return nil
	}
	n := cgroups.PodName(qosClass(pod), pod.UID)
	if err := k.cfg.Cgroups.Ensure(n, podCgroupResources(pod)); err != nil {
		return fmt.Errorf("pod cgroup: %w", err)
	}
	return nil
}

// removePodCgroup removes the cgroup of a pod whose containers are all
// gone, wherever its QoS class put it (a spec change may have moved it).
// Only pods of this agent come here (their containers bear its owner label,
// or their directory is under its root), so another agent's pods on the
// same host are never touched.
func (k *Kubelet) removePodCgroup(uid types.UID) error {
	if k.cfg.Cgroups == nil {
		return nil
	}
	for _, qos := range []v1.PodQOSClass{v1.PodQOSGuaranteed, v1.PodQOSBurstable, v1.PodQOSBestEffort} {
		n := cgroups.PodName(qos, uid)
		if !k.cfg.Cgroups.Exists(n) {
			continue
		}
		if err := k.cfg.Cgroups.Remove(n); err != nil {
			return err
		}
		glog.V(2).Infof("Removed pod cgroup %s", k.cfg.Cgroups.Path(n))
	}
	return nil
}

// PodCgroupPath is the pod's cgroup as cAdvisor names it, if it has one
// (its stats are the pod's totals, infra container included).
func (k *Kubelet) PodCgroupPath(pod *v1.Pod) string {
	if k.cfg.Cgroups == nil {
		return ""
	}
	n := cgroups.PodName(qosClass(pod), pod.UID)
	if !k.cfg.Cgroups.Exists(n) {
		return ""
	}
	return k.cfg.Cgroups.Path(n)
}

// updateQoSCgroups sizes the QoS cgroups to the desired pods, as the
// kubelet does: burstable's CPU shares are the sum of its pods' CPU
// requests, besteffort's the minimum. It writes only on a change; lastQoS
// is owned by the sync loop.
func (k *Kubelet) updateQoSCgroups() {
	if k.cfg.Cgroups == nil {
		return
	}
	var burstableMilli int64
	for _, pod := range k.desired.all() {
		if qosClass(pod) == v1.PodQOSBurstable {
			burstableMilli += podCPURequestMilli(pod)
		}
	}
	want := qosShares{burstable: uint64(cpuShares(burstableMilli)), besteffort: minShares}
	if want == k.lastQoS {
		return
	}
	err := k.cfg.Cgroups.Ensure(cgroups.QoSName(v1.PodQOSBurstable), cgroups.Resources{CPUShares: want.burstable, CPUQuota: -1})
	if err == nil {
		err = k.cfg.Cgroups.Ensure(cgroups.QoSName(v1.PodQOSBestEffort), cgroups.Resources{CPUShares: want.besteffort, CPUQuota: -1})
	}
	if err != nil {
		glog.Errorf("QoS cgroups: %v", err)
		return
	}
	k.lastQoS = want
}

// qosShares are the CPU shares last written to the QoS cgroups.
type qosShares struct{ burstable, besteffort uint64 }
