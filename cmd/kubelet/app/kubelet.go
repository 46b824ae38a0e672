package app

import (
	"context"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/config"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	"github.com/classic-kubelet/kubelet/pkg/kubeapi"
	"github.com/classic-kubelet/kubelet/pkg/kubelet"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/devices"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/diskusage"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/images"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/network"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/network/dns"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodeshutdown"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodestatus"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/pleg"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podqueue"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podstatus"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/prober"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeclass"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/server"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/status"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes/csi"
)

// cgroupMount is where the cgroup file system is mounted.
const cgroupMount = "/sys/fs/cgroup"

// agent is the agent's parts, each built in newAgent with all it needs,
// before the parts that use it; nothing is assigned to a part after its
// constructor returns. Run runs them.
type agent struct {
	docker   *dockertools.Client
	sources  []string
	metrics  *metrics.Metrics
	recorder *events.Recorder
	alloc    nodeAllocatable
	nodeIP   string
	merger   *config.Merger
	nm       *nodeMode // nil: not a node of a cluster
	network  *network.Manager
	// hub is the one subscription to the runtime's events: the relist, the
	// image manager and cAdvisor's inspect cache read it.
	hub *runtimeevents.Hub
	// The Kubelet and the parts the rest of the agent reads.
	kubelet *kubelet.Kubelet
	runtime *kuberuntime.Manager
	meter   *diskusage.Meter
	volumes *volumes.Manager
	pods    localPods
	logs    *kuberuntime.LogSettings // a SIGHUP changes them
	gc      *gc.Settings             // a SIGHUP changes it
	node    *nodestatus.Builder
	devices *devices.Manager
	csi     *csi.Registry
}

// newAgent builds the agent's parts in dependency order: the node's own
// (events, metrics, the merger of the pod sources, node mode, the pod
// network, the runtime and its event hub), then the Kubelet and its parts
// (newKubelet), then the Node object.
func newAgent(o *Options) (*agent, error) {
	a := &agent{sources: configuredSources(o), metrics: metrics.New(o.HostnameOverride), recorder: events.New(o.HostnameOverride), nodeIP: o.NodeIP}
	if len(a.sources) == 0 {
		klog.Warningf("No pod source configured (--pod-manifest-path, --manifest-url, --etcd-servers, --port): no pods will be started")
	}
	if a.nodeIP == "" {
		a.nodeIP = nodestatus.DefaultIP()
	}
	var err error
	if a.docker, err = dockertools.NewClient(o.DockerEndpoint); err != nil {
		return nil, err
	}
	if a.alloc, err = newNodeAllocatable(o); err != nil {
		return nil, err
	}
	if a.merger, err = newMerger(o, a.sources, a.alloc, a.metrics, a.recorder); err != nil {
		return nil, err
	}
	if o.Kubeconfig != "" {
		if a.nm, err = newNodeMode(o, a.metrics.Registry); err != nil {
			return nil, err
		}
		kubeapi.RegisterClientMetrics(a.metrics.Registry)
	}
	if a.network, err = newPodNetwork(o, a.nodeIP, a.nm != nil, a.recorder); err != nil {
		return nil, err
	}
	// The runtime as every part sees it: a CNI sandbox's IP is its
	// plugin's, and each call is counted once (as the CRI method it stands
	// for), the event stream among them (get_container_events).
	rt := kuberuntime.NewInstrumentedRuntime(a.network.Runtime(a.docker), a.metrics)
	a.hub = runtimeevents.NewHub(rt, clock.RealClock{})
	if err := newKubelet(o, a, rt); err != nil {
		return nil, err
	}
	a.node = &nodestatus.Builder{Name: o.HostnameOverride, RootDir: o.RootDir, MaxPods: o.MaxPods, HostIP: a.nodeIP,
		Reserved: a.alloc.reserved(), Version: Version, Health: a.kubelet.Health, Pressure: a.kubelet.Pressure, Network: a.network.Ready,
		Shutdown: a.kubelet.ShutdownErr,
		RuntimeVersion: func() (string, error) {
			info, err := a.docker.DaemonInfo()
			return info.Version, err
		},
		Runtimes: a.dockerRuntimes, MaxImages: o.NodeStatusMaxImages, Extended: a.devices.Capacity,
		Images: func() ([]kubecontainer.Image, error) { return a.docker.ListImages(context.Background()) }}
	return a, nil
}

// dockerRuntimes are the runtime handlers Docker has: its runtimes.
func (a *agent) dockerRuntimes() ([]string, error) {
	info, err := a.docker.DaemonInfo()
	return info.Runtimes, err
}

