package app

import (
	"context"
	"crypto/tls"
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

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/config"
	"github.com/classic-kubelet/kubelet/pkg/credentialprovider"
	"github.com/classic-kubelet/kubelet/pkg/etcdnode"
	"github.com/classic-kubelet/kubelet/pkg/kubeapi"
	"github.com/classic-kubelet/kubelet/pkg/kubelet"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/cadvisor"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podresources"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/server"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
	"github.com/classic-kubelet/kubelet/pkg/systemd"
)

// Run runs the agent until ctx is cancelled. It returns once every goroutine
// it started has stopped; containers are left running.
//
// On each value from hup it re-reads its settings with reparse (the same
// command line and --kubelet-config file): sources, -v, garbage collection
// and log settings apply at once; anything else is logged as needing a
// restart.
func Run(ctx context.Context, o *Options, hup <-chan os.Signal, reparse func() (*Options, error)) error {
	lock, err := lockNode(o.HostnameOverride, o.RootDir)
	if err != nil {
		return err
	}
	defer lock.release()
	if err := os.MkdirAll(o.RootDir, 0o755); err != nil {
		return fmt.Errorf("root dir: %w", err)
	}
	// As the kubelet: a pod's volumes (and a CSI node plugin's hostPath of
	// the root dir) can then be mounted Bidirectional. Unlike the kubelet,
	// a failure (no CAP_SYS_ADMIN) is no reason not to run the pods that
	// do not ask for it: theirs is a clear error at container create.
	if err := volumes.MakeRShared(o.RootDir); err != nil {
		klog.Warningf("Root dir %s is not a shared mount (Bidirectional and HostToContainer mounts of pod volumes will be refused): %v", o.RootDir, err)
	}
	for _, w := range o.Warnings {
		klog.Warningf("%s", w)
	}
	a, err := newAgent(o)
	if err != nil {
		return err
	}
	klog.Infof("Classic Kubelet starting: node %q, root dir %s, docker %s, sources %v", o.HostnameOverride, o.RootDir, o.DockerEndpoint, a.sources)
	// On the way out: cancel, then wait for every goroutine, then close.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a.start(ctx, wg.Go)
	// cAdvisor starts in the background, which takes tens of seconds on a
	// busy node (it reads every container's cgroups): the stats endpoints
	// answer 503 until it runs, and for good if it cannot (no cgroups).
	// Pods, sources, the API and node registration do not wait for it.
	stats := cadvisor.New(o.DockerEndpoint, o.HousekeepingInterval, a.hub)
	defer stats.Stop()
	// The etcd lease of the node name, once the sources made one.
	var lease atomic.Pointer[etcdnode.Lease]
	if err := a.serve(ctx, o, stats, &lease, wg.Go); err != nil {
		return err
	}
	if err := a.serveSockets(ctx, o, wg.Go); err != nil {
		return err
	}
	if a.nm != nil {
		a.nm.start(ctx, o, a.merger, a.pods, a.recorder, a.node, a.network, wg.Go)
		klog.Infof("Node mode: joining %s as node %q", a.nm.server, o.HostnameOverride)
	}
	report := nodeReport{pods: a.pods, lease: &lease, node: a.node.Build}
	srcs, err := startSources(ctx, o, a.merger, a.recorder, report)
	if err != nil {
		return err
	}
	defer func() { srcs.stop() }()
	// Listeners are up, checkpoints and local manifests loaded: ready.
	// Docker and remote sources are not waited for (/healthz/relist shows
	// whether Docker answers).
	if _, err := systemd.Notify("READY=1"); err != nil {
		klog.Errorf("%v", err)
	}
	if interval := systemd.WatchdogInterval(); interval > 0 {
		wg.Go(func() { watchdog(ctx, a.kubelet, interval) })
	}
	for {
		select {
		case <-hup:
			srcs = reload(ctx, o, reparse, a, report, srcs)
			continue
		case <-ctx.Done():
		}
		break
	}
	_, _ = systemd.Notify("STOPPING=1")
	klog.Infof("Classic Kubelet stopping; containers are left running")
	return nil
}

