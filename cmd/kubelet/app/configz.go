package app

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"
)

// agentConfigzSection is the /configz section of the agent's own settings,
// beside the kubelet's "kubeletconfig".
const agentConfigzSection = "classickubelet"

// Configz is the configuration the agent runs with, as /configz serves it:
// the effective settings as a KubeletConfiguration under "kubeletconfig"
// (kind and apiVersion set, as the kubelet's), and every option of the
// agent's under "classickubelet".
func (o *Options) Configz() map[string]any {
	return map[string]any{"kubeletconfig": o.KubeletConfiguration(), agentConfigzSection: o.agentSettings()}
}

// KubeletConfiguration spells the effective settings as the kubelet's
// configuration: the fields the agent implements, and those it accepts and
// records (feature gates, cgroup driver, runtime endpoint).
func (o *Options) KubeletConfiguration() *kubeletv1beta1.KubeletConfiguration {
	kc := &kubeletv1beta1.KubeletConfiguration{
		TypeMeta: metav1.TypeMeta{Kind: kubeletConfigKind, APIVersion: kubeletConfigAPIVersion},
	}
	o.configzServing(kc)
	o.configzNode(kc)
	o.configzResources(kc)
	if o.Logging != nil {
		kc.Logging = *o.Logging.DeepCopy()
	}
	return kc
}

// configzServing fills the sources, the API ports and who may use them.
func (o *Options) configzServing(kc *kubeletv1beta1.KubeletConfiguration) {
	kc.EnableServer = ptr.To(o.Port != 0)
	kc.StaticPodPath = o.PodManifestPath
	kc.SyncFrequency = configDuration(o.SyncFrequency)
	kc.FileCheckFrequency = configDuration(o.FileCheckFrequency)
	kc.HTTPCheckFrequency = configDuration(o.HTTPCheckFrequency)
	kc.StaticPodURL = o.ManifestURL
	for _, h := range o.ManifestURLHeader {
		name, value, _ := strings.Cut(h, ":")
		if kc.StaticPodURLHeader == nil {
			kc.StaticPodURLHeader = map[string][]string{}
		}
		kc.StaticPodURLHeader[name] = append(kc.StaticPodURLHeader[name], strings.TrimSpace(value))
	}
	kc.Address, kc.Port, kc.ReadOnlyPort = o.Address, int32(o.Port), int32(o.ReadOnlyPort)
	kc.HealthzBindAddress, kc.HealthzPort = o.HealthzBindAddress, ptr.To(int32(o.HealthzPort))
	kc.TLSCertFile, kc.TLSPrivateKeyFile = o.TLSCertFile, o.TLSPrivateKeyFile
	kc.Authentication = kubeletv1beta1.KubeletAuthentication{
		X509: kubeletv1beta1.KubeletX509Authentication{ClientCAFile: o.ClientCAFile},
		Webhook: kubeletv1beta1.KubeletWebhookAuthentication{Enabled: ptr.To(o.AuthenticationTokenWebhook),
			CacheTTL: configDuration(o.AuthenticationTokenWebhookCacheTTL)},
		Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: ptr.To(o.AnonymousAuth)},
	}
	kc.Authorization = kubeletv1beta1.KubeletAuthorization{
		Mode: kubeletv1beta1.KubeletAuthorizationMode(o.AuthorizationMode),
		Webhook: kubeletv1beta1.KubeletWebhookAuthorization{CacheAuthorizedTTL: configDuration(o.AuthorizationWebhookCacheAuthorizedTTL),
			CacheUnauthorizedTTL: configDuration(o.AuthorizationWebhookCacheUnauthorized)},
	}
	kc.EnableProfilingHandler = ptr.To(o.Profiling)
	kc.FeatureGates = o.FeatureGates
	kc.ContainerRuntimeEndpoint = o.DockerEndpoint
}

// configzNode fills the node's registration, status, DNS, images and logs.
func (o *Options) configzNode(kc *kubeletv1beta1.KubeletConfiguration) {
	kc.RegisterNode = ptr.To(o.RegisterNode)
	kc.RotateCertificates, kc.ServerTLSBootstrap = o.RotateCertificates, o.RotateServerCertificates
	if t, err := ParseTaints(o.RegisterWithTaints); err == nil { // validated
		kc.RegisterWithTaints = t
	}
	kc.NodeStatusUpdateFrequency = configDuration(o.NodeStatusUpdateFrequency)
	kc.NodeStatusReportFrequency = configDuration(o.NodeStatusReportFrequency)
	kc.NodeLeaseDurationSeconds = o.NodeLeaseDurationSeconds
	kc.KubeAPIQPS, kc.KubeAPIBurst = ptr.To(int32(o.KubeAPIQPS)), int32(o.KubeAPIBurst)
	kc.ClusterDomain, kc.ClusterDNS, kc.ResolverConfig = o.ClusterDomain, o.ClusterDNS, ptr.To(o.ResolvConf)
	kc.RegistryPullQPS, kc.RegistryBurst = ptr.To(int32(o.RegistryQPS)), int32(o.RegistryBurst)
	kc.ImageMinimumGCAge = configDuration(o.MinimumImageTTLDuration)
	kc.ImageGCHighThresholdPercent = ptr.To(int32(o.ImageGCHighThreshold))
	kc.ImageGCLowThresholdPercent = ptr.To(int32(o.ImageGCLowThreshold))
	kc.ContainerLogMaxSize, kc.ContainerLogMaxFiles = o.ContainerLogMaxSize, ptr.To(int32(o.ContainerLogMaxFiles))
	kc.SeccompDefault = ptr.To(o.SeccompDefault)
}

// configzResources fills pods' resources, cgroups, eviction and the
// graceful node shutdown.
func (o *Options) configzResources(kc *kubeletv1beta1.KubeletConfiguration) {
	kc.MaxPods, kc.PodPidsLimit = int32(o.MaxPods), ptr.To(o.PodMaxPids)
	kc.CgroupsPerQOS, kc.CgroupDriver = ptr.To(o.CgroupsPerQOS), o.CgroupDriver
	kc.SystemReserved, kc.KubeReserved = unpairs(o.SystemReserved, "="), unpairs(o.KubeReserved, "=")
	kc.EnforceNodeAllocatable = o.EnforceNodeAllocatable
	kc.AllowedUnsafeSysctls = o.AllowedUnsafeSysctls
	kc.EvictionHard, kc.EvictionSoft = unpairs(o.EvictionHard, "<"), unpairs(o.EvictionSoft, "<")
	kc.EvictionSoftGracePeriod = unpairs(o.EvictionSoftGracePeriod, "=")
	kc.EvictionMinimumReclaim = unpairs(o.EvictionMinimumReclaim, "=")
	kc.EvictionPressureTransitionPeriod = configDuration(o.EvictionPressureTransitionPeriod)
	kc.EvictionMaxPodGracePeriod = int32(o.EvictionMaxPodGracePeriod)
	kc.ShutdownGracePeriod = configDuration(o.ShutdownGracePeriod)
	kc.ShutdownGracePeriodCriticalPods = configDuration(o.ShutdownGracePeriodCriticalPods)
	for _, g := range o.ShutdownTable {
		kc.ShutdownGracePeriodByPodPriority = append(kc.ShutdownGracePeriodByPodPriority,
			kubeletv1beta1.ShutdownGracePeriodByPodPriority{Priority: g.Priority, ShutdownGracePeriodSeconds: int64(g.Grace / time.Second)})
	}
}

// unpairs reads a flag's key<op>value list back into the map the
// configuration holds (nil when empty).
func unpairs(s, op string) map[string]string {
	var out map[string]string
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), op)
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}
