package container

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// InfraContainerName is the container name of a pod's infra ("sandbox")
// container, as Kubernetes named it.
const InfraContainerName = "POD"

// ContainerState is what the agent knows of one container of a pod, as of
// the last relist.
type ContainerState struct {
	ID          string
	RuntimeName string // the runtime's name of the container
	Name        string // container name in the pod; InfraContainerName for the infra container
	Hash        string // the full spec hash at creation (HashContainer)
	// SpecHash is the resources-free hash (LabelSpecHash); "" for a
	// container made before the agent resized in place.
	SpecHash     string
	RestartCount int
	Running      bool
	Status       string // created, running, exited, ...
	ExitCode     int
	Error        string // why the runtime could not start it
	OOMKilled    bool
	CreatedAt    time.Time
	StartedAt    time.Time
	FinishedAt   time.Time
	Image        string
	ImageID      string
	ImageRef     string // as a container status's imageID says it ("": see StatusImageID)
	IP           string
	LogPath      string
	LayerPath    string // the writable layer's directory, "" if unknown
	Labels       map[string]string
	// Resources are what the runtime enforces now (nil: not known).
	Resources *Resources
	// User is the identity its process runs with, as seen while it ran
	// (nil: never seen running).
	User *ContainerUser
}

// ContainerUser is the identity of a container's process, as a CRI
// runtime's container status gives it: its uid, its primary gid, and its
// groups (the primary one first, as containerd reports them).
type ContainerUser struct {
	UID, GID           int64
	SupplementalGroups []int64
}

// FailedToStart reports a container the runtime created but could not
// start: its exit code and error say why (a mistyped command, a bad working
// dir).
func (c *ContainerState) FailedToStart() bool {
	return !c.Running && c.Status == "created" && (c.ExitCode != 0 || c.Error != "")
}

// StatusImageID is the container's image as the kubelet's container
// status says it (imageID): the runtime's reference (with cri-dockerd,
// docker-pullable://<repo>@sha256:… for an image with a repo digest, else
// docker://sha256:…), or, when the runtime gave none, the image's ID in
// the second form.
func (c *ContainerState) StatusImageID() string {
	switch {
	case c.ImageRef != "":
		return c.ImageRef
	case c.ImageID != "":
		return "docker://" + c.ImageID
	}
	return ""
}

// ExitedAt is when the container stopped running: for one that never ran,
// when it was created.
func (c *ContainerState) ExitedAt() time.Time {
	if c.FinishedAt.IsZero() {
		return c.CreatedAt
	}
	return c.FinishedAt
}

// PodState is the containers of one pod, newest first.
type PodState struct {
	UID        types.UID
	Name       string
	Namespace  string
	Containers []*ContainerState
}

// Infra returns the pod's infra containers, newest first.
func (p *PodState) Infra() []*ContainerState { return p.Instances(InfraContainerName) }

// RunningInfra returns the pod's running infra container, or nil.
func (p *PodState) RunningInfra() *ContainerState {
	for _, c := range p.Infra() {
		if c.Running {
			return c
		}
	}
	return nil
}

// Instances returns the instances of the named container, newest first.
func (p *PodState) Instances(name string) []*ContainerState {
	if p == nil {
		return nil
	}
	var out []*ContainerState
	for _, c := range p.Containers {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// All returns the pod's containers (none for a nil state).
func (p *PodState) All() []*ContainerState {
	if p == nil {
		return nil
	}
	return p.Containers
}

// SortNewestFirst orders a pod's containers newest first (by creation, then
// restart count).
func SortNewestFirst(cs []*ContainerState) {
	sort.SliceStable(cs, func(i, j int) bool {
		if !cs[i].CreatedAt.Equal(cs[j].CreatedAt) {
			return cs[i].CreatedAt.After(cs[j].CreatedAt)
		}
		return cs[i].RestartCount > cs[j].RestartCount
	})
}
