// Package app wires the agent together: options from flags, validation,
// dependencies, and Run.
package app

import (
	"errors"
	goflag "flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/classic-kubelet/kubelet/pkg/config"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/network"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodeshutdown"
)

// DefaultInfraImage is the pause image `make images` builds.
const DefaultInfraImage = "classic-kubelet/pause:1"

// Options is every setting of the agent. The yaml tags are the long flag
// names, so a config file can fill the same struct.
type Options struct {
	PodManifestPath        string        `yaml:"pod-manifest-path"`
	HostnameOverride       string        `yaml:"hostname-override"`
	RootDir                string        `yaml:"root-dir"`
	DockerEndpoint         string        `yaml:"docker-endpoint"`
	PodInfraContainerImage string        `yaml:"pod-infra-container-image"`
	SyncFrequency          time.Duration `yaml:"sync-frequency"`
	FileCheckFrequency     time.Duration `yaml:"file-check-frequency"`
	RelistPeriod           time.Duration `yaml:"relist-period"`
	BackoffInitial         time.Duration `yaml:"backoff-initial"`
	BackoffMax             time.Duration `yaml:"backoff-max"`

	Address         string `yaml:"address"`
	Port            int    `yaml:"port"`
	ReadOnlyAddress string `yaml:"read-only-address"`
	ReadOnlyPort    int    `yaml:"read-only-port"`
	// HealthzBindAddress and HealthzPort serve /healthz alone, as the
	// kubelet's healthz port does.
	HealthzBindAddress string `yaml:"healthz-bind-address"`
	HealthzPort        int    `yaml:"healthz-port"`
	// MaxPods caps the pods the node runs, across all sources.
	MaxPods int `yaml:"max-pods"`

	ManifestURL        string        `yaml:"manifest-url"`
	ManifestURLHeader  []string      `yaml:"manifest-url-header"`
	HTTPCheckFrequency time.Duration `yaml:"http-check-frequency"`

	EtcdServers            []string      `yaml:"etcd-servers"`
	EtcdCAFile             string        `yaml:"etcd-cafile"`
	EtcdCertFile           string        `yaml:"etcd-certfile"`
	EtcdKeyFile            string        `yaml:"etcd-keyfile"`
	EtcdPrefix             string        `yaml:"etcd-prefix"`
	EtcdResyncPeriod       time.Duration `yaml:"etcd-resync-period"`
	NodeLeaseDuration      time.Duration `yaml:"node-lease-duration"`
	NodeLeaseRenewInterval time.Duration `yaml:"node-lease-renew-interval"`
	EventTTL               time.Duration `yaml:"event-ttl"`

	TLSCertFile          string        `yaml:"tls-cert-file"`
	TLSPrivateKeyFile    string        `yaml:"tls-private-key-file"`
	ClientCAFile         string        `yaml:"client-ca-file"`
	InsecureFullAccess   bool          `yaml:"insecure-full-access"`
	NodeLogDir           string        `yaml:"node-log-dir"`
	HousekeepingInterval time.Duration `yaml:"housekeeping-interval"`
	DiskUsagePeriod      time.Duration `yaml:"disk-usage-period"`
	Profiling            bool          `yaml:"profiling"`
	AllowPrivileged      bool          `yaml:"allow-privileged"`
	SeccompDefault       bool          `yaml:"seccomp-default"`
	CgroupsPerQOS        bool          `yaml:"cgroups-per-qos"`
	ClusterDomain        string        `yaml:"cluster-domain"`
	ResolvConf           string        `yaml:"resolv-conf"`
	// ClusterDNS are the cluster's DNS servers of ClusterFirst pods.
	ClusterDNS []string `yaml:"cluster-dns"`
	// NetworkPlugin is "" (Docker's bridge) or "cni"; the CNI directories
	// are the kubelet's and libcni's (CNIBinDir a comma-separated list).
	NetworkPlugin string `yaml:"network-plugin"`
	CNIConfDir    string `yaml:"cni-conf-dir"`
	CNIBinDir     string `yaml:"cni-bin-dir"`
	CNICacheDir   string `yaml:"cni-cache-dir"`

	PodMaxPids int64 `yaml:"pod-max-pids"`
	// AllowedUnsafeSysctls are sysctls (or prefixes ending in *) pods may
	// set besides the safe ones.
	AllowedUnsafeSysctls []string `yaml:"allowed-unsafe-sysctls"`
	// KubeReserved and SystemReserved are resource lists as the
	// kubelet's flags spell them: cpu=100m,memory=100Mi,pid=1000.
	KubeReserved           string   `yaml:"kube-reserved"`
	SystemReserved         string   `yaml:"system-reserved"`
	EnforceNodeAllocatable []string `yaml:"enforce-node-allocatable"`

	DockerConfig                      string        `yaml:"docker-config"`
	RegistryQPS                       float64       `yaml:"registry-qps"`
	RegistryBurst                     int           `yaml:"registry-burst"`
	MinimumContainerTTLDuration       time.Duration `yaml:"minimum-container-ttl-duration"`
	MaximumDeadContainersPerContainer int           `yaml:"maximum-dead-containers-per-container"`
	MaximumDeadContainers             int           `yaml:"maximum-dead-containers"`
	ImageGCHighThreshold              int           `yaml:"image-gc-high-threshold"`
	ImageGCLowThreshold               int           `yaml:"image-gc-low-threshold"`
	MinimumImageTTLDuration           time.Duration `yaml:"minimum-image-ttl-duration"`
	ContainerLogMaxSize               string        `yaml:"container-log-max-size"`
	ContainerLogMaxFiles              int           `yaml:"container-log-max-files"`
	ContainerLogDir                   string        `yaml:"container-log-dir"`
	PodLogsDir                        string        `yaml:"pod-logs-dir"`
	GCPeriod                          time.Duration `yaml:"gc-period"`

	// Eviction, as the kubelet's flags: thresholds as signal<value lists.
	EvictionHard                     string        `yaml:"eviction-hard"`
	EvictionSoft                     string        `yaml:"eviction-soft"`
	EvictionSoftGracePeriod          string        `yaml:"eviction-soft-grace-period"`
	EvictionMaxPodGracePeriod        int           `yaml:"eviction-max-pod-grace-period"`
	EvictionMinimumReclaim           string        `yaml:"eviction-minimum-reclaim"`
	EvictionPressureTransitionPeriod time.Duration `yaml:"eviction-pressure-transition-period"`

	// Node mode: with a kubeconfig the agent is a node of that cluster.
	Kubeconfig string `yaml:"kubeconfig"`
	// BootstrapKubeconfig requests the node's client certificate when
	// --kubeconfig gives none that is valid (TLS bootstrap), into CertDir.
	BootstrapKubeconfig string `yaml:"bootstrap-kubeconfig"`
	// CertDir holds the node's certificates (default <root-dir>/pki).
	CertDir string `yaml:"cert-dir"`
	// RotateCertificates renews the client certificate before it expires;
	// RotateServerCertificates requests the serving certificate from the
	// API server and renews it (KubeletConfiguration serverTLSBootstrap).
	RotateCertificates        bool              `yaml:"rotate-certificates"`
	RotateServerCertificates  bool              `yaml:"rotate-server-certificates"`
	NodeIP                    string            `yaml:"node-ip"`
	RegisterNode              bool              `yaml:"register-node"`
	NodeLabels                map[string]string `yaml:"node-labels"`
	RegisterWithTaints        []string          `yaml:"register-with-taints"`
	NodeStatusUpdateFrequency time.Duration     `yaml:"node-status-update-frequency"`
	NodeStatusReportFrequency time.Duration     `yaml:"node-status-report-frequency"`
	NodeStatusMaxImages       int               `yaml:"node-status-max-images"`
	NodeLeaseDurationSeconds  int32             `yaml:"node-lease-duration-seconds"`
	KubeAPIQPS                float32           `yaml:"kube-api-qps"`
	KubeAPIBurst              int               `yaml:"kube-api-burst"`

	// Who may use the full-access port, as the kubelet's flags.
	AuthenticationTokenWebhook             bool          `yaml:"authentication-token-webhook"`
	AuthenticationTokenWebhookCacheTTL     time.Duration `yaml:"authentication-token-webhook-cache-ttl"`
	AuthorizationMode                      string        `yaml:"authorization-mode"`
	AuthorizationWebhookCacheAuthorizedTTL time.Duration `yaml:"authorization-webhook-cache-authorized-ttl"`
	AuthorizationWebhookCacheUnauthorized  time.Duration `yaml:"authorization-webhook-cache-unauthorized-ttl"`
	AnonymousAuth                          bool          `yaml:"anonymous-auth"`

	// ConfigFile is the --kubelet-config file the options came from, if any.
	ConfigFile string `yaml:"-"`

	// ConfigPath is --config: a KubeletConfiguration file (by its kind), or
	// else the manifest path, its 2014 meaning.
	ConfigPath string `yaml:"-"`
	// ConfigDir holds KubeletConfiguration drop-ins (*.conf), as the kubelet's.
	ConfigDir string `yaml:"config-dir"`
	// KubeletConfigFile is the KubeletConfiguration the options came from, if any.
	KubeletConfigFile string `yaml:"-"`
	// FeatureGates are the kubelet's feature gates as given (checked by
	// name; the agent acts on the logging gates only).
	FeatureGates map[string]bool `yaml:"feature-gates"`
	// Logging are component-base's logging options (--logging-format, -v,
	// ...), the KubeletConfiguration's logging section; ApplyLogging
	// applies them.
	Logging *logsapi.LoggingConfiguration `yaml:"-"`
	// ContainerRuntimeEndpoint is the kubelet's runtime socket: only
	// Docker's is accepted, and then it is the Docker endpoint.
	ContainerRuntimeEndpoint string `yaml:"container-runtime-endpoint"`
	// ShutdownGracePeriod, ShutdownGracePeriodCriticalPods and
	// ShutdownTable are a KubeletConfiguration's shutdownGracePeriod,
	// shutdownGracePeriodCriticalPods and shutdownGracePeriodByPodPriority
	// (config only: the kubelet has no flags for them). A period above
	// zero, or a table, turns the graceful node shutdown on.
	ShutdownGracePeriod             time.Duration        `yaml:"-"`
	ShutdownGracePeriodCriticalPods time.Duration        `yaml:"-"`
	ShutdownTable                   []nodeshutdown.Group `yaml:"-"`
	// CgroupDriver is a KubeletConfiguration's cgroupDriver: pod cgroups
	// follow Docker's driver, and a different one is logged.
	CgroupDriver string `yaml:"-"`
	// SelfSignedCert: TLSCertFile and TLSPrivateKeyFile are the agent's own
	// self-signed pair under the root dir, made at start if missing, as the
	// kubelet makes one when it is given none.
	SelfSignedCert bool `yaml:"-"`
	// Warnings are what the configuration asks that the agent does not do,
	// logged once at start.
	Warnings []string `yaml:"-"`
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Logging:                                logsapi.NewLoggingConfiguration(),
		RootDir:                                "/var/lib/kubelet",
		DockerEndpoint:                         dockertools.DefaultEndpoint(),
		PodInfraContainerImage:                 DefaultInfraImage,
		SyncFrequency:                          10 * time.Second,
		FileCheckFrequency:                     20 * time.Second,
		RelistPeriod:                           time.Second,
		BackoffInitial:                         kuberuntime.DefaultBackoffInitial,
		BackoffMax:                             kuberuntime.DefaultBackoffMax,
		Address:                                "127.0.0.1",
		Port:                                   10250,
		ReadOnlyAddress:                        "127.0.0.1",
		ReadOnlyPort:                           10255,
		HealthzBindAddress:                     "127.0.0.1",
		HealthzPort:                            10248,
		MaxPods:                                110,
		SeccompDefault:                         true,
		AllowPrivileged:                        true,
		CgroupsPerQOS:                          true,
		PodMaxPids:                             -1,
		EnforceNodeAllocatable:                 []string{"pods"},
		NodeLeaseDuration:                      40 * time.Second,
		NodeLeaseRenewInterval:                 10 * time.Second,
		EventTTL:                               time.Hour,
		HTTPCheckFrequency:                     20 * time.Second,
		EtcdPrefix:                             config.DefaultEtcdPrefix,
		EtcdResyncPeriod:                       time.Minute,
		NodeLogDir:                             "/var/log",
		HousekeepingInterval:                   10 * time.Second,
		DiskUsagePeriod:                        5 * time.Minute,
		ClusterDomain:                          "cluster.local",
		ResolvConf:                             "/etc/resolv.conf",
		CNIConfDir:                             network.DefaultCNIConfDir,
		CNIBinDir:                              network.DefaultCNIBinDir,
		CNICacheDir:                            network.DefaultCNICacheDir,
		RegistryQPS:                            5,
		RegistryBurst:                          10,
		MaximumDeadContainersPerContainer:      1,
		MaximumDeadContainers:                  -1,
		ImageGCHighThreshold:                   85,
		ImageGCLowThreshold:                    80,
		MinimumImageTTLDuration:                2 * time.Minute,
		ContainerLogMaxSize:                    "10Mi",
		ContainerLogMaxFiles:                   5,
		ContainerLogDir:                        "/var/log/containers",
		PodLogsDir:                             "/var/log/pods",
		GCPeriod:                               time.Minute,
		EvictionHard:                           eviction.DefaultHard,
		EvictionPressureTransitionPeriod:       5 * time.Minute,
		RegisterNode:                           true,
		NodeStatusUpdateFrequency:              10 * time.Second,
		NodeStatusReportFrequency:              5 * time.Minute,
		NodeStatusMaxImages:                    50,
		NodeLeaseDurationSeconds:               40,
		KubeAPIQPS:                             50,
		KubeAPIBurst:                           100,
		AuthenticationTokenWebhookCacheTTL:     2 * time.Minute,
		AuthorizationMode:                      "AlwaysAllow",
		AuthorizationWebhookCacheAuthorizedTTL: 5 * time.Minute,
		AuthorizationWebhookCacheUnauthorized:  30 * time.Second,
	}
}

