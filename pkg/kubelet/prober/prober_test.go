package prober

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/await"
	"github.com/classic-kubelet/kubelet/pkg/probe"
)

// scripted returns the results of a fake probe in order.
type scripted struct {
	mu      sync.Mutex
	results []probe.Result
	calls   int
	clock   clock.Clock // when set, each call's time goes to at
	at      []time.Time
}

func (s *scripted) run(context.Context, Target, *v1.Probe) (probe.Result, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.clock != nil {
		s.at = append(s.at, s.clock.Now())
	}
	if len(s.results) == 0 {
		return probe.Success, "", nil
	}
	r := s.results[0]
	s.results = s.results[1:]
	return r, "", nil
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func testManager(clk clock.WithTicker, s *scripted) (*Manager, *[]types.UID) {
	var changes []types.UID
	m := &Manager{clock: clk, run: s.run, workers: map[key]*worker{}, results: map[key]probe.Result{},
		onChange: func(uid types.UID) { changes = append(changes, uid) }}
	return m, &changes
}

func TestWorkerThresholds(t *testing.T) {
	S, F := probe.Success, probe.Failure
	cases := []struct {
		name    string
		typ     Type
		spec    v1.Probe
		results []probe.Result
		settled []string // after each probe: "" unsettled, "S" success, "F" failure
	}{
		{"liveness fails after 3 failures", Liveness, v1.Probe{}, []probe.Result{F, F, S, F, F, F}, []string{"", "", "S", "S", "S", "F"}},
		{"liveness threshold 1", Liveness, v1.Probe{FailureThreshold: 1}, []probe.Result{S, F}, []string{"S", "F"}},
		{"readiness needs 2 successes", Readiness, v1.Probe{SuccessThreshold: 2}, []probe.Result{S, F, S, S, F, F, F}, []string{"", "", "", "S", "S", "S", "F"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			s := &scripted{results: c.results}
			m, _ := testManager(clk, s)
			tgt := Target{PodUID: "u", ContainerID: "c1", StartedAt: clk.Now()}
			w := newWorker(m, tgt, c.typ, &c.spec)
			for i, want := range c.settled {
				w.probeOnce(context.Background())
				r, ok := m.results[key{"c1", c.typ}]
				got := ""
				if ok {
					got = map[probe.Result]string{S: "S", F: "F"}[r]
				}
				if got != want {
					t.Fatalf("after probe %d: settled %q, want %q", i+1, got, want)
				}
			}
		})
	}
}

func TestWorkerInitialDelayAndStartupGate(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	s := &scripted{}
	m, changes := testManager(clk, s)
	c := v1.Container{Name: "c", StartupProbe: &v1.Probe{}, LivenessProbe: &v1.Probe{InitialDelaySeconds: 5}}
	tgt := Target{PodUID: "u", ContainerID: "c1", Container: c, StartedAt: clk.Now()}
	live := newWorker(m, tgt, Liveness, c.LivenessProbe)
	start := newWorker(m, tgt, Startup, c.StartupProbe)

	live.probeOnce(context.Background())
	if s.calls != 0 {
		t.Fatal("liveness probed before the startup probe succeeded")
	}
	if m.Started(&c, "c1") {
		t.Fatal("started before the startup probe")
	}
	if more := start.probeOnce(context.Background()); more {
		t.Error("startup worker continues after success")
	}
	if !m.Started(&c, "c1") || len(*changes) != 1 {
		t.Fatalf("startup success not recorded (changes %v)", *changes)
	}
	live.probeOnce(context.Background())
	if s.calls != 1 {
		t.Fatalf("liveness probed within its initial delay (%d calls)", s.calls)
	}
	clk.Step(5 * time.Second)
	live.probeOnce(context.Background())
	if s.calls != 2 {
		t.Errorf("liveness not probed after its initial delay (%d calls)", s.calls)
	}
}

// A startup probe's success asks for a readiness probe at once, and a
// worker asked probes without waiting for its next tick (the kubelet's
// manual trigger), instead of up to a period later; its next periodic probe
// is a period after the asked one.
func TestReadinessProbedWhenStarted(t *testing.T) {
	clk := await.NewFakeClock(time.Now())
	s := &scripted{}
	m, _ := testManager(clk, s)
	c := v1.Container{Name: "c", StartupProbe: &v1.Probe{PeriodSeconds: 5}, ReadinessProbe: &v1.Probe{PeriodSeconds: 30}}
	tgt := Target{PodUID: "u", ContainerID: "c1", Container: c, StartedAt: clk.Now()}
	ready := newWorker(m, tgt, Readiness, c.ReadinessProbe)
	m.workers[key{"c1", Readiness}] = ready
	newWorker(m, tgt, Startup, c.StartupProbe).probeOnce(context.Background()) // succeeds
	if len(ready.now) != 1 {
		t.Fatal("the startup probe succeeded and no readiness probe was asked for")
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan struct{})
	go func() { defer close(stopped); ready.loop(ctx) }()
	// parked: the worker has done what it was woken for (a goroutine a
	// channel send woke is runnable until it runs).
	parked := func() { t.Helper(); await.Parked(t, 1, "prober.(*worker).loop(") }
	clk.AwaitWait(t, 1) // the start jitter
	clk.Step(maxJitter)
	if d := clk.AwaitWait(t, 2); d != 30*time.Second {
		t.Fatalf("a ticker of %v, want the period", d)
	}
	parked()
	if s.count() != 2 { // the startup probe, then this one
		t.Fatalf("%d probes after the jitter, want 2", s.count())
	}
	first := clk.Now()
	clk.Step(10 * time.Second)
	s.mu.Lock()
	s.clock = clk
	s.mu.Unlock()
	m.probeNow("c1", Readiness)
	clk.AwaitWait(t, 3) // the ticker started over
	parked()
	if s.count() != 3 { // the clock not moved
		t.Fatalf("%d probes after one was asked for, want 3", s.count())
	}
	// The next periodic probe is a period after the asked one (first+40 s),
	// not at the tick before it (first+30 s).
	clk.Step(20 * time.Second)
	parked() // a probe of the tick (if one fired) is done
	clk.Step(10 * time.Second)
	parked()
	s.mu.Lock()
	at := s.at
	s.mu.Unlock()
	if want := []time.Duration{10 * time.Second, 40 * time.Second}; len(at) != 2 || at[0].Sub(first) != want[0] || at[1].Sub(first) != want[1] {
		t.Errorf("readiness probes at %v after the first periodic one, want %v", since(first, at), want)
	}
	cancel()
	<-stopped
}

func since(t0 time.Time, ts []time.Time) []time.Duration {
	var out []time.Duration
	for _, t := range ts {
		out = append(out, t.Sub(t0))
	}
	return out
}

func TestManagerReadiness(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	m, _ := testManager(clk, &scripted{})
	plain := v1.Container{Name: "plain"}
	probed := v1.Container{Name: "probed", ReadinessProbe: &v1.Probe{}}
	if !m.Ready(&plain, "a") {
		t.Error("container without a readiness probe not ready")
	}
	if m.Ready(&probed, "b") {
		t.Error("container ready before its first readiness result")
	}
	m.set(key{"b", Readiness}, probe.Success)
	if !m.Ready(&probed, "b") {
		t.Error("container not ready after success")
	}
	m.set(key{"b", Liveness}, probe.Failure)
	if bad, _ := m.Unhealthy("b"); !bad {
		t.Error("liveness failure not reported")
	}
}

// Sync starts and stops workers with the containers; cancelling stops all.
func TestManagerSyncLifecycle(t *testing.T) {
	m, _ := testManager(clocktesting.NewFakeClock(time.Now()), &scripted{})
	ctx, cancel := context.WithCancel(context.Background())
	c := v1.Container{Name: "c", LivenessProbe: &v1.Probe{}, ReadinessProbe: &v1.Probe{}}
	m.Sync(ctx, "u", []Target{{PodUID: "u", ContainerID: "c1", Container: c}})
	m.Sync(ctx, "u", []Target{{PodUID: "u", ContainerID: "c1", Container: c}})
	if len(m.workers) != 2 {
		t.Fatalf("%d workers, want 2", len(m.workers))
	}
	m.Sync(ctx, "u", []Target{{PodUID: "u", ContainerID: "c2", Container: c}})
	if _, old := m.workers[key{"c1", Liveness}]; old || len(m.workers) != 2 {
		t.Errorf("workers of the old container kept: %v", m.workers)
	}
	m.RemovePod("u")
	if len(m.workers) != 0 {
		t.Errorf("workers left after RemovePod: %d", len(m.workers))
	}
	cancel()
	m.Wait()
}

func TestResolvePortAndHTTPTarget(t *testing.T) {
	c := &v1.Container{Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	u, h, err := HTTPTarget(&v1.HTTPGetAction{Port: intstr.FromString("http"), Path: "/healthz", Scheme: v1.URISchemeHTTPS,
		HTTPHeaders: []v1.HTTPHeader{{Name: "X-A", Value: "b"}}}, c, "10.1.2.3")
	if err != nil || u.String() != "https://10.1.2.3:8080/healthz" || h.Get("X-A") != "b" {
		t.Errorf("HTTPTarget = %v %v %v", u, h, err)
	}
	if _, err := ResolvePort(intstr.FromString("nope"), c); err == nil {
		t.Error("unknown port name resolved")
	}
	if p, _ := ResolvePort(intstr.FromInt32(99), c); p != 99 {
		t.Errorf("numeric port = %d", p)
	}
}
