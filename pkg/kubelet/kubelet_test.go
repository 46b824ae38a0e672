package kubelet

import (
	"context"
	"errors"
	"flag"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	"github.com/classic-kubelet/kubelet/pkg/dockertools/dockertest"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func TestMain(m *testing.M) {
	_ = flag.Set("logtostderr", "true")
	flag.Parse()
	// Every goroutine a test starts must have stopped when it returns.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}

type seenAll struct{}

func (seenAll) Seen(string) bool { return true }

// seenNone is a config whose sources have never spoken; it counts how
// often the kubelet asked, the evidence that it considered a pod.
type seenNone struct{ asked atomic.Int32 }

func (s *seenNone) Seen(string) bool { s.asked.Add(1); return false }

func newTestKubelet(t *testing.T, fake *dockertest.FakeClient, sources SourcesSeen) (*Kubelet, chan api.PodUpdate, func()) {
	t.Helper()
	k := New(Config{
		NodeName: "n", RootDir: t.TempDir(), InfraImage: "pause:1",
		SyncFrequency: 200 * time.Millisecond, RelistPeriod: 50 * time.Millisecond,
	}, fake, sources)
	updates := make(chan api.PodUpdate)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); k.Run(ctx, updates) }()
	return k, updates, func() { cancel(); wg.Wait() }
}

func desiredPod(name string, images ...string) *v1.Pod {
	p := &v1.Pod{}
	p.Name = name
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Image: img})
	}
	api.SetDefaults(p, "n", api.SourceFile)
	return p
}

func TestKubeletSyncSteadyStateAndRemove(t *testing.T) {
	fake := dockertest.NewFakeClient("pause:1", "img:1")
	_, updates, stop := newTestKubelet(t, fake, seenAll{})
	defer stop()
	pod := desiredPod("web", "img:1", "img:1")
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{pod}}
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 3 })

	// Steady state: relists and resyncs, but no inspect and no action; with
	// the event stream connected the relist period (50 ms) is stretched
	// fivefold.
	time.Sleep(150 * time.Millisecond)
	fake.Calls()
	time.Sleep(1500 * time.Millisecond)
	for _, m := range []string{"inspect", "create", "start", "stop", "remove", "image"} {
		if n := fake.CountCalls(m); n != 0 {
			t.Errorf("steady state made %d %s calls", n, m)
		}
	}
	if n := fake.CountCalls("list"); n < 4 || n > 8 {
		t.Errorf("steady state made %d lists in 1.5 s at a 250 ms period", n)
	}

	updates <- api.PodUpdate{Op: api.REMOVE, Pods: []*v1.Pod{pod}}
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 0 })
	waitUntil(t, func() bool { l, _ := fake.List(context.Background(), dockertools.LabelOwner, "n"); return len(l) == 0 })
}

func TestKubeletRestartsExitedContainer(t *testing.T) {
	fake := dockertest.NewFakeClient("pause:1", "img:1")
	_, updates, stop := newTestKubelet(t, fake, seenAll{})
	defer stop()
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{desiredPod("web", "img:1")}}
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 2 })
	var appID string
	l, _ := fake.List(context.Background(), dockertools.LabelOwner, "n")
	for _, c := range l {
		if c.Labels[dockertools.LabelContainerName] == "a" {
			appID = c.ID
		}
	}
	fake.Exit(appID, 2)
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 2 })
	l, _ = fake.List(context.Background(), dockertools.LabelOwner, "n")
	restarts := 0
	for _, c := range l {
		if c.Labels[dockertools.LabelContainerName] == "a" && c.Running {
			restarts = dockertools.ParseRestartCount(c.Labels)
		}
	}
	if restarts != 1 {
		t.Errorf("restartCount label %d, want 1", restarts)
	}
}

