// Package network is a pod's network, as the kubelet and cri-dockerd make
// it: the resolver settings of its sandbox (cluster DNS, package dns), and
// the network its infra container joins — Docker's bridge (the default,
// --network-plugin=""), the host's (hostNetwork pods), or a CNI network
// (--network-plugin=cni: the infra container starts with network mode none
// and the CNI plugins of the first network configuration in --cni-conf-dir
// attach its network namespace, through libcni).
//
// The runtime manager (pkg/kubelet/kuberuntime) asks the Manager for a
// sandbox's DNS and network mode, has it attach a CNI sandbox once its infra
// container runs (SetUp) and detach one it stops or removes (TearDown); the
// node status asks whether the network is ready (Ready); node mode hands it
// the Node's podCIDRs (SetPodCIDRs), from which it writes the reference
// network configuration when none exists. What is true of CNI sandboxes
// across restarts of the agent is on disk: the sandboxes it attached
// (<root-dir>/network/sandboxes, one record each, written before the ADD),
// their network namespaces, pinned (<root-dir>/network/netns, bind mounts,
// as containerd pins them) so that a DEL after the sandbox died still finds
// its interface, and libcni's cache of each ADD's result and configuration
// (--cni-cache-dir), from which a restarted agent learns the IPs of running
// sandboxes without a new ADD, and with which it DELs those that stopped or
// went while it was down (Run).
package network

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/network/dns"
)

// Network plugins, as --network-plugin names them.
const (
	// PluginDocker ("") is Docker's bridge: Docker gives each sandbox its
	// IP and publishes host ports itself.
	PluginDocker = ""
	// PluginCNI attaches sandboxes with CNI plugins.
	PluginCNI = "cni"
)

// Sandbox network modes (kubecontainer.CreateSpec.NetworkMode).
const (
	ModeBridge = ""     // Docker's default network
	ModeHost   = "host" // the host's network namespace
	ModeNone   = "none" // a namespace of its own the plugin attaches
)

// Defaults of the CNI flags, as the kubelet's and libcni's.
const (
	DefaultCNIConfDir  = "/etc/cni/net.d"
	DefaultCNIBinDir   = "/opt/cni/bin"
	DefaultCNICacheDir = "/var/lib/cni/cache"
)

// Events is where the Manager records what happens (*events.Recorder).
type Events interface {
	Event(ref events.Ref, warning bool, reason, format string, args ...any)
}

// Config is the pod network of the node.
type Config struct {
	// NodeName names the node in events and, hashed, the reference
	// network's bridge.
	NodeName string
	// Plugin is --network-plugin: PluginDocker or PluginCNI.
	Plugin string
	// ConfDir, BinDirs and CacheDir are --cni-conf-dir, --cni-bin-dir and
	// --cni-cache-dir (CNI only).
	ConfDir  string
	BinDirs  []string
	CacheDir string
	// StateDir holds the agent's records of the sandboxes it attached
	// (<root-dir>/network).
	StateDir string
	// DNS computes the sandboxes' resolver settings.
	DNS *dns.Configurer
	// Events records what happens (nil: nothing).
	Events Events
}

// Manager is the node's pod network. Its methods may be called from every
// pod worker at once.
type Manager struct {
	cfg Config
	cni *cniNetwork // nil unless Plugin is PluginCNI
}

// New returns the pod network cfg describes; with CNI it reads the records
// of the sandboxes attached before a restart.
func New(cfg Config) (*Manager, error) {
	if cfg.DNS == nil {
		cfg.DNS = &dns.Configurer{ResolvConf: dns.DefaultResolvConf}
	}
	m := &Manager{cfg: cfg}
	switch cfg.Plugin {
	case PluginDocker:
	case PluginCNI:
		c, err := newCNI(cfg)
		if err != nil {
			return nil, err
		}
		m.cni = c
	default:
		return nil, fmt.Errorf("network plugin %q: want %q (Docker's bridge) or %q", cfg.Plugin, PluginDocker, PluginCNI)
	}
	return m, nil
}

// DNS is the resolver configuration of the pod's sandbox.
func (m *Manager) DNS(pod *v1.Pod) (kubecontainer.DNSSettings, error) {
	return m.cfg.DNS.PodDNS(pod)
}