// start runs the parts that need no listener until ctx ends: the event hub,
// the Kubelet, the pod network's clean-up, the merger's checkpoint retries,
// the disk meter; then loads the checkpointed snapshots, so that what ran
// before a restart stays as it is while the sources are slow to answer.
func (a *agent) start(ctx context.Context, goRun func(func())) {
	goRun(func() { a.hub.Run(ctx) })
	goRun(func() { a.kubelet.Run(ctx, a.merger.Updates()) })
	goRun(func() { a.network.Run(ctx, a.docker) }) // detaches CNI sandboxes gone while the agent was down
	goRun(func() { a.merger.Run(ctx) })            // retries checkpoints that failed
	goRun(func() { a.meter.Run(ctx) })
	a.merger.LoadCheckpoints(ctx)
}

// serve starts the HTTP API's listeners (full-access, read-only, health
// check), each serving until ctx ends.
func (a *agent) serve(ctx context.Context, o *Options, stats *cadvisor.Client, lease *atomic.Pointer[etcdnode.Lease], goRun func(func())) error {
	var apiSource server.PodSource
	if o.Port != 0 {
		apiSource = config.NewAPISource(ctx, o.HostnameOverride, a.merger)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(stats.Collectors(o.HostnameOverride)...)
	// The API's streaming goes through the runtime manager, whose runtime
	// is the instrumented one.
	deps := server.Deps{Host: serverHost{k: a.kubelet, rt: a.runtime}, View: a.pods.PodView, DiskUsage: a.meter, Runtime: a.runtime,
		Pods: apiSource, Sources: a.merger, Metrics: a.metrics.Registry, ProbeMetrics: a.metrics.ProbeRegistry,
		Config: func() any { return o.Configz() }, Stats: stats, CadvisorMetrics: reg, Events: a.recorder, Claims: a.volumes,
		NodeName: func() error {
			if l := lease.Load(); l != nil {
				if _, taken := l.Held(); taken != nil {
					return fmt.Errorf("%w; nothing is written to etcd until the name is free", taken)
				}
			}
			return nil
		}}
	srv := server.New(deps, server.Options{NodeName: o.HostnameOverride, NodeLogDir: o.NodeLogDir, RootDir: o.RootDir, Profiling: o.Profiling,
		Auth: fullAccessAuth(o, a.nm)})
	fullTLS, err := a.servingTLS(ctx, o, goRun)
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
		scheme := map[bool]string{true: "https", false: "http"}[l.tls != nil]
		klog.Infof("Serving the %s on %s://%s", l.kind, scheme, addr)
		goRun(func() {
			if err := serve(); err != nil {
				klog.Errorf("API server on %s: %v", addr, err)
			}
		})
	}
	return nil
}

// serveSockets serves the kubelet's node-local gRPC sockets until ctx
// ends: the device-plugin registration (<root-dir>/device-plugins/
// kubelet.sock) and the pod-resources API (<root-dir>/pod-resources/
// kubelet.sock); and it watches <root-dir>/plugins_registry for CSI
// plugins' registration sockets.
func (a *agent) serveSockets(ctx context.Context, o *Options, goRun func(func())) error {
	dl, err := a.devices.Listen()
	if err != nil {
		return err
	}
	pl, err := podresources.Listen(filepath.Join(o.RootDir, "pod-resources"))
	if err != nil {
		_ = dl.Close()
		return err
	}
	goRun(func() { a.devices.Run(ctx, dl) })
	goRun(func() {
		if err := a.csi.Run(ctx); err != nil {
			klog.Errorf("CSI plugin registration: %v", err)
		}
	})
	goRun(func() { podresources.Serve(ctx, pl, podresources.NewServer(a.kubelet, a.devices)) })
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