// AddFlags registers the options' flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.addNodeFlags(fs)
	o.addAPIFlags(fs)
	o.addSourceFlags(fs)
	o.addAccessFlags(fs)
	o.addRuntimeFlags(fs)
	o.addHousekeepingFlags(fs)
	o.addNodeModeFlags(fs)
}

// addNodeFlags adds the flags of the node, its state and the runtime.
func (o *Options) addNodeFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PodManifestPath, "pod-manifest-path", o.PodManifestPath, "Directory of pod manifests to run (or a single manifest file). Watched; re-read every --file-check-frequency.")
	fs.StringVar(&o.ConfigPath, "config", o.ConfigPath, "A KubeletConfiguration file (kubelet.config.k8s.io/v1beta1), read as the kubelet reads it, flags winning; any other path is the manifest path (--pod-manifest-path, its 2014 name).")
	fs.StringVar(&o.ConfigDir, "config-dir", o.ConfigDir, "Directory of KubeletConfiguration drop-ins (*.conf, subdirectories included), merged in lexical order over --config; flags win.")
	fs.Var(cliflag.NewMapStringBool(&o.FeatureGates), "feature-gates", "The kubelet's feature gates (A=true,B=false): unknown gates are refused; the agent acts on the logging gates only, and another gate set away from its default is logged.")
	fs.StringVar(&o.ContainerRuntimeEndpoint, "container-runtime-endpoint", o.ContainerRuntimeEndpoint, "The kubelet's runtime socket: Docker's (unix:///var/run/docker.sock, /run/docker.sock, or the --docker-endpoint) is accepted and used as the Docker endpoint; any other is refused.")
	fs.StringVar(&o.HostnameOverride, "hostname-override", o.HostnameOverride, "The node name (default: the lower-cased hostname). Scopes the containers this agent owns.")
	fs.StringVar(&o.RootDir, "root-dir", o.RootDir, "Directory for the agent's state: pod volumes, checkpoints.")
	fs.StringVar(&o.DockerEndpoint, "docker-endpoint", o.DockerEndpoint, "Docker Engine API endpoint (unix:// or tcp://).")
	fs.StringVar(&o.PodInfraContainerImage, "pod-infra-container-image", o.PodInfraContainerImage, "Image of each pod's infra container. Never pulled; changing it does not recreate running pods.")
	fs.DurationVar(&o.SyncFrequency, "sync-frequency", o.SyncFrequency, "How often every pod is compared with its spec (from cached state).")
	fs.DurationVar(&o.FileCheckFrequency, "file-check-frequency", o.FileCheckFrequency, "How often the manifest path is re-read besides file notifications.")
	fs.DurationVar(&o.RelistPeriod, "relist-period", o.RelistPeriod, "How often containers are listed from Docker while its event stream is down; five times that while events flow (each event updates the pod it names at once).")
	fs.DurationVar(&o.BackoffInitial, "backoff-initial", o.BackoffInitial, "Crash-loop back-off after the first restart (advanced).")
	fs.DurationVar(&o.BackoffMax, "backoff-max", o.BackoffMax, "Longest crash-loop back-off (advanced).")
	_ = fs.MarkHidden("backoff-initial")
	_ = fs.MarkHidden("backoff-max")
}

