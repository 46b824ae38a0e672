package kubelet

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/devices"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodeshutdown"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podstatus"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/prober"
)

// Config is what the Kubelet itself uses of the agent's options; what its
// parts use they were built with (cmd/kubelet/app).
type Config struct {
	// RootDir holds the pods' directories (RootDir/pods), which the GC
	// sweeps for those of pods long gone.
	RootDir string
	// SyncFrequency is the period of the resync of every pod.
	SyncFrequency time.Duration
	// GCPeriod is how often garbage is collected (default a minute).
	GCPeriod time.Duration
	// Clock times the sync loop, the housekeeping, the GC and the pods'
	// records; nil: the real clock (tests move a fake one).
	Clock clock.WithTicker
	// Allocatable is the node's allocatable cpu and memory, which the
	// admitted pods' requests, and an in-place resize, must fit (nil:
	// every pod and resize fits).
	Allocatable v1.ResourceList
	// StaticPodsCritical makes every static pod critical, as the
	// kubelet's: it preempts the API server's pods to be admitted. Set
	// where an API server gives pods (in standalone, every pod is static).
	StaticPodsCritical bool
}

// Deps are the parts the Kubelet drives, each built and wired before it
// (cmd/kubelet/app builds them in order; newTestDeps in the tests). The
// Kubelet runs those that feed its sync loop (the relist, the status store,
// the retry queue, the image manager's event follower) from Run; the others
// run under their builder.
type Deps struct {
	// Runtime is the runtime manager: the Kubelet's one way to the
	// containers.
	Runtime PodRuntime
	// Cache is the pods' containers as the relist last saw them; Relist
	// fills it.
	Cache  PodCache
	Relist Relist
	// Dirty and Retries hold the pods due a step, now and at a time
	// (pkg/kubelet/podqueue): the relist, the prober, the image manager and
	// the eviction manager mark them there.
	Dirty   Dirty
	Retries Retries
	// Statuses keeps the statuses the pods' workers produce.
	Statuses Statuses
	Probes   Probes
	Images   Images
	Volumes  Volumes
	// LogLinks are the containers' log links, of which the GC drops those
	// whose container is gone.
	LogLinks LogLinks
	// GC is the dead-container policy in force (a SIGHUP changes it).
	GC GCPolicy
	// Sources tell whether a config source has spoken.
	Sources SourcesSeen
	// Events records what happens to pods (an events.Recorder; nil: none).
	Events  Events
	Metrics *metrics.Metrics
	// NewStatusProducer makes the status producer over the pods' records.
	// The records are the Kubelet's own (its workers own them), so the
	// Kubelet makes it; the rest it reads comes with the function.
	NewStatusProducer func(podstatus.Records) *podstatus.Producer
	// Evictions remembers the pods evicted across restarts
	// (eviction.Remembered); nil: none are.
	Evictions Evictions
	// NewShutdownManager makes the graceful node shutdown over the
	// Kubelet's pods (nil: none; pods die with the machine).
	NewShutdownManager func(nodeshutdown.Pods) *nodeshutdown.Manager
	// NewEvictor makes the eviction manager's runner over the Kubelet's
	// pods (the desired set, the workers it asks to terminate a pod, the
	// records of pods refused under pressure); the rest it reads comes with
	// the function.
	NewEvictor func(eviction.Pods) *eviction.Evictor
	// Devices are the device plugins' assignments (devices.Manager),
	// released once a pod terminated; nil: no device plugins.
	Devices Devices
}

// Devices holds the devices assigned to pods (devices.Manager): a pod's are
// released once it terminated, and those of pods gone while the agent was
// down once nothing of them is left.
type Devices interface {
	Release(uid types.UID)
	Prune(keep func(uid types.UID) bool)
}

var _ Devices = (*devices.Manager)(nil)

// noDevices is Devices without device plugins.
type noDevices struct{}

func (noDevices) Release(types.UID)              {}
func (noDevices) Prune(func(uid types.UID) bool) {}

// PodRuntime is what the Kubelet asks of the runtime manager
// (kuberuntime.Manager): admit, sync, stop and remove pods, collect dead
// containers, and keep the pod and QoS cgroups.
type PodRuntime interface {
	Admit(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState) *lifecycle.Rejection
	NewPodRecord() *kuberuntime.PodRecord
	SyncPod(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, rec *kuberuntime.PodRecord) (kuberuntime.Result, error)
	StopPod(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, grace time.Duration) (bool, error)
	RemovePod(ctx context.Context, state *kubecontainer.PodState) (bool, error)
	RemoveContainer(ctx context.Context, c *kubecontainer.ContainerState) error
	RemovePodCgroup(uid types.UID) error
	UpdateQoSCgroups(desired []*v1.Pod)
}