// Pods found on the node whose source has not delivered a snapshot stay.
func TestKubeletKeepsPodsOfUnseenSources(t *testing.T) {
	fake := dockertest.NewFakeClient("pause:1", "img:1")
	pod := desiredPod("web", "img:1")
	fake.AddContainer(kubecontainer.ContainerDetail{
		Name:  dockertools.BuildName(dockertools.ContainerName{Container: dockertools.InfraContainerName, Hash: dockertools.HashInfra(pod), Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
		Image: "pause:1", Running: true,
		Labels: dockertools.ContainerLabels(pod, "n", dockertools.InfraContainerName, dockertools.HashInfra(pod), dockertools.TypeSandbox, 0),
	})
	sources := &seenNone{}
	_, _, stop := newTestKubelet(t, fake, sources)
	// Evidence, not a sleep: the pod was weighed for removal twice (once
	// when the relist found it, once by housekeeping).
	deadline := time.Now().Add(10 * time.Second)
	for sources.asked.Load() < 2 {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("the kubelet asked about the pod's source %d times in 10 s, want 2", sources.asked.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if n := fake.CountCalls("stop") + fake.CountCalls("remove"); n != 0 {
		t.Errorf("%d stop/remove calls on a pod whose source never spoke", n)
	}
}

// lastSync of a removed pod is kept until a relist newer than the removal
// shows it gone, then forgotten.
func TestPruneRecords(t *testing.T) {
	k := New(Config{NodeName: "n", RootDir: t.TempDir()}, dockertest.NewFakeClient(), seenAll{})
	removedAt := time.Now()
	k.records.setLastSync("gone", removedAt)
	k.cache.Set(map[types.UID]*kubecontainer.PodState{}, removedAt.Add(-time.Second)) // older than the removal
	k.records.prune(k.cache.LastUpdate(), func(uid types.UID) bool { return k.cache.Get(uid) == nil && k.desired.get(uid) == nil })
	if _, ok := k.records.m["gone"]; !ok {
		t.Fatal("forgot lastSync before a relist caught up with the removal")
	}
	k.cache.Set(map[types.UID]*kubecontainer.PodState{}, removedAt.Add(time.Second))
	k.records.prune(k.cache.LastUpdate(), func(uid types.UID) bool { return k.cache.Get(uid) == nil && k.desired.get(uid) == nil })
	if _, ok := k.records.m["gone"]; ok {
		t.Error("kept lastSync of a pod gone from a newer relist")
	}
}

// A container that is running in the runtime but not yet in the last relist
// (started a moment ago) is found by a request that needs it running; a
// container the pod does not have is not waited for.
func TestFindRunningContainerLooksAgain(t *testing.T) {
	fake := dockertest.NewFakeClient("pause:1", "img:1")
	k := New(Config{NodeName: "n", RootDir: t.TempDir(), RelistPeriod: time.Hour}, fake, seenAll{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); k.relist.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	waitUntil(t, func() bool { return !k.cache.LastUpdate().IsZero() })

	pod := desiredPod("web", "img:1")
	k.desired.set(pod)
	fake.AddContainer(kubecontainer.ContainerDetail{Name: "k8s_a.1_web_default_" + string(pod.UID) + "_00000001",
		Image: "img:1", Running: true, Labels: dockertools.ContainerLabels(pod, "n", "a", "1", dockertools.TypeContainer, 0)})

	if _, err := k.FindContainer("default", "web", "", "a", false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("before a relist: FindContainer = %v, want not found (the relist period is an hour)", err)
	}
	ref, err := k.FindRunningContainer(context.Background(), "default", "web", "", "a")
	if err != nil || !ref.Running {
		t.Fatalf("FindRunningContainer = %+v, %v; want the running container", ref, err)
	}
	if _, err := k.FindRunningContainer(context.Background(), "default", "web", "", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a container the pod lacks: %v, want not found", err)
	}
}

// Probe workers outlive the sync that starts them: they stop with the
// agent or their container, not when the sync's context ends.
func TestKubeletProbesOutliveTheSync(t *testing.T) {
	fake := dockertest.NewFakeClient("pause:1", "img:1")
	_, updates, stop := newTestKubelet(t, fake, seenAll{})
	defer stop()
	pod := desiredPod("web", "img:1")
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 3, SuccessThreshold: 1}
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{pod}}
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 2 })
	fake.Calls()
	time.Sleep(2500 * time.Millisecond)
	if n := fake.CountCalls("exec"); n < 2 {
		t.Errorf("%d exec probes in 2.5 s at a 1 s period, want 2 or more", n)
	}
}
