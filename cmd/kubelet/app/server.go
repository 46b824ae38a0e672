package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang/glog"
	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/config"
	"github.com/classic-kubelet/kubelet/pkg/credentialprovider"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	"github.com/classic-kubelet/kubelet/pkg/etcdnode"
	"github.com/classic-kubelet/kubelet/pkg/kubeapi"
	"github.com/classic-kubelet/kubelet/pkg/kubelet"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/cadvisor"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/images"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/network"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/network/dns"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodestatus"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/server"
	"github.com/classic-kubelet/kubelet/pkg/systemd"
)

// Run runs the agent until ctx is cancelled. It returns once every goroutine
// it started has stopped; containers are left running.
//
// On each value from hup it re-reads its settings with reparse (the same
// command line and --kubelet-config file): sources, -v, garbage collection
// and log settings apply at once; anything else is logged as needing a
// restart.
// cgroupMount is where the cgroup file system is mounted.
const cgroupMount = "/sys/fs/cgroup"

func Run(ctx context.Context, o *Options, hup <-chan os.Signal, reparse func() (*Options, error)) error {
	lock, err := lockNode(o.HostnameOverride, o.RootDir)
	if err != nil {
		return err
	}
	defer lock.release()
	if err := os.MkdirAll(o.RootDir, 0o755); err != nil {
		return fmt.Errorf("root dir: %w", err)
	}
	docker, err := dockertools.NewClient(o.DockerEndpoint)
	if err != nil {
		return err
	}
	sources := configuredSources(o)
	if len(sources) == 0 {
		glog.Warningf("No pod source configured (--pod-manifest-path, --manifest-url, --etcd-servers, --port): no pods will be started")
	}
	keyring, err := loadKeyring(o.DockerConfig)
	if err != nil {
		return err
	}
	logMax := resource.MustParse(o.ContainerLogMaxSize) // validated
	m := metrics.New(o.HostnameOverride)
	recorder := events.New(o.HostnameOverride)
	alloc, err := newNodeAllocatable(o)
	if err != nil {
		return err
	}
	merger, err := config.NewMerger(filepath.Join(o.RootDir, "checkpoints"), config.MergerOptions{
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
	if err != nil {
		return err
	}
	nodeIP := o.NodeIP
	if nodeIP == "" {
		nodeIP = nodestatus.DefaultIP()
	}
	cfg := kubelet.Config{
		NodeName:        o.HostnameOverride,
		NodeIP:          nodeIP,
		RootDir:         o.RootDir,
		InfraImage:      o.PodInfraContainerImage,
		SyncFrequency:   o.SyncFrequency,
		RelistPeriod:    o.RelistPeriod,
		BackoffInitial:  o.BackoffInitial,
		BackoffMax:      o.BackoffMax,
		Metrics:         m,
		AllowPrivileged: o.AllowPrivileged,
		SeccompDefault:  o.SeccompDefault,
		ClusterDomain:   o.ClusterDomain,
		ResolvConf:      o.ResolvConf,
		GC: gc.Policy{MinAge: o.MinimumContainerTTLDuration, MaxPerContainer: o.MaximumDeadContainersPerContainer,
			MaxTotal: o.MaximumDeadContainers},
		ContainerLogDir: o.ContainerLogDir,
		GCPeriod:        o.GCPeriod,
		DiskUsagePeriod: o.DiskUsagePeriod,
		PauseBinary:     pauseBinary(o.PodInfraContainerImage),
		LogMaxSize:      logMax.Value(),
		LogMaxFiles:     o.ContainerLogMaxFiles,
		Events:          recorder,
		Images: images.Policy{Keyring: keyring, QPS: o.RegistryQPS, Burst: o.RegistryBurst,
			HighThreshold: o.ImageGCHighThreshold, LowThreshold: o.ImageGCLowThreshold, MinAge: o.MinimumImageTTLDuration},
	}
	thresholds, _ := o.evictionThresholds() // validated
	cfg.Eviction = eviction.Config{Thresholds: thresholds, MaxPodGracePeriod: time.Duration(o.EvictionMaxPodGracePeriod) * time.Second,
		PressureTransitionPeriod: o.EvictionPressureTransitionPeriod}
	v2, err := cgroups.IsV2(cgroupMount)
	if err != nil && len(thresholds) > 0 {
		glog.Warningf("Eviction: %v; taking cgroup v1", err)
	}
	cfg.EvictionNode = eviction.Node{Proc: "/proc", CgroupMount: cgroupMount, CgroupV2: v2}
	if o.CgroupsPerQOS {
		cfg.PodMaxPids = o.PodMaxPids
		capacity := nodestatus.Capacity(o.MaxPods)
		if pids := nodestatus.PidMax(); pids > 0 {
			capacity[kuberuntime.PidResource] = *resource.NewQuantity(pids, resource.DecimalSI)
		}
		if cfg.PodsLimits, err = alloc.podsLimits(capacity); err != nil {
			return err
		}
		cfg.Cgroups = cgroups.NewDetected(func() (cgroups.Config, error) {
			info, err := docker.DaemonInfo()
			if err != nil {
				return cgroups.Config{}, err
			}
			v2, err := cgroups.IsV2(cgroupMount)
			return cgroups.Config{Mount: cgroupMount, Driver: info.CgroupDriver, V2: v2}, err
		})
	}
	var nm *nodeMode
	if o.Kubeconfig != "" {
		if nm, err = newNodeMode(o); err != nil {
			return err
		}
		kubeapi.RegisterClientMetrics(m.Registry)
		cfg.Services, cfg.Objects = nm.services, nm.objects
	}
	cfg.Sysctls, _ = kuberuntime.NewSysctlAllowlist(o.AllowedUnsafeSysctls) // validated
	podNetwork, err := network.New(network.Config{NodeName: o.HostnameOverride, Plugin: o.NetworkPlugin,
		ConfDir: o.CNIConfDir, BinDirs: strings.Split(o.CNIBinDir, ","), CacheDir: o.CNICacheDir,
		StateDir: filepath.Join(o.RootDir, "network"), Events: recorder,
		DNS: &dns.Configurer{ClusterDNS: o.ClusterDNS, ClusterDomain: o.ClusterDomain, ResolvConf: o.ResolvConf,
			NodeIP: nodeIP, NodeName: o.HostnameOverride, WarnMissingClusterDNS: nm != nil, Events: recorder}})
	if err != nil {
		return err
	}
	cfg.Network = podNetwork
	// One subscription to Docker's events, for the relist, the image
	// manager and cAdvisor's inspect cache (counted as the runtime's
	// get_container_events).
	runtimeEvents := runtimeevents.NewHub(kuberuntime.NewInstrumentedRuntime(docker, m), clock.RealClock{})
	cfg.RuntimeEvents = runtimeEvents
	// The runtime as the agent sees it: a CNI sandbox's IP is its plugin's.
	k := kubelet.New(cfg, podNetwork.Runtime(docker), merger)

	glog.Infof("Classic Kubelet starting: node %q, root dir %s, docker %s, sources %v", o.HostnameOverride, o.RootDir, o.DockerEndpoint, sources)
	// On the way out: cancel, then wait for every goroutine, then close.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	goRun := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	goRun(func() { runtimeEvents.Run(ctx) })
	goRun(func() { k.Run(ctx, merger.Updates()) })
	goRun(func() { podNetwork.Run(ctx, docker) }) // detaches CNI sandboxes gone while the agent was down
	goRun(func() { merger.Run(ctx) })             // retries checkpoints that failed

	// Checkpointed snapshots first: what ran before the restart stays as it
	// is while the sources are slow to answer.
	merger.LoadCheckpoints(ctx)

	var apiSource server.PodSource
	if o.Port != 0 {
		apiSource = config.NewAPISource(ctx, o.HostnameOverride, merger)
	}
	// cAdvisor starts in the background, which takes tens of seconds on a
	// busy node (it reads every container's cgroups): the stats endpoints
	// answer 503 until it runs, and for good if it cannot (no cgroups).
	// Pods, sources, the API and node registration do not wait for it.
	stats := cadvisor.New(o.DockerEndpoint, o.HousekeepingInterval, runtimeEvents)
	reg := prometheus.NewRegistry()
	reg.MustRegister(stats.Collectors(o.HostnameOverride)...)
	defer stats.Stop()
	// The etcd lease of the node name, once the sources made one.
	var lease atomic.Pointer[etcdnode.Lease]
	// One pod view for the API and the status writers; the API's streaming
	// goes through the runtime manager, whose runtime is the instrumented one.
	pods := localPods{PodView: server.NewPodView(k.PodSources()), statuses: k.Statuses()}
	deps := server.Deps{Host: serverHost{k: k, rt: k.Runtime()}, View: pods.PodView, DiskUsage: k.DiskUsage(), Runtime: k.Runtime(), Pods: apiSource, Sources: merger, Metrics: m.Registry, ProbeMetrics: m.ProbeRegistry,
		Config: func() any { return o.Configz() }, Stats: stats, CadvisorMetrics: reg, Events: recorder,
		NodeName: func() error {
			if l := lease.Load(); l != nil {
				if _, taken := l.Held(); taken != nil {
					return fmt.Errorf("%w; nothing is written to etcd until the name is free", taken)
				}
			}
			return nil
		}}
	srv := server.New(deps, server.Options{NodeName: o.HostnameOverride, NodeLogDir: o.NodeLogDir, RootDir: o.RootDir, Profiling: o.Profiling,
		Auth: fullAccessAuth(o, nm)})
	fullTLS, err := tlsConfig(o)
	if err != nil {
		return err
	}
	listeners := []struct {
		kind    string
		addr    string
		port    int
		handler http.Handler
		tls     *tls.Config
	}{
		{"full-access API", o.Address, o.Port, srv.Handler(false), fullTLS},
		{"read-only API", o.ReadOnlyAddress, o.ReadOnlyPort, srv.Handler(true), nil},
		{"health check", o.HealthzBindAddress, o.HealthzPort, srv.HealthzHandler(), nil},
	}
	for _, l := range listeners {
		if l.port == 0 {
			continue
		}
		addr := net.JoinHostPort(l.addr, strconv.Itoa(l.port))
		serve, err := server.Serve(ctx, addr, l.handler, l.tls)
		if err != nil {
			return err
		}
		kind := l.kind
		scheme := map[bool]string{true: "https", false: "http"}[l.tls != nil]
		glog.Infof("Serving the %s on %s://%s", kind, scheme, addr)
		goRun(func() {
			if err := serve(); err != nil {
				glog.Errorf("API server on %s: %v", addr, err)
			}
		})
	}

	node := &nodestatus.Builder{Name: o.HostnameOverride, RootDir: o.RootDir, MaxPods: o.MaxPods, HostIP: nodeIP,
		Reserved: alloc.reserved(), Version: Version, Health: k.Health, Pressure: k.Pressure, Network: podNetwork.Ready, RuntimeVersion: func() (string, error) {
			info, err := docker.DaemonInfo()
			return info.Version, err
		}}
	if nm != nil {
		nm.start(ctx, o, merger, pods, recorder, node, podNetwork, goRun)
		glog.Infof("Node mode: joining %s as node %q", nm.server, o.HostnameOverride)
	}
	report := nodeReport{pods: pods, lease: &lease, node: node.Build}
	srcs, err := startSources(ctx, o, merger, recorder, report)
	if err != nil {
		return err
	}
	defer func() { srcs.stop() }()
	// Listeners are up, checkpoints and local manifests loaded: ready.
	// Docker and remote sources are not waited for (/healthz/relist shows
	// whether Docker answers).
	if _, err := systemd.Notify("READY=1"); err != nil {
		glog.Errorf("%v", err)
	}
	if interval := systemd.WatchdogInterval(); interval > 0 {
		goRun(func() { watchdog(ctx, k, interval) })
	}
	for {
		select {
		case <-hup:
			srcs = reload(ctx, o, reparse, k, merger, recorder, report, srcs)
			continue
		case <-ctx.Done():
		}
		break
	}
	_, _ = systemd.Notify("STOPPING=1")
	glog.Infof("Classic Kubelet stopping; containers are left running")
	return nil
}

// watchdog pings the service manager while the sync loop is alive; a stuck
// loop stops the pings and systemd restarts the agent (pods keep running).
func watchdog(ctx context.Context, k *kubelet.Kubelet, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if syncLoop, _ := k.Health(); syncLoop == nil {
				_, _ = systemd.Notify("WATCHDOG=1")
			}
		}
	}
}

