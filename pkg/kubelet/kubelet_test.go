package kubelet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/await"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/server"
)

func TestMain(m *testing.M) {
	// Every goroutine a test starts must have stopped when it returns.
	goleak.VerifyTestMain(m)
}

type seenAll struct{}

func (seenAll) Seen(string) bool { return true }

// seenNone is a config whose sources have never spoken; it counts how
// often the kubelet asked, the evidence that it considered a pod.
type seenNone struct{ asked atomic.Int32 }

func (s *seenNone) Seen(string) bool { s.asked.Add(1); return false }

// testClock is a fake clock whose Now never repeats, as the real clock's
// does not: a pod worker waits for a relist that started after its own last
// action, which a frozen clock would never give. Timers and tickers fire
// only when the test steps it.
type testClock struct {
	*testingclock.FakeClock
	ticks atomic.Int64
}

func newTestClock() *testClock { return &testClock{FakeClock: testingclock.NewFakeClock(time.Now())} }

func (c *testClock) Now() time.Time                  { return c.FakeClock.Now().Add(time.Duration(c.ticks.Add(1))) }
func (c *testClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// newTestKubelet runs a Kubelet on clk (nil: the real clock).
func newTestKubelet(t *testing.T, fake *containertest.FakeClient, sources SourcesSeen, clk clock.WithTicker) (*Kubelet, chan api.PodUpdate, func()) {
	t.Helper()
	k, parts := newKubelet(t, fake, testOptions{Clock: clk, Sources: sources, SyncFrequency: 200 * time.Millisecond, RelistPeriod: 50 * time.Millisecond})
	updates, stop := parts.run(k)
	return k, updates, stop
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

// podSyncs is how many syncs of a pod (past its first) its workers have
// finished: the evidence that a resync ran.
func podSyncs(k *Kubelet) uint64 {
	var m dto.Metric
	_ = k.metrics.PodWorkerDuration.WithLabelValues("sync").(prometheus.Metric).Write(&m)
	return m.GetHistogram().GetSampleCount()
}

func TestKubeletSyncSteadyStateAndRemove(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	clk := newTestClock()
	k, updates, stop := newTestKubelet(t, fake, seenAll{}, clk)
	defer stop()
	pod := desiredPod("web", "img:1", "img:1")
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{pod}}
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 3 })
	// With the event stream connected the relist period (50 ms) is
	// stretched fivefold.
	waitUntil(t, func() bool { return k.relist.Period() == 250*time.Millisecond })

	// period moves the clock by one relist period, which also passes one
	// resync (200 ms), and waits for the evidence of both: a relist that
	// started after the step, and one more sync of the pod, finished.
	period := func() []string {
		t.Helper()
		fake.Calls()
		syncs := podSyncs(k)
		clk.Step(250 * time.Millisecond)
		stepped := clk.FakeClock.Now()
		waitUntil(t, func() bool {
			return !k.cache.LastUpdate().Before(stepped) && podSyncs(k) > syncs && !k.workers.Busy(pod.UID)
		})
		return fake.Calls()
	}
	// What the start set in motion (events, the relists the workers asked
	// for) settles within a few periods: a period with a single list is
	// the steady state.
	for i := 0; ; i++ {
		calls := period()
		if len(calls) == 1 && calls[0] == "list" {
			break
		}
		if i == 10 {
			t.Fatalf("no steady state after %d relist periods: the last made %v", i, calls)
		}
	}
	// Steady state: relists and resyncs, but no inspect and no action.
	for i := range 6 {
		if calls := period(); len(calls) != 1 || calls[0] != "list" {
			t.Errorf("steady-state period %d made %v, want a single list", i, calls)
		}
	}

	// The removal may take more than one relist or housekeeping: the clock
	// moves a relist period at each poll.
	updates <- api.PodUpdate{Op: api.REMOVE, Pods: []*v1.Pod{pod}}
	waitUntil(t, func() bool {
		clk.Step(250 * time.Millisecond)
		l, _ := fake.List(context.Background(), kubecontainer.LabelOwner, "n")
		return len(fake.RunningNames()) == 0 && len(l) == 0
	})
}

