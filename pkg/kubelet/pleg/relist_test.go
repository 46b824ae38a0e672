package pleg

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/await"
	"github.com/classic-kubelet/kubelet/pkg/backoff"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRelistInspectsOnlyWhatChanged(t *testing.T) {
	fake := containertest.NewFakeClient()
	labels := func(uid string) map[string]string {
		return map[string]string{kubecontainer.LabelOwner: "n", kubecontainer.LabelPodUID: uid}
	}
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c1", Name: "k8s_a.h_p_default_u1_00000001", Labels: labels("u1"), Running: true, LogPath: "/l/c1"})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c2", Name: "k8s_b.h_q_default_u2_00000002", Labels: labels("u2"), Running: true, LogPath: "/l/c2"})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "other", Name: "k8s_b.h_q_default_u3_00000002",
		Labels: map[string]string{kubecontainer.LabelOwner: "another-node", kubecontainer.LabelPodUID: "u3"}, Running: true})

	var dirty []types.UID
	cache := NewCache()
	var seen []string
	r := NewRelister(Config{Node: "n", Period: time.Second}, Deps{Runtime: fake, Cache: cache,
		Dirty: markFunc(func(uids []types.UID) { dirty = append(dirty, uids...) }),
		Logs:  linkFunc(func(c *kubecontainer.ContainerState) { seen = append(seen, c.ID) })})
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
		{"an event names a container", func() { r.markEvented(kubecontainer.Event{ContainerID: "c2"}) }, 1, []types.UID{"u2"}, 2},
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
		if n := len(cache.All()); n != s.podsInCache {
			t.Errorf("%s: %d pods cached, want %d", s.name, n, s.podsInCache)
		}
	}
	sort.Strings(seen)
	if len(seen) != 2 || seen[0] != "c1" || seen[1] != "c2" {
		t.Errorf("onLogPath saw %v, want each of c1 and c2 once", seen)
	}
	if st := cache.Get("u1"); st == nil || st.Containers[0].Running || st.Containers[0].ExitCode != 1 {
		t.Errorf("cache of u1 = %+v, want the exited container with code 1", st)
	}
	fake.InjectError("list", kubecontainer.ErrRuntimeUnavailable)
	before := cache.LastUpdate()
	if err := r.relist(context.Background()); err == nil {
		t.Error("relist succeeded with Docker down")
	}
	if !cache.LastUpdate().Equal(before) {
		t.Error("a failed relist advanced the cache timestamp")
	}
}

