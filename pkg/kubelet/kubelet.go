// Package kubelet reconciles the desired pods with Docker: the sync loop
// takes changes from the config merger and the relist, and hands each pod to
// its own worker, which admits it and has the runtime manager
// (kuberuntime) compare its spec with its containers and act.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/diskusage"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/images"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/pleg"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podqueue"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podstatus"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/prober"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/server"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/status"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
	"github.com/classic-kubelet/kubelet/pkg/probe"
)

// Runtime is what the agent needs from the container runtime
// (pkg/dockertools implements it).
type Runtime = kubecontainer.Runtime

// SourcesSeen tells whether a config source has delivered its snapshot: only
// then may its silence about a running pod remove that pod.
type SourcesSeen interface {
	Seen(source string) bool
}

// Config is the part of the agent's options the Kubelet uses.
type Config struct {
	NodeName string
	// Objects reads config maps and secrets and requests tokens for
	// volumes and variables (node mode); nil: none (they fail, named).
	Objects volumes.Objects
	// Sysctls are what pods may set; nil: the safe sysctls alone.
	Sysctls *kuberuntime.SysctlAllowlist
	// Services are the cluster's (node mode), for the containers' service
	// variables; nil: none.
	Services kuberuntime.ServiceLister
	// NodeIP is the pods' host IP (--node-ip, or the default route's).
	NodeIP         string
	RootDir        string
	InfraImage     string
	SyncFrequency  time.Duration
	RelistPeriod   time.Duration
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// Metrics records what the agent does; nil creates a private set.
	Metrics *metrics.Metrics
	// AllowPrivileged lets containers run privileged.
	AllowPrivileged bool
	// SeccompDefault gives containers without a seccompProfile the
	// runtime's default profile (otherwise they run unconfined, as the
	// kubelet's default does).
	SeccompDefault bool
	// ClusterDomain is the domain of pods with a subdomain.
	ClusterDomain string
	// ResolvConf is the resolver configuration of dnsPolicy Default.
	ResolvConf string
	// Network is the pod network (cluster DNS, CNI); nil: Docker's bridge
	// without cluster DNS.
	Network kuberuntime.Network
	// GC bounds the dead containers kept.
	GC gc.Policy
	// ContainerLogDir holds the containers' log symlinks ("" for none).
	ContainerLogDir string
	// LogMaxSize (bytes) and LogMaxFiles bound each container's json-file log.
	LogMaxSize  int64
	LogMaxFiles int
	// Images configures pulls and image GC.
	Images images.Policy
	// Events records what happens to pods (nil: nothing is recorded).
	Events *events.Recorder
	// GCPeriod is how often garbage is collected (default a minute).
	GCPeriod time.Duration
	// DiskUsagePeriod is how often disk usage is measured (default 5
	// minutes).
	DiskUsagePeriod time.Duration
	// PauseBinary, if set, is the pause program the infra image is built
	// from when it is absent (never pulled).
	PauseBinary string
	// Cgroups, if set, puts each pod's containers in a pod cgroup under
	// its QoS class's (--cgroups-per-qos).
	Cgroups kuberuntime.PodCgroups
	// PodMaxPids bounds each pod cgroup's processes (--pod-max-pids); 0
	// or less: unbounded.
	PodMaxPids int64
	// PodsLimits, if set, sizes the cgroup of all pods (kubepods): its cpu
	// (shares), memory and pid amounts (node allocatable).
	PodsLimits v1.ResourceList
	// Eviction configures the eviction manager (no thresholds: off).
	Eviction eviction.Config
	// EvictionNode says where the node's signals are read; its RootDir
	// and ImageFsDir are filled in by the Kubelet.
	EvictionNode eviction.Node
	// Clock times the sync loop, the relist, retries, probes and the
	// status manager; nil: the real clock (tests move a fake one).
	Clock clock.WithTicker
	// RuntimeEvents is the agent's one subscription to the runtime's
	// events, which the relist and the image manager read (its owner runs
	// it); nil: the Kubelet makes one on its runtime and runs it itself.
	RuntimeEvents *runtimeevents.Hub
}

// housekeepingPeriod is how often pods left on the node without a desired
// spec are looked for; the relist also triggers this for changed pods.
const housekeepingPeriod = 2 * time.Second