// addAPIFlags adds the flags of the agent's own HTTP API ports and the pod count.
func (o *Options) addAPIFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Address, "address", o.Address, "Address of the full-access API port.")
	fs.IntVar(&o.Port, "port", o.Port, "Full-access API port (POST/PUT/DELETE /pods and everything read-only); 0 disables it and the API pod source.")
	fs.StringVar(&o.ReadOnlyAddress, "read-only-address", o.ReadOnlyAddress, "Address of the read-only API port.")
	fs.IntVar(&o.ReadOnlyPort, "read-only-port", o.ReadOnlyPort, "Read-only API port (GET /healthz, /pods, /sources, ...); 0 disables it.")
	fs.StringVar(&o.HealthzBindAddress, "healthz-bind-address", o.HealthzBindAddress, "Address of the healthz port.")
	fs.IntVar(&o.HealthzPort, "healthz-port", o.HealthzPort, "Port serving /healthz alone; 0 disables it.")
	fs.IntVar(&o.MaxPods, "max-pods", o.MaxPods, "Pods this node runs at most, across all sources; the rest are rejected (OutOfpods).")
}

// addSourceFlags adds the flags of the URL and etcd sources, and etcd's node keys.
func (o *Options) addSourceFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ManifestURL, "manifest-url", o.ManifestURL, "URL polled for this node's pods.")
	fs.StringArrayVar(&o.ManifestURLHeader, "manifest-url-header", o.ManifestURLHeader, "Header 'Name:value' sent with each --manifest-url request (repeatable).")
	fs.DurationVar(&o.HTTPCheckFrequency, "http-check-frequency", o.HTTPCheckFrequency, "How often --manifest-url is polled.")
	fs.StringSliceVar(&o.EtcdServers, "etcd-servers", o.EtcdServers, "Comma-separated etcd endpoints; the node's pods are at <etcd-prefix>/<node name>/kubelet.")
	fs.StringVar(&o.EtcdCAFile, "etcd-cafile", o.EtcdCAFile, "CA bundle to verify etcd's certificate.")
	fs.StringVar(&o.EtcdCertFile, "etcd-certfile", o.EtcdCertFile, "Client certificate for etcd.")
	fs.StringVar(&o.EtcdKeyFile, "etcd-keyfile", o.EtcdKeyFile, "Client key for etcd.")
	fs.StringVar(&o.EtcdPrefix, "etcd-prefix", o.EtcdPrefix, "etcd key prefix of the node keys.")
	fs.DurationVar(&o.EtcdResyncPeriod, "etcd-resync-period", o.EtcdResyncPeriod, "Full re-read of the etcd key besides the watch (advanced).")
	_ = fs.MarkHidden("etcd-resync-period")
	fs.DurationVar(&o.NodeLeaseDuration, "node-lease-duration", o.NodeLeaseDuration, "TTL of the node's lease key in etcd (<etcd-prefix>/<node>/lease): the node counts as gone this long after its agent stops renewing.")
	fs.DurationVar(&o.NodeLeaseRenewInterval, "node-lease-renew-interval", o.NodeLeaseRenewInterval, "How often the node lease is renewed and the Node object (<etcd-prefix>/<node>/node) checked for changes.")
	fs.DurationVar(&o.EventTTL, "event-ttl", o.EventTTL, "How long events written to etcd (/events/<node>/...) are kept.")
}

// addAccessFlags adds the flags of TLS and who may use the full-access port (the token and authorization webhooks are with node mode).
func (o *Options) addAccessFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "Certificate (PEM) for HTTPS on the full-access port.")
	fs.StringVar(&o.TLSPrivateKeyFile, "tls-private-key-file", o.TLSPrivateKeyFile, "Private key (PEM) of --tls-cert-file.")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "CA bundle: the full-access port then requires client certificates signed by it.")
	fs.BoolVar(&o.InsecureFullAccess, "insecure-full-access", o.InsecureFullAccess, "Allow the full-access port on a non-loopback address without client certificates (dangerous).")
}