var _ PodRuntime = (*kuberuntime.Manager)(nil)

// PodCache is the relist's view of the pods' containers (pleg.Cache).
type PodCache interface {
	Get(uid types.UID) *kubecontainer.PodState
	All() map[types.UID]*kubecontainer.PodState
	// GetNewerThan waits for the pod's state as a relist that started
	// after t saw it.
	GetNewerThan(ctx context.Context, uid types.UID, t time.Time) (*kubecontainer.PodState, error)
	// LastUpdate is when the last relist started.
	LastUpdate() time.Time
	Len() int
	RelistedLen() int
}

// Relist lists the containers into the PodCache (pleg.Relister).
type Relist interface {
	Run(ctx context.Context)
	// RelistPod lists one pod's containers at once.
	RelistPod(uid types.UID)
	// Period is the time between two relists of the moment.
	Period() time.Duration
}

// Dirty are the pods due a step now (podqueue.Dirty).
type Dirty interface {
	Mark(uids []types.UID)
	MarkPod(uid types.UID)
	Ready() <-chan struct{}
	Take() []types.UID
	Len() int
}

// Retries wakes pods at a time (podqueue.Retries).
type Retries interface {
	Add(uid types.UID, at time.Time)
	Forget(uid types.UID)
	Run(ctx context.Context, fire func([]types.UID))
	Len() int
}

// Statuses keeps the pods' produced statuses (status.Manager).
type Statuses interface {
	Get(uid types.UID) (v1.PodStatus, bool)
	Set(uid types.UID, st v1.PodStatus)
	Forget(uid types.UID)
	Len() int
	Run(ctx context.Context)
}

// Probes runs the probes of the pods' running containers (prober.Manager).
type Probes interface {
	Sync(ctx context.Context, uid types.UID, targets []prober.Target)
	RemovePod(uid types.UID)
	Wait()
	Len() int
}

// Images forgets a pod's pull failures, collects unused images, and wakes
// the pods waiting for an image that appears (images.Manager).
type Images interface {
	ForgetPod(uid types.UID)
	Collect(ctx context.Context)
	Run(ctx context.Context)
}

// Volumes are the pods' directories and volumes (volumes.Manager).
type Volumes interface {
	PodDir(uid types.UID) string
	// TearDown releases a terminated pod's volumes (CSI volumes
	// unpublished, mounts undone); RemovePodDir its whole directory.
	TearDown(ctx context.Context, uid types.UID) error
	RemovePodDir(ctx context.Context, uid types.UID) error
	Forget(uid types.UID)
}

// LogLinks drops the log links whose container is gone
// (kuberuntime.LogLinks).
type LogLinks interface {
	RemoveDangling()
}

// GCPolicy is the dead-container policy in force (gc.Settings).
type GCPolicy interface {
	Policy() gc.Policy
}

// Events records what happens to pods (events.Recorder).
type Events interface {
	Event(ref events.Ref, warning bool, reason, format string, args ...any)
}

// Evictions are the evicted pods the agent remembers across restarts, so
// that one stays evicted as the kubelet keeps it Failed
// (eviction.Remembered).
type Evictions interface {
	// Remember records the pod's eviction durably.
	Remember(pod *v1.Pod, message string, at time.Time) error
	// Lookup returns the message of the pod's eviction, if it was evicted
	// with this manifest (with another, it is forgotten).
	Lookup(pod *v1.Pod) (message string, ok bool)
	Forget(uid types.UID)
	// Prune forgets the pods keep rejects.
	Prune(keep func(uid types.UID, source string) bool)
}

var _ Evictions = (*eviction.Remembered)(nil)

// noEvictions remembers nothing.
type noEvictions struct{}

func (noEvictions) Remember(*v1.Pod, string, time.Time) error     { return nil }
func (noEvictions) Lookup(*v1.Pod) (string, bool)                 { return "", false }
func (noEvictions) Forget(types.UID)                              {}
func (noEvictions) Prune(func(uid types.UID, source string) bool) {}