// defaultGCPeriod is how often dead containers and unused images are
// collected.
const defaultGCPeriod = time.Minute

// Kubelet is the node agent's core: desired pods in, Docker actions out.
type Kubelet struct {
	cfg     Config
	docker  Runtime
	sources SourcesSeen
	cache   *pleg.Cache
	relist  *pleg.Relister
	retries *podqueue.Retries // pods to wake when their back-off ends
	probes  *prober.Manager
	status  *status.Manager
	metrics *metrics.Metrics
	// runtime admits, syncs and kills pods on the container runtime: it
	// decides, makes the create specs and cgroups, and acts.
	runtime *kuberuntime.Manager

	images  *images.Manager
	volumes *volumes.Manager

	logs     *kuberuntime.LogSettings // the containers' log settings (SIGHUP changes them)
	logLinks *kuberuntime.LogLinks

	// producer produces the pods' statuses, which status keeps.
	producer *podstatus.Producer

	// life is Run's context (see lifetime): what outlives the pod sync
	// that starts it (probe workers) stops with it, not with the sync's
	// context, which ends with the sync (or a kill). Atomic: the API may
	// compute a status before Run has set it.
	life atomic.Pointer[context.Context]

	hk atomic.Pointer[Housekeeping] // changeable while running (SIGHUP)

	lastSyncLoop atomic.Int64 // unix nanoseconds of the last sync loop iteration

	desired *desiredSet     // what the config wants here
	dirty   *podqueue.Dirty // pods to sync, from the relist, retries and probes
	// workers walk each pod through its life; each owns its pod's record.
	workers *podWorkers
	// forgetters drop what a cache keeps of a pod, called once when the
	// pod is forgotten.
	forgetters []func(types.UID)

	meter *diskusage.Meter // measures disk usage in the background

	eviction *eviction.Evictor

	ownEvents *runtimeevents.Hub // made by New when Config had none; Run runs it
}

