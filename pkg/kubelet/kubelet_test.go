package kubelet

import (
	"context"
	"flag"
	"sort"
	"sync"
	"testing"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	"github.com/classic-kubelet/kubelet/pkg/dockertools/dockertest"
)

func TestMain(m *testing.M) {
	_ = flag.Set("logtostderr", "true")
	flag.Parse()
	// Every goroutine a test starts must have stopped when it returns.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}

func TestRelistInspectsOnlyWhatChanged(t *testing.T) {
	fake := dockertest.NewFakeClient()
	labels := func(uid string) map[string]string {
		return map[string]string{dockertools.LabelOwner: "n", dockertools.LabelPodUID: uid}
	}
	fake.AddContainer(dockertools.ContainerDetail{ID: "c1", Name: "k8s_a.h_p_default_u1_00000001", Labels: labels("u1"), Running: true, LogPath: "/l/c1"})
	fake.AddContainer(dockertools.ContainerDetail{ID: "c2", Name: "k8s_b.h_q_default_u2_00000002", Labels: labels("u2"), Running: true, LogPath: "/l/c2"})
	fake.AddContainer(dockertools.ContainerDetail{ID: "other", Name: "k8s_b.h_q_default_u3_00000002",
		Labels: map[string]string{dockertools.LabelOwner: "another-node", dockertools.LabelPodUID: "u3"}, Running: true})

	var dirty []types.UID
	cache := newPodCache()
	r := newRelister(fake, "n", time.Second, cache, func(uids []types.UID) { dirty = append(dirty, uids...) })
	var seen []string
	r.onLogPath = func(c *kubecontainer.ContainerState) { seen = append(seen, c.ID) }
	steps := []struct {
		name        string
		change      func()
		inspects    int
		dirty       []types.UID
		podsInCache int
	}{
		{"first relist inspects all", func() {}, 2, []types.UID{"u1", "u2"}, 2},
		{"nothing changed: no inspect, nothing dirty", func() {}, 0, nil, 2},
		// Docker reports "die" before its list stops showing the container
		// running: a container named by an event is inspected regardless.
		{"an event names a container", func() { r.markEvented("c2") }, 1, []types.UID{"u2"}, 2},
		{"a container exited", func() { fake.Exit("c1", 1) }, 1, []types.UID{"u1"}, 2},
		{"a container was removed", func() { _ = fake.Remove(context.Background(), "c2") }, 0, []types.UID{"u2"}, 1},
	}
	for _, s := range steps {
		s.change()
		fake.Calls()
		dirty = nil
		if err := r.relist(context.Background()); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n := fake.CountCalls("inspect"); n != s.inspects {
			t.Errorf("%s: %d inspects, want %d", s.name, n, s.inspects)
		}
		if n := fake.CountCalls("list"); n != 1 {
			t.Errorf("%s: %d lists, want 1", s.name, n)
		}
		sort.Slice(dirty, func(i, j int) bool { return dirty[i] < dirty[j] })
		if len(dirty) != len(s.dirty) || (len(dirty) > 0 && dirty[0] != s.dirty[0]) {
			t.Errorf("%s: dirty %v, want %v", s.name, dirty, s.dirty)
		}
		if n := len(cache.all()); n != s.podsInCache {
			t.Errorf("%s: %d pods cached, want %d", s.name, n, s.podsInCache)
		}
	}
	sort.Strings(seen)
	if len(seen) != 2 || seen[0] != "c1" || seen[1] != "c2" {
		t.Errorf("onLogPath saw %v, want each of c1 and c2 once", seen)
	}
	if st := cache.get("u1"); st == nil || st.Containers[0].Running || st.Containers[0].ExitCode != 1 {
		t.Errorf("cache of u1 = %+v, want the exited container with code 1", st)
	}
	fake.InjectError("list", kubecontainer.ErrRuntimeUnavailable)
	before := cache.lastUpdate()
	if err := r.relist(context.Background()); err == nil {
		t.Error("relist succeeded with Docker down")
	}
	if !cache.lastUpdate().Equal(before) {
		t.Error("a failed relist advanced the cache timestamp")
	}
}

type seenAll struct{}

func (seenAll) Seen(string) bool { return true }

type seenNone struct{}

func (seenNone) Seen(string) bool { return false }

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

	// Steady state: relists and resyncs, but no inspect and no action.
	time.Sleep(150 * time.Millisecond)
	fake.Calls()
	time.Sleep(500 * time.Millisecond)
	for _, m := range []string{"inspect", "create", "start", "stop", "remove", "image"} {
		if n := fake.CountCalls(m); n != 0 {
			t.Errorf("steady state made %d %s calls", n, m)
		}
	}
	if n := fake.CountCalls("list"); n < 5 || n > 12 {
		t.Errorf("steady state made %d lists in 500ms at a 50ms period", n)
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
	fake.AddContainer(dockertools.ContainerDetail{
		Name: dockertools.InfraSpec(pod, "pause:1", "n", "http", dockertools.InfraOptions{}).Name, Image: "pause:1", Running: true,
		Labels: dockertools.InfraSpec(pod, "pause:1", "n", "http", dockertools.InfraOptions{}).Labels,
	})
	_, _, stop := newTestKubelet(t, fake, seenNone{})
	time.Sleep(2500 * time.Millisecond) // past a housekeeping round
	stop()
	if n := fake.CountCalls("stop") + fake.CountCalls("remove"); n != 0 {
		t.Errorf("%d stop/remove calls on a pod whose source never spoke", n)
	}
}

// lastSync of a removed pod is kept until a relist newer than the removal
// shows it gone, then forgotten.
func TestPruneLastSync(t *testing.T) {
	k := New(Config{NodeName: "n", RootDir: t.TempDir()}, dockertest.NewFakeClient(), seenAll{})
	removedAt := time.Now()
	k.lastSync["gone"] = removedAt
	k.cache.set(map[types.UID]*kubecontainer.PodState{}, removedAt.Add(-time.Second)) // older than the removal
	k.pruneLastSync(k.cache.all())
	if _, ok := k.lastSync["gone"]; !ok {
		t.Fatal("forgot lastSync before a relist caught up with the removal")
	}
	k.cache.set(map[types.UID]*kubecontainer.PodState{}, removedAt.Add(time.Second))
	k.pruneLastSync(k.cache.all())
	if _, ok := k.lastSync["gone"]; ok {
		t.Error("kept lastSync of a pod gone from a newer relist")
	}
}
