package app

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logsapi "k8s.io/component-base/logs/api/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodeshutdown"
)

// configField maps a KubeletConfiguration field to the flag that holds the
// same setting here.
type configField struct {
	path string // dotted JSON path in KubeletConfiguration
	flag string
	// value spells the field as the flag's values (a repeatable flag takes
	// several).
	value func(kc *kubeletv1beta1.KubeletConfiguration) []string
	// kubeletDefault is the kubelet's default where it differs from the
	// agent's (nil: the same, or the agent's kept): a KubeletConfiguration
	// that leaves the field out gets what the kubelet would run with.
	kubeletDefault []string
}

// kubeletConfigFields are the KubeletConfiguration fields the agent
// implements. The kubelet's defaults that differ from the agent's are the
// kubelet's secure serving (every address, webhook authentication and
// authorization, no read-only port), its sync period, unconfined seccomp and
// pprof on; clusterDomain keeps the agent's cluster.local (the kubelet's ""
// would give ClusterFirst pods no cluster search path).
var kubeletConfigFields = []configField{
	{"staticPodPath", "pod-manifest-path", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(kc.StaticPodPath) }, nil},
	{"syncFrequency", "sync-frequency", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return dur(kc.SyncFrequency) }, []string{"1m0s"}},
	{"fileCheckFrequency", "file-check-frequency", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return dur(kc.FileCheckFrequency) }, nil},
	{"httpCheckFrequency", "http-check-frequency", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return dur(kc.HTTPCheckFrequency) }, nil},
	{"staticPodURL", "manifest-url", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(kc.StaticPodURL) }, nil},
	{"staticPodURLHeader", "manifest-url-header", headers, nil},
	{"address", "address", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(kc.Address) }, []string{"0.0.0.0"}},
	{"port", "port", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return num(kc.Port) }, nil},
	{"readOnlyPort", "read-only-port", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return num(kc.ReadOnlyPort) }, []string{"0"}},
	{"healthzPort", "healthz-port", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return num(*kc.HealthzPort) }, nil},
	{"healthzBindAddress", "healthz-bind-address", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(kc.HealthzBindAddress) }, nil},
	{"tlsCertFile", "tls-cert-file", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(kc.TLSCertFile) }, nil},
	{"tlsPrivateKeyFile", "tls-private-key-file", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(kc.TLSPrivateKeyFile) }, nil},
	{"authentication.x509.clientCAFile", "client-ca-file", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return one(kc.Authentication.X509.ClientCAFile)
	}, nil},
	{"authentication.webhook.enabled", "authentication-token-webhook", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return boolean(*kc.Authentication.Webhook.Enabled)
	}, []string{"true"}},
	{"authentication.webhook.cacheTTL", "authentication-token-webhook-cache-ttl", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return dur(kc.Authentication.Webhook.CacheTTL)
	}, nil},
	{"authentication.anonymous.enabled", "anonymous-auth", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return boolean(*kc.Authentication.Anonymous.Enabled)
	}, nil},
	{"authorization.mode", "authorization-mode", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return one(string(kc.Authorization.Mode))
	}, []string{"Webhook"}},
	{"authorization.webhook.cacheAuthorizedTTL", "authorization-webhook-cache-authorized-ttl", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return dur(kc.Authorization.Webhook.CacheAuthorizedTTL)
	}, nil},
	{"authorization.webhook.cacheUnauthorizedTTL", "authorization-webhook-cache-unauthorized-ttl", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return dur(kc.Authorization.Webhook.CacheUnauthorizedTTL)
	}, nil},
	{"registryPullQPS", "registry-qps", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return num(*kc.RegistryPullQPS) }, nil},
	{"registryBurst", "registry-burst", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return num(kc.RegistryBurst) }, nil},
	{"enableProfilingHandler", "profiling", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return boolean(*kc.EnableProfilingHandler) }, []string{"true"}},
	{"clusterDomain", "cluster-domain", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(kc.ClusterDomain) }, nil},
	{"clusterDNS", "cluster-dns", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(strings.Join(kc.ClusterDNS, ",")) }, nil},
	{"resolvConf", "resolv-conf", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(*kc.ResolverConfig) }, nil},
	{"nodeStatusUpdateFrequency", "node-status-update-frequency", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return dur(kc.NodeStatusUpdateFrequency)
	}, nil},
	{"nodeStatusReportFrequency", "node-status-report-frequency", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return dur(kc.NodeStatusReportFrequency)
	}, nil},
	{"nodeStatusMaxImages", "node-status-max-images", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return num(*kc.NodeStatusMaxImages)
	}, nil},
	{"nodeLeaseDurationSeconds", "node-lease-duration-seconds", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return num(kc.NodeLeaseDurationSeconds)
	}, nil},
	{"imageMinimumGCAge", "minimum-image-ttl-duration", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return dur(kc.ImageMinimumGCAge) }, nil},
	{"imageGCHighThresholdPercent", "image-gc-high-threshold", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return num(*kc.ImageGCHighThresholdPercent)
	}, nil},
	{"imageGCLowThresholdPercent", "image-gc-low-threshold", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return num(*kc.ImageGCLowThresholdPercent)
	}, nil},
	{"cgroupsPerQOS", "cgroups-per-qos", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return boolean(*kc.CgroupsPerQOS) }, nil},
	{"maxPods", "max-pods", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return num(kc.MaxPods) }, nil},
	{"podPidsLimit", "pod-max-pids", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		// The kubelet reads any negative limit as none.
		return num(max(*kc.PodPidsLimit, -1))
	}, nil},
	{"kubeAPIQPS", "kube-api-qps", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return num(*kc.KubeAPIQPS) }, nil},
	{"kubeAPIBurst", "kube-api-burst", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return num(kc.KubeAPIBurst) }, nil},
	{"evictionHard", "eviction-hard", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return pairs(kc.EvictionHard, "<") }, nil},
	{"evictionSoft", "eviction-soft", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return pairs(kc.EvictionSoft, "<") }, nil},
	{"evictionSoftGracePeriod", "eviction-soft-grace-period", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return pairs(kc.EvictionSoftGracePeriod, "=")
	}, nil},
	{"evictionMinimumReclaim", "eviction-minimum-reclaim", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return pairs(kc.EvictionMinimumReclaim, "=")
	}, nil},
	{"evictionPressureTransitionPeriod", "eviction-pressure-transition-period", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return dur(kc.EvictionPressureTransitionPeriod)
	}, nil},
	{"evictionMaxPodGracePeriod", "eviction-max-pod-grace-period", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return num(kc.EvictionMaxPodGracePeriod)
	}, nil},
	{"containerLogMaxSize", "container-log-max-size", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(kc.ContainerLogMaxSize) }, nil},
	{"containerLogMaxFiles", "container-log-max-files", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return num(*kc.ContainerLogMaxFiles) }, nil},
	{"podLogsDir", "pod-logs-dir", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(kc.PodLogsDir) }, nil},
	{"systemReserved", "system-reserved", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return pairs(kc.SystemReserved, "=") }, nil},
	{"kubeReserved", "kube-reserved", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return pairs(kc.KubeReserved, "=") }, nil},
	{"enforceNodeAllocatable", "enforce-node-allocatable", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return one(strings.Join(kc.EnforceNodeAllocatable, ","))
	}, nil},
	{"allowedUnsafeSysctls", "allowed-unsafe-sysctls", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return one(strings.Join(kc.AllowedUnsafeSysctls, ","))
	}, nil},
	{"seccompDefault", "seccomp-default", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return boolean(*kc.SeccompDefault) }, []string{"false"}},
	{"rotateCertificates", "rotate-certificates", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return boolean(kc.RotateCertificates) }, nil},
	{"serverTLSBootstrap", "rotate-server-certificates", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return boolean(kc.ServerTLSBootstrap)
	}, nil},
	{"registerNode", "register-node", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return boolean(*kc.RegisterNode) }, nil},
	{"registerWithTaints", "register-with-taints", taints, nil},
	{"containerRuntimeEndpoint", "container-runtime-endpoint", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return one(kc.ContainerRuntimeEndpoint)
	}, nil},
	{"logging.verbosity", "v", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return num(uint32(kc.Logging.Verbosity)) }, nil},
	{"logging.format", "logging-format", func(kc *kubeletv1beta1.KubeletConfiguration) []string { return one(kc.Logging.Format) }, nil},
	{"logging.flushFrequency", "log-flush-frequency", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return one(kc.Logging.FlushFrequency.Duration.Duration.String())
	}, nil},
	{"logging.vmodule", "vmodule", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return one(logsapi.VModuleConfigurationPflag(&kc.Logging.VModule).String())
	}, nil},
	{"logging.options.text.splitStream", "log-text-split-stream", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return boolean(kc.Logging.Options.Text.SplitStream)
	}, nil},
	{"logging.options.text.infoBufferSize", "log-text-info-buffer-size", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return one(kc.Logging.Options.Text.InfoBufferSize.String())
	}, nil},
	{"logging.options.json.splitStream", "log-json-split-stream", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return boolean(kc.Logging.Options.JSON.SplitStream)
	}, nil},
	{"logging.options.json.infoBufferSize", "log-json-info-buffer-size", func(kc *kubeletv1beta1.KubeletConfiguration) []string {
		return one(kc.Logging.Options.JSON.InfoBufferSize.String())
	}, nil},
}