// New returns a Kubelet; Run starts it.
func New(cfg Config, docker Runtime, sources SourcesSeen) *Kubelet {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(cfg.NodeName)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	docker = kuberuntime.NewInstrumentedRuntime(docker, cfg.Metrics) // the only wrap: each call counted once
	k := &Kubelet{
		cfg:     cfg,
		metrics: cfg.Metrics,
		docker:  docker,
		sources: sources,
		cache:   pleg.NewCache(),
		status:  status.NewManager(filepath.Join(cfg.RootDir, "checkpoints", "conditions.json"), cfg.Clock),
		desired: newDesiredSet(),
		dirty:   podqueue.NewDirty(),
		retries: podqueue.NewRetries(cfg.Clock),
	}
	k.hk.Store(&Housekeeping{GC: cfg.GC, ContainerLogDir: cfg.ContainerLogDir, LogMaxSize: cfg.LogMaxSize, LogMaxFiles: cfg.LogMaxFiles})
	k.logs = kuberuntime.NewLogSettings(kuberuntime.ContainerLogs{Dir: cfg.ContainerLogDir, MaxSize: cfg.LogMaxSize, MaxFiles: cfg.LogMaxFiles})
	k.logLinks = kuberuntime.NewLogLinks(k.logs)
	memory := nodeMemory()
	downward := kuberuntime.NewDownward(kuberuntime.DownwardNode{Name: cfg.NodeName, IP: cfg.NodeIP, CPUs: runtime.NumCPU(), Memory: memory, RootDir: cfg.RootDir})
	k.volumes = volumes.NewManager(volumes.Config{RootDir: cfg.RootDir, NodeMemory: memory}, volumes.Deps{Downward: downward, Objects: cfg.Objects})
	k.meter = &diskusage.Meter{Runtime: k.docker, Pods: k.cache, Node: cfg.NodeName, PodDir: k.volumes.PodDir, Period: cfg.DiskUsagePeriod}
	k.metrics.TrackPodState(k.podStateSizes)
	if cfg.RuntimeEvents == nil {
		k.ownEvents = runtimeevents.NewHub(k.docker, cfg.Clock)
		cfg.RuntimeEvents = k.ownEvents
	}
	k.relist = pleg.NewRelister(pleg.Config{Node: cfg.NodeName, Period: cfg.RelistPeriod, Clock: cfg.Clock},
		pleg.Deps{Runtime: k.docker, Hub: cfg.RuntimeEvents, Cache: k.cache, Dirty: k.dirty, Logs: k.logLinks, Metrics: k.metrics})
	if cfg.Images.BackoffInitial <= 0 {
		cfg.Images.BackoffInitial, cfg.Images.BackoffMax = kuberuntime.BackoffBounds(cfg.BackoffInitial, cfg.BackoffMax)
	}
	k.cfg.Images = cfg.Images
	k.images = images.NewManager(images.Config{Policy: cfg.Images, InfraImage: cfg.InfraImage, RecordPath: filepath.Join(cfg.RootDir, "images.json")},
		images.Deps{Runtime: docker, Hub: cfg.RuntimeEvents, Retries: k.retries, Events: cfg.Events})
	k.probes = prober.NewManager(docker, k.dirty.MarkPod,
		func(t prober.Target, typ prober.Type, r probe.Result, out string, took time.Duration) {
			ns, name, _ := strings.Cut(t.PodKey, "/")
			k.metrics.ObserveProbe(typ.Title(), r != probe.Failure, t.Container.Name, name, ns, t.PodUID, took)
			ref := events.Ref{Namespace: ns, Name: name, UID: t.PodUID, FieldPath: "spec.containers{" + t.Container.Name + "}"}
			switch r {
			case probe.Failure:
				cfg.Events.Event(ref, true, "Unhealthy", "%s probe failed: %s", typ.Title(), probe.Truncate(out))
			case probe.Warning:
				cfg.Events.Event(ref, true, "ProbeWarning", "%s probe warning: %s", typ.Title(), probe.Truncate(out))
			}
		}, cfg.Clock)
	k.runtime = kuberuntime.NewManager(kuberuntime.Config{
		NodeName: cfg.NodeName, NodeIP: cfg.NodeIP, NodeMemory: memory,
		RootDir: cfg.RootDir, InfraImage: cfg.InfraImage, PauseBinary: cfg.PauseBinary, ClusterDomain: cfg.ClusterDomain,
		ResolvConf: cfg.ResolvConf, AllowPrivileged: cfg.AllowPrivileged, SeccompDefault: cfg.SeccompDefault,
		Sysctls: cfg.Sysctls, Services: cfg.Services, Objects: cfg.Objects, Cgroups: cfg.Cgroups,
		PodMaxPids: cfg.PodMaxPids, PodsLimits: cfg.PodsLimits, Events: cfg.Events, Metrics: k.metrics,
		BackoffInitial: cfg.BackoffInitial, BackoffMax: cfg.BackoffMax, Clock: cfg.Clock,
	}, kuberuntime.Deps{Runtime: docker, Volumes: k.volumes, Images: k.images, Probes: k.probes, Relist: k.relist, Network: cfg.Network,
		Downward: downward, Logs: k.logs, LogLinks: k.logLinks})
	k.workers = newPodWorkers(k, func() *podRecord { return newPodRecord(cfg.Clock.Now(), k.runtime.NewPodRecord()) })
	k.metrics.TrackWorkingPods(k.workers.WorkingPods)
	k.forgetters = []func(types.UID){k.retries.Forget, k.images.ForgetPod, k.status.Forget, k.volumes.Forget, k.probes.RemovePod}
	k.producer = podstatus.New(podstatus.Config{HostIP: cfg.NodeIP, PodDir: k.volumes.PodDir, Records: statusRecords{k.workers},
		Statuses: k.status, Probes: k.probes, Logs: k.runtime, Metrics: k.metrics, Clock: cfg.Clock})
	k.eviction = newEvictor(k)
	return k
}

// lifetime is Run's context, or the background before Run.
func (k *Kubelet) lifetime() context.Context {
	if ctx := k.life.Load(); ctx != nil {
		return *ctx
	}
	return context.Background()
}

// DiskUsage is the background measurement of what the pods hold on disk,
// which Run runs; the API serves its last result.
func (k *Kubelet) DiskUsage() *diskusage.Meter { return k.meter }