// addRuntimeFlags adds the flags of stats, what pods may do and use, their network and images.
func (o *Options) addRuntimeFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeLogDir, "node-log-dir", o.NodeLogDir, "Directory served at /logs/.")
	fs.DurationVar(&o.HousekeepingInterval, "housekeeping-interval", o.HousekeepingInterval, "How often the embedded cAdvisor samples container stats.")
	fs.DurationVar(&o.DiskUsagePeriod, "disk-usage-period", o.DiskUsagePeriod, "How often the disk usage of containers (writable layers, logs), pod volumes and images is measured, in the background, for /stats/summary.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, "Serve /debug/pprof/ on the full-access port.")
	fs.BoolVar(&o.AllowPrivileged, "allow-privileged", o.AllowPrivileged, "Allow containers with securityContext.privileged, as the kubelet always does (false: they wait with CreateContainerConfigError).")
	fs.BoolVar(&o.CgroupsPerQOS, "cgroups-per-qos", o.CgroupsPerQOS, "Put each pod's containers in a pod cgroup (kubepods/[burstable|besteffort/]pod<uid>) sized to the whole pod, as the kubelet does; pods started without it stay where they are.")
	fs.StringSliceVar(&o.AllowedUnsafeSysctls, "allowed-unsafe-sysctls", o.AllowedUnsafeSysctls, "Sysctls (or prefixes ending in *) pods may set besides the kubelet's safe ones; each must be namespaced (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*, net.*).")
	fs.Int64Var(&o.PodMaxPids, "pod-max-pids", o.PodMaxPids, "Processes and threads each pod may have: its pod cgroup's pids.max (-1: unbounded).")
	fs.StringVar(&o.KubeReserved, "kube-reserved", o.KubeReserved, "Resources kept for the agent and the runtime, not for pods: cpu=100m,memory=100Mi,pid=1000.")
	fs.StringVar(&o.SystemReserved, "system-reserved", o.SystemReserved, "Resources kept for the rest of the system, not for pods (as --kube-reserved).")
	fs.StringSliceVar(&o.EnforceNodeAllocatable, "enforce-node-allocatable", o.EnforceNodeAllocatable, "'pods': bound the cgroup of all pods (kubepods) to capacity less --kube-reserved and --system-reserved; 'none': to capacity.")
	fs.BoolVar(&o.SeccompDefault, "seccomp-default", o.SeccompDefault, "Give containers without a seccompProfile Docker's default profile (false: unconfined, the kubelet's default).")
	fs.StringVar(&o.ClusterDomain, "cluster-domain", o.ClusterDomain, "The cluster's domain: ClusterFirst pods search <namespace>.svc.<domain>, svc.<domain> and <domain>; pods with a subdomain are <subdomain>.<namespace>.svc.<domain>.")
	fs.StringSliceVar(&o.ClusterDNS, "cluster-dns", o.ClusterDNS, "Comma-separated IPs of the cluster's DNS servers: the nameservers of pods with dnsPolicy ClusterFirst (and ClusterFirstWithHostNet). Without it those pods get the host's resolver (dnsPolicy Default).")
	fs.StringVar(&o.NetworkPlugin, "network-plugin", o.NetworkPlugin, "The pods' network: \"\" (default) Docker's bridge; \"cni\": each pod's infra container starts with network none and the first network configuration of --cni-conf-dir attaches it (CNI plugins from --cni-bin-dir).")
	fs.StringVar(&o.CNIConfDir, "cni-conf-dir", o.CNIConfDir, "CNI network configurations (.conflist, .conf, .json): the first valid one in lexical order is the pods' network (--network-plugin=cni).")
	fs.StringVar(&o.CNIBinDir, "cni-bin-dir", o.CNIBinDir, "Comma-separated directories of CNI plugin binaries (--network-plugin=cni).")
	fs.StringVar(&o.CNICacheDir, "cni-cache-dir", o.CNICacheDir, "libcni's cache of each attachment's configuration and result, from which a restarted agent learns its pods' IPs and detaches them (--network-plugin=cni).")
	fs.StringVar(&o.DockerConfig, "docker-config", o.DockerConfig, "Docker config file with registry credentials (default: ~/.docker/config.json and the legacy ~/.dockercfg).")
	fs.Float64Var(&o.RegistryQPS, "registry-qps", o.RegistryQPS, "Image pulls per second (0: unlimited).")
	fs.IntVar(&o.RegistryBurst, "registry-burst", o.RegistryBurst, "Image pulls allowed in a burst above --registry-qps.")
}

// addHousekeepingFlags adds the flags of garbage collection, logs and eviction.
func (o *Options) addHousekeepingFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.MinimumContainerTTLDuration, "minimum-container-ttl-duration", o.MinimumContainerTTLDuration, "A dead container younger than this is never collected.")
	fs.IntVar(&o.MaximumDeadContainersPerContainer, "maximum-dead-containers-per-container", o.MaximumDeadContainersPerContainer, "Dead instances kept per container (at least 1).")
	fs.IntVar(&o.MaximumDeadContainers, "maximum-dead-containers", o.MaximumDeadContainers, "Dead containers kept on the node (-1: no limit).")
	fs.IntVar(&o.ImageGCHighThreshold, "image-gc-high-threshold", o.ImageGCHighThreshold, "Image file system use (percent) above which pulled, unused images are collected.")
	fs.IntVar(&o.ImageGCLowThreshold, "image-gc-low-threshold", o.ImageGCLowThreshold, "Image file system use (percent) image GC brings it down to.")
	fs.DurationVar(&o.MinimumImageTTLDuration, "minimum-image-ttl-duration", o.MinimumImageTTLDuration, "An image pulled more recently is never collected.")
	fs.StringVar(&o.ContainerLogMaxSize, "container-log-max-size", o.ContainerLogMaxSize, "Size of a container's log file before it rotates (a quantity: 10Mi).")
	fs.IntVar(&o.ContainerLogMaxFiles, "container-log-max-files", o.ContainerLogMaxFiles, "Rotated log files kept per container.")
	fs.StringVar(&o.ContainerLogDir, "container-log-dir", o.ContainerLogDir, "Directory of <pod>_<namespace>_<container>-<id>.log symlinks to the containers' logs (empty: none).")
	fs.StringVar(&o.PodLogsDir, "pod-logs-dir", o.PodLogsDir, "Root of the <namespace>_<pod>_<uid>/<container>/<restart count>.log symlinks to the containers' logs, the kubelet's layout (empty: none).")
	fs.DurationVar(&o.GCPeriod, "gc-period", o.GCPeriod, "How often dead containers and unused images are collected (advanced).")
	_ = fs.MarkHidden("gc-period")
	fs.StringVar(&o.EvictionHard, "eviction-hard", o.EvictionHard, "Hard eviction thresholds (signal<quantity or percentage, comma-separated; empty: none). Signals: memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available.")
	fs.StringVar(&o.EvictionSoft, "eviction-soft", o.EvictionSoft, "Soft eviction thresholds (as --eviction-hard), each needing --eviction-soft-grace-period.")
	fs.StringVar(&o.EvictionSoftGracePeriod, "eviction-soft-grace-period", o.EvictionSoftGracePeriod, "How long each soft threshold must hold before a pod is evicted (signal=duration, comma-separated).")
	fs.IntVar(&o.EvictionMaxPodGracePeriod, "eviction-max-pod-grace-period", o.EvictionMaxPodGracePeriod, "Longest grace period, in seconds, of a pod evicted for a soft threshold.")
	fs.StringVar(&o.EvictionMinimumReclaim, "eviction-minimum-reclaim", o.EvictionMinimumReclaim, "What must be available beyond a threshold before its pressure ends (signal=quantity or percentage, comma-separated).")
	fs.DurationVar(&o.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", o.EvictionPressureTransitionPeriod, "How long a pressure condition stays after its signal recovered.")
}