func one(s string) []string { return []string{s} }

func dur(d metav1.Duration) []string { return []string{d.Duration.String()} }

func boolean(b bool) []string { return []string{strconv.FormatBool(b)} }

func num[T int32 | int64 | uint32](n T) []string { return []string{fmt.Sprint(n)} }

// pairs spells a map as the kubelet's flags do: key<op>value, comma-separated
// in key order.
func pairs(m map[string]string, op string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+op+v)
	}
	sort.Strings(out)
	return one(strings.Join(out, ","))
}

// headers are staticPodURLHeader's as --manifest-url-header takes them, one
// Name:value each.
func headers(kc *kubeletv1beta1.KubeletConfiguration) []string {
	var out []string
	for name, values := range kc.StaticPodURLHeader {
		for _, v := range values {
			out = append(out, name+":"+v)
		}
	}
	sort.Strings(out)
	return out
}

// taints are registerWithTaints as --register-with-taints spells them.
func taints(kc *kubeletv1beta1.KubeletConfiguration) []string {
	out := make([]string, len(kc.RegisterWithTaints))
	for i, t := range kc.RegisterWithTaints {
		out[i] = t.Key
		if t.Value != "" {
			out[i] += "=" + t.Value
		}
		out[i] += ":" + string(t.Effect)
	}
	return one(strings.Join(out, ","))
}

