// Package kuberuntime is the runtime manager: it owns the step from a pod
// and its observed state to the container runtime.
//
//   - The decisions: computePodActions (pure, table-tested) compares a pod's
//     spec with its containers under the crash-loop and failure back-off, in
//     phases over one view of the pod, each stop with a typed reason;
//     SyncPod carries the actions out and returns a Result (acted, retry
//     at, waiting reasons, containers being stopped) for the Kubelet to
//     record; KillPod stops and removes a pod's containers; Admit refuses
//     what the runtime cannot enforce.
//   - The create spec of every container: hostname, DNS and network mode
//     (the Network's), hosts file, environment (downward API, config maps,
//     secrets, service variables), command, mounts, resources, QoS and OOM score, security, sysctls; the
//     pod and QoS cgroups; the image pull secrets a pull uses.
//   - The verbs: starting containers (bounded by start slots) with their
//     postStart hooks, stopping them in the kubelet's order with their
//     preStop hooks, removing them with their log links, and the streams
//     the API serves (logs, exec, attach, port-forward); every runtime call
//     is measured once, by the instrumented runtime.
//
// The Kubelet holds one Manager and asks it; what the Manager needs of the
// Kubelet and its other parts are the small interfaces declared here
// (Volumes, Images, Probes, Relister, Network), and the parts of its own
// it shares, built first: the downward API (Downward, which the volume
// manager reads too), the log settings and links (LogSettings, which a
// SIGHUP changes, and LogLinks, which the relist makes).
package kuberuntime

import (
	"context"
	"fmt"
	goruntime "runtime"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/credentialprovider"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/devices"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/network"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/network/dns"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/prober"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeclass"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
	probehttp "github.com/classic-kubelet/kubelet/pkg/probe/http"
)

// Config is what the Manager is told of the node and the agent's options.
type Config struct {
	NodeName string
	// NodeIP is the pods' host IP (status.hostIP in the downward API).
	NodeIP string
	// NodeMemory (bytes) is the node's: the memory a Burstable
	// container's OOM score is reckoned against.
	NodeMemory int64
	RootDir    string
	InfraImage string
	// ClusterDomain is the domain of pods with a subdomain (default
	// cluster.local).
	ClusterDomain string
	// ResolvConf is the resolver configuration of dnsPolicy Default
	// (default /etc/resolv.conf) for the default Network (Deps.Network
	// nil: Docker's bridge, no cluster DNS).
	ResolvConf string
	// AllowPrivileged lets containers run privileged.
	AllowPrivileged bool
	// SeccompDefault gives containers without a seccompProfile the
	// runtime's default profile.
	SeccompDefault bool
	// Sysctls are what pods may set; nil: the safe sysctls alone.
	Sysctls *SysctlAllowlist
	// Services are the cluster's (node mode), for the containers' service
	// variables; nil: none.
	Services ServiceLister
	// Objects reads config maps and secrets (node mode); nil: none (they
	// fail, named).
	Objects volumes.Objects
	// Cgroups, if set, puts each pod's containers in a pod cgroup under
	// its QoS class's.
	Cgroups PodCgroups
	// PodMaxPids bounds each pod cgroup's processes; 0 or less: unbounded.
	PodMaxPids int64
	// PodsLimits, if set, sizes the cgroup of all pods (kubepods).
	PodsLimits v1.ResourceList
	// PauseBinary, if set, is the pause program the infra image is built
	// from when it is absent (never pulled).
	PauseBinary string
	// Events records what happens to pods (nil: nothing is recorded).
	Events *events.Recorder
	// Metrics counts the containers and pods started; nil creates a
	// private set.
	Metrics *metrics.Metrics
	// BackoffInitial and BackoffMax bound the back-off of a container that
	// keeps failing (0: DefaultBackoffInitial, DefaultBackoffMax).
	BackoffInitial, BackoffMax time.Duration
	// Clock times back-off and retries (nil: the real clock); Docker
	// calls and grace periods run on the real one.
	Clock clock.Clock
}

// Deps are the parts of the agent the Manager acts through.
type Deps struct {
	// Runtime is the container runtime, instrumented by the caller
	// (NewInstrumentedRuntime) once for the whole agent.
	Runtime kubecontainer.Runtime
	Volumes Volumes
	Images  Images
	Probes  Probes
	Relist  Relister
	// Network is the pod network; nil: Docker's bridge without cluster
	// DNS.
	Network Network
	// Downward resolves the downward API's values (the volume manager's
	// too); nil: one of the node of Config (and its CPUs).
	Downward *Downward
	// Logs are the containers' log settings of the moment; nil: no links,
	// Docker's default log bounds.
	Logs *LogSettings
	// LogLinks are the containers' log links, which the Manager removes
	// with their containers; nil: links in the directory of Logs.
	LogLinks *LogLinks
	// RuntimeClasses resolve a pod's runtime handler; nil: a pod naming a
	// RuntimeClass fails to start, its handler not supported.
	RuntimeClasses RuntimeClasses
	// Devices assigns the device plugins' devices to containers; nil: no
	// device plugins (a pod asking for an extended resource runs without
	// a device, as the kubelet runs one asking for a resource no plugin
	// serves).
	Devices Devices
}