// addNodeModeFlags adds the flags of node mode (the API server, the Node, the
// webhooks that ask it) and the host's resolver file.
func (o *Options) addNodeModeFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of a Kubernetes API server: the agent joins it as a node (registers the Node, renews its Lease, runs the pods bound to it, writes their statuses and events). See docs/kubernetes.md.")
	fs.StringVar(&o.BootstrapKubeconfig, "bootstrap-kubeconfig", o.BootstrapKubeconfig, "Kubeconfig of bootstrap credentials (a bootstrap token): when --kubeconfig is missing or its client certificate invalid or expired, a client certificate for system:node:<name> is requested with them (a CSR of signer kubernetes.io/kube-apiserver-client-kubelet), kept in --cert-dir, and --kubeconfig written to use it. See docs/kubernetes.md.")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "Directory of the node's certificates: kubelet-client-current.pem (TLS bootstrap, rotation), kubelet-server-current.pem (--rotate-server-certificates), the self-signed kubelet.crt (default <root-dir>/pki).")
	fs.BoolVar(&o.RotateCertificates, "rotate-certificates", o.RotateCertificates, "Renew the client certificate at 70-90 % of its life (jittered) with a CSR, and use the new one without a restart; an expired one is replaced with the bootstrap credentials.")
	fs.BoolVar(&o.RotateServerCertificates, "rotate-server-certificates", o.RotateServerCertificates, "Request the full-access port's serving certificate from the API server (a CSR of signer kubernetes.io/kubelet-serving for the node's addresses, which someone must approve) and renew it; until it is issued, TLS handshakes fail (or --tls-cert-file serves).")
	fs.StringVar(&o.NodeIP, "node-ip", o.NodeIP, "The node's InternalIP, which the API server reaches the agent at (default: the address of the interface of the default route; never loopback).")
	fs.BoolVar(&o.RegisterNode, "register-node", o.RegisterNode, "Create the Node in the API server if it is missing (false: it must exist).")
	fs.StringToStringVar(&o.NodeLabels, "node-labels", o.NodeLabels, "Labels of the Node when it is registered (key=value,...). NodeRestriction refuses most kubernetes.io/ and k8s.io/ keys.")
	fs.StringSliceVar(&o.RegisterWithTaints, "register-with-taints", o.RegisterWithTaints, "Taints of the Node when it is registered (key=value:Effect,...).")
	fs.DurationVar(&o.NodeStatusUpdateFrequency, "node-status-update-frequency", o.NodeStatusUpdateFrequency, "How often the node status is computed and, if it changed, written to the API server.")
	fs.DurationVar(&o.NodeStatusReportFrequency, "node-status-report-frequency", o.NodeStatusReportFrequency, "How often the node status is written to the API server when it has not changed.")
	fs.IntVar(&o.NodeStatusMaxImages, "node-status-max-images", o.NodeStatusMaxImages, "Images the node status reports at most, the largest first (-1: all).")
	fs.Int32Var(&o.NodeLeaseDurationSeconds, "node-lease-duration-seconds", o.NodeLeaseDurationSeconds, "Duration of the node's Lease (kube-node-lease/<node>), renewed every quarter of it.")
	fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Requests per second to the API server.")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Requests to the API server allowed in a burst above --kube-api-qps.")
	fs.BoolVar(&o.AuthenticationTokenWebhook, "authentication-token-webhook", o.AuthenticationTokenWebhook, "Authenticate bearer tokens on the full-access port by the API server's TokenReview (needs --kubeconfig).")
	fs.DurationVar(&o.AuthenticationTokenWebhookCacheTTL, "authentication-token-webhook-cache-ttl", o.AuthenticationTokenWebhookCacheTTL, "How long a TokenReview's answer is kept.")
	fs.StringVar(&o.AuthorizationMode, "authorization-mode", o.AuthorizationMode, "AlwaysAllow: every authenticated request is allowed; Webhook: each is authorized by the API server's SubjectAccessReview (needs --kubeconfig), as the kubelet maps it (verb on nodes/<subresource>).")
	fs.DurationVar(&o.AuthorizationWebhookCacheAuthorizedTTL, "authorization-webhook-cache-authorized-ttl", o.AuthorizationWebhookCacheAuthorizedTTL, "How long an allowing SubjectAccessReview is kept.")
	fs.DurationVar(&o.AuthorizationWebhookCacheUnauthorized, "authorization-webhook-cache-unauthorized-ttl", o.AuthorizationWebhookCacheUnauthorized, "How long a denying SubjectAccessReview is kept.")
	fs.BoolVar(&o.AnonymousAuth, "anonymous-auth", o.AnonymousAuth, "Let requests without credentials on the full-access port through as system:anonymous (then authorized as such).")
	fs.StringVar(&o.ResolvConf, "resolv-conf", o.ResolvConf, "The host's resolver configuration: pods with dnsPolicy Default get it (and ClusterFirst pods without --cluster-dns), ClusterFirst pods its search paths after the cluster's. \"\": none (nameserver 127.0.0.1, no search).")
}

// Validate checks the options and fills in derived defaults.
func (o *Options) Validate() error {
	if err := o.validateNodeName(); err != nil {
		return err
	}
	for _, check := range []func() error{o.validateRanges, o.validateSources, o.validateHousekeeping,
		o.validateKubeletSurface, o.validateLogging, o.validateAccess, o.validateResources, o.validateNetwork, o.validateNodeMode} {
		if err := check(); err != nil {
			return err
		}
	}
	if o.PodManifestPath != "" {
		if err := checkNotKubeletConfig(o.PodManifestPath); err != nil {
			return err
		}
	}
	return nil
}

// validateNodeName defaults the node name to the host's, lower-cased.
func (o *Options) validateNodeName() error {
	if o.HostnameOverride == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node name: %w (set --hostname-override)", err)
		}
		o.HostnameOverride = h
	}
	o.HostnameOverride = strings.ToLower(o.HostnameOverride)
	// The node name labels containers, keys etcd and names the node lock:
	// a DNS subdomain, as Kubernetes' node names.
	if msgs := validation.IsDNS1123Subdomain(o.HostnameOverride); len(msgs) > 0 {
		return fmt.Errorf("node name %q (--hostname-override): %s", o.HostnameOverride, strings.Join(msgs, "; "))
	}
	return nil
}

