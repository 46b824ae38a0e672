// Package kubelet reconciles the desired pods with Docker: the sync loop
// takes changes from the config merger and the relist, and hands each pod to
// its own worker, which compares the pod's spec with its containers and acts.
package kubelet

import (
	"context"
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

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/images"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/pleg"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/prober"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/status"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
	"github.com/classic-kubelet/kubelet/pkg/probe"
	probehttp "github.com/classic-kubelet/kubelet/pkg/probe/http"
)

// Runtime is what the agent needs from the container runtime.
type Runtime = kubecontainer.Runtime

var _ Runtime = (*dockertools.Client)(nil)

// SourcesSeen tells whether a config source has delivered its snapshot: only
// then may its silence about a running pod remove that pod.
type SourcesSeen interface {
	Seen(source string) bool
}

// Config is the part of the agent's options the Kubelet uses.
type Config struct {
	NodeName       string
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
	Cgroups PodCgroups
}

// housekeepingPeriod is how often pods left on the node without a desired
// spec are looked for; the relist also triggers this for changed pods.
const housekeepingPeriod = 2 * time.Second

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

// defaultGCPeriod is how often dead containers and unused images are
// collected.
const defaultGCPeriod = time.Minute

// Kubelet is the node agent's core: desired pods in, Docker actions out.
type Kubelet struct {
	cfg      Config
	docker   Runtime
	sources  SourcesSeen
	cache    *pleg.Cache
	relist   *pleg.Relister
	retries  *retryQueue // pods to wake when their back-off ends
	backoff  *backoff
	probes   *prober.Manager
	hookHTTP *probehttp.Prober
	status   *status.Manager
	hostIP   string
	metrics  *metrics.Metrics

	nodeCPUs   int       // capacity: a missing CPU limit in the downward API
	nodeMemory int64     // bytes: a missing memory limit; Memory emptyDir default size
	oomFloor   int       // the lowest oom_score_adj this host lets containers have
	lastQoS    qosShares // the QoS cgroups' shares last written; owned by Run

	images  *images.Manager
	volumes *volumes.Manager

	// starts bounds the container creations and starts in flight across all
	// pods: the daemon serializes much of that work, and a burst of pods
	// contending for it finishes later than the same pods taken a few at a
	// time (measured with make bench on two cores).
	starts *startSlots
	// life is Run's context: what outlives the pod sync that starts it
	// (probe workers) stops with it, not with the sync's context, which
	// ends with the sync (or a kill).
	life context.Context

	hk atomic.Pointer[Housekeeping] // changeable while running (SIGHUP)

	lastSyncLoop atomic.Int64 // unix nanoseconds of the last sync loop iteration

	desired *desiredSet                // what the config wants here
	dirty   *dirtySet                  // pods to sync, from the relist, retries and probes
	records *podRecords                // what is remembered of each pod between syncs
	workers atomic.Pointer[podWorkers] // set by Run, for podStateSizes

	appArmor func() bool // whether the host enforces AppArmor; replaced in tests

	disk atomic.Pointer[DiskStats] // the last disk usage measurement
}

