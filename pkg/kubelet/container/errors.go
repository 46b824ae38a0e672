// Package container holds what the kubelet knows of containers and their
// conventions without knowing any one runtime: the state of a pod's
// containers as the relist sees them, the options of the runtime calls, the
// errors every runtime implementation returns and every caller matches with
// errors.Is (so that no package but the runtime's own reads a runtime's
// error strings), and the agent's own conventions: how it names, labels and
// hashes the containers it creates (the identity by which a restarted agent
// adopts them), and the restart and QoS policy read from a pod's spec.
package container

import "errors"

var (
	// ErrNotFound: the container does not exist (any more).
	ErrNotFound = errors.New("container: not found")
	// ErrImageNotFound: the image is not present.
	ErrImageNotFound = errors.New("container: image not found")
	// ErrRuntimeUnavailable: the runtime did not answer (down, restarting,
	// unreachable); retry once it does.
	ErrRuntimeUnavailable = errors.New("container: runtime unavailable")
	// ErrExecTimeout: a command run in a container outlived its timeout
	// and was killed.
	ErrExecTimeout = errors.New("container: exec timed out")
	// ErrNameConflict: a container of that name exists already.
	// The text predates the move from dockertools and is kept: it is part
	// of the CreateContainerError message users see in status and events.
	ErrNameConflict = errors.New("dockertools: container name already in use")
	// ErrNotOurName: a container name this agent did not make (ParseName).
	ErrNotOurName = errors.New("container: not a container name of this agent")
)

// StartError is why a container, or a pod's sandbox, could not start: the
// reason Kubernetes shows in the waiting state (ErrImagePull,
// CreateContainerConfigError, ...) and a one-line message.
type StartError struct {
	Reason, Message string
}

func (e *StartError) Error() string { return e.Reason + ": " + e.Message }

// Waiting reasons of image and create failures, as Kubernetes reports them.
const (
	ReasonErrImagePull      = "ErrImagePull"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	// ReasonInvalidImageName: the image reference does not parse; it is
	// never pulled.
	ReasonInvalidImageName = "InvalidImageName"
	// ReasonCreateContainerConfigError: the container's configuration
	// cannot be made (a bad subPath, an env value that cannot be resolved).
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	// ReasonCreateContainerError: the runtime refused to create the
	// container, or a file its spec names cannot be used (a seccomp
	// profile).
	ReasonCreateContainerError = "CreateContainerError"
)
