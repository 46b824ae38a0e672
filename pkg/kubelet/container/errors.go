// Package container holds what the kubelet knows of containers without
// knowing any one runtime: the state of a pod's containers as the relist
// sees them, the options of the runtime calls, and the errors every runtime
// implementation returns and every caller matches with errors.Is, so that
// no package but the runtime's own reads a runtime's error strings.
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
)

// StartError is why a container, or a pod's sandbox, could not start: the
// reason Kubernetes shows in the waiting state (ErrImagePull,
// CreateContainerConfigError, ...) and a one-line message.
type StartError struct {
	Reason, Message string
}

func (e *StartError) Error() string { return e.Reason + ": " + e.Message }

// Waiting reasons of image failures, as Kubernetes reports them.
const (
	ReasonErrImagePull      = "ErrImagePull"
	ReasonImagePullBackOff  = "ImagePullBackOff"
	ReasonErrImageNeverPull = "ErrImageNeverPull"
	// ReasonCreateContainerConfigError: the container's configuration
	// cannot be made (a bad subPath, an env value that cannot be resolved).
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
)
