package eviction

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/diskusage"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

const infraName = kubecontainer.InfraContainerName

// podCleanupTimeout bounds the wait, after an eviction, for the pod's
// containers to stop before the next round may pick another pod (the
// kubelet's waitForPodsCleanup).
const podCleanupTimeout = 30 * time.Second

// Pods are the agent's pods as the Evictor sees them: the desired ones, and
// what is remembered of each (the Kubelet keeps both).
type Pods interface {
	// Desired are the pods the config wants here.
	Desired() []*v1.Pod
	// DesiredPod is the desired pod of that UID (nil: none).
	DesiredPod(uid types.UID) *v1.Pod
	// Evicted tells whether the pod was asked to terminate (evicted, or
	// any other cause): it runs no more, and is not evicted again.
	Evicted(uid types.UID) bool
	// Evict terminates the pod for its eviction, with the status message
	// and grace given: its worker stops it (and its status says so from
	// now on).
	Evict(uid types.UID, message string, grace time.Duration)
	// RefusedUnderPressure tells whether the pod was last refused with
	// Reason (AdmitPod's rejection).
	RefusedUnderPressure(uid types.UID) bool
	// Sync has the pods' workers sync them soon.
	Sync(uids []types.UID)
}

// PodStates are the pods' containers as the relist last saw them
// (pleg.Cache).
type PodStates interface {
	Get(uid types.UID) *kubecontainer.PodState
	All() map[types.UID]*kubecontainer.PodState
}

// Runtime is what the Evictor does to containers (kuberuntime.Manager):
// it removes the dead ones to reclaim disk.
type Runtime interface {
	RemoveContainer(ctx context.Context, c *kubecontainer.ContainerState) error
}

// Images deletes the unused images (images.Manager).
type Images interface {
	DeleteUnused(ctx context.Context)
}

// Volumes says where a pod's emptyDirs are (volumes.Manager).
type Volumes interface {
	EmptyDirPath(uid types.UID, name string) string
}

// DiskStats is the background disk measurement (diskusage.Meter); Last
// is nil until the first.
type DiskStats interface {
	Last() *diskusage.Stats
}

// CgroupUsage is what eviction reads of the pod cgroups (cgroups.Detected).
type CgroupUsage interface {
	MemoryWorkingSet(n cgroups.Name, containerID string) (int64, error)
	Processes(n cgroups.Name) (int64, error)
}

// Events records what happens to pods (events.Recorder).
type Events interface {
	Event(ref events.Ref, warning bool, reason, format string, args ...any)
}

// EvictorConfig configures an Evictor.
type EvictorConfig struct {
	// Eviction are the thresholds and periods (no thresholds: off).
	Eviction Config
	// Node says where the node's signals are read; ImageFsDir is filled
	// in from the last disk measurement.
	Node Node
	// Period is the periodic round's (the housekeeping period).
	Period time.Duration
}

// Deps are what the Evictor reads and acts through.
type Deps struct {
	Pods    Pods
	States  PodStates
	Runtime Runtime
	Images  Images
	Volumes Volumes
	Disk    DiskStats
	// Cgroups measures the pods' memory and processes; nil: no pod
	// cgroups (they are not measured).
	Cgroups CgroupUsage
	Events  Events
	// GC is the dead-container policy in force (it changes on SIGHUP).
	GC    func() gc.Policy
	Clock clock.WithTicker
}

// Evictor runs the eviction rounds around a Manager: it observes the node,
// measures the pods, reclaims at node level, evicts the pod the Manager
// picks (its pod worker stops it) and waits for it to stop; it admits pods
// under pressure.
type Evictor struct {
	cfg EvictorConfig
	m   *Manager
	d   Deps
}

// NewEvictor returns an Evictor with a Manager of cfg.Eviction, timed by
// d.Clock.
func NewEvictor(cfg EvictorConfig, d Deps) *Evictor {
	return &Evictor{cfg: cfg, m: NewManager(cfg.Eviction, d.Clock), d: d}
}

