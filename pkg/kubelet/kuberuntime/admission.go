package kuberuntime

import (
	"context"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

// appArmorAnnotationPrefix is the beta annotation that named a container's
// AppArmor profile before the field existed ("runtime/default",
// "unconfined", "localhost/<profile>"); the kubelet still honours it.
const appArmorAnnotationPrefix = "container.apparmor.security.beta.kubernetes.io/"

// appArmorEnabled reports whether the host enforces AppArmor. Docker drops
// an apparmor= option silently on a host without it, so the agent checks
// itself, as the kubelet does.
func appArmorEnabled() bool {
	data, err := os.ReadFile("/sys/module/apparmor/parameters/enabled")
	return err == nil && strings.HasPrefix(string(data), "Y")
}

// appArmorProfile resolves a container's AppArmor profile as the kubelet
// does: its field, else its annotation, else the pod's field (nil: none
// asked for, the runtime's default applies).
func appArmorProfile(pod *v1.Pod, c *v1.Container) *v1.AppArmorProfile {
	if sc := c.SecurityContext; sc != nil && sc.AppArmorProfile != nil {
		return sc.AppArmorProfile
	}
	if a, ok := pod.Annotations[appArmorAnnotationPrefix+c.Name]; ok {
		switch {
		case a == "runtime/default":
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
		case a == "unconfined":
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
		case strings.HasPrefix(a, "localhost/"):
			name := strings.TrimPrefix(a, "localhost/")
			return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
		}
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		return psc.AppArmorProfile
	}
	return nil
}

// dockerAppArmor is the apparmor= value Docker takes for a profile ("":
// Docker's default).
func dockerAppArmor(p *v1.AppArmorProfile) string {
	switch {
	case p == nil:
		return ""
	case p.Type == v1.AppArmorProfileTypeUnconfined:
		return "unconfined"
	case p.Type == v1.AppArmorProfileTypeLocalhost && p.LocalhostProfile != nil:
		return *p.LocalhostProfile
	default:
		return "docker-default"
	}
}

// ReasonUnexpectedAdmissionError is the kubelet's reason for a pod whose
// devices could not be allocated (more asked than are free, say).
const ReasonUnexpectedAdmissionError = "UnexpectedAdmissionError"

// Admit says whether the pod can run on this node (nil: it can); what
// cannot be enforced is refused rather than silently dropped. Last, a pod
// nothing of which has run yet (state: the relist's) is assigned its
// devices (kept across calls: a pod admitted before is admitted again at
// once).
func (m *Manager) Admit(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState) *lifecycle.Rejection {
	// A pod for another OS, or selecting nodes of another OS, is refused
	// with the kubelet's reasons: this node runs Linux containers.
	if pod.Spec.OS != nil && pod.Spec.OS.Name != v1.Linux {
		return &lifecycle.Rejection{Reason: "PodOSNotSupported", Message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	if os, ok := pod.Spec.NodeSelector[v1.LabelOSStable]; ok && os != string(v1.Linux) {
		return &lifecycle.Rejection{Reason: "PodOSSelectorNodeLabelDoesNotMatch", Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if r := m.cfg.Sysctls.admit(pod); r != nil {
		return r
	}
	if psc := pod.Spec.SecurityContext; psc != nil && psc.SupplementalGroupsPolicy != nil &&
		*psc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		// Docker always adds the groups the image's /etc/group gives the
		// user: Strict cannot be honoured, so the pod is refused.
		return &lifecycle.Rejection{Reason: "SupplementalGroupsPolicyNotSupported", Message: "SupplementalGroupsPolicy=Strict is not supported by the container runtime (Docker) on this node"}
	}
	if r := pod.Spec.Resources; r != nil && (len(r.Limits) > 0 || len(r.Requests) > 0) && m.cfg.Cgroups == nil {
		return &lifecycle.Rejection{Reason: "PodLevelResourcesNotSupported", Message: "pod-level resources need pod cgroups, and this agent runs with --cgroups-per-qos=false"}
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if p := appArmorProfile(pod, &cs[i]); p != nil && p.Type != v1.AppArmorProfileTypeUnconfined && !m.appArmor() {
				return &lifecycle.Rejection{Reason: "AppArmor", Message: "Cannot enforce AppArmor: AppArmor is not enabled on the host"}
			}
		}
	}
	// A pod with containers was admitted before, by this agent or the one
	// before a restart, and is not refused for its devices now: its plugin
	// may not have registered again yet, or its assignments may not have
	// been checkpointed (the kubelet skips the containers it finds
	// running). A container of it without devices is assigned them when it
	// is created (ContainerOptions), a failure there its start's back-off.
	if m.devices != nil && len(state.All()) == 0 {
		// The kubelet allocates devices before it checks the node's
		// resources: a pod asking more devices than are free is
		// refused by the allocation, with its message.
		if err := m.devices.Allocate(ctx, pod); err != nil {
			return &lifecycle.Rejection{Reason: ReasonUnexpectedAdmissionError, Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
		}
	}
	return nil
}