// honouredElsewhere are the fields the agent acts on without a flag of its
// own (applySpecialFields).
var honouredElsewhere = map[string]bool{"featureGates": true, "cgroupDriver": true, "cgroupRoot": true, "imageServiceEndpoint": true,
	"shutdownGracePeriod": true, "shutdownGracePeriodCriticalPods": true, "shutdownGracePeriodByPodPriority": true}

// applySpecialFields takes the fields without a flag: feature gates are
// merged under the command line's (a gate the command line names wins, the
// others are kept, as the kubelet merges them); cgroupDriver must be one
// (pod cgroups follow Docker's driver, and a mismatch is logged once it is
// known); cgroupRoot must be the root, where the agent puts kubepods; the
// image service is the runtime's; the graceful node shutdown's periods (no
// flags, as the kubelet has none) are checked as the kubelet checks them.
func applySpecialFields(o *Options, c *kubeletConfig) error {
	if len(c.kc.FeatureGates) > 0 && o.FeatureGates == nil {
		o.FeatureGates = map[string]bool{}
	}
	for name, on := range c.kc.FeatureGates {
		if _, given := o.FeatureGates[name]; !given {
			o.FeatureGates[name] = on
		}
	}
	switch d := c.kc.CgroupDriver; d {
	case "", "cgroupfs", "systemd":
		o.CgroupDriver = d
	default:
		return fmt.Errorf("KubeletConfiguration %s: cgroupDriver %q: want cgroupfs or systemd", c.sources, d)
	}
	if r := c.kc.CgroupRoot; r != "" && r != "/" {
		return fmt.Errorf("KubeletConfiguration %s: cgroupRoot %q: this agent puts pod cgroups under the root cgroup (kubepods) only; leave cgroupRoot out or \"/\"", c.sources, r)
	}
	if ep := c.kc.ImageServiceEndpoint; ep != "" {
		if err := checkRuntimeEndpoint(ep, o.DockerEndpoint); err != nil {
			return fmt.Errorf("KubeletConfiguration %s: imageServiceEndpoint: %w", c.sources, err)
		}
	}
	if err := applyShutdownFields(o, &c.kc); err != nil {
		return fmt.Errorf("KubeletConfiguration %s: %w", c.sources, err)
	}
	return nil
}