// Manager is the Evictor's manager: the pressure conditions, for the Node.
func (e *Evictor) Manager() *Manager { return e.m }

// roundTrigger is what started an eviction round (logged with the
// threshold it acts on).
type roundTrigger string

const (
	roundPeriodic           roundTrigger = "housekeeping period"
	roundMemoryNotification roundTrigger = "memory threshold notification"
)

// minNotificationGap spaces the rounds the memory notification starts.
const minNotificationGap = 500 * time.Millisecond

// Run runs eviction rounds until ctx ends: every housekeeping period, and
// at once when the kernel notifies that the node's memory usage crossed a
// memory.available threshold (cgroup v1; elsewhere the periodic rounds
// alone). Rounds never overlap: they all run in this goroutine, which owns
// the notifier and stops it on return.
func (e *Evictor) Run(ctx context.Context) {
	var crossed <-chan struct{}
	var rearm func(Observations)
	notifier, err := NewMemoryNotifier(e.cfg.Node, e.cfg.Eviction.Thresholds)
	switch {
	case err != nil:
		klog.V(2).Infof("Eviction: memory.available is observed every %v only: %v", e.cfg.Period, err)
	case notifier != nil:
		defer notifier.Stop()
		crossed, rearm = notifier.Crossed(), rearmLogged(notifier, e.cfg.Period)
	}
	tick := e.d.Clock.NewTicker(e.cfg.Period)
	defer tick.Stop()
	var lastNotified time.Time
	for e.iteration(ctx, tick.C(), crossed, rearm, &lastNotified) {
	}
}

// iteration waits for one of:
//   - tick: the housekeeping period's round;
//   - crossed: the memory threshold notification; a round at once, or
//     minNotificationGap after the last one (lastNotified) it started;
//
// runs that round, then re-arms the notification from what it observed
// (rearm is nil without a notifier). It returns false when ctx is done.
func (e *Evictor) iteration(ctx context.Context, tick <-chan time.Time, crossed <-chan struct{},
	rearm func(Observations), lastNotified *time.Time) bool {
	trigger := roundPeriodic
	select {
	case <-ctx.Done():
		return false
	case <-tick:
	case <-crossed:
		trigger = roundMemoryNotification
		// The kernel signals a crossing both ways: usage hovering at a
		// level would run rounds back to back. At most one such round
		// per minNotificationGap.
		if wait := minNotificationGap - e.d.Clock.Since(*lastNotified); wait > 0 {
			select {
			case <-ctx.Done():
				return false
			case <-e.d.Clock.After(wait):
			}
		}
		*lastNotified = e.d.Clock.Now()
		klog.V(2).Infof("Eviction: memory threshold notification: a round now")
	}
	obs := e.round(ctx, trigger)
	if rearm != nil && ctx.Err() == nil {
		rearm(obs)
	}
	return true
}

// rearmLogged re-arms n, logging when re-arming starts failing (the
// periodic rounds, every period, still observe memory) and when it works
// again.
func rearmLogged(n *MemoryNotifier, period time.Duration) func(Observations) {
	failing := false
	return func(obs Observations) {
		err := n.Rearm(obs)
		switch {
		case err != nil && !failing:
			klog.Warningf("Eviction: %v; memory.available is observed every %v until it is armed again", err, period)
		case err == nil && failing:
			klog.Infof("Eviction: memory threshold notification armed again")
		}
		failing = err != nil
	}
}

func (e *Evictor) observeNode() Observations {
	n := e.cfg.Node
	if d := e.d.Disk.Last(); d != nil && d.Runtime != nil {
		n.ImageFsDir = d.Runtime.RootDir // Docker's root, known from the last disk measurement
	}
	obs, errs := n.Observe(e.m.Signals())
	for _, err := range errs {
		klog.V(2).Infof("Eviction: %v", err)
	}
	return obs
}