// validateRanges checks the periods, ports and counts.
func (o *Options) validateRanges() error {
	for name, d := range map[string]time.Duration{
		"--sync-frequency": o.SyncFrequency, "--file-check-frequency": o.FileCheckFrequency,
		"--relist-period": o.RelistPeriod, "--backoff-initial": o.BackoffInitial, "--backoff-max": o.BackoffMax,
		"--http-check-frequency": o.HTTPCheckFrequency, "--etcd-resync-period": o.EtcdResyncPeriod,
		"--housekeeping-interval": o.HousekeepingInterval, "--gc-period": o.GCPeriod,
		"--disk-usage-period": o.DiskUsagePeriod, "--event-ttl": o.EventTTL,
		"--node-lease-duration": o.NodeLeaseDuration, "--node-lease-renew-interval": o.NodeLeaseRenewInterval,
	} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive, got %v", name, d)
		}
	}
	for name, p := range map[string]int{"--port": o.Port, "--read-only-port": o.ReadOnlyPort, "--healthz-port": o.HealthzPort} {
		if p < 0 || p > 65535 {
			return fmt.Errorf("%s must be between 0 and 65535, got %d", name, p)
		}
	}
	if o.MaxPods < 1 {
		return fmt.Errorf("--max-pods must be at least 1, got %d", o.MaxPods)
	}
	if o.RegistryQPS < 0 || o.RegistryBurst < 0 {
		return fmt.Errorf("--registry-qps and --registry-burst must not be negative")
	}
	return nil
}

// validateSources checks the pod sources' options (the URL, etcd).
func (o *Options) validateSources() error {
	if _, err := config.ParseHeaders(o.ManifestURLHeader); err != nil {
		return fmt.Errorf("--manifest-url-header: %w", err)
	}
	if o.ManifestURL != "" {
		if u, err := url.Parse(o.ManifestURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Errorf("--manifest-url %q: want an http or https URL", o.ManifestURL)
		}
	}
	// etcd leases count whole seconds; a renewal must come well before
	// the lease runs out.
	if o.NodeLeaseDuration < 2*time.Second || o.NodeLeaseRenewInterval*2 > o.NodeLeaseDuration {
		return fmt.Errorf("--node-lease-duration (%v) must be at least 2s and twice --node-lease-renew-interval (%v)", o.NodeLeaseDuration, o.NodeLeaseRenewInterval)
	}
	if !strings.HasPrefix(o.EtcdPrefix, "/") {
		return fmt.Errorf("--etcd-prefix %q must start with /", o.EtcdPrefix)
	}
	return nil
}

// validateHousekeeping checks the root dir, garbage collection, logs and
// eviction.
func (o *Options) validateHousekeeping() error {
	if o.RootDir == "" {
		return fmt.Errorf("--root-dir must not be empty")
	}
	if o.ImageGCLowThreshold < 0 || o.ImageGCHighThreshold > 100 || o.ImageGCLowThreshold > o.ImageGCHighThreshold {
		return fmt.Errorf("image GC thresholds: want 0 <= --image-gc-low-threshold (%d) <= --image-gc-high-threshold (%d) <= 100", o.ImageGCLowThreshold, o.ImageGCHighThreshold)
	}
	if q, err := resource.ParseQuantity(o.ContainerLogMaxSize); err != nil || q.Value() < 0 {
		return fmt.Errorf("--container-log-max-size %q: want a quantity such as 10Mi", o.ContainerLogMaxSize)
	}
	// As the kubelet's validation of podLogsDir: the shippers' globs and the
	// links' own paths assume one spelling of the root.
	if d := o.PodLogsDir; d != "" && (!filepath.IsAbs(d) || filepath.Clean(d) != d) {
		return fmt.Errorf("--pod-logs-dir %q: want an absolute, normalized path", d)
	}
	if _, err := o.evictionThresholds(); err != nil {
		return err
	}
	if o.EvictionMaxPodGracePeriod < 0 || o.EvictionPressureTransitionPeriod < 0 {
		return fmt.Errorf("--eviction-max-pod-grace-period and --eviction-pressure-transition-period must not be negative")
	}
	return nil
}

// validateAccess checks the full-access port's TLS, authentication and
// authorization: it is refused on a non-loopback address to
// unauthenticated clients unless --insecure-full-access. (Client
// certificates and bearer tokens without a certificate of the port's get a
// self-signed one: validateKubeletSurface.)
func (o *Options) validateAccess() error {
	if (o.TLSCertFile == "") != (o.TLSPrivateKeyFile == "") {
		return fmt.Errorf("--tls-cert-file and --tls-private-key-file go together")
	}
	switch o.AuthorizationMode {
	case "AlwaysAllow", "Webhook":
	default:
		return fmt.Errorf("--authorization-mode %q: want AlwaysAllow or Webhook", o.AuthorizationMode)
	}
	if (o.AuthenticationTokenWebhook || o.AuthorizationMode == "Webhook") && o.Kubeconfig == "" {
		return fmt.Errorf("--authentication-token-webhook and --authorization-mode=Webhook ask the API server: set --kubeconfig")
	}
	authenticated := o.ClientCAFile != "" || o.AuthenticationTokenWebhook
	if o.Port != 0 && !isLoopback(o.Address) && (!authenticated || (o.AnonymousAuth && o.AuthorizationMode == "AlwaysAllow")) {
		if !o.InsecureFullAccess {
			return fmt.Errorf("refusing to serve the full-access port on %s to unauthenticated clients: set --client-ca-file (with --tls-cert-file and --tls-private-key-file) or --authentication-token-webhook, without --anonymous-auth unless --authorization-mode=Webhook; or bind --address to loopback, or pass --insecure-full-access", o.Address)
		}
		klog.Warningf("Serving the full-access port on %s without client certificates (--insecure-full-access): anyone who reaches it can run anything on this node", o.Address)
	}
	return nil
}

// validateResources checks what pods may use: processes, the node's
// reservations, sysctls.
func (o *Options) validateResources() error {
	if o.PodMaxPids < -1 {
		return fmt.Errorf("--pod-max-pids must be -1 (unbounded) or more, got %d", o.PodMaxPids)
	}
	if _, err := newNodeAllocatable(o); err != nil {
		return err
	}
	if _, err := kuberuntime.NewSysctlAllowlist(o.AllowedUnsafeSysctls); err != nil {
		return fmt.Errorf("--allowed-unsafe-sysctls: %w", err)
	}
	return nil
}

