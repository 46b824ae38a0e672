package api

import v1 "k8s.io/api/core/v1"

// Op is what happened to the pods of a PodUpdate.
type Op int

// The operations, emitted in this order for one change.
const (
	ADD Op = iota
	UPDATE
	REMOVE
)

func (o Op) String() string { return [...]string{"ADD", "UPDATE", "REMOVE"}[o] }

// PodUpdate is one change to the desired set, from the config merger to
// the kubelet. It lives here, beside the pod types, so that the kubelet
// does not import the sources (and etcd with them).
type PodUpdate struct {
	Op   Op
	Pods []*v1.Pod
}

// Source names, as recorded on the containers (and the
// ConfigSourceAnnotation) of their pods.
const (
	SourceFile = "file"
	SourceHTTP = "http"
	SourceAPI  = "api"
	SourceEtcd = "etcd"
	// SourceAPIServer is a Kubernetes API server's pods bound to the node
	// (node mode). The kubelet calls it "api"; that name was ours first,
	// for the pods POSTed to the agent.
	SourceAPIServer = "apiserver"
)
