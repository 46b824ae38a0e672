package container

import (
	"context"
	"io"
	"time"
)

// Container is one entry of a container list.
type Container struct {
	ID      string
	Name    string // without Docker's leading "/"
	Labels  map[string]string
	Running bool
	Created time.Time
}

// ContainerDetail is what inspect says of one container.
type ContainerDetail struct {
	ID         string
	Name       string
	Image      string // as requested at create time
	ImageID    string
	ImageRef   string // the image as a container status's imageID says it ("": none given)
	Labels     map[string]string
	Status     string // created, running, exited, ...
	Running    bool
	ExitCode   int
	Error      string
	OOMKilled  bool
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	IP         string
	Pid        int
	User       *ContainerUser // of its running process (nil: not running, or not known)
	LogPath    string
	// LayerPath is the directory of the container's writable layer on the
	// host (overlay2's upper dir), "" where the storage driver names none.
	LayerPath string
	// Resources as the runtime applied them (for tests and status).
	CPUShares, CPUQuota, CPUPeriod, Memory int64
}

// EventType says what an Event is about.
type EventType string

const (
	// ContainerEvent: a container's state or health changed.
	ContainerEvent EventType = "container"
	// ImageEvent: an image may be present that was not (pull, load, tag,
	// import).
	ImageEvent EventType = "image"
)

// Event is one event of the runtime's event stream.
type Event struct {
	Type EventType
	// ContainerID and Labels are a container event's: its ID and its
	// labels (Docker mixes in its own attributes: name, image, exitCode).
	ContainerID string
	Labels      map[string]string
	// Image is an image event's reference (a load names only the ID).
	Image    string
	Action   string
	Time     time.Time // when the runtime says it happened
	ExitCode int       // of a "die"
}

// StateActions are the container event actions after which a list or an
// inspect shows the container differently (what the relist follows): not
// exec_* (every exec probe makes three), nor health_status, which only
// cAdvisor's inspects show.
var StateActions = []string{"create", "start", "die", "destroy", "oom", "pause", "unpause", "rename", "update"}

// CreateSpec is everything the agent sets on a container it creates.
type CreateSpec struct {
	Name        string
	Image       string
	Entrypoint  []string
	Cmd         []string
	Env         []string
	WorkingDir  string
	Labels      map[string]string
	Hostname    string
	Domainname  string
	NetworkMode string
	IpcMode     string
	PidMode     string
	// Sysctls are set in the container's namespaces (the infra
	// container's: the pod's network and IPC namespaces are its).
	Sysctls   map[string]string
	Ports     []PortMapping
	Binds     []string
	Resources Resources
	DNS       DNSSettings

	User            string
	GroupAdd        []string
	CapAdd, CapDrop []string
	Privileged      bool
	ReadOnlyRootfs  bool
	NoNewPrivileges bool
	Tty             bool
	OpenStdin       bool
	StdinOnce       bool
	// LogMaxSize (bytes) and LogMaxFiles rotate the json-file log; 0: Docker's default.
	LogMaxSize  int64
	LogMaxFiles int

	// CgroupParent places the container under a pod cgroup ("": the
	// runtime's default).
	CgroupParent string
	// Runtime is the runtime handler that runs the container, the pod's
	// RuntimeClass's ("": the runtime's default).
	Runtime string
	// Seccomp confines the container's system calls (zero: the runtime's
	// default profile).
	Seccomp SeccompProfile
	// AppArmorProfile names a loaded profile, or "unconfined" ("": the
	// runtime's default).
	AppArmorProfile string
	// SELinuxLabels are the container's SELinux label options, as Docker
	// takes them ("level:s0:c1,c2"); Docker ignores them where SELinux is
	// off, as the kubelet's runtime does.
	SELinuxLabels []string
	// OOMScoreAdj, if set, is the container's oom_score_adj.
	OOMScoreAdj *int
	// Mounts are bind mounts given as structured sources and targets (a
	// path may hold any character, ':' included).
	Mounts []Mount
	// Devices are host devices given to the container (a device plugin's).
	Devices []Device
	// CDIDevices are fully qualified CDI device names (vendor/class=name)
	// the runtime injects (a device plugin's).
	CDIDevices []string
	// Annotations are the container's annotations (a device plugin's),
	// kept by the runtime beside its labels.
	Annotations map[string]string
}

// Device is a host device node given to a container.
type Device struct {
	PathOnHost, PathInContainer string
	// Permissions are the cgroup permissions: any of r, w, m.
	Permissions string
}

