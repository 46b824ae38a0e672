// Package kubelet reconciles the desired pods with Docker: the sync loop
// takes changes from the config merger and the relist, and hands each pod to
// its own worker, which admits it and has the runtime manager
// (kuberuntime) compare its spec with its containers and act.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodeshutdown"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podstatus"
)

// SourcesSeen tells whether a config source has delivered its snapshot: only
// then may its silence about a running pod remove that pod.
type SourcesSeen interface {
	Seen(source string) bool
}

// HousekeepingPeriod is how often pods left on the node without a desired
// spec are looked for (the relist also triggers this for changed pods), and
// the eviction manager's period.
const HousekeepingPeriod = 2 * time.Second

// defaultGCPeriod is how often dead containers and unused images are
// collected.
const defaultGCPeriod = time.Minute

// Kubelet is the node agent's core: desired pods in, Docker actions out.
// It builds what is its own (the desired set, the pod workers and their
// records) and is given its parts, built before it (Deps).
type Kubelet struct {
	cfg      Config
	sources  SourcesSeen
	cache    PodCache
	relist   Relist
	dirty    Dirty   // pods to sync, from the relist, retries, probes and eviction
	retries  Retries // pods to wake when their back-off ends
	probes   Probes
	status   Statuses
	metrics  *metrics.Metrics
	events   Events
	images   Images
	volumes  Volumes
	logLinks LogLinks
	gc       GCPolicy
	// runtime admits, syncs and kills pods on the container runtime: it
	// decides, makes the create specs and cgroups, and acts.
	runtime PodRuntime

	// producer produces the pods' statuses, which status keeps.
	producer *podstatus.Producer

	// life is Run's context (see lifetime): what outlives the pod sync
	// that starts it (probe workers) stops with it, not with the sync's
	// context, which ends with the sync (or a kill). Atomic: the API may
	// compute a status before Run has set it.
	life atomic.Pointer[context.Context]

	lastSyncLoop atomic.Int64 // unix nanoseconds of the last sync loop iteration

	desired *desiredSet // what the config wants here
	// admitMu serializes the resource-fit admissions (admission.go): each
	// decision sees the ones made before it.
	admitMu sync.Mutex
	// workers walk each pod through its life; each owns its pod's record.
	workers *podWorkers
	// forgetters drop what a cache keeps of a pod, called once when the
	// pod is forgotten.
	forgetters []func(types.UID)

	eviction *eviction.Evictor
	// shutdown stops the pods when the machine shuts down (nil: never).
	shutdown *nodeshutdown.Manager
	// evictions are the evicted pods remembered across restarts.
	evictions Evictions
	// devices are the device plugins' assignments to pods.
	devices Devices
}

// New returns a Kubelet driving the parts of d; Run starts it. It makes the
// two parts that read its own state: the status producer (the pods'
// records) and the eviction manager's runner (the desired pods and their
// workers).
func New(cfg Config, d Deps) *Kubelet {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if d.Events == nil {
		d.Events = (*events.Recorder)(nil) // records nothing
	}
	if d.Evictions == nil {
		d.Evictions = noEvictions{}
	}
	if d.Devices == nil {
		d.Devices = noDevices{}
	}
	k := &Kubelet{
		cfg: cfg, sources: d.Sources, cache: d.Cache, relist: d.Relist, dirty: d.Dirty, retries: d.Retries,
		probes: d.Probes, status: d.Statuses, metrics: d.Metrics, events: d.Events, images: d.Images,
		volumes: d.Volumes, logLinks: d.LogLinks, gc: d.GC, runtime: d.Runtime, evictions: d.Evictions, devices: d.Devices,
		desired: newDesiredSet(),
	}
	k.workers = newPodWorkers(k, func() *podRecord { return newPodRecord(cfg.Clock.Now(), k.runtime.NewPodRecord()) }, k.rememberedEviction)
	k.metrics.TrackPodState(k.podStateSizes)
	k.metrics.TrackWorkingPods(k.workers.WorkingPods)
	k.forgetters = []func(types.UID){k.retries.Forget, k.images.ForgetPod, k.status.Forget, k.volumes.Forget, k.probes.RemovePod,
		k.evictions.Forget, k.devices.Release}
	k.producer = d.NewStatusProducer(statusRecords{k.workers})
	k.eviction = d.NewEvictor(evictionPods{k})
	if d.NewShutdownManager != nil {
		k.shutdown = d.NewShutdownManager(shutdownPods{k})
	}
	return k
}