// A container named by an event is inspected by itself at once and its pod
// updated in the cache, without a list and without advancing the cache's
// timestamp; meanwhile the connected stream stretches the relist period.
// The clock is fake and never moves: the only relist is the one the
// subscription asks for, however slow this machine.
func TestEventsUpdateTheirPodsWithoutAList(t *testing.T) {
	fake := containertest.NewFakeClient()
	labels := func(node, uid string) map[string]string {
		return map[string]string{kubecontainer.LabelOwner: node, kubecontainer.LabelPodUID: uid}
	}
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c1", Name: "k8s_a.h_p_default_u1_00000001", Labels: labels("n", "u1"), Running: true})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c2", Name: "k8s_b.h_q_default_u2_00000002", Labels: labels("n", "u2"), Running: true})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "x", Name: "k8s_b.h_q_default_u3_00000003", Labels: labels("another-node", "u3"), Running: true})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c4", Name: "k8s_c.h_r_default_u4_00000004", Labels: labels("n", "u4"), Running: true})

	// Each round of the relister (a relist that found changes, or the
	// inspect of what events named) ends with the pods it dirtied.
	rounds := make(chan []types.UID, 16)
	round := func(what string) []types.UID {
		t.Helper()
		select {
		case uids := <-rounds:
			sort.Slice(uids, func(i, j int) bool { return uids[i] < uids[j] })
			return uids
		case <-time.After(await.Timeout):
			t.Fatalf("timed out waiting for %s", what)
			return nil
		}
	}
	cache := NewCache()
	const period = 200 * time.Millisecond // stretched to 1 s by the stream
	clk := testingclock.NewFakeClock(time.Now())
	hub := runtimeevents.NewHub(fake, clk)
	r := NewRelister(Config{Node: "n", Period: period, Clock: clk}, Deps{Runtime: fake, Hub: hub, Cache: cache, Dirty: markFunc(func(uids []types.UID) { rounds <- uids })})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	wg.Go(func() { r.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	// The relist the subscription asked for finds this node's three pods,
	// all new.
	if got := round("the first relist"); fmt.Sprint(got) != "[u1 u2 u4]" {
		t.Fatalf("the first relist dirtied %v, want this node's three pods", got)
	}
	if r.Period() != 5*period {
		t.Errorf("relist period %v with the stream connected, want %v", r.Period(), 5*period)
	}
	stamp := cache.LastUpdate()
	fake.Calls()

	// A die event says all an inspect would (exit code, time): no inspect.
	steps := []struct {
		name     string
		change   func()
		check    func() bool
		dirty    string
		inspects int
	}{
		// The other node's container first: the hub hands the relist
		// only this node's events, or it would inspect it.
		{"a container dies", func() { fake.Exit("x", 1); fake.Exit("c1", 3) }, func() bool {
			p := cache.Get("u1")
			return p != nil && !p.Containers[0].Running && p.Containers[0].ExitCode == 3 && p.Containers[0].Status == "exited" &&
				!p.Containers[0].FinishedAt.IsZero()
		}, "[u1]", 0},
		{"a container is removed", func() { _ = fake.Remove(context.Background(), "c2") }, func() bool { return cache.Get("u2") == nil }, "[u2]", 1},
		{"another node's container is refreshed", func() { r.Refresh("x") }, func() bool { return true }, "[]", 1},
		// Docker tells OOMKilled only in the inspect after the exit.
		{"an OOM kill, then the exit", func() {
			fake.OOM("c4")
			if got := round("the oom's inspect"); fmt.Sprint(got) != "[u4]" || fake.CountCalls("inspect") != 1 {
				t.Errorf("the oom event dirtied %v with %d inspects, want [u4] and one", got, fake.CountCalls("inspect"))
			}
			fake.Exit("c4", 137)
		}, func() bool {
			p := cache.Get("u4")
			return p != nil && !p.Containers[0].Running && p.Containers[0].OOMKilled
		}, "[u4]", 2},
	}
	for _, s := range steps {
		fake.Calls()
		s.change()
		if got := round(s.name); fmt.Sprint(got) != s.dirty {
			t.Errorf("%s: dirty %v, want %s", s.name, got, s.dirty)
		}
		if !s.check() {
			t.Errorf("%s: the cache does not show it", s.name)
		}
		if n := fake.CountCalls("inspect"); n != s.inspects {
			t.Errorf("%s: %d inspects, want %d", s.name, n, s.inspects)
		}
		if n := fake.CountCalls("list"); n != 0 {
			t.Errorf("%s: %d lists, want none: events name what changed", s.name, n)
		}
	}
	if cache.Get("u3") != nil {
		t.Error("another node's container entered the cache")
	}
	if !cache.LastUpdate().Equal(stamp) {
		t.Error("an event's update advanced the cache timestamp: a worker waiting for a relist would stop waiting")
	}
}

// A container the agent is starting is left out of relists (its inspect
// would wait for the start) and of its create event until Docker lists it
// running: then it is inspected once, though its start has not returned.
func TestRelistLeavesOutContainersBeingStarted(t *testing.T) {
	ctx := context.Background()
	fake := containertest.NewFakeClient()
	cache := NewCache()
	r := NewRelister(Config{Node: "n", Period: time.Second}, Deps{Runtime: fake, Cache: cache, Dirty: markFunc(func([]types.UID) {})})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c1", Name: "k8s_a.h_p_default_u1_00000001", Status: "created",
		Labels: map[string]string{kubecontainer.LabelOwner: "n", kubecontainer.LabelPodUID: "u1"}})
	started := r.Starting("c1")
	steps := []struct {
		name     string
		step     func() error
		inspects int
		running  bool // u1's container is cached, running
	}{
		{"relist while starting", func() error { return r.relist(ctx) }, 0, false},
		{"its create event", func() error {
			r.markEvented(kubecontainer.Event{ContainerID: "c1", Action: "create"})
			r.inspectNamed(ctx)
			return nil
		}, 0, false},
		{"relist once Docker lists it running, its start not yet returned", func() error {
			if err := fake.Start(ctx, "c1"); err != nil {
				return err
			}
			return r.relist(ctx)
		}, 1, true},
		{"relist after the start returned", func() error {
			started()
			return r.relist(ctx)
		}, 0, true},
	}
	for _, s := range steps {
		fake.Calls()
		if err := s.step(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n := fake.CountCalls("inspect"); n != s.inspects {
			t.Errorf("%s: %d inspects, want %d", s.name, n, s.inspects)
		}
		st := cache.Get("u1")
		if running := st != nil && len(st.Containers) == 1 && st.Containers[0].Running; running != s.running {
			t.Errorf("%s: cache of u1 = %+v, want running %v", s.name, st, s.running)
		}
	}
}

