package dockertools

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
	LabelType          = "io.kubernetes.docker.type"
	LabelOwner         = "io.classic-kubelet.node"
	LabelSource        = "io.classic-kubelet.source"
	LabelGracePeriod   = "io.kubernetes.pod.terminationGracePeriod"
	TypeSandbox        = "podsandbox"
	TypeContainer      = "container"
)
