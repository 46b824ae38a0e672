package container

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestContainerLabels(t *testing.T) {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "p", "ns", "u1"
	l := ContainerLabels(pod, "n", "c", "h", TypeContainer, 3)
	if l[LabelGracePeriod] != "30" || l[LabelRestartCount] != "3" || l[LabelOwner] != "n" || l[LabelPodUID] != "u1" {
		t.Errorf("labels %v", l)
	}
	grace := int64(5)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	if l := ContainerLabels(pod, "n", "c", "h", TypeContainer, 0); l[LabelGracePeriod] != "5" {
		t.Errorf("grace label %q, want 5", l[LabelGracePeriod])
	}
}