// New returns a Kubelet; Run starts it.
func New(cfg Config, docker Runtime, sources SourcesSeen) *Kubelet {
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(cfg.NodeName)
	}
	if cfg.ClusterDomain == "" {
		cfg.ClusterDomain = "cluster.local"
	}
	if cfg.ResolvConf == "" {
		cfg.ResolvConf = defaultResolvConf
	}
	docker = instrumentedRuntime{r: docker, m: cfg.Metrics}
	oomFloor := oomScoreFloor()
	if oomFloor > infraOOMScoreAdj {
		glog.Warningf("This host does not let processes lower their oom_score_adj (no CAP_SYS_RESOURCE): Guaranteed, node-critical and infra containers get %d instead of the kubelet's -997/-998", oomFloor)
	}
	k := &Kubelet{
		cfg:        cfg,
		metrics:    cfg.Metrics,
		docker:     docker,
		sources:    sources,
		cache:      pleg.NewCache(),
		backoff:    newBackoff(cfg.BackoffInitial, cfg.BackoffMax),
		hookHTTP:   probehttp.New(),
		hostIP:     nodeIP(),
		nodeCPUs:   runtime.NumCPU(),
		nodeMemory: nodeMemory(),
		oomFloor:   oomFloor,
		status:     status.NewManager(filepath.Join(cfg.RootDir, "checkpoints", "conditions.json")),
		desired:    newDesiredSet(),
		dirty:      newDirtySet(),
		starts:     newStartSlots(maxParallelStarts),
		life:       context.Background(), // until Run
		retries:    newRetryQueue(),
		records:    newPodRecords(),
		appArmor:   appArmorEnabled,
	}
	k.hk.Store(&Housekeeping{GC: cfg.GC, ContainerLogDir: cfg.ContainerLogDir, LogMaxSize: cfg.LogMaxSize, LogMaxFiles: cfg.LogMaxFiles})
	k.volumes = &volumes.Manager{RootDir: cfg.RootDir, NodeMemory: k.nodeMemory, Downward: downwardValues{k}}
	k.metrics.TrackPodState(k.podStateSizes)
	k.relist = pleg.NewRelister(k.docker, cfg.NodeName, cfg.RelistPeriod, k.cache, k.dirty.mark)
	k.relist.Metrics = k.metrics
	// Log links are made from the relist's inspect rather than one of
	// their own on the start path; a restarted agent remakes them all.
	k.relist.OnLogPath = func(c *kubecontainer.ContainerState) {
		if c.Name != infraName {
			k.logLinks().create(c.Labels[dockertools.LabelPodName], c.Labels[dockertools.LabelPodNamespace], c.Name, c.ID, c.LogPath)
		}
	}
	if cfg.Images.BackoffInitial <= 0 {
		cfg.Images.BackoffInitial, cfg.Images.BackoffMax = k.backoff.initial, k.backoff.max
	}
	k.cfg.Images = cfg.Images
	k.images = images.NewManager(docker, cfg.Images, cfg.InfraImage, filepath.Join(cfg.RootDir, "images.json"))
	k.images.Events = func(pod *v1.Pod, container, reason, msg string, warning bool) {
		cfg.Events.Event(events.PodRef(pod, container), warning, reason, "%s", msg)
	}
	k.images.Retry = k.retries.add
	k.images.Pulled = k.records.addPulling
	k.probes = prober.NewManager(docker, func(uid types.UID) { k.dirty.mark([]types.UID{uid}) },
		func(t prober.Target, typ prober.Type, r probe.Result, out string, took time.Duration) {
			ns, name, _ := strings.Cut(t.PodKey, "/")
			k.metrics.ObserveProbe(typ.Title(), r == probe.Success, t.Container.Name, name, ns, t.PodUID, took)
			if r == probe.Failure {
				cfg.Events.Event(events.Ref{Namespace: ns, Name: name, UID: t.PodUID, FieldPath: "spec.containers{" + t.Container.Name + "}"},
					true, "Unhealthy", "%s probe failed: %s", typ.Title(), probe.Truncate(out))
			}
		})
	return k
}

// Run reconciles until ctx is cancelled, then waits for its goroutines. It
// never touches containers on the way out: pods keep running.
func (k *Kubelet) Run(ctx context.Context, updates <-chan api.PodUpdate) {
	k.life = ctx
	var wg sync.WaitGroup
	defer wg.Wait()
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
		k.retries.run(ctx, k.dirty.mark)
	}()
	workers := newPodWorkers(ctx, k.syncPodWork)
	k.workers.Store(workers)
	defer workers.Wait()
	defer k.probes.Wait()

	syncTicker := time.NewTicker(k.cfg.SyncFrequency)
	defer syncTicker.Stop()
	housekeeping := time.NewTicker(housekeepingPeriod)
	defer housekeeping.Stop()
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.runGC(ctx)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.runDiskUsage(ctx)
	}()
	for k.syncLoopIteration(ctx, workers, updates, k.dirty.ch, syncTicker.C, housekeeping.C) {
	}
}