// fullAccessAuth is who may use the full-access port: client certificates
// of --client-ca-file, bearer tokens by TokenReview, anonymous requests if
// allowed; authorized by SubjectAccessReview with --authorization-mode=
// Webhook. Nil (open) when nothing is configured: the port is then on
// loopback (Validate refuses it elsewhere).
func fullAccessAuth(o *Options, nm *nodeMode) *server.Auth {
	if o.ClientCAFile == "" && !o.AuthenticationTokenWebhook && !o.AnonymousAuth && o.AuthorizationMode != "Webhook" {
		return nil
	}
	a := &server.Auth{Anonymous: o.AnonymousAuth}
	if o.ClientCAFile != "" {
		a.Authenticators = append(a.Authenticators, kubeapi.ClientCerts{})
	}
	if o.AuthenticationTokenWebhook {
		a.Authenticators = append(a.Authenticators, kubeapi.NewTokenReviews(nm.client, o.AuthenticationTokenWebhookCacheTTL))
	}
	if o.AuthorizationMode == "Webhook" {
		a.Authorizer = kubeapi.NewAccessReviews(nm.client, o.AuthorizationWebhookCacheAuthorizedTTL, o.AuthorizationWebhookCacheUnauthorized)
	}
	return a
}

// tlsConfig is the full-access port's TLS, if configured: HTTPS with the
// given certificate and, with a client CA, client certificates required.
func tlsConfig(o *Options) (*tls.Config, error) {
	if o.TLSCertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSPrivateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file/--tls-private-key-file: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.ClientCAFile != "" {
		pem, err := os.ReadFile(o.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--client-ca-file %s: no certificates", o.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		if o.AuthenticationTokenWebhook || o.AnonymousAuth {
			// A bearer token, or nothing, may stand for a certificate.
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	return cfg, nil
}

// loadKeyring reads registry credentials: --docker-config, else Docker's
// own files in the home directory.
func loadKeyring(path string) (*credentialprovider.Keyring, error) {
	paths := []string{path}
	if path == "" {
		home, _ := os.UserHomeDir()
		paths = []string{filepath.Join(home, ".docker", "config.json"), filepath.Join(home, ".dockercfg")}
	} else if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("--docker-config: %w", err)
	}
	kr, err := credentialprovider.LoadKeyring(paths...)
	if err != nil {
		return nil, fmt.Errorf("registry credentials: %w", err)
	}
	return kr, nil
}

// pauseBinary finds the pause program installed beside the agent
// (classic-kubelet-pause, or pause), from which a classic-kubelet/pause
// infra image (no registry has it) is built on a node that lacks it. Any
// other infra image is the user's to provide.
func pauseBinary(infraImage string) string {
	if !strings.HasPrefix(infraImage, "classic-kubelet/pause:") {
		return ""
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	for _, name := range []string{"classic-kubelet-pause", "pause"} {
		p := filepath.Join(filepath.Dir(exe), name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// serverHost is the agent as the API sees it beyond its pods: the health
// of the Kubelet's loops, and the pod cgroups of its runtime manager.
type serverHost struct {
	k  *kubelet.Kubelet
	rt *kuberuntime.Manager
}

func (h serverHost) Health() (syncLoop, relist error) { return h.k.Health() }
func (h serverHost) PodCgroupPath(pod *v1.Pod) string { return h.rt.PodCgroupPath(pod) }
func (h serverHost) PodsCgroupPath() string           { return h.rt.PodsCgroupPath() }