// round is one round of the kubelet's eviction manager: observe, update
// the pressure conditions, and for the first threshold due reclaim at node
// level (disk signals) and then evict one pod. It returns the node's
// signals as last observed (none if a pod was evicted for its local
// storage first).
func (e *Evictor) round(ctx context.Context, trigger roundTrigger) Observations {
	// A round the memory notification started looks at memory at once:
	// the walks of local storage wait for the periodic round.
	if trigger == roundPeriodic && e.evictLocalStorage(ctx) {
		return nil
	}
	before := fmt.Sprint(e.m.Conditions())
	obs := e.observeNode()
	due := e.m.Observe(obs)
	if after := fmt.Sprint(e.m.Conditions()); after != before {
		klog.Infof("Eviction: node pressure conditions now %s (were %s)", after, before)
		e.readmit()
	}
	if len(due) == 0 {
		return obs
	}
	t := due[0]
	if t.Signal != SignalMemoryAvailable && t.Signal != SignalPIDAvailable {
		klog.Infof("Eviction: %v met; collecting dead containers and unused images first", t)
		e.reclaimDisk(ctx)
		if obs = e.observeNode(); !StillMet(t, obs) {
			klog.Infof("Eviction: node-level reclaim relieved %v", t)
			return obs
		}
	}
	ev := e.m.Pick(t, obs, e.podUsages(ctx, t.Signal))
	if ev == nil {
		klog.Warningf("Eviction: %v met and no pod to evict", t)
		return obs
	}
	klog.Infof("Eviction: %v met, in a round started by the %s", t, trigger)
	e.evict(ctx, ev, e.m.FirstObserved(t))
	return obs
}

// localStorageWalkBudget bounds the walk of one emptyDir or writable layer
// of a pod with local storage limits in an eviction round (every 2 s).
const localStorageWalkBudget = time.Second

// evictLocalStorage evicts (at once, as the kubelet) the first pod over a
// local storage limit, and reports whether it did. Only pods with such a
// limit are measured, every round: their disk emptyDirs walked as du does
// (each within localStorageWalkBudget: what a cut walk counted is a lower
// bound, so it never evicts wrongly), their containers' logs stat'ed, and
// where a container has a limit, the writable layers walked too (those of
// a storage driver that names no upper dir are known from the last disk
// measurement, --disk-usage-period, since Docker walks every layer to
// answer).
func (e *Evictor) evictLocalStorage(ctx context.Context) bool {
	disk := e.d.Disk.Last()
	for _, pod := range e.d.Pods.Desired() {
		// A critical pod is never evicted, over its limits too (as the
		// kubelet: "cannot evict a critical pod").
		if !HasLocalStorageLimits(pod) || IsCritical(pod) || e.d.Pods.Evicted(pod.UID) {
			continue
		}
		state := e.d.States.Get(pod.UID)
		if state == nil || !kubecontainer.AnyRunning(state) {
			continue
		}
		u := LocalUsage{Volumes: map[string]int64{}, Containers: map[string]int64{}}
		// Walked: a disk emptyDir with a sizeLimit, and every one when a
		// container's limit makes the pod's total count.
		podTotal := HasContainerStorageLimits(pod)
		for _, v := range pod.Spec.Volumes {
			if v.EmptyDir != nil && v.EmptyDir.Medium != v1.StorageMediumMemory && (podTotal || v.EmptyDir.SizeLimit != nil) {
				wctx, cancel := context.WithTimeout(ctx, localStorageWalkBudget)
				u.Volumes[v.Name], _ = diskusage.DirBytes(wctx, e.d.Volumes.EmptyDirPath(pod.UID, v.Name))
				cancel()
			}
		}
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range cs {
				insts := state.Instances(c.Name)
				if len(insts) == 0 {
					continue
				}
				used := diskusage.LogFilesSize(insts[0].LogPath)
				switch {
				case podTotal && insts[0].LayerPath != "":
					// The writable layer walked now, as the emptyDirs: the
					// background measurement (Docker's, of every
					// container) comes only every --disk-usage-period.
					wctx, cancel := context.WithTimeout(ctx, localStorageWalkBudget)
					layer, _ := diskusage.DirBytes(wctx, insts[0].LayerPath)
					cancel()
					used += layer
				case disk != nil && disk.Runtime != nil:
					used += disk.Runtime.Writable[insts[0].ID]
				}
				u.Containers[c.Name] = used
			}
		}
		if msg := LocalStorageViolation(pod, u); msg != "" {
			e.evict(ctx, &Eviction{Pod: pod, Message: msg}, e.d.Clock.Now())
			return true
		}
	}
	return false
}