// A pod relisted by itself lists only its own containers, inspects what is
// new, drops what is gone, and satisfies a worker of that pod waiting for a
// newer relist, not one of another pod: the node's timestamp stays.
func TestRelistPodListsThatPodAlone(t *testing.T) {
	ctx := context.Background()
	fake := containertest.NewFakeClient()
	labels := func(node, uid string) map[string]string {
		return map[string]string{kubecontainer.LabelOwner: node, kubecontainer.LabelPodUID: uid}
	}
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "a1", Name: "k8s_a.h_p_default_u1_00000001", Labels: labels("n", "u1"), Running: true})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "b1", Name: "k8s_b.h_q_default_u2_00000002", Labels: labels("n", "u2"), Running: true})
	var dirty []types.UID
	cache := NewCache()
	r := NewRelister(Config{Node: "n", Period: time.Second}, Deps{Runtime: fake, Cache: cache, Dirty: markFunc(func(uids []types.UID) { dirty = append(dirty, uids...) })})
	if err := r.relist(ctx); err != nil {
		t.Fatal(err)
	}
	stamp := cache.LastUpdate()
	steps := []struct {
		name       string
		change     func()
		containers int // of u1 in the cache
		inspects   int
		dirty      bool
	}{
		{"nothing changed", func() {}, 1, 0, false},
		{"a container was added", func() {
			fake.AddContainer(kubecontainer.ContainerDetail{ID: "a2", Name: "k8s_c.h_p_default_u1_00000003", Labels: labels("n", "u1"), Running: true})
		}, 2, 1, true},
		{"another node's container of the same UID", func() {
			fake.AddContainer(kubecontainer.ContainerDetail{ID: "x", Name: "k8s_c.h_p_default_u1_00000004", Labels: labels("m", "u1"), Running: true})
		}, 2, 0, false},
		{"an evented container is inspected here, not again", func() { r.markEvented(kubecontainer.Event{ContainerID: "a1", Action: "start"}) }, 2, 1, true},
		{"a container was removed", func() { _ = fake.Remove(ctx, "a1") }, 1, 0, true},
	}
	for _, s := range steps {
		s.change()
		fake.Calls()
		dirty = nil
		since := time.Now()
		r.RelistPod("u1")
		r.relistPods(ctx)
		if n := fake.CountCalls("list"); n != 1 {
			t.Errorf("%s: %d lists, want 1", s.name, n)
		}
		if n := fake.CountCalls("inspect"); n != s.inspects {
			t.Errorf("%s: %d inspects, want %d", s.name, n, s.inspects)
		}
		if got := len(cache.Get("u1").Containers); got != s.containers {
			t.Errorf("%s: u1 has %d containers cached, want %d", s.name, got, s.containers)
		}
		if (len(dirty) == 1 && dirty[0] == "u1") != s.dirty || len(dirty) > 1 {
			t.Errorf("%s: dirty %v, want u1 %v", s.name, dirty, s.dirty)
		}
		if len(r.evented) != 0 {
			t.Errorf("%s: %d containers left for inspectNamed", s.name, len(r.evented))
		}
		wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		if _, err := cache.GetNewerThan(wctx, "u1", since); err != nil {
			t.Errorf("%s: a worker of u1 still waits after its pod's relist", s.name)
		}
		if _, err := cache.GetNewerThan(wctx, "u2", since); err == nil {
			t.Errorf("%s: a worker of u2 stopped waiting on u1's relist", s.name)
		}
		cancel()
	}
	if cache.Get("u2") == nil || !cache.LastUpdate().Equal(stamp) {
		t.Error("a pod's relist changed another pod or the node's timestamp")
	}
	if err := r.relist(ctx); err != nil {
		t.Fatal(err)
	}
	if n := cache.RelistedLen(); n != 0 {
		t.Errorf("%d pods still held as relisted by themselves after a relist of the node", n)
	}
}

