package container

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// Labels on every container the agent creates. The pod and container labels
// are the ones Kubernetes tools know; the owner label scopes everything the
// agent lists or touches to one node name, so two agents on one daemon never
// touch each other's containers.
const (
	LabelPodName       = "io.kubernetes.pod.name"
	LabelPodNamespace  = "io.kubernetes.pod.namespace"
	LabelPodUID        = "io.kubernetes.pod.uid"
	LabelContainerName = "io.kubernetes.container.name"
	LabelContainerHash = "io.kubernetes.container.hash"
	LabelRestartCount  = "io.kubernetes.container.restartCount"
	// LabelSpecHash is HashContainerSpec of the container's spec: its
	// hash without resources, which a resize leaves alone (the name and
	// LabelContainerHash keep the full hash at creation). The kubelet used
	// this name while in-place resize was alpha.
	LabelSpecHash    = "io.kubernetes.container.hashWithoutResources"
	LabelType        = "io.kubernetes.docker.type"
	LabelOwner       = "io.classic-kubelet.node"
	LabelSource      = "io.classic-kubelet.source"
	LabelGracePeriod = "io.kubernetes.pod.terminationGracePeriod"
	TypeSandbox      = "podsandbox"
	TypeContainer    = "container"
)

// ContainerLabels are the labels of a container the agent creates: they name
// its pod, container, spec hash, restart count and owner, so the relist can
// rebuild the agent's view from Docker alone.
func ContainerLabels(pod *v1.Pod, node, container, hash, kind string, restartCount int) map[string]string {
	grace := int64(30)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: container,
		LabelContainerHash: hash,
		LabelRestartCount:  strconv.Itoa(restartCount),
		LabelType:          kind,
		LabelOwner:         node,
		LabelGracePeriod:   strconv.FormatInt(grace, 10),
	}
}

// ParseRestartCount reads the restart-count label; absent or malformed is 0.
func ParseRestartCount(labels map[string]string) int {
	n, err := strconv.Atoi(labels[LabelRestartCount])
	if err != nil || n < 0 {
		return 0
	}
	return n
}
