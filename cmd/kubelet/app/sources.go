package app

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/config"
	"github.com/classic-kubelet/kubelet/pkg/etcdnode"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
)

// configuredSources names the sources o enables.
func configuredSources(o *Options) []string {
	var s []string
	if o.PodManifestPath != "" {
		s = append(s, api.SourceFile)
	}
	if o.ManifestURL != "" {
		s = append(s, api.SourceHTTP)
	}
	if len(o.EtcdServers) > 0 {
		s = append(s, api.SourceEtcd)
	}
	if o.Port != 0 {
		s = append(s, api.SourceAPI)
	}
	if o.Kubeconfig != "" {
		s = append(s, api.SourceAPIServer)
	}
	return s
}

// sourceSet runs the file, URL and etcd sources (and the etcd event writer)
// of one set of options; a reload stops it and starts another.
type sourceSet struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// nodeReport is what the agent writes about its node to etcd.
type nodeReport struct {
	pods  etcdnode.PodSource
	node  func() *v1.Node
	lease *atomic.Pointer[etcdnode.Lease] // set to the sources' lease (nil without etcd)
}

// podStatusPeriod is how often pod statuses are written to etcd: at most
// one write per pod per period.
const podStatusPeriod = time.Second

func startSources(ctx context.Context, o *Options, merger *config.Merger, recorder *events.Recorder, report nodeReport) (*sourceSet, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &sourceSet{cancel: cancel}
	report.lease.Store(nil)
	run := func(f func()) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			f()
		}()
	}
	if len(o.EtcdServers) > 0 {
		etcd, err := config.NewEtcdClient(o.EtcdServers, config.EtcdTLS{CAFile: o.EtcdCAFile, CertFile: o.EtcdCertFile, KeyFile: o.EtcdKeyFile})
		if err != nil {
			cancel()
			return nil, err
		}
		lease, err := claimNodeName(ctx, etcd, o)
		if err != nil {
			etcd.Close()
			cancel()
			return nil, err
		}
		report.lease.Store(lease)
		src := config.NewEtcdSource(etcd, config.EtcdKey(o.EtcdPrefix, o.HostnameOverride), o.HostnameOverride, o.EtcdResyncPeriod, merger)
		workers := []func(context.Context){
			src.Run,
			recorder.EtcdWriter(etcd, o.EventTTL),
			lease.Run,
			etcdnode.NewNodeWriter(etcd, lease, o.EtcdPrefix, o.HostnameOverride, report.node, o.NodeLeaseRenewInterval).Run,
			etcdnode.NewPodWriter(etcd, lease, o.EtcdPrefix, o.HostnameOverride, report.pods, podStatusPeriod).Run,
		}
		var inner sync.WaitGroup
		for _, w := range workers {
			inner.Add(1)
			go func() { defer inner.Done(); w(ctx) }()
		}
		run(func() { inner.Wait(); etcd.Close() })
	}
	if o.ManifestURL != "" {
		header, _ := config.ParseHeaders(o.ManifestURLHeader) // validated
		src := config.NewURLSource(o.ManifestURL, header, o.HostnameOverride, o.HTTPCheckFrequency, merger)
		run(func() { src.Run(ctx) })
	}
	if o.PodManifestPath != "" {
		src := config.NewFileSource(o.PodManifestPath, o.HostnameOverride, o.FileCheckFrequency, merger)
		run(func() { src.Run(ctx) })
		select { // ready means the local manifests are read, not merely watched
		case <-src.FirstRead():
		case <-ctx.Done():
		}
	}
	return s, nil
}

// claimNodeName takes the node's lease key in etcd. A name another live
// agent holds refuses the start; an etcd that does not answer does not:
// the lease is claimed in the background once it does.
func claimNodeName(ctx context.Context, etcd *clientv3.Client, o *Options) (*etcdnode.Lease, error) {
	holder, err := etcdnode.NewHolder(o.RootDir)
	if err != nil {
		return nil, err
	}
	lease := etcdnode.NewLease(etcd, o.EtcdPrefix, o.HostnameOverride, holder, o.NodeLeaseDuration, o.NodeLeaseRenewInterval)
	cctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	err = lease.Claim(cctx)
	var taken *etcdnode.TakenError
	switch {
	case errors.As(err, &taken):
		return nil, err
	case err != nil:
		klog.Warningf("etcd: %v; the node name will be claimed once etcd answers", err)
	default:
		klog.Infof("Holding node name %q in etcd (lease %v)", o.HostnameOverride, o.NodeLeaseDuration)
	}
	return lease, nil
}

// claimTimeout bounds the wait for etcd at start.
const claimTimeout = 5 * time.Second

// stop stops the sources and waits for them.
func (s *sourceSet) stop() {
	s.cancel()
	s.wg.Wait()
}