// Devices assigns the device plugins' devices (pkg/kubelet/devices): to
// every container of a pod at admission, and to the container's creation
// what the plugins answered for it.
type Devices interface {
	Allocate(ctx context.Context, pod *v1.Pod) error
	ContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*devices.ContainerOptions, error)
}

var _ Devices = (*devices.Manager)(nil)

// RuntimeClasses resolve the runtime handler of a pod's containers from
// its runtimeClassName ("": the runtime's default); an error fails the
// pod's sandbox (pkg/kubelet/runtimeclass).
type RuntimeClasses interface {
	Handler(ctx context.Context, pod *v1.Pod) (string, error)
}

// Network is the pod network (pkg/kubelet/network): the resolver settings
// of a pod's sandbox, the network mode its infra container starts with,
// and, when a network plugin attaches sandboxes (mode none), their
// attachment once the infra container runs and their detachment once it
// stops or goes.
type Network interface {
	DNS(pod *v1.Pod) (kubecontainer.DNSSettings, error)
	// SandboxMode is "host", "" (Docker's bridge) or "none" (SetUp
	// attaches it); an error says the plugin is not ready.
	SandboxMode(pod *v1.Pod) (string, error)
	// SetUp attaches the running sandbox (its infra container's process
	// is pid) and returns its IP; a failure has undone the attachment.
	SetUp(ctx context.Context, pod *v1.Pod, sandboxID string, pid int) (ip string, err error)
	// TearDown detaches a sandbox that stopped or goes: idempotent, and
	// nothing for one never attached.
	TearDown(ctx context.Context, sandboxID string) error
}

var _ Network = (*network.Manager)(nil)

// ContainerLogs are the settings of the containers' logs.
type ContainerLogs struct {
	// Dir holds the containers' log symlinks ("" for none).
	Dir string
	// PodDir is the root of the pods' log tree ("" for none; podLogs).
	PodDir string
	// MaxSize (bytes) and MaxFiles bound each container's json-file log.
	MaxSize  int64
	MaxFiles int
}

// Images is what the Manager needs of the image manager: a container's
// image present as its pull policy says, pulled with the pod's
// credentials (asked for only when a pull is due) and the node's, and how
// long a pull took (0: none was made); and whether the image's pulls are in
// back-off, until when and why.
type Images interface {
	Ensure(ctx context.Context, pod *v1.Pod, c *v1.Container, podCreds func() *credentialprovider.Keyring) (pulled time.Duration, err error)
	BackOff(pod *v1.Pod, c *v1.Container) (until time.Time, why *kubecontainer.StartError)
}

// Probes is what the Manager asks of the prober (prober.Manager): whether
// a running container failed its liveness or startup probe (and which),
// and whether a running container has passed its startup probe.
type Probes interface {
	Unhealthy(containerID string) (bool, string)
	Started(c *v1.Container, containerID string) bool
}

var _ Probes = (*prober.Manager)(nil)

// Relister is what the Manager tells the relist (pleg.Relister) of the
// containers it starts.
type Relister interface {
	// Starting marks a container being started until done is called, so
	// the relist does not take it for one that stopped.
	Starting(id string) (done func())
	// Refresh has the container inspected at the next relist.
	Refresh(id string)
}

// Volumes is what the Manager needs of the pod's volumes
// (volumes.Manager): set up before its sandbox, refreshed while it runs,
// bound into its containers.
type Volumes interface {
	PodDir(uid types.UID) string
	Setup(ctx context.Context, pod *v1.Pod) (hostPaths map[string]string, err error)
	Refresh(ctx context.Context, pod *v1.Pod) error
	Binds(pod *v1.Pod, c *v1.Container, hostPaths map[string]string, expand func(string) string, restartCount int) ([]string, error)
}

var _ Volumes = (*volumes.Manager)(nil)

// Manager turns pods into what the container runtime is asked to do. Its
// methods may be called from every pod worker at once, but for
// UpdateQoSCgroups, which the sync loop alone calls.
type Manager struct {
	cfg     Config
	runtime kubecontainer.Runtime
	volumes Volumes
	images  Images
	probes  Probes
	relist  Relister
	network Network
	classes RuntimeClasses
	devices Devices // nil: none

	downward *Downward
	logs     *LogSettings
	logLinks *LogLinks

	// starts bounds the container creations and starts in flight across
	// all pods: the daemon serializes much of that work, and a burst of
	// pods contending for it finishes later than the same pods taken a
	// few at a time (measured with make bench on two cores).
	starts   *startSlots
	hookHTTP *probehttp.Prober // runs HTTP lifecycle hooks

	oomFloor int         // the lowest oom_score_adj this host lets containers have
	appArmor func() bool // whether the host enforces AppArmor; replaced in tests

	// Owned by UpdateQoSCgroups (the sync loop).
	lastQoS     qosShares // the QoS cgroups' shares last written
	podsSized   bool      // kubepods sized to PodsLimits
	podsRetryAt time.Time // when sizing kubepods may be tried again
}