// reclaimDisk is the kubelet's node-level reclaim: dead containers as the
// GC policy lets go, and every unused image.
func (e *Evictor) reclaimDisk(ctx context.Context) {
	pods := e.d.States.All()
	dead := gc.DeadContainersToRemove(pods, e.d.Pods.DesiredPod, e.d.GC(), e.d.Clock.Now())
	// An evicted pod's containers are all garbage, its newest dead
	// instances too (which GC keeps for a desired pod): what an evicted
	// pod wrote to its layers and logs must be freed, or the pressure
	// stays and the next pod is evicted for it.
	for uid, st := range pods {
		if !e.d.Pods.Evicted(uid) {
			continue
		}
		for _, c := range st.Containers {
			if !c.Running && !slices.Contains(dead, c) {
				dead = append(dead, c)
			}
		}
	}
	for _, c := range dead {
		if err := e.d.Runtime.RemoveContainer(ctx, c); err != nil {
			klog.Errorf("Eviction: remove dead container %s: %v", c.RuntimeName, err)
		}
	}
	e.d.Images.DeleteUnused(ctx)
}

// rankWalkBudget bounds the walks of all the pods' disk usage in one
// round that ranks them for a disk signal: past it, the pods not walked
// yet are unmeasured (they rank last). 1e5 files take well under a second.
const rankWalkBudget = 10 * time.Second

// podUsages are the pods eviction may pick (desired, running, not already
// evicted) with what they use, measured now: only what sig ranks by.
// Memory and processes are read from the pod cgroups; disk is walked
// (diskUsage), since the background measurement (--disk-usage-period) is
// minutes old and knows nothing of what a pod wrote since: ranked by it,
// a pod idle for hours outranked the one filling the disk (issue 49).
func (e *Evictor) podUsages(ctx context.Context, sig Signal) []PodUsage {
	cg := e.d.Cgroups
	disk := e.d.Disk.Last()
	walks, cancel := context.WithTimeout(ctx, rankWalkBudget)
	defer cancel()
	var out []PodUsage
	for _, pod := range e.d.Pods.Desired() {
		state := e.d.States.Get(pod.UID)
		if state == nil || !kubecontainer.AnyRunning(state) || e.d.Pods.Evicted(pod.UID) {
			continue
		}
		u := PodUsage{Pod: pod}
		n := cgroups.PodName(kubecontainer.QOSClass(pod), pod.UID)
		switch sig {
		case SignalMemoryAvailable:
			if cg == nil {
				break // no pod cgroups (--cgroups-per-qos=false): not measured
			}
			ws, err := cg.MemoryWorkingSet(n, "")
			u.Known, u.Memory = err == nil, ws
			for _, c := range state.Containers {
				if c.Running && c.Name != infraName {
					cws, _ := cg.MemoryWorkingSet(n, c.ID)
					u.Containers = append(u.Containers, ContainerUsage{Name: c.Name, Memory: cws})
				}
			}
		case SignalPIDAvailable:
			if cg != nil {
				p, err := cg.Processes(n)
				u.Known, u.Processes = err == nil, p
			}
		default:
			u = e.diskUsage(walks, pod, state, disk)
		}
		out = append(out, u)
	}
	return out
}