// applyShutdownFields takes shutdownGracePeriod,
// shutdownGracePeriodCriticalPods and shutdownGracePeriodByPodPriority,
// refused where the kubelet's validation refuses them (in its words).
func applyShutdownFields(o *Options, kc *kubeletv1beta1.KubeletConfiguration) error {
	period, critical := kc.ShutdownGracePeriod.Duration, kc.ShutdownGracePeriodCriticalPods.Duration
	gate := func(name string) bool {
		on, given := o.FeatureGates[name]
		return on || !given // both gates are on by default
	}
	if gate("GracefulNodeShutdown") {
		if critical > period {
			return fmt.Errorf("invalid configuration: shutdownGracePeriodCriticalPods %v must be <= shutdownGracePeriod %v", critical, period)
		}
		if period < 0 || period > 0 && period < time.Second {
			return fmt.Errorf("invalid configuration: shutdownGracePeriod %v must be either zero or otherwise >= 1 sec", period)
		}
		if critical < 0 || critical > 0 && critical < time.Second {
			return fmt.Errorf("invalid configuration: shutdownGracePeriodCriticalPods %v must be either zero or otherwise >= 1 sec", critical)
		}
	} else if period > 0 || critical > 0 {
		return fmt.Errorf("invalid configuration: specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods requires feature gate GracefulNodeShutdown")
	}
	byPriority := kc.ShutdownGracePeriodByPodPriority
	if len(byPriority) > 0 {
		if !gate("GracefulNodeShutdownBasedOnPodPriority") {
			return fmt.Errorf("invalid configuration: Specifying shutdownGracePeriodByPodPriority requires feature gate GracefulNodeShutdownBasedOnPodPriority")
		}
		if period > 0 || critical > 0 {
			return fmt.Errorf("invalid configuration: Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time")
		}
	}
	o.ShutdownGracePeriod, o.ShutdownGracePeriodCriticalPods, o.ShutdownTable = period, critical, nil
	for _, row := range byPriority {
		if row.ShutdownGracePeriodSeconds < 0 {
			return fmt.Errorf("invalid configuration: shutdownGracePeriodByPodPriority: priority %d: shutdownGracePeriodSeconds %d must be >= 0",
				row.Priority, row.ShutdownGracePeriodSeconds)
		}
		o.ShutdownTable = append(o.ShutdownTable, nodeshutdown.Group{Priority: row.Priority, Grace: time.Duration(row.ShutdownGracePeriodSeconds) * time.Second})
	}
	return nil
}

// configDuration is a duration as KubeletConfiguration holds it.
func configDuration(d time.Duration) metav1.Duration { return metav1.Duration{Duration: d} }
