package api

import (
	"github.com/google/uuid"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	// DefaultNamespace is where a pod without metadata.namespace lives.
	DefaultNamespace = "default"
	// DefaultTerminationGracePeriod is Kubernetes' default, in seconds.
	DefaultTerminationGracePeriod = 30
	// ConfigSourceAnnotation records which source kind declared a pod.
	ConfigSourceAnnotation = "kubernetes.io/config.source"
	// MirrorAnnotation marks a mirror pod: the API server's copy of a pod
	// of another source, which the agent writes and never runs; its value
	// is the hash of the pod it mirrors (the kubelet's).
	MirrorAnnotation = "kubernetes.io/config.mirror"
	// RestoredAnnotation marks a pod restored from the previous generation
	// of its source's checkpoint (the newest was unreadable): it may have
	// been deleted since, so it is kept if it runs and never started.
	RestoredAnnotation = "classic-kubelet.io/restored-from"
)

// uidNamespace seeds derived pod UIDs; changing it would change every derived
// UID and so recreate every pod that has no metadata.uid.
var uidNamespace = uuid.MustParse("6b1c3d0e-6f2a-4f7e-9a55-0c1a55c1c0de")

// Key is the pod's identity for merging: "<namespace>/<name>".
func Key(pod *v1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

// DerivedUID is the UID of a pod that names none: stable across edits and
// restarts because it depends only on where the pod comes from and its name.
func DerivedUID(node, source, namespace, name string) types.UID {
	return types.UID(uuid.NewSHA1(uidNamespace, []byte(node+"/"+source+"/"+namespace+"/"+name)).String())
}

// SetDefaults fills in the pod-level fields the agent relies on: namespace,
// UID, source annotation, restart policy and grace period. Containers are left
// exactly as written, because their spec hash must not change when defaults do.
func SetDefaults(pod *v1.Pod, node, source string) {
	if pod.Namespace == "" {
		pod.Namespace = DefaultNamespace
	}
	if pod.UID == "" {
		pod.UID = DerivedUID(node, source, pod.Namespace, pod.Name)
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[ConfigSourceAnnotation] = source
	if pod.Spec.RestartPolicy == "" {
		pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		g := int64(DefaultTerminationGracePeriod)
		pod.Spec.TerminationGracePeriodSeconds = &g
	}
}