// lifetime is Run's context, or the background before Run.
func (k *Kubelet) lifetime() context.Context {
	if ctx := k.life.Load(); ctx != nil {
		return *ctx
	}
	return context.Background()
}

// Run reconciles until ctx is cancelled, then waits for its goroutines. It
// never touches containers on the way out: pods keep running. It runs the
// parts that feed the sync loop (the relist, the status store, the retry
// queue, the image manager's event follower) beside its own.
func (k *Kubelet) Run(ctx context.Context, updates <-chan api.PodUpdate) {
	k.life.Store(&ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { k.relist.Run(ctx) })
	wg.Go(func() { k.status.Run(ctx) })
	wg.Go(func() { k.retries.Run(ctx, k.dirty.Mark) })
	wg.Go(func() { k.images.Run(ctx) })
	k.workers.Start(ctx)
	defer k.workers.Wait()
	defer k.probes.Wait()

	syncTicker := k.cfg.Clock.NewTicker(k.cfg.SyncFrequency)
	defer syncTicker.Stop()
	housekeeping := k.cfg.Clock.NewTicker(HousekeepingPeriod)
	defer housekeeping.Stop()
	wg.Go(func() { k.runGC(ctx) })
	wg.Go(func() { k.eviction.Run(ctx) })
	wg.Go(func() { k.shutdown.Run(ctx) })
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
			klog.Errorf("Config updates closed; no more pod changes will be seen")
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
		// Evictions of pods removed while the agent was down: their source
		// has spoken without them.
		k.evictions.Prune(func(uid types.UID, source string) bool {
			return k.desired.get(uid) != nil || k.workers.Known(uid) || !k.sources.Seen(source)
		})
		all := k.cache.All()
		for uid := range all {
			if k.desired.get(uid) == nil && !k.workers.Known(uid) {
				k.dispatch(uid)
			}
		}
		// Devices of pods gone while the agent was down (neither desired,
		// nor known, nor with a container left), once the relist has
		// seen the node.
		if !k.cache.LastUpdate().IsZero() {
			k.devices.Prune(func(uid types.UID) bool {
				return k.desired.get(uid) != nil || k.workers.Known(uid) || all[uid] != nil
			})
		}
	}
	return true
}

// handleUpdate hands a change of the desired pods to their workers. The
// pods added are all desired before any worker is told: the first to be
// admitted sees the others that run already (after a restart), whatever
// their order.
func (k *Kubelet) handleUpdate(u api.PodUpdate) {
	if u.Op != api.REMOVE {
		for _, pod := range u.Pods {
			k.desired.set(pod)
		}
	}
	for _, pod := range u.Pods {
		klog.Infof("%s pod %s (uid %s)", u.Op, api.Key(pod), pod.UID)
		if u.Op == api.REMOVE {
			k.desired.remove(pod.UID)
			k.workers.RemovePod(pod.UID)
			continue
		}
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
	syncLoopHealthThreshold = 10 * HousekeepingPeriod
	// relistHealthMin is the shortest time without a relist that counts as
	// unhealthy (a relist period of 1 s makes it 5 s while Docker's event
	// stream is down, 25 s while it flows and the relist is stretched).
	relistHealthMin = 5 * time.Second
)

// ActivePods are the desired pods that are not terminating nor terminated
// (the pod-resources API lists them, as the kubelet's active pods).
func (k *Kubelet) ActivePods() []*v1.Pod {
	var out []*v1.Pod
	for _, pod := range k.desired.all() {
		if phase, ok := k.workers.Phase(pod.UID); !ok || phase == lifecycle.Syncing {
			out = append(out, pod)
		}
	}
	return out
}

// DesiredPods are the pods the config wants here (the API's pod view lists
// them).
func (k *Kubelet) DesiredPods() []*v1.Pod { return k.desired.all() }

// FallbackStatus is the status of a desired pod whose worker has not
// produced one yet, computed on the spot under Run's context (the API's
// pod view shows it).
func (k *Kubelet) FallbackStatus(pod *v1.Pod) v1.PodStatus {
	return k.producer.Status(k.lifetime(), pod, k.cache.Get(pod.UID))
}