// validateNetwork checks the pod network's options.
func (o *Options) validateNetwork() error {
	for _, s := range o.ClusterDNS {
		if net.ParseIP(s) == nil {
			return fmt.Errorf("--cluster-dns %q: want IP addresses", s)
		}
	}
	switch o.NetworkPlugin {
	case network.PluginDocker:
	case network.PluginCNI:
		if o.CNIConfDir == "" || strings.Trim(o.CNIBinDir, ",") == "" {
			return fmt.Errorf("--network-plugin=cni needs --cni-conf-dir and --cni-bin-dir")
		}
	default:
		return fmt.Errorf("--network-plugin %q: want \"\" (Docker's bridge) or \"cni\"", o.NetworkPlugin)
	}
	return nil
}

// validateNodeMode checks the node-mode options.
func (o *Options) validateNodeMode() error {
	if o.NodeIP != "" {
		ip := net.ParseIP(o.NodeIP)
		if ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
			return fmt.Errorf("--node-ip %q: want the node's address, neither loopback nor unspecified (the API server refuses to reach a node there)", o.NodeIP)
		}
	}
	if _, err := ParseTaints(o.RegisterWithTaints); err != nil {
		return fmt.Errorf("--register-with-taints: %w", err)
	}
	for k, v := range o.NodeLabels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return fmt.Errorf("--node-labels: key %q: %s", k, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return fmt.Errorf("--node-labels: %s=%q: %s", k, v, strings.Join(msgs, "; "))
		}
	}
	if o.NodeStatusMaxImages < -1 {
		return fmt.Errorf("--node-status-max-images must be -1 (all) or more, got %d", o.NodeStatusMaxImages)
	}
	if o.NodeStatusUpdateFrequency <= 0 || o.NodeStatusReportFrequency < o.NodeStatusUpdateFrequency {
		return fmt.Errorf("--node-status-update-frequency (%v) must be positive and at most --node-status-report-frequency (%v)", o.NodeStatusUpdateFrequency, o.NodeStatusReportFrequency)
	}
	if o.NodeLeaseDurationSeconds < 4 {
		return fmt.Errorf("--node-lease-duration-seconds must be at least 4, got %d", o.NodeLeaseDurationSeconds)
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst < 1 {
		return fmt.Errorf("--kube-api-qps must be positive and --kube-api-burst at least 1")
	}
	return o.validateCertificates()
}

// validateCertificates checks TLS bootstrap and rotation: both are the
// node's dealings with the API server.
func (o *Options) validateCertificates() error {
	if o.BootstrapKubeconfig != "" && o.Kubeconfig == "" {
		return fmt.Errorf("--bootstrap-kubeconfig needs --kubeconfig: the path the node's kubeconfig is written to")
	}
	if o.RotateServerCertificates && o.Kubeconfig == "" {
		return fmt.Errorf("--rotate-server-certificates asks the API server for the serving certificate: set --kubeconfig")
	}
	if o.RotateServerCertificates && o.Port == 0 {
		return fmt.Errorf("--rotate-server-certificates is for the full-access port: --port is 0")
	}
	if o.RotateCertificates && o.Kubeconfig == "" {
		o.Warnings = append(o.Warnings, "--rotate-certificates without --kubeconfig: there is no client certificate to rotate")
	}
	return nil
}

// ParseTaints parses taints as --register-with-taints spells them:
// key[=value]:Effect.
func ParseTaints(specs []string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, spec := range specs {
		kv, effect, ok := strings.Cut(spec, ":")
		key, value, _ := strings.Cut(kv, "=")
		switch e := v1.TaintEffect(effect); {
		case !ok:
			return nil, fmt.Errorf("%q: want key[=value]:Effect", spec)
		case e != v1.TaintEffectNoSchedule && e != v1.TaintEffectPreferNoSchedule && e != v1.TaintEffectNoExecute:
			return nil, fmt.Errorf("%q: effect must be NoSchedule, PreferNoSchedule or NoExecute", spec)
		}
		if msgs := validation.IsQualifiedName(key); len(msgs) > 0 {
			return nil, fmt.Errorf("%q: key: %s", spec, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(value); len(msgs) > 0 {
			return nil, fmt.Errorf("%q: value: %s", spec, strings.Join(msgs, "; "))
		}
		out = append(out, v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)})
	}
	return out, nil
}

// ParseReserved parses a reservation as the kubelet's --kube-reserved:
// comma-separated name=quantity of cpu, memory and pid.
func ParseReserved(s string) (v1.ResourceList, error) {
	out := v1.ResourceList{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		switch v1.ResourceName(name) {
		case v1.ResourceCPU, v1.ResourceMemory, kuberuntime.PidResource:
		default:
			return nil, fmt.Errorf("%q: want cpu=, memory= or pid=", kv)
		}
		q, err := resource.ParseQuantity(val)
		if !ok || err != nil || q.Sign() < 0 {
			return nil, fmt.Errorf("%s: want a quantity of at least 0, such as 100m or 100Mi", name)
		}
		if _, dup := out[v1.ResourceName(name)]; dup {
			return nil, fmt.Errorf("%s given twice", name)
		}
		out[v1.ResourceName(name)] = q
	}
	return out, nil
}

// EnforcePods reports whether --enforce-node-allocatable asks for kubepods
// to be bounded by the reservations. The kubelet's other values need the
// reserved cgroups, which this agent does not manage.
func (o *Options) EnforcePods() (bool, error) {
	pods := false
	for _, v := range o.EnforceNodeAllocatable {
		switch v {
		case "pods":
			pods = true
		case "none", "":
		default:
			return false, fmt.Errorf("--enforce-node-allocatable %q: want pods or none (the agent manages no system-reserved or kube-reserved cgroup)", v)
		}
	}
	return pods, nil
}

// evictionThresholds parses the eviction flags.
func (o *Options) evictionThresholds() ([]eviction.Threshold, error) {
	return eviction.ParseThresholds(eviction.Flags{Hard: o.EvictionHard, Soft: o.EvictionSoft,
		SoftGracePeriod: o.EvictionSoftGracePeriod, MinimumReclaim: o.EvictionMinimumReclaim})
}

// isLoopback reports whether addr is a loopback address or name.
func isLoopback(addr string) bool {
	if addr == "localhost" {
		return true
	}
	ip := net.ParseIP(addr)
	return ip != nil && ip.IsLoopback()
}

// checkNotKubeletConfig catches a KubeletConfiguration given as the
// manifest path.
func checkNotKubeletConfig(path string) error {
	if isKubeletConfigFile(path) {
		return fmt.Errorf("--pod-manifest-path %s is a KubeletConfiguration: pass it as --config", path)
	}
	return nil
}