// housekeepingSettings are the settings a SIGHUP applies to the running
// Kubelet (-v is applied by reloadLogging).
var housekeepingSettings = map[string]bool{
	"minimum-container-ttl-duration": true, "maximum-dead-containers-per-container": true, "maximum-dead-containers": true,
	"container-log-max-size": true, "container-log-max-files": true, "container-log-dir": true, "pod-logs-dir": true,
}

// sourceSettings are the settings a SIGHUP applies by restarting the sources.
var sourceSettings = map[string]bool{
	"pod-manifest-path": true, "file-check-frequency": true, "manifest-url": true, "manifest-url-header": true,
	"http-check-frequency": true, "etcd-servers": true, "etcd-cafile": true, "etcd-certfile": true, "etcd-keyfile": true,
	"etcd-prefix": true, "etcd-resync-period": true, "node-lease-duration": true, "node-lease-renew-interval": true, "event-ttl": true,
}

// changedSettings names (by their yaml tags, the long flag names) the
// settings that differ between two option sets.
func changedSettings(a, b *Options) []string {
	va, vb := reflect.ValueOf(*a), reflect.ValueOf(*b)
	var out []string
	for i := 0; i < va.NumField(); i++ {
		name := strings.Split(va.Type().Field(i).Tag.Get("yaml"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			out = append(out, name)
		}
	}
	return out
}

// reload re-reads the settings (on SIGHUP) and applies what it can live.
// It returns the source set now running.
func reload(ctx context.Context, o *Options, reparse func() (*Options, error), a *agent, report nodeReport, srcs *sourceSet) *sourceSet {
	n, err := reparse()
	if err != nil {
		klog.Errorf("SIGHUP: settings not reloaded: %v", err)
		return srcs
	}
	changed := changedSettings(o, n)
	restartSources := false
	var needRestart []string
	for _, name := range changed {
		switch {
		case sourceSettings[name]:
			restartSources = true
		case !housekeepingSettings[name]:
			needRestart = append(needRestart, "--"+name)
		}
	}
	if reloadLogging(o.Logging, n.Logging) {
		needRestart = append(needRestart, "the logging options (--logging-format, --vmodule, ...)")
	}
	// The graceful node shutdown's fields have no flag (nor key) to be
	// named by; they too need a restart.
	if o.ShutdownGracePeriod != n.ShutdownGracePeriod || o.ShutdownGracePeriodCriticalPods != n.ShutdownGracePeriodCriticalPods ||
		!reflect.DeepEqual(o.ShutdownTable, n.ShutdownTable) {
		needRestart = append(needRestart, "KubeletConfiguration shutdownGracePeriod*")
	}
	a.gc.Set(gcPolicy(n))
	a.logs.Set(containerLogs(n))
	if restartSources {
		srcs.stop()
		a.merger.SetConfigured(configuredSources(n)...)
		next, err := startSources(ctx, n, a.merger, a.recorder, report)
		if err != nil {
			klog.Errorf("SIGHUP: sources: %v; running the previous ones", err)
			next, _ = startSources(ctx, o, a.merger, a.recorder, report)
			a.merger.SetConfigured(configuredSources(o)...)
		} else {
			copySourceSettings(o, n)
		}
		srcs = next
	}
	copyHousekeeping(o, n)
	klog.Infof("SIGHUP: settings reloaded (changed: %v)", changed)
	if len(needRestart) > 0 {
		klog.Warningf("SIGHUP: %s changed; a restart is needed for them to apply", strings.Join(needRestart, ", "))
	}
	return srcs
}

func copySourceSettings(o, n *Options) {
	o.PodManifestPath, o.FileCheckFrequency = n.PodManifestPath, n.FileCheckFrequency
	o.ManifestURL, o.ManifestURLHeader, o.HTTPCheckFrequency = n.ManifestURL, n.ManifestURLHeader, n.HTTPCheckFrequency
	o.EtcdServers, o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = n.EtcdServers, n.EtcdCAFile, n.EtcdCertFile, n.EtcdKeyFile
	o.EtcdPrefix, o.EtcdResyncPeriod = n.EtcdPrefix, n.EtcdResyncPeriod
	o.NodeLeaseDuration, o.NodeLeaseRenewInterval, o.EventTTL = n.NodeLeaseDuration, n.NodeLeaseRenewInterval, n.EventTTL
}

func copyHousekeeping(o, n *Options) {
	o.MinimumContainerTTLDuration, o.MaximumDeadContainersPerContainer = n.MinimumContainerTTLDuration, n.MaximumDeadContainersPerContainer
	o.MaximumDeadContainers, o.ContainerLogMaxSize = n.MaximumDeadContainers, n.ContainerLogMaxSize
	o.ContainerLogMaxFiles, o.ContainerLogDir, o.PodLogsDir = n.ContainerLogMaxFiles, n.ContainerLogDir, n.PodLogsDir
}