// The wait between two relists: the period, stretched while the event
// stream is connected, doubled per failure in a row up to relistRetryMax.
func TestRelistDelay(t *testing.T) {
	r := NewRelister(Config{Node: "n", Period: time.Second}, Deps{Runtime: containertest.NewFakeClient(), Cache: NewCache(), Dirty: markFunc(func([]types.UID) {})})
	for _, tc := range []struct {
		name     string
		live     bool
		failures int
		want     time.Duration
	}{
		{"Docker answers", false, 0, time.Second},
		{"the event stream is connected", true, 0, eventedPeriodFactor * time.Second},
		{"one failure", false, 1, time.Second},
		{"two failures in a row", false, 2, 2 * time.Second},
		{"three failures in a row", false, 3, 4 * time.Second},
		{"many failures", false, 10, relistRetryMax},
		{"a failure while connected", true, 1, relistRetryMax},
		{"failures while connected", true, 3, relistRetryMax},
	} {
		r.live.Store(tc.live)
		r.failing = r.newFailing()
		for range tc.failures {
			r.failing.Next(backoff.One{}, r.clock.Now())
		}
		if got := r.nextDelay(); got != tc.want {
			t.Errorf("%s: next relist in %v, want %v", tc.name, got, tc.want)
		}
	}
}

// markFunc is a function as the relist's Dirty marker.
type markFunc func([]types.UID)

func (f markFunc) Mark(uids []types.UID) { f(uids) }

// linkFunc is a function as the relist's log linker.
type linkFunc func(*kubecontainer.ContainerState)

func (f linkFunc) Link(c *kubecontainer.ContainerState) { f(c) }

// The identity a container's process runs with shows only while it runs
// (Docker's inspect gives the process, and the agent reads it): once it
// has exited, the relist keeps what it saw, as a CRI runtime's status does.
func TestRelistKeepsTheUserOfAnExitedContainer(t *testing.T) {
	fake := containertest.NewFakeClient()
	user := &kubecontainer.ContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000}}
	labels := map[string]string{kubecontainer.LabelOwner: "n", kubecontainer.LabelPodUID: "u1"}
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c1", Name: "k8s_a.h_p_default_u1_00000001", Labels: labels, Running: true, User: user})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c2", Name: "k8s_b.h_p_default_u1_00000002", Labels: labels, Status: "created"})
	cache := NewCache()
	r := NewRelister(Config{Node: "n", Period: time.Second}, Deps{Runtime: fake, Cache: cache,
		Dirty: markFunc(func([]types.UID) {}), Logs: linkFunc(func(*kubecontainer.ContainerState) {})})
	for _, step := range []struct {
		name   string
		change func()
		want   map[string]*kubecontainer.ContainerUser
	}{
		{"running", func() {}, map[string]*kubecontainer.ContainerUser{"c1": user, "c2": nil}},
		{"exited", func() { fake.Exit("c1", 0) }, map[string]*kubecontainer.ContainerUser{"c1": user, "c2": nil}},
	} {
		step.change()
		if err := r.relist(context.Background()); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		for _, c := range cache.Get("u1").Containers {
			if got := c.User; (got == nil) != (step.want[c.ID] == nil) || (got != nil && got.UID != step.want[c.ID].UID) {
				t.Errorf("%s: %s user %+v, want %+v", step.name, c.ID, got, step.want[c.ID])
			}
		}
	}
}