// validateKubeletSurface checks the kubelet's own flags: the runtime
// endpoint and the feature gates; and gives the full-access port the
// kubelet's self-signed certificate when it needs TLS and has none.
func (o *Options) validateKubeletSurface() error {
	if o.ContainerRuntimeEndpoint != "" {
		if err := checkRuntimeEndpoint(o.ContainerRuntimeEndpoint, o.DockerEndpoint); err != nil {
			return fmt.Errorf("--container-runtime-endpoint: %w", err)
		}
	}
	warnings, err := checkFeatureGates(o.FeatureGates)
	if err != nil {
		return err
	}
	o.Warnings = append(o.Warnings, warnings...)
	if o.CertDir == "" {
		o.CertDir = filepath.Join(o.RootDir, "pki")
	}
	// The serving certificate from the API server needs none of its own
	// until it is issued, as the kubelet.
	if o.TLSCertFile == "" && o.TLSPrivateKeyFile == "" && !o.RotateServerCertificates && (o.ClientCAFile != "" || o.AuthenticationTokenWebhook) {
		o.TLSCertFile, o.TLSPrivateKeyFile = filepath.Join(o.CertDir, "kubelet.crt"), filepath.Join(o.CertDir, "kubelet.key")
		o.SelfSignedCert = true
	}
	return nil
}

// runtimeHints name the runtimes whose sockets a kubelet is usually given.
var runtimeHints = map[string]string{"containerd.sock": "containerd", "crio.sock": "CRI-O",
	"cri-dockerd.sock": "cri-dockerd (a CRI shim in front of Docker; the agent speaks Docker's own API)"}

// checkRuntimeEndpoint accepts a container runtime endpoint that names
// Docker: a unix socket named docker.sock, or the agent's Docker endpoint.
func checkRuntimeEndpoint(endpoint, dockerEndpoint string) error {
	ep := normalizeEndpoint(endpoint)
	if ep == normalizeEndpoint(dockerEndpoint) {
		return nil
	}
	if sock, ok := strings.CutPrefix(ep, "unix://"); ok && filepath.Base(sock) == "docker.sock" {
		return nil
	}
	what := "not Docker's socket"
	if hint, ok := runtimeHints[filepath.Base(ep)]; ok {
		what = "the socket of " + hint
	}
	return fmt.Errorf("%q is %s: this agent runs pods on Docker; pass unix:///var/run/docker.sock (or leave it out and set --docker-endpoint)", endpoint, what)
}

// normalizeEndpoint spells a bare socket path as a unix:// endpoint.
func normalizeEndpoint(ep string) string {
	if strings.HasPrefix(ep, "/") {
		return "unix://" + ep
	}
	return ep
}

// ErrVersion is returned by ParseFlags for --version: print Version, exit 0.
var ErrVersion = errors.New("version requested")

// Version is the agent's version, set at build time with
// -ldflags "-X github.com/classic-kubelet/kubelet/cmd/kubelet/app.Version=...".
var Version = "dev"

// applyConfigFile sets, from a YAML file whose keys are long flag names,
// every flag the command line did not set. Parsing is strict: an unknown
// key, or a value the flag refuses, is an error naming the file and key.
func applyConfigFile(fs *pflag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--kubelet-config: %w", err)
	}
	var settings map[string]any
	if err := yaml.UnmarshalStrict(data, &settings); err != nil {
		return fmt.Errorf("--kubelet-config %s: %w", path, err)
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		f := fs.Lookup(strings.ReplaceAll(key, "_", "-"))
		if f == nil || key == "kubelet-config" || key == "version" {
			return fmt.Errorf("--kubelet-config %s: unknown key %q (keys are the long flag names)", path, key)
		}
		if f.Changed {
			continue // the command line wins
		}
		values := []any{settings[key]}
		if list, ok := settings[key].([]any); ok {
			values = list
		}
		for _, v := range values {
			if err := fs.Set(f.Name, fmt.Sprint(v)); err != nil {
				return fmt.Errorf("--kubelet-config %s: %s: %w", path, key, err)
			}
		}
	}
	return nil
}

// resolveConfig gives --config its meaning by content: a KubeletConfiguration
// is read with the --config-dir drop-ins under the flags (and
// --kubelet-config, whose keys are flags); any other path is the manifest
// path. An accepted --container-runtime-endpoint is then the Docker endpoint
// unless --docker-endpoint is given.
func resolveConfig(fs *pflag.FlagSet, o *Options) error {
	file := ""
	switch {
	case o.ConfigPath != "" && isKubeletConfigFile(o.ConfigPath):
		file = o.ConfigPath
	case o.ConfigPath != "" && !fs.Changed("pod-manifest-path"):
		o.PodManifestPath = o.ConfigPath
	}
	if file != "" || o.ConfigDir != "" {
		c, err := loadKubeletConfig(file, o.ConfigDir)
		if err != nil {
			return err
		}
		warnings, err := applyKubeletConfig(fs, o, c)
		if err != nil {
			return err
		}
		o.KubeletConfigFile, o.Warnings = file, append(o.Warnings, warnings...)
	}
	if o.ContainerRuntimeEndpoint != "" && !fs.Changed("docker-endpoint") &&
		checkRuntimeEndpoint(o.ContainerRuntimeEndpoint, o.DockerEndpoint) == nil {
		o.DockerEndpoint = normalizeEndpoint(o.ContainerRuntimeEndpoint)
	}
	return nil
}

// ParseFlags parses the command line into Options. Both "_" and "-" are
// accepted in flag names. The logging options configure klog once
// ApplyLogging applies them; klog's legacy flags (--logtostderr,
// --log-dir, ...) write its settings as they are parsed.
func ParseFlags(args []string) (*Options, error) {
	return parseFlags(args, klogFlags())
}

// ReparseFlags parses the command line again (on SIGHUP) without writing
// klog's settings: what may change of them live (-v) is applied by reload.
func ReparseFlags(args []string) (*Options, error) {
	return parseFlags(args, shadowKlogFlags())
}

func parseFlags(args []string, klogLegacy *goflag.FlagSet) (*Options, error) {
	o := NewOptions()
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})
	o.AddFlags(fs)
	addLoggingFlags(o, fs, klogLegacy)
	var configFile string
	var showVersion bool
	fs.StringVar(&configFile, "kubelet-config", "", "YAML file of settings: keys are the long flag names; flags given on the command line win.")
	fs.BoolVar(&showVersion, "version", false, "Print the version and exit.")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if showVersion {
		return nil, ErrVersion
	}
	if configFile != "" {
		if err := applyConfigFile(fs, configFile); err != nil {
			return nil, err
		}
		o.ConfigFile = configFile
	}
	if err := resolveConfig(fs, o); err != nil {
		return nil, err
	}
	if err := checkLegacyLogFlags(fs, o); err != nil {
		return nil, err
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// agentSettings are the agent's own settings, for /configz beside the
// KubeletConfiguration: each option under its flag's name in camelCase,
// durations and quantities as written on the command line. Key files appear
// by path only.
func (o *Options) agentSettings() map[string]any {
	out := map[string]any{}
	v := reflect.ValueOf(o).Elem()
	for i := 0; i < v.NumField(); i++ {
		tag := v.Type().Field(i).Tag.Get("yaml")
		if tag == "" || tag == "-" {
			continue
		}
		parts := strings.Split(tag, "-")
		for j := 1; j < len(parts); j++ {
			parts[j] = strings.ToUpper(parts[j][:1]) + parts[j][1:]
		}
		val := v.Field(i).Interface()
		if s, ok := val.(fmt.Stringer); ok {
			val = s.String()
		}
		out[strings.Join(parts, "")] = val
	}
	return out
}