// newMerger is the merger of the sources, which admits pods as the kubelet
// does (--max-pods, the Node's allocatable) and tells of rejections and
// source failures by event (and counts the failures).
func newMerger(o *Options, sources []string, alloc nodeAllocatable, m *metrics.Metrics, recorder *events.Recorder) (*config.Merger, error) {
	return config.NewMerger(filepath.Join(o.RootDir, "checkpoints"), config.MergerOptions{
		MaxPods: o.MaxPods,
		// The kubelet's admission: a pod whose requests alone pass the
		// Node's allocatable never runs here.
		Allocatable: nodestatus.Allocatable(nodestatus.Capacity(o.MaxPods), alloc.reserved()),
		OnReject: func(r config.Rejection) {
			recorder.Event(events.PodRef(r.Pod, ""), true, r.Reason, "Pod was rejected: %s", r.Message)
		},
		OnError: func(source string, err error) {
			m.SourceErrors.WithLabelValues(source).Inc()
			recorder.Event(events.Ref{Name: source}, true, "FailedValidation", "source %s: %v", source, err)
		},
	}, sources...)
}

// newPodNetwork is the pods' network: cluster DNS, and Docker's bridge or
// CNI.
func newPodNetwork(o *Options, nodeIP string, nodeMode bool, recorder *events.Recorder) (*network.Manager, error) {
	return network.New(network.Config{NodeName: o.HostnameOverride, Plugin: o.NetworkPlugin,
		ConfDir: o.CNIConfDir, BinDirs: strings.Split(o.CNIBinDir, ","), CacheDir: o.CNICacheDir,
		StateDir: filepath.Join(o.RootDir, "network"), Events: recorder,
		DNS: &dns.Configurer{ClusterDNS: o.ClusterDNS, ClusterDomain: o.ClusterDomain, ResolvConf: o.ResolvConf,
			NodeIP: nodeIP, NodeName: o.HostnameOverride, WarnMissingClusterDNS: nodeMode, Events: recorder}})
}