// SandboxMode is the network mode the pod's infra container starts with:
// ModeHost for a host-network pod (which never touches a plugin),
// ModeBridge with Docker's network, ModeNone with CNI, where SetUp must
// attach it before anything joins it. With CNI, an error says the network
// is not ready (no valid configuration, a plugin missing): no sandbox can
// be made until it is.
func (m *Manager) SandboxMode(pod *v1.Pod) (string, error) {
	switch {
	case pod.Spec.HostNetwork:
		return ModeHost, nil
	case m.cni == nil:
		return ModeBridge, nil
	}
	if _, err := m.cni.network(); err != nil {
		return ModeNone, notReady(err)
	}
	return ModeNone, nil
}

// SetUp attaches the running sandbox sandboxID of pod, whose infra
// container's process is pid, to the CNI network, and returns its IP. A
// failure is the sandbox's: what the plugins did is undone (DEL) and the
// error names the plugin's.
func (m *Manager) SetUp(ctx context.Context, pod *v1.Pod, sandboxID string, pid int) (string, error) {
	if m.cni == nil {
		return "", nil
	}
	return m.cni.setUp(ctx, pod, sandboxID, pid)
}

// TearDown detaches a sandbox that stopped or is being removed (CNI DEL):
// idempotent, and nothing for a sandbox the plugin never attached (a
// host-network or Docker-bridge sandbox). A failure is kept: the sandbox is
// detached again at its removal, or at the agent's next start.
func (m *Manager) TearDown(ctx context.Context, sandboxID string) error {
	if m.cni == nil {
		return nil
	}
	return m.cni.tearDown(ctx, sandboxID)
}

// Ready is nil when pods can get a network; else why not: the CNI
// configuration is missing or invalid, or a plugin it names is missing
// (the node is then NotReady, NetworkPluginNotReady). Cheap: the
// configuration is parsed and validated again only when a file of
// --cni-conf-dir or --cni-bin-dir changed.
func (m *Manager) Ready() error {
	if m.cni == nil {
		return nil
	}
	_, err := m.cni.network()
	return err
}

// notReady is the sandbox failure of a network that is not ready, in
// cri-dockerd's words.
func notReady(err error) error {
	return fmt.Errorf("network plugin is not ready: %w", err)
}

// Lister lists the runtime's containers carrying label=value
// (kubecontainer.Runtime).
type Lister interface {
	List(ctx context.Context, label, value string) ([]kubecontainer.Container, error)
}

// Run detaches, once at the start, the CNI sandboxes that no longer run:
// stopped, or removed, while the agent was down (their IPs and host ports
// would otherwise leak), as cri-dockerd's StopPodSandbox does for the
// kubelet's dead sandboxes. It lists the node's containers once (retrying
// while Docker does not answer) and returns. Sandboxes attached after it
// starts are not its business: the runtime manager detaches them.
func (m *Manager) Run(ctx context.Context, rt Lister) {
	if m.cni == nil {
		return
	}
	ids := m.cni.recorded()
	if len(ids) == 0 {
		return
	}
	retry := time.Second
	for {
		cs, err := rt.List(ctx, kubecontainer.LabelOwner, m.cfg.NodeName)
		if err == nil {
			running := map[string]bool{}
			for _, c := range cs {
				if c.Running {
					running[c.ID] = true
				}
			}
			for _, id := range ids {
				if running[id] {
					continue
				}
				klog.Infof("CNI: sandbox %s no longer runs: detaching it", kubecontainer.ShortID(id))
				if err := m.cni.tearDown(ctx, id); err != nil {
					klog.Errorf("CNI: detach sandbox %s: %v", kubecontainer.ShortID(id), err)
				}
			}
			return
		}
		klog.V(2).Infof("CNI: list the node's containers: %v", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
			retry = min(2*retry, time.Minute)
		}
	}
}

// Runtime is rt as the agent sees it on this pod network: inspecting a
// running sandbox the CNI plugin attached reports the plugin's IP (Docker
// knows none of a container on network none), as cri-dockerd's
// PodSandboxStatus asks its network plugin. Without CNI it is rt.
func (m *Manager) Runtime(rt kubecontainer.Runtime) kubecontainer.Runtime {
	if m.cni == nil {
		return rt
	}
	return podIPRuntime{Runtime: rt, cni: m.cni}
}

type podIPRuntime struct {
	kubecontainer.Runtime
	cni *cniNetwork
}

func (r podIPRuntime) Inspect(ctx context.Context, id string) (*kubecontainer.ContainerDetail, error) {
	d, err := r.Runtime.Inspect(ctx, id)
	if err == nil && d.Running && d.IP == "" && d.Labels[kubecontainer.LabelType] == kubecontainer.TypeSandbox {
		d.IP = r.cni.podIP(id)
	}
	return d, err
}