// diskUsage is what the pod holds on disk now, as the kubelet ranks it:
// its disk emptyDirs and its containers' writable layers (the storage
// driver's upper directories) walked as du walks them, each within
// localStorageWalkBudget (a cut walk is a lower bound: it still ranks a
// big writer high), and its containers' log files stat'ed. A layer whose
// driver names no directory is taken from the last background
// measurement, last. The pod is unmeasured (Known false) when a layer is
// in neither, or ctx (the round's rankWalkBudget) ended before a walk of
// it began.
func (e *Evictor) diskUsage(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, last *diskusage.Stats) PodUsage {
	u := PodUsage{Pod: pod, Known: true}
	walk := func(dir string) int64 {
		if ctx.Err() != nil {
			u.Known = false
			return 0
		}
		wctx, cancel := context.WithTimeout(ctx, localStorageWalkBudget)
		defer cancel()
		n, _ := diskusage.DirBytes(wctx, dir)
		return n
	}
	for _, v := range pod.Spec.Volumes {
		if isDiskEmptyDir(v) {
			u.Disk += walk(e.d.Volumes.EmptyDirPath(pod.UID, v.Name))
		}
	}
	for _, c := range state.Containers {
		var used int64
		if c.LogPath != "" {
			used = diskusage.LogFilesSize(c.LogPath)
		}
		switch {
		case c.LayerPath != "":
			used += walk(c.LayerPath)
		case last != nil && last.Runtime != nil && hasKey(last.Runtime.Writable, c.ID):
			used += last.Runtime.Writable[c.ID]
		default:
			u.Known = false
		}
		u.Disk += used
		if c.Running && c.Name != infraName {
			u.Containers = append(u.Containers, ContainerUsage{Name: c.Name, Disk: used})
		}
	}
	return u
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// evict records the eviction and has the pod's worker stop it, then waits
// (bounded) for its containers to stop, so the next round sees what it
// freed before it picks another pod.
func (e *Evictor) evict(ctx context.Context, ev *Eviction, since time.Time) {
	pod := ev.Pod
	klog.Warningf("Eviction: evicting pod %s (grace %v): %s", api.Key(pod), ev.GracePeriod, ev.Message)
	e.d.Events.Event(events.PodRef(pod, ""), true, Reason, "%s", ev.Message)
	e.d.Pods.Evict(pod.UID, ev.Message, ev.GracePeriod)
	wait := e.d.Clock.NewTicker(100 * time.Millisecond)
	defer wait.Stop()
	deadline := e.d.Clock.Now().Add(max(ev.GracePeriod, lifecycle.MinStopGrace) + podCleanupTimeout)
	for e.d.Clock.Now().Before(deadline) {
		if state := e.d.States.Get(pod.UID); state == nil || !kubecontainer.AnyRunning(state) {
			klog.Infof("Eviction: pod %s stopped %v after the pressure or overuse was first seen", api.Key(pod), e.d.Clock.Since(since).Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wait.C():
		}
	}
	klog.Warningf("Eviction: pod %s still running %v after its eviction", api.Key(pod), podCleanupTimeout)
}

// readmit has the pods refused under pressure synced again: the pressure
// changed, and they may be admitted now.
func (e *Evictor) readmit() {
	var uids []types.UID
	for _, pod := range e.d.Pods.Desired() {
		if e.d.Pods.RefusedUnderPressure(pod.UID) {
			uids = append(uids, pod.UID)
		}
	}
	e.d.Pods.Sync(uids)
}

// AdmitPod is the eviction manager's admission of a pod not started yet
// (nil: admitted).
func (e *Evictor) AdmitPod(pod *v1.Pod) *lifecycle.Rejection {
	if msg := e.m.Admit(pod, kubecontainer.QOSClass(pod)); msg != "" {
		return &lifecycle.Rejection{Reason: Reason, Message: msg}
	}
	return nil
}