// syncLoopIteration waits for one of:
//   - updates: a change to the desired pods, handed to their workers;
//   - dirty: the relist saw containers of some pods change; desired ones are
//     synced, others are killed if their source has spoken;
//   - syncTick: the periodic resync of every desired pod (from the cache:
//     no Docker calls when nothing changed);
//   - housekeeping: pods left on the node that nothing desires are killed.
//
// It returns false when ctx is done.
func (k *Kubelet) syncLoopIteration(ctx context.Context, workers *podWorkers, updates <-chan api.PodUpdate,
	dirty <-chan struct{}, syncTick, housekeeping <-chan time.Time) bool {
	k.lastSyncLoop.Store(time.Now().UnixNano())
	var start time.Time
	defer func() {
		if !start.IsZero() {
			k.metrics.SyncLoopDuration.Observe(time.Since(start).Seconds())
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
		start = time.Now()
		k.handleUpdate(workers, u)
	case <-dirty:
		start = time.Now()
		for _, uid := range k.dirty.take() {
			k.dispatch(workers, uid)
		}
	case <-syncTick:
		start = time.Now()
		for _, pod := range k.desired.all() {
			workers.Update(podWork{UID: pod.UID, Pod: pod})
		}
	case <-housekeeping:
		start = time.Now()
		k.backoff.gc(time.Now())
		k.updateQoSCgroups()
		cached := k.cache.All()
		for uid := range cached {
			if k.desired.get(uid) == nil && !workers.Busy(uid) {
				k.dispatch(workers, uid)
			}
		}
		k.records.prune(k.cache.LastUpdate(), func(uid types.UID) bool { return cached[uid] == nil && k.desired.get(uid) == nil })
	}
	return true
}

func (k *Kubelet) handleUpdate(workers *podWorkers, u api.PodUpdate) {
	for _, pod := range u.Pods {
		glog.Infof("%s pod %s (uid %s)", u.Op, api.Key(pod), pod.UID)
		if u.Op == api.REMOVE {
			k.desired.remove(pod.UID)
			k.records.setRemoved(pod.UID)
		} else {
			k.desired.set(pod)
			if k.records.seen(pod.UID, time.Now()) {
				k.metrics.RestartedPods.WithLabelValues("true").Inc() // every pod here is static: none comes from an API server
			}
		}
		if u.Op == api.REMOVE {
			workers.Update(podWork{UID: pod.UID, Pod: pod, Kill: true})
		} else {
			workers.Update(podWork{UID: pod.UID, Pod: pod})
		}
	}
}

// dispatch syncs a desired pod, or kills an undesired one whose source has
// delivered a snapshot without it. Pods of a source that has not spoken yet
// (unreachable since the agent started) are left running.
func (k *Kubelet) dispatch(workers *podWorkers, uid types.UID) {
	if pod := k.desired.get(uid); pod != nil {
		workers.Update(podWork{UID: uid, Pod: pod})
		return
	}
	state := k.cache.Get(uid)
	if state == nil || !k.sources.Seen(podSource(state)) {
		return
	}
	workers.Update(podWork{UID: uid, Kill: true})
}

// podSource is the source recorded on the pod's containers.
func podSource(state *kubecontainer.PodState) string {
	for _, c := range state.Containers {
		if s := c.Labels[dockertools.LabelSource]; s != "" {
			return s
		}
	}
	return ""
}

// runGC collects garbage every gcPeriod until ctx is cancelled. It runs
// beside the sync loop: removing a dead container never waits on a pod.
func (k *Kubelet) runGC(ctx context.Context) {
	period := k.cfg.GCPeriod
	if period <= 0 {
		period = defaultGCPeriod
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			k.garbageCollect(ctx)
		}
	}
}