// Run reconciles until ctx is cancelled, then waits for its goroutines. It
// never touches containers on the way out: pods keep running.
func (k *Kubelet) Run(ctx context.Context, updates <-chan api.PodUpdate) {
	k.life.Store(&ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	if k.ownEvents != nil {
		wg.Go(func() { k.ownEvents.Run(ctx) })
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.relist.Run(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.status.Run(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.retries.Run(ctx, k.dirty.Mark)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.images.Run(ctx)
	}()
	k.workers.Start(ctx)
	defer k.workers.Wait()
	defer k.probes.Wait()

	syncTicker := k.cfg.Clock.NewTicker(k.cfg.SyncFrequency)
	defer syncTicker.Stop()
	housekeeping := k.cfg.Clock.NewTicker(housekeepingPeriod)
	defer housekeeping.Stop()
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.runGC(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.meter.Run(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.eviction.Run(ctx)
	}()
	for k.syncLoopIteration(ctx, updates, k.dirty.Ready(), syncTicker.C(), housekeeping.C()) {
	}
}

// syncLoopIteration waits for one of:
//   - updates: a change to the desired pods, handed to their workers;
//   - dirty: the relist saw containers of some pods change (or a back-off
//     ended); their workers take their step again, and pods found on the
//     node without a spec are terminated if their source has spoken;
//   - syncTick: the periodic resync of every pod's worker (from the cache:
//     no Docker calls when nothing changed);
//   - housekeeping: pods left on the node that nothing desires are
//     terminated.
//
// It returns false when ctx is done.
func (k *Kubelet) syncLoopIteration(ctx context.Context, updates <-chan api.PodUpdate,
	dirty <-chan struct{}, syncTick, housekeeping <-chan time.Time) bool {
	k.lastSyncLoop.Store(k.cfg.Clock.Now().UnixNano())
	var start time.Time
	defer func() {
		if !start.IsZero() {
			k.metrics.SyncLoopDuration.Observe(k.cfg.Clock.Since(start).Seconds())
		}
	}()
	select {
	case <-ctx.Done():
		return false
	case u, ok := <-updates:
		if !ok {
			glog.Errorf("Config updates closed; no more pod changes will be seen")
			return false
		}
		start = k.cfg.Clock.Now()
		k.handleUpdate(u)
	case <-dirty:
		start = k.cfg.Clock.Now()
		for _, uid := range k.dirty.Take() {
			k.dispatch(uid)
		}
	case <-syncTick:
		start = k.cfg.Clock.Now()
		for _, pod := range k.desired.all() {
			k.workers.UpdatePod(pod)
		}
		k.workers.SyncUndesired()
	case <-housekeeping:
		start = k.cfg.Clock.Now()
		k.runtime.UpdateQoSCgroups(k.desired.all())
		k.workers.PruneForgotten(k.cache.LastUpdate())
		for uid := range k.cache.All() {
			if k.desired.get(uid) == nil && !k.workers.Known(uid) {
				k.dispatch(uid)
			}
		}
	}
	return true
}

func (k *Kubelet) handleUpdate(u api.PodUpdate) {
	for _, pod := range u.Pods {
		glog.Infof("%s pod %s (uid %s)", u.Op, api.Key(pod), pod.UID)
		if u.Op == api.REMOVE {
			k.desired.remove(pod.UID)
			k.workers.RemovePod(pod.UID)
			continue
		}
		k.desired.set(pod)
		if k.workers.UpdatePod(pod) {
			k.metrics.RestartedPods.WithLabelValues("true").Inc() // every pod here is static: none comes from an API server
		}
	}
}

// dispatch has a pod's worker take its step again, or terminates a pod
// found on the node without a spec once its source has delivered a
// snapshot without it. Pods of a source that has not spoken yet
// (unreachable since the agent started) are left running.
func (k *Kubelet) dispatch(uid types.UID) {
	if pod := k.desired.get(uid); pod != nil {
		k.workers.UpdatePod(pod)
		return
	}
	if k.workers.Known(uid) {
		k.workers.Sync(uid)
		return
	}
	state := k.cache.Get(uid)
	if state == nil || k.workers.Forgotten(uid, k.cache.LastUpdate()) || !k.sources.Seen(podSource(state)) {
		return
	}
	k.workers.Terminate(uid, lifecycle.Termination{Cause: lifecycle.Orphaned, Grace: kuberuntime.LabelGrace(state)})
}

// podSource is the source recorded on the pod's containers.
func podSource(state *kubecontainer.PodState) string {
	for _, c := range state.Containers {
		if s := c.Labels[kubecontainer.LabelSource]; s != "" {
			return s
		}
	}
	return ""
}

// isStatic reports whether the pod comes from a source of the node's own
// (a file, a URL, the agent's API, etcd), not from an API server.
func isStatic(pod *v1.Pod) bool {
	return pod.Annotations[api.ConfigSourceAnnotation] != api.SourceAPIServer
}

// runGC collects garbage every gcPeriod until ctx is cancelled. It runs
// beside the sync loop: removing a dead container never waits on a pod.
func (k *Kubelet) runGC(ctx context.Context) {
	period := k.cfg.GCPeriod
	if period <= 0 {
		period = defaultGCPeriod
	}
	every(ctx, k.cfg.Clock, period, k.garbageCollect)
}

// every runs f each period (the first time a period from now) until ctx
// ends: what runs beside the sync loop on a fixed period.
func every(ctx context.Context, clk clock.WithTicker, period time.Duration, f func(context.Context)) {
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			f(ctx)
		}
	}
}

// Health reports whether the sync loop and the relist completed recently.
func (k *Kubelet) Health() (syncLoop, relist error) {
	lastSyncLoop := time.Unix(0, k.lastSyncLoop.Load())
	if since := k.cfg.Clock.Since(lastSyncLoop); since > syncLoopHealthThreshold {
		syncLoop = fmt.Errorf("sync loop last ran %v ago", since.Round(time.Second))
	}
	threshold := max(relistHealthMin, 5*k.relist.Period())
	last := k.cache.LastUpdate() // when the last successful relist started
	switch since := k.cfg.Clock.Since(last); {
	case last.IsZero():
		relist = errors.New("no relist has completed yet (is Docker reachable?)")
	case since > threshold:
		relist = fmt.Errorf("last relist completed %v ago (is Docker reachable?)", since.Round(time.Second))
	}
	return syncLoop, relist
}

const (
	// syncLoopHealthThreshold: the sync loop wakes at least every
	// housekeeping period; much longer means it is stuck.
	syncLoopHealthThreshold = 10 * housekeepingPeriod
	// relistHealthMin is the shortest time without a relist that counts as
	// unhealthy (a relist period of 1 s makes it 5 s while Docker's event
	// stream is down, 25 s while it flows and the relist is stretched).
	relistHealthMin = 5 * time.Second
)

// PodSources are the parts of the Kubelet the API's pod view reads (see
// server.PodView): the desired pods, the statuses their workers produced,
// the relist's cache and a relist on demand. A pod whose worker has not
// synced yet gets a status computed on the spot, under Run's context.
func (k *Kubelet) PodSources() server.PodSources {
	return server.PodSources{Desired: desiredPods{k.desired}, Statuses: k.status, Cache: k.cache, Relist: k.relist,
		Fallback: func(p *v1.Pod) v1.PodStatus { return k.producer.Status(k.lifetime(), p, k.cache.Get(p.UID)) }}
}

// desiredPods is the desired set as the pod view reads it.
type desiredPods struct{ d *desiredSet }

func (p desiredPods) All() []*v1.Pod { return p.d.all() }

// Runtime is the runtime manager the Kubelet syncs pods through; the API
// reads the pod cgroups from it and reaches containers (logs, exec, attach,
// port-forward) through it.
func (k *Kubelet) Runtime() *kuberuntime.Manager { return k.runtime }

// Statuses is the store of the pods' produced statuses, whose change
// notifications the status writers (etcd, the API server) wait on.
func (k *Kubelet) Statuses() *status.Manager { return k.status }

// nodeMemory is the node's total memory in bytes.
func nodeMemory() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// Housekeeping are the settings a running agent can change (on SIGHUP):
// garbage collection and container logs.
type Housekeeping struct {
	GC              gc.Policy
	ContainerLogDir string
	LogMaxSize      int64
	LogMaxFiles     int
}

// SetHousekeeping applies new housekeeping settings from now on.
func (k *Kubelet) SetHousekeeping(h Housekeeping) {
	k.hk.Store(&h)
	k.logs.Set(kuberuntime.ContainerLogs{Dir: h.ContainerLogDir, MaxSize: h.LogMaxSize, MaxFiles: h.LogMaxFiles})
}

func (k *Kubelet) housekeeping() Housekeeping {
	return *k.hk.Load()
}