// newKubelet builds the Kubelet and its parts on the runtime rt, each before
// those that use it: the queues of pods due a step, the log settings and
// links, the downward API, the volumes, the relist, the image manager, the
// prober, the runtime manager, the status store, the disk meter; then the
// Kubelet, which makes the status producer and the eviction manager's
// runner over its own pods from the constructors given here. It fills in
// the agent's Kubelet and the parts the rest of the agent reads.
func newKubelet(o *Options, a *agent, rt kubecontainer.Runtime) error {
	clk := clock.RealClock{}
	node := o.HostnameOverride
	dirty, retries := podqueue.NewDirty(), podqueue.NewRetries(clk)
	logs := kuberuntime.NewLogSettings(containerLogs(o))
	links := kuberuntime.NewLogLinks(logs)
	memory := nodeMemory()
	downward := kuberuntime.NewDownward(kuberuntime.DownwardNode{Name: node, IP: a.nodeIP, CPUs: runtime.NumCPU(), Memory: memory, RootDir: o.RootDir})
	var objects volumes.Objects
	var claims volumes.Claims
	var bundles volumes.TrustBundles
	var services kuberuntime.ServiceLister
	var classes runtimeclass.Classes // standalone: a runtimeClassName names the Docker runtime
	if a.nm != nil {
		objects, claims, bundles, services, classes = a.nm.objects, a.nm.objects, a.nm.bundles, a.nm.services, a.nm.objects
	}
	// CSI node plugins register through <root-dir>/plugins_registry;
	// in node mode their drivers are recorded in the node's CSINode.
	var csiInfo csi.NodeInfo
	var csiObjects volumes.CSIObjects
	var podCerts volumes.PodCertificates
	if a.nm != nil {
		csiInfo, csiObjects, podCerts = kubeapi.NewCSINodes(a.nm.client, node), a.nm.objects, a.nm.objects
	}
	a.csi = csi.NewRegistry(filepath.Join(o.RootDir, "plugins_registry"), csiInfo)
	vols := volumes.NewManager(volumes.Config{RootDir: o.RootDir, NodeMemory: memory, NodeName: node},
		volumes.Deps{Downward: downward, Objects: objects, Claims: claims, TrustBundles: bundles, CSIDrivers: a.csi, CSIObjects: csiObjects,
			PodCertificates: podCerts})
	cache := pleg.NewCache()
	relist := pleg.NewRelister(pleg.Config{Node: node, Period: o.RelistPeriod, Clock: clk},
		pleg.Deps{Runtime: rt, Hub: a.hub, Cache: cache, Dirty: dirty, Logs: links, Metrics: a.metrics})
	imgs, err := newImages(o, rt, a.hub, retries, a.recorder)
	if err != nil {
		return err
	}
	probes := prober.NewManager(rt, dirty.MarkPod, prober.Report(a.metrics, a.recorder), clk)
	cg, err := newPodCgroups(o, a.docker, a.alloc)
	if err != nil {
		return err
	}
	sysctls, _ := kuberuntime.NewSysctlAllowlist(o.AllowedUnsafeSysctls) // validated
	// The device plugins' devices, their assignments read back from the
	// checkpoint before any pod is admitted.
	devs := devices.New(filepath.Join(o.RootDir, "device-plugins"), clk)
	rtm := kuberuntime.NewManager(kuberuntime.Config{
		NodeName: node, NodeIP: a.nodeIP, NodeMemory: memory, RootDir: o.RootDir, InfraImage: o.PodInfraContainerImage,
		PauseBinary: pauseBinary(o.PodInfraContainerImage), ClusterDomain: o.ClusterDomain, ResolvConf: o.ResolvConf,
		AllowPrivileged: o.AllowPrivileged, SeccompDefault: o.SeccompDefault, Sysctls: sysctls, Services: services, Objects: objects,
		Cgroups: cg.runtime, PodMaxPids: cg.podMaxPids, PodsLimits: cg.podsLimits, Events: a.recorder, Metrics: a.metrics,
		BackoffInitial: o.BackoffInitial, BackoffMax: o.BackoffMax, Clock: clk,
	}, kuberuntime.Deps{Runtime: rt, Volumes: vols, Images: imgs, Probes: probes, Relist: relist, Network: a.network,
		Downward: downward, Logs: logs, LogLinks: links, RuntimeClasses: runtimeclass.NewResolver(classes, a.dockerRuntimes), Devices: devs})
	statuses := status.NewManager(filepath.Join(o.RootDir, "checkpoints", "conditions.json"), clk)
	gcSettings := gc.NewSettings(gcPolicy(o))
	meter := &diskusage.Meter{Runtime: rt, Pods: cache, Node: node, PodDir: vols.PodDir, Period: o.DiskUsagePeriod}
	evictor := newEvictorConfig(o)
	k := kubelet.New(kubelet.Config{RootDir: o.RootDir, SyncFrequency: o.SyncFrequency, GCPeriod: o.GCPeriod, Clock: clk,
		Allocatable:        nodestatus.Allocatable(nodestatus.Capacity(o.MaxPods), a.alloc.reserved()),
		StaticPodsCritical: o.Kubeconfig != ""}, kubelet.Deps{
		Runtime: rtm, Cache: cache, Relist: relist, Dirty: dirty, Retries: retries, Statuses: statuses, Probes: probes,
		Images: imgs, Volumes: vols, LogLinks: links, GC: gcSettings, Sources: a.merger, Events: a.recorder, Metrics: a.metrics,
		Evictions: eviction.LoadRemembered(filepath.Join(o.RootDir, "checkpoints", "evictions.json")), Devices: devs,
		NewStatusProducer: func(records podstatus.Records) *podstatus.Producer {
			return podstatus.New(podstatus.Config{HostIP: a.nodeIP, PodDir: vols.PodDir, Records: records, Statuses: statuses,
				Probes: probes, Logs: rtm, Metrics: a.metrics, Clock: clk})
		},
		NewEvictor: func(pods eviction.Pods) *eviction.Evictor {
			return eviction.NewEvictor(evictor, eviction.Deps{Pods: pods, States: cache, Runtime: rtm, Images: imgs, Volumes: vols,
				Disk: meter, Cgroups: cg.usage, Events: a.recorder, GC: gcSettings.Policy, Clock: clk})
		},
		NewShutdownManager: func(pods nodeshutdown.Pods) *nodeshutdown.Manager {
			return nodeshutdown.New(nodeshutdown.Config{
				Table: nodeshutdown.Table(o.ShutdownGracePeriod, o.ShutdownGracePeriodCriticalPods, o.ShutdownTable),
				Node:  node, StateFile: filepath.Join(o.RootDir, "graceful_node_shutdown_state"), Clock: clk,
			}, nodeshutdown.Deps{Dial: nodeshutdown.DialLogind, Pods: pods, Events: a.recorder, Gauges: a.metrics})
		},
	})
	// One view of the pods for the API and the status writers, composed of
	// the parts: the Kubelet's desired pods (with a status computed on the
	// spot for one not synced yet), the statuses, the relist's cache.
	view := server.NewPodView(server.PodSources{Desired: desiredPods{k}, Statuses: statuses, Cache: cache, Relist: relist,
		Fallback: k.FallbackStatus})
	a.kubelet, a.runtime, a.meter, a.volumes, a.logs, a.gc, a.devices = k, rtm, meter, vols, logs, gcSettings, devs
	a.pods = localPods{PodView: view, statuses: statuses}
	return nil
}