// maxParallelStarts is how many containers are created and started at once
// (startSlots: pods' own containers before infra containers).
// Measured with make bench on two cores against the baseline's sweep (the
// same containers through the API, 1 to 16 and unbounded pods at a time).
// 4 put the agent at 1.19, 1.10 and 1.03 of the sweep's best at 10, 30 and
// 100 pods; 8 at 1.09 at 10 pods (whole sweep, 9 rounds): two pods of such a
// burst wait for a slot until the first eight's app containers have had
// theirs, and end the burst at low concurrency. 16 gave 0.98 and 0.99 at
// 10 and 30 pods in partial runs on the same day, and at 100 pods (3 rounds)
// 1.00 of the baseline at 8 and 1.09 of its best level, 4, whose rounds
// varied by 15 %. The full run then gave 1.04, 1.04 and 1.12, and once a
// worker that acted had its own pod relisted instead of the node (pleg's
// RelistPod), 1.05, 0.99 and 1.01: what the large bursts had lost was
// dockerd's CPU spent listing the node, not the bound (docs/benchmarks.md).
const maxParallelStarts = 16

// NewManager returns a Manager acting through deps. It lowers the agent's
// own OOM score first, as the kubelet does, and probes how low this host
// lets containers' scores go.
func NewManager(cfg Config, deps Deps) *Manager {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(cfg.NodeName)
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.Sysctls == nil {
		cfg.Sysctls, _ = NewSysctlAllowlist(nil) // the safe ones: no error
	}
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = dns.DefaultResolvConf
	}
	if deps.Network == nil {
		// Docker's bridge: no error is possible.
		deps.Network, _ = network.New(network.Config{NodeName: cfg.NodeName,
			DNS: &dns.Configurer{ClusterDomain: cfg.ClusterDomain, ResolvConf: cfg.ResolvConf, NodeIP: cfg.NodeIP}})
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if deps.Downward == nil {
		deps.Downward = NewDownward(DownwardNode{Name: cfg.NodeName, IP: cfg.NodeIP, CPUs: goruntime.NumCPU(), Memory: cfg.NodeMemory, RootDir: cfg.RootDir})
	}
	if deps.Logs == nil {
		deps.Logs = NewLogSettings(ContainerLogs{})
	}
	if deps.LogLinks == nil {
		deps.LogLinks = NewLogLinks(deps.Logs)
	}
	if deps.RuntimeClasses == nil {
		deps.RuntimeClasses = runtimeclass.NewResolver(nil, func() ([]string, error) { return nil, nil })
	}
	// The agent outlives its pods when the node runs out of memory, as
	// the kubelet (before the floor is probed: its probe reads this).
	selfErr := lowerOOMScoreAdj("/proc/self/oom_score_adj", agentOOMScoreAdj)
	oomFloor := oomScoreFloor()
	if selfErr != nil || oomFloor > infraOOMScoreAdj {
		self := "the agent has its -999"
		if selfErr != nil {
			self = fmt.Sprintf("the agent keeps its own (%v) instead of the kubelet's %d, so the OOM killer takes it before Guaranteed pods", selfErr, agentOOMScoreAdj)
		}
		klog.Warningf("This host does not let processes lower their oom_score_adj (no CAP_SYS_RESOURCE): %s; Guaranteed, node-critical and infra containers get %d instead of the kubelet's -997/-998", self, oomFloor)
	}
	return &Manager{cfg: cfg, runtime: deps.Runtime, volumes: deps.Volumes, images: deps.Images, probes: deps.Probes, relist: deps.Relist,
		network: deps.Network, classes: deps.RuntimeClasses, devices: deps.Devices, downward: deps.Downward, logs: deps.Logs, logLinks: deps.LogLinks, starts: newStartSlots(maxParallelStarts),
		hookHTTP: probehttp.New(), oomFloor: oomFloor, appArmor: appArmorEnabled}
}

// PodRecord is what the Manager remembers of one pod between its syncs:
// the back-off of its containers (and sandbox) that keep failing, and the
// image pull secrets it warned of. The pod's worker owns it and hands it to
// every SyncPod of the pod, so it lives exactly as long as the pod's worker
// and is touched by that worker alone.
type PodRecord struct {
	backoff *backoff
	secrets string // the imagePullSecrets last warned of
}

// NewPodRecord returns the record of a pod the Manager has not synced yet.
func (m *Manager) NewPodRecord() *PodRecord {
	return &PodRecord{backoff: newBackoff(m.cfg.BackoffInitial, m.cfg.BackoffMax, m.cfg.Clock)}
}