// LastRelist is when the last successful relist started.
func (k *Kubelet) LastRelist() time.Time { return k.cache.LastUpdate() }

// LastSyncLoop is when the sync loop last woke up.
func (k *Kubelet) LastSyncLoop() time.Time { return time.Unix(0, k.lastSyncLoop.Load()) }

// syncPodWork is a pod worker's unit of work. It first waits for a relist
// newer than its own last action on Docker, so it never acts twice on stale
// state.
func (k *Kubelet) syncPodWork(ctx context.Context, w podWork) {
	since := k.records.lastSync(w.UID)
	state, err := k.cache.GetNewerThan(ctx, w.UID, since)
	if err != nil {
		return // ctx cancelled
	}
	var acted bool
	start := time.Now()
	op := "sync"
	if seen, first := k.records.workerStarting(w.UID); w.Kill {
		op = "kill"
	} else if first {
		op = "create"
		if !seen.IsZero() {
			k.metrics.PodWorkerStartDuration.Observe(start.Sub(seen).Seconds())
		}
	}
	defer func() { k.metrics.PodWorkerDuration.WithLabelValues(op).Observe(time.Since(start).Seconds()) }()
	if w.Kill {
		acted, err = k.killPod(ctx, w.UID, w.Pod, state)
	} else {
		acted, err = k.syncPod(ctx, w.Pod, state)
		// The status is produced here, once per sync, with the reasons
		// this sync recorded; GET /pods only reads it.
		st := k.podStatus(w.Pod, state)
		k.status.Set(w.Pod.UID, st)
		k.observeStart(w.Pod, &st, state)
	}
	// A sync that changed nothing leaves the cache as true as it was: the
	// next one need not wait for another relist. One that acted asks for
	// a relist of its pod now: events only update what they name, and the
	// periodic relist may be seconds away.
	if acted || err != nil {
		k.records.setLastSync(w.UID, time.Now())
		k.relist.RelistPod(w.UID)
	}
	if ctx.Err() == nil {
		k.logSyncError(w, state, acted, err)
	}
	if err != nil && !w.Kill && ctx.Err() == nil {
		// Retried once the relist has caught up with what this sync did;
		// from then on the back-off spaces the retries.
		k.dirty.mark([]types.UID{w.UID})
	}
}

// logSyncError logs a pod's sync error when it appears or changes, and once
// when a sync that acted succeeds: a pod failing the same way on every
// back-off retry (and idle between them) does not fill the log.
func (k *Kubelet) logSyncError(w podWork, state *kubecontainer.PodState, acted bool, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	prev, msg := k.records.syncError(w.UID, msg, acted)
	name := string(w.UID)
	if w.Pod != nil {
		name = api.Key(w.Pod)
	} else if state != nil {
		name = state.Namespace + "/" + state.Name
	}
	switch {
	case msg == prev:
		if msg != "" {
			glog.V(4).Infof("Sync pod %s: %v (as before)", name, err)
		}
	case msg == "":
		glog.Infof("Sync pod %s: no longer failing", name)
	default:
		glog.Errorf("Sync pod %s: %v", name, err)
	}
}

// forgetPod drops what the agent remembers of a pod that is gone, in one
// place (its record keeps the time of its last sync until housekeeping sees
// a relist newer than it).
func (k *Kubelet) forgetPod(uid types.UID) {
	k.records.forget(uid)
	k.backoff.forgetPod(uid)
	k.retries.forget(uid)
	k.images.ForgetPod(uid)
	k.status.Forget(uid)
}

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
func (k *Kubelet) SetHousekeeping(h Housekeeping) { k.hk.Store(&h) }

func (k *Kubelet) housekeeping() Housekeeping {
	return *k.hk.Load()
}

func (k *Kubelet) logLinks() logLinks { return logLinks{dir: k.housekeeping().ContainerLogDir} }