// newImages is the image manager: pulls with the node's registry
// credentials (--docker-config), throttled, backed off as containers are
// (unless told otherwise), and image GC.
func newImages(o *Options, rt images.Runtime, hub *runtimeevents.Hub, retries images.Retries, recorder *events.Recorder) (*images.Manager, error) {
	keyring, err := loadKeyring(o.DockerConfig)
	if err != nil {
		return nil, err
	}
	initial, maxDelay := kuberuntime.BackoffBounds(o.BackoffInitial, o.BackoffMax)
	return images.NewManager(images.Config{
		Policy: images.Policy{Keyring: keyring, QPS: o.RegistryQPS, Burst: o.RegistryBurst, BackoffInitial: initial, BackoffMax: maxDelay,
			HighThreshold: o.ImageGCHighThreshold, LowThreshold: o.ImageGCLowThreshold, MinAge: o.MinimumImageTTLDuration},
		InfraImage: o.PodInfraContainerImage, RecordPath: filepath.Join(o.RootDir, "images.json"),
	}, images.Deps{Runtime: rt, Hub: hub, Retries: retries, Events: recorder}), nil
}

// podCgroups are the pod cgroups (--cgroups-per-qos) as the runtime manager
// sizes them and the eviction manager measures them; nil interfaces (not
// nil pointers in them) when off.
type podCgroups struct {
	runtime    kuberuntime.PodCgroups
	usage      eviction.CgroupUsage
	podMaxPids int64
	podsLimits v1.ResourceList
}

// newPodCgroups detects Docker's cgroup driver on first use, and sizes
// kubepods to the node's capacity less what --enforce-node-allocatable
// keeps from pods.
func newPodCgroups(o *Options, docker *dockertools.Client, alloc nodeAllocatable) (podCgroups, error) {
	if !o.CgroupsPerQOS {
		return podCgroups{}, nil
	}
	capacity := nodestatus.Capacity(o.MaxPods)
	if pids := nodestatus.PidMax(); pids > 0 {
		capacity[kuberuntime.PidResource] = *resource.NewQuantity(pids, resource.DecimalSI)
	}
	limits, err := alloc.podsLimits(capacity)
	if err != nil {
		return podCgroups{}, err
	}
	cg := cgroups.NewDetected(func() (cgroups.Config, error) {
		info, err := docker.DaemonInfo()
		if err != nil {
			return cgroups.Config{}, err
		}
		if o.CgroupDriver != "" && o.CgroupDriver != info.CgroupDriver {
			klog.Warningf("KubeletConfiguration cgroupDriver is %s, but Docker's is %s: pod cgroups follow Docker's", o.CgroupDriver, info.CgroupDriver)
		}
		v2, err := cgroups.IsV2(cgroupMount)
		return cgroups.Config{Mount: cgroupMount, Driver: info.CgroupDriver, V2: v2}, err
	})
	return podCgroups{runtime: cg, usage: cg, podMaxPids: o.PodMaxPids, podsLimits: limits}, nil
}

// newEvictorConfig is the eviction manager's: the thresholds, and where the
// node's signals are read.
func newEvictorConfig(o *Options) eviction.EvictorConfig {
	thresholds, _ := o.evictionThresholds() // validated
	v2, err := cgroups.IsV2(cgroupMount)
	if err != nil && len(thresholds) > 0 {
		klog.Warningf("Eviction: %v; taking cgroup v1", err)
	}
	return eviction.EvictorConfig{
		Eviction: eviction.Config{Thresholds: thresholds, MaxPodGracePeriod: time.Duration(o.EvictionMaxPodGracePeriod) * time.Second,
			PressureTransitionPeriod: o.EvictionPressureTransitionPeriod},
		Node:   eviction.Node{Proc: "/proc", CgroupMount: cgroupMount, CgroupV2: v2, RootDir: o.RootDir},
		Period: kubelet.HousekeepingPeriod,
	}
}

// gcPolicy is the dead-container policy of o.
func gcPolicy(o *Options) gc.Policy {
	return gc.Policy{MinAge: o.MinimumContainerTTLDuration, MaxPerContainer: o.MaximumDeadContainersPerContainer,
		MaxTotal: o.MaximumDeadContainers}
}

// containerLogs are the container log settings of o.
func containerLogs(o *Options) kuberuntime.ContainerLogs {
	logMax := resource.MustParse(o.ContainerLogMaxSize) // validated
	return kuberuntime.ContainerLogs{Dir: o.ContainerLogDir, PodDir: o.PodLogsDir, MaxSize: logMax.Value(), MaxFiles: o.ContainerLogMaxFiles}
}

// desiredPods are the Kubelet's desired pods as the pod view reads them.
type desiredPods struct{ k *kubelet.Kubelet }

func (d desiredPods) All() []*v1.Pod { return d.k.DesiredPods() }

// nodeMemory is the node's total memory in bytes.
func nodeMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
