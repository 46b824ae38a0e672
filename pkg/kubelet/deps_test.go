package kubelet

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/diskusage"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/eviction"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/images"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodeshutdown"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/pleg"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podqueue"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/podstatus"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/prober"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/server"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/status"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// testOptions are what a test's Kubelet is built with; the zero value of
// each is the helper's default.
type testOptions struct {
	Clock                      clock.WithTicker // nil: the real clock
	Sources                    SourcesSeen      // nil: every source has spoken
	SyncFrequency              time.Duration    // 0: a minute
	RelistPeriod               time.Duration    // 0: a second
	BackoffInitial, BackoffMax time.Duration
	Events                     *events.Recorder // nil: none recorded
	Eviction                   eviction.Config
	Evictions                  Evictions // nil: none remembered
	// Shutdown makes the graceful node shutdown (nil: none).
	Shutdown           func(nodeshutdown.Pods) *nodeshutdown.Manager
	Allocatable        v1.ResourceList
	StaticPodsCritical bool
}

// testParts are the parts of a test's Kubelet as they are, for the test to
// drive and look into.
type testParts struct {
	hub     *runtimeevents.Hub
	cache   *pleg.Cache
	relist  *pleg.Relister
	retries *podqueue.Retries
	status  *status.Manager
	runtime *kuberuntime.Manager
}

// newKubelet builds a Kubelet of node "n" on the runtime rt with a default
// set of parts, wired as cmd/kubelet/app wires the agent's, under a
// temporary root dir.
func newKubelet(t *testing.T, rt kubecontainer.Runtime, o testOptions) (*Kubelet, *testParts) {
	t.Helper()
	const node, infraImage = "n", "pause:1"
	root := t.TempDir()
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if o.Sources == nil {
		o.Sources = seenAll{}
	}
	if o.SyncFrequency == 0 {
		o.SyncFrequency = time.Minute
	}
	if o.RelistPeriod == 0 {
		o.RelistPeriod = time.Second
	}
	m := metrics.New(node)
	rt = kuberuntime.NewInstrumentedRuntime(rt, m)
	p := &testParts{hub: runtimeevents.NewHub(rt, clk), cache: pleg.NewCache(), retries: podqueue.NewRetries(clk),
		status: status.NewManager(filepath.Join(root, "checkpoints", "conditions.json"), clk)}
	dirty := podqueue.NewDirty()
	logs := kuberuntime.NewLogSettings(kuberuntime.ContainerLogs{})
	links := kuberuntime.NewLogLinks(logs)
	downward := kuberuntime.NewDownward(kuberuntime.DownwardNode{Name: node, CPUs: 1, Memory: 1 << 30, RootDir: root})
	vols := volumes.NewManager(volumes.Config{RootDir: root, NodeMemory: 1 << 30}, volumes.Deps{Downward: downward})
	p.relist = pleg.NewRelister(pleg.Config{Node: node, Period: o.RelistPeriod, Clock: clk},
		pleg.Deps{Runtime: rt, Hub: p.hub, Cache: p.cache, Dirty: dirty, Logs: links, Metrics: m})
	pullInitial, pullMax := kuberuntime.BackoffBounds(o.BackoffInitial, o.BackoffMax)
	imgs := images.NewManager(images.Config{Policy: images.Policy{BackoffInitial: pullInitial, BackoffMax: pullMax},
		InfraImage: infraImage, RecordPath: filepath.Join(root, "images.json")},
		images.Deps{Runtime: rt, Hub: p.hub, Retries: p.retries, Events: o.Events})
	probes := prober.NewManager(rt, dirty.MarkPod, prober.Report(m, o.Events), clk)
	p.runtime = kuberuntime.NewManager(kuberuntime.Config{NodeName: node, RootDir: root, InfraImage: infraImage, NodeMemory: 1 << 30,
		Events: o.Events, Metrics: m, BackoffInitial: o.BackoffInitial, BackoffMax: o.BackoffMax, Clock: clk},
		kuberuntime.Deps{Runtime: rt, Volumes: vols, Images: imgs, Probes: probes, Relist: p.relist,
			Downward: downward, Logs: logs, LogLinks: links})
	policy := gc.NewSettings(gc.Policy{})
	meter := &diskusage.Meter{Runtime: rt, Pods: p.cache, Node: node, PodDir: vols.PodDir}
	k := New(Config{RootDir: root, SyncFrequency: o.SyncFrequency, Clock: clk, Allocatable: o.Allocatable,
		StaticPodsCritical: o.StaticPodsCritical}, Deps{
		Runtime: p.runtime, Cache: p.cache, Relist: p.relist, Dirty: dirty, Retries: p.retries, Statuses: p.status,
		Probes: probes, Images: imgs, Volumes: vols, LogLinks: links, GC: policy, Sources: o.Sources, Events: o.Events, Metrics: m,
		Evictions: o.Evictions, NewShutdownManager: o.Shutdown,
		NewStatusProducer: func(r podstatus.Records) *podstatus.Producer {
			return podstatus.New(podstatus.Config{PodDir: vols.PodDir, Records: r, Statuses: p.status, Probes: probes,
				Logs: p.runtime, Metrics: m, Clock: clk})
		},
		NewEvictor: func(pods eviction.Pods) *eviction.Evictor {
			return eviction.NewEvictor(eviction.EvictorConfig{Eviction: o.Eviction, Node: eviction.Node{RootDir: root}, Period: HousekeepingPeriod},
				eviction.Deps{Pods: pods, States: p.cache, Runtime: p.runtime, Images: imgs, Volumes: vols, Disk: meter,
					Events: o.Events, GC: policy.Policy, Clock: clk})
		},
	})
	return k, p
}

// run runs k, and the event hub its parts read, until stop is called.
func (p *testParts) run(k *Kubelet) (updates chan api.PodUpdate, stop func()) {
	updates = make(chan api.PodUpdate)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.hub.Run(ctx) })
	wg.Go(func() { k.Run(ctx, updates) })
	return updates, func() { cancel(); wg.Wait() }
}

// podView is the API's view of k's pods, as cmd/kubelet/app composes it.
func (p *testParts) podView(k *Kubelet) *server.PodView {
	return server.NewPodView(server.PodSources{Desired: desiredOf{k}, Statuses: p.status, Cache: p.cache, Relist: p.relist,
		Fallback: k.FallbackStatus})
}

// desiredOf is k's desired pods as the pod view reads them.
type desiredOf struct{ k *Kubelet }

func (d desiredOf) All() []*v1.Pod { return d.k.DesiredPods() }