func TestKubeletRestartsExitedContainer(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	_, updates, stop := newTestKubelet(t, fake, seenAll{}, nil)
	defer stop()
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{desiredPod("web", "img:1")}}
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 2 })
	var appID string
	l, _ := fake.List(context.Background(), kubecontainer.LabelOwner, "n")
	for _, c := range l {
		if c.Labels[kubecontainer.LabelContainerName] == "a" {
			appID = c.ID
		}
	}
	fake.Exit(appID, 2)
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 2 })
	l, _ = fake.List(context.Background(), kubecontainer.LabelOwner, "n")
	restarts := 0
	for _, c := range l {
		if c.Labels[kubecontainer.LabelContainerName] == "a" && c.Running {
			restarts = kubecontainer.ParseRestartCount(c.Labels)
		}
	}
	if restarts != 1 {
		t.Errorf("restartCount label %d, want 1", restarts)
	}
}

// Pods found on the node whose source has not delivered a snapshot stay.
func TestKubeletKeepsPodsOfUnseenSources(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	pod := desiredPod("web", "img:1")
	fake.AddContainer(kubecontainer.ContainerDetail{
		Name:  kubecontainer.BuildName(kubecontainer.ContainerName{Container: kubecontainer.InfraContainerName, Hash: kubecontainer.HashInfra(pod), Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
		Image: "pause:1", Running: true,
		Labels: kubecontainer.ContainerLabels(pod, "n", kubecontainer.InfraContainerName, kubecontainer.HashInfra(pod), kubecontainer.TypeSandbox, 0),
	})
	sources := &seenNone{}
	clk := newTestClock()
	_, _, stop := newTestKubelet(t, fake, sources, clk)
	// Evidence, not a sleep: the pod was weighed for removal twice (once
	// when the relist found it, once by housekeeping, which each step of
	// the clock makes due).
	await.True(t, "the kubelet to weigh the pod's source twice", func() bool {
		clk.Step(HousekeepingPeriod)
		return sources.asked.Load() >= 2
	})
	stop()
	if n := fake.CountCalls("stop") + fake.CountCalls("remove"); n != 0 {
		t.Errorf("%d stop/remove calls on a pod whose source never spoke", n)
	}
}

// A container that is running in the runtime but not yet in the last relist
// (started a moment ago) is found by a request that needs it running; a
// container the pod does not have is not waited for.
func TestFindRunningContainerLooksAgain(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	k, parts := newKubelet(t, fake, testOptions{RelistPeriod: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { parts.relist.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	waitUntil(t, func() bool { return !k.cache.LastUpdate().IsZero() })

	pod := desiredPod("web", "img:1")
	k.desired.set(pod)
	fake.AddContainer(kubecontainer.ContainerDetail{Name: "k8s_a.1_web_default_" + string(pod.UID) + "_00000001",
		Image: "img:1", Running: true, Labels: kubecontainer.ContainerLabels(pod, "n", "a", "1", kubecontainer.TypeContainer, 0)})

	view := parts.podView(k)
	if _, err := view.FindContainer("default", "web", "", "a", false); !errors.Is(err, server.ErrNotFound) {
		t.Fatalf("before a relist: FindContainer = %v, want not found (the relist period is an hour)", err)
	}
	ref, err := view.FindRunningContainer(context.Background(), "default", "web", "", "a")
	if err != nil || !ref.Running {
		t.Fatalf("FindRunningContainer = %+v, %v; want the running container", ref, err)
	}
	if _, err := view.FindRunningContainer(context.Background(), "default", "web", "", "nope"); !errors.Is(err, server.ErrNotFound) {
		t.Errorf("a container the pod lacks: %v, want not found", err)
	}
}

// Probe workers outlive the sync that starts them: they stop with the
// agent or their container, not when the sync's context ends.
func TestKubeletProbesOutliveTheSync(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	clk := newTestClock()
	_, updates, stop := newTestKubelet(t, fake, seenAll{}, clk)
	defer stop()
	pod := desiredPod("web", "img:1")
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 3, SuccessThreshold: 1}
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{pod}}
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 2 })
	fake.Calls()
	// Each poll moves the clock by a probe period: a worker still running
	// long after the sync that started it ended probes again and again.
	waitUntil(t, func() bool {
		clk.Step(time.Second)
		return fake.CountCalls("exec") >= 2
	})
}

// A pod's status is produced by its worker's sync, and its condition times
// are stamped then: a GET only reads it (before, the status was computed on
// each GET, and a transition was dated by the first GET that saw it).
func TestStatusProducedBySync(t *testing.T) {
	k, parts := newKubelet(t, containertest.NewFakeClient(), testOptions{})
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	k.desired.set(pod)
	b := &containertest.Builder{T0: time.Now()}
	parts.cache.Set(map[types.UID]*kubecontainer.PodState{pod.UID: containertest.State(b.C(pod, kubecontainer.InfraContainerName, true, 0, ""), b.C(pod, "a", true, 0, ""))}, time.Now())
	synced := time.Now().Add(-time.Hour).Truncate(time.Second)
	parts.status.SetClock(testingclock.NewFakeClock(synced))
	if _, err := k.syncPod(context.Background(), podWork{UID: pod.UID, Pod: pod, Record: newPodRecord(time.Now(), k.runtime.NewPodRecord())}); err != nil {
		t.Fatal(err)
	}
	k.probes.RemovePod(pod.UID)

	parts.status.SetClock(testingclock.NewFakeClock(synced.Add(time.Hour)))
	got, ok := parts.podView(k).GetPod(pod.Namespace, pod.Name)
	if !ok || got.Status.Phase != v1.PodRunning {
		t.Fatalf("GET after a sync: %v %+v", ok, got)
	}
	for _, c := range got.Status.Conditions {
		if !c.LastTransitionTime.Time.Equal(synced) {
			t.Errorf("condition %s dated %v, want the sync's time %v", c.Type, c.LastTransitionTime.Time, synced)
		}
	}
}

// activeDeadlineSeconds counts from the status's start time or, before a
// status has one, from the running sandbox's start: either way the retry
// queue wakes the pod at the deadline, and a pod past it is terminated.
func TestActiveDeadline(t *testing.T) {
	clk := newTestClock()
	now := clk.FakeClock.Now()
	running := &kubecontainer.PodState{Containers: []*kubecontainer.ContainerState{
		{Name: kubecontainer.InfraContainerName, Running: true, StartedAt: now.Add(-time.Second)}}}
	for _, tc := range []struct {
		name        string
		statusStart time.Time // zero: no start time in the status yet
		state       *kubecontainer.PodState
		wantWake    time.Time // zero: no wake asked for
		wantStopped bool
	}{
		{"not started", time.Time{}, nil, time.Time{}, false},
		{"status start", now.Add(-2 * time.Second), running, now.Add(time.Second), false},
		{"sandbox start before the status", time.Time{}, running, now.Add(2 * time.Second), false},
		{"past the deadline", now.Add(-4 * time.Second), running, time.Time{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, parts := newKubelet(t, containertest.NewFakeClient(), testOptions{Clock: clk})
			pod := desiredPod("p", "img:1")
			secs := int64(3)
			pod.Spec.ActiveDeadlineSeconds = &secs
			if !tc.statusStart.IsZero() {
				start := metav1.NewTime(tc.statusStart)
				k.status.Set(pod.UID, v1.PodStatus{StartTime: &start})
			}
			term := k.activeDeadline(pod, tc.state)
			wake, _ := parts.retries.Next(pod.UID)
			if !wake.Equal(tc.wantWake) {
				t.Errorf("wake at %v, want %v", wake.Sub(now), tc.wantWake.Sub(now))
			}
			if stopped := term != nil; stopped != tc.wantStopped {
				t.Errorf("terminated %v, want %v", stopped, tc.wantStopped)
			}
			if term != nil && (term.Cause != lifecycle.DeadlineExceeded || term.Reason != "DeadlineExceeded" || term.Message != messageDeadlineExceeded || term.Grace != 30*time.Second) {
				t.Errorf("termination %+v, want the kubelet's DeadlineExceeded within the pod's grace", term)
			}
		})
	}
}

// The API may compute a pod's status (the fallback, before its worker
// synced it) while Run starts: under the race detector, reading Run's
// context there raced with Run setting it.
func TestStatusFallbackWhileRunStarts(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1")
	k, parts := newKubelet(t, fake, testOptions{Clock: newTestClock()})
	_, stop := parts.run(k)
	if st := k.FallbackStatus(desiredPod("p", "img:1")); st.Phase != v1.PodPending {
		t.Errorf("a pod no worker synced yet is %s, want Pending", st.Phase)
	}
	stop()
}