// Seccomp profile kinds, as the pod spec names them.
const (
	SeccompRuntimeDefault = "RuntimeDefault"
	SeccompUnconfined     = "Unconfined"
	SeccompLocalhost      = "Localhost"
)

// SeccompProfile is a container's seccomp confinement: a kind, and for
// Localhost the profile's JSON content (the runtime takes the content, not
// a path).
type SeccompProfile struct {
	Kind    string // "" or SeccompRuntimeDefault: the runtime's default
	Content []byte // SeccompLocalhost only
}

// Mount binds a host path into the container.
type Mount struct {
	Source, Target string
	ReadOnly       bool
}

// PortMapping publishes ContainerPort on the node's HostIP:HostPort.
type PortMapping struct {
	ContainerPort int32
	HostPort      int32
	HostIP        string
	Protocol      string // "tcp" or "udp"
}

// DNSSettings are explicit resolver settings; all empty means Docker's
// default (derived from the node's resolv.conf).
type DNSSettings struct {
	Nameservers, Searches, Options []string
}

// Resources is what Docker enforces for one container.
type Resources struct {
	CPUShares int64
	CPUQuota  int64 // 0: unlimited
	CPUPeriod int64 // set with CPUQuota
	Memory    int64 // bytes; 0: unlimited
}

// Image is an image on the node as the node status reports it.
type Image struct {
	Names []string // digests first, then tags
	Size  int64    // bytes
}

// Auth is one registry credential.
type Auth struct {
	Username, Password, ServerAddress string
}

// Runtime is what the kubelet needs from a container runtime; pkg/dockertools
// implements it on Docker. Its types are the runtime's neutral ones: what
// Docker (or another runtime) makes of them is the implementation's
// business.
type Runtime interface {
	List(ctx context.Context, label, value string) ([]Container, error)
	Inspect(ctx context.Context, id string) (*ContainerDetail, error)
	// Events streams the runtime's events, every container's (its
	// StateActions and its health) and the image events that may make an
	// image present, until ctx ends or the stream breaks (the channel is
	// then closed). The agent holds one such subscription
	// (pkg/kubelet/runtimeevents), which its readers share.
	Events(ctx context.Context) (<-chan Event, error)
	Create(ctx context.Context, spec *CreateSpec) (string, error)
	Start(ctx context.Context, id string) error
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Update changes a running container's cpu and memory bounds in
	// place (an in-place resize).
	Update(ctx context.Context, id string, r Resources) error
	Remove(ctx context.Context, id string) error
	ImagePresent(ctx context.Context, image string) (bool, error)
	PullAuth(ctx context.Context, image string, auth *Auth, inactivity time.Duration) error
	ImageID(ctx context.Context, image string) (string, error)
	RemoveImage(ctx context.Context, id string) error
	ImagesInUse(ctx context.Context) (map[string]bool, error)
	ImageFsUsage(ctx context.Context) (int, error)
	ImageUser(ctx context.Context, image string) (string, error)
	BuildPauseImage(ctx context.Context, tag, binary string) error
	Exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (int, []byte, error)
	// ExecStream runs cmd in a running container connected to streams, and
	// returns its exit code once it exits (or ctx ends the session).
	ExecStream(ctx context.Context, containerID string, cmd []string, s Streams) (int, error)
	// Attach connects streams to a running container's main process until
	// it exits or ctx ends the session.
	Attach(ctx context.Context, containerID string, s Streams) error
	Logs(ctx context.Context, id string, o LogOptions, w io.Writer) error
	// DiskUsage measures what the containers labelled label=value and the
	// images hold on disk. It is costly for the runtime: call it rarely.
	DiskUsage(ctx context.Context, label, value string) (*DiskUsage, error)
}

// DiskUsage is what the runtime holds on disk.
type DiskUsage struct {
	Writable map[string]int64 // bytes of each container's writable layer, by ID
	Images   int64            // bytes of all image layers (shared ones once)
	RootDir  string           // the runtime's root directory, on the file system holding both
}

// TerminalSize is a terminal's size in characters.
type TerminalSize struct {
	Width, Height uint16
}

// Streams are what a process in a container is connected to: nil ones are
// not. With TTY, the process has a terminal (stdout and stderr are one), and
// Resize, if set, carries its size changes.
type Streams struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	TTY    bool
	Resize <-chan TerminalSize
}
