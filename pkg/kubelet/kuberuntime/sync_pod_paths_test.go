package kuberuntime

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/credentialprovider"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/images"
)

// newSyncManager is a Manager over fake for SyncPod, timed by a fake clock,
// with no probes and a silent relist.
func newSyncManager(t *testing.T, cfg Config, fake *containertest.FakeClient) (*Manager, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Now())
	cfg.NodeName, cfg.InfraImage, cfg.Clock = "n", "pause:1", clk
	m := newTestManager(t, cfg, fake)
	m.images = images.NewManager(images.Config{Policy: images.Policy{}, InfraImage: "pause:1", RecordPath: filepath.Join(t.TempDir(), "images.json")}, images.Deps{Runtime: fake})
	m.probes, m.relist = noProbes{}, noRelist{}
	return m, clk
}

func counterValue(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var pb dto.Metric
	if err := c.Write(&pb); err != nil {
		t.Fatal(err)
	}
	return pb.GetCounter().GetValue()
}

// created is the pod containers (by container name) the fake was asked to
// create, in order.
func created(calls []string) []string {
	var out []string
	for _, c := range calls {
		if name, ok := strings.CutPrefix(c, "create "); ok {
			if n, err := kubecontainer.ParseName(name); err == nil {
				out = append(out, n.Container)
			} else {
				out = append(out, name)
			}
		}
	}
	return out
}

func startErrorReason(err error) string {
	var ce *kubecontainer.StartError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}

// A sandbox that cannot be made fails the sync, counts a failed pod start
// and asks for a retry as the back-off says: at once after the first
// failure, then 10 s later; before then the pod waits without a call to
// Docker; once the cause is gone the pod starts.
func TestSyncPodSandboxFailureBacksOff(t *testing.T) {
	cases := []struct {
		name       string
		cfg        Config
		images     []string
		inject     string // the fake's method that fails
		cgroupFail bool
		wantReason string // "": Docker's own error, as it is
		fix        func(f *containertest.FakeClient, cg *fakeCgroups)
	}{
		{"infra image absent", Config{}, []string{"img:1"}, "", false, reasonInfraImageAbsent,
			func(f *containertest.FakeClient, _ *fakeCgroups) { f.AddImages("pause:1") }},
		{"infra create fails", Config{}, []string{"img:1", "pause:1"}, "create", false, "",
			func(f *containertest.FakeClient, _ *fakeCgroups) { f.InjectError("create", nil) }},
		{"pause image build fails", Config{PauseBinary: "/pause"}, []string{"img:1"}, "build", false, "",
			func(f *containertest.FakeClient, _ *fakeCgroups) { f.InjectError("build", nil) }},
		{"pod cgroup fails", Config{}, []string{"img:1", "pause:1"}, "", true, reasonCreateSandbox,
			func(_ *containertest.FakeClient, cg *fakeCgroups) { delete(cg.fail, "kubepods/besteffort/poduid1") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := containertest.NewFakeClient(c.images...)
			cg := newFakeCgroups()
			if c.cgroupFail {
				cg.fail["kubepods/besteffort/poduid1"] = errors.New("no memory controller")
				c.cfg.Cgroups = cg
			}
			m, clk := newSyncManager(t, c.cfg, fake)
			if c.inject != "" {
				fake.InjectError(c.inject, errors.New("daemon says no"))
			}
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			t0 := clk.Now()

			r, err := m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID))
			if err == nil || startErrorReason(err) != c.wantReason || (c.wantReason == "" && err.Error() != "daemon says no") {
				t.Fatalf("first sync: error %v, want a %q", err, c.wantReason)
			}
			if !r.Acted || !r.RetryAt.Equal(t0) {
				t.Errorf("first sync: acted %v, retry at %v; want acted, a retry at once", r.Acted, r.RetryAt.Sub(t0))
			}
			if got := created(fake.Calls()); slices.Contains(got, "a") {
				t.Errorf("created %v: an app container without its sandbox", got)
			}
			if n := counterValue(t, m.cfg.Metrics.StartedPodErrors); n != 1 {
				t.Errorf("%v failed pod starts counted, want 1", n)
			}

			r, err = m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID))
			if err == nil || !r.RetryAt.Equal(t0.Add(10*time.Second)) {
				t.Fatalf("second sync: error %v, retry at +%v; want a failure and a retry at +10s", err, r.RetryAt.Sub(t0))
			}
			fake.Calls()

			clk.Step(5 * time.Second)
			r, err = m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID))
			if err != nil || r.Acted || !r.RetryAt.Equal(t0.Add(10*time.Second)) {
				t.Errorf("in back-off: acted %v, error %v, retry at +%v; want a wait until +10s", r.Acted, err, r.RetryAt.Sub(t0))
			}
			if calls := fake.Calls(); len(calls) != 0 {
				t.Errorf("in back-off, Docker was called: %v", calls)
			}

			c.fix(fake, cg)
			clk.Step(5 * time.Second)
			r, err = m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID))
			if err != nil {
				t.Fatalf("after the fix: %v", err)
			}
			if got := created(fake.Calls()); !slices.Equal(got, []string{infraName, "a"}) {
				t.Errorf("after the fix created %v, want the infra container then a", got)
			}
			if why, ok := r.Waiting["a"]; !ok || why != nil {
				t.Errorf("waiting %v: want a's reason cleared", r.Waiting)
			}
			if n, e := counterValue(t, m.cfg.Metrics.StartedPods), counterValue(t, m.cfg.Metrics.StartedPodErrors); n != 3 || e != 2 {
				t.Errorf("%v pod starts counted, %v failed; want 3, 2 (the sync in back-off starts none)", n, e)
			}
		})
	}
}

// An infra container that fails to start is removed, not left behind.
func TestSyncPodInfraStartFailureRemovesIt(t *testing.T) {
	fake := containertest.NewFakeClient("img:1", "pause:1")
	m, _ := newSyncManager(t, Config{}, fake)
	fake.InjectError("start", errors.New("oci runtime error"))
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	if _, err := m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID)); err == nil {
		t.Fatal("no error")
	}
	calls := fake.Calls()
	if i := slices.IndexFunc(calls, func(c string) bool { return strings.HasPrefix(c, "remove ") }); i < 0 {
		t.Errorf("calls %v: the infra container was not removed", calls)
	}
}

// A container's own failures: a create that fails waits with its reason
// and backs off; one that fails to start is left as the record of why (its
// reason cleared), one whose postStart hook fails is killed and waits with
// PostStartHookError (the hook's words); neither is backed off here.
func TestSyncPodContainerFailures(t *testing.T) {
	hook := func(p *v1.Pod) {
		p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"setup"}}}}
	}
	cases := []struct {
		name       string
		tweak      func(*v1.Pod)
		inject     string
		execCode   int
		wantReason string // of the error; "" for none
		wantWait   string // a's waiting reason; "-" cleared
		wantRetry  bool
		wantStop   bool
	}{
		{"started", nil, "", 0, "", "-", false, false},
		{"create fails", nil, "create", 0, reasonCreateError, reasonCreateError, true, false},
		{"start fails", nil, "start", 0, reasonRunError, "-", false, false},
		{"postStart ok", hook, "", 0, "", "-", false, false},
		{"postStart fails: killed", hook, "", 2, reasonPostStartFailed, reasonPostStartFailed, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := containertest.NewFakeClient("img:1", "pause:1")
			fake.SetExecResult(c.execCode, "")
			m, clk := newSyncManager(t, Config{}, fake)
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			if c.tweak != nil {
				c.tweak(pod)
			}
			b := &containertest.Builder{T0: clk.Now().Add(-time.Hour)}
			state := containertest.State(b.C(pod, infraName, true, 0, ""))
			if c.inject != "" {
				fake.InjectError(c.inject, errors.New("daemon says no"))
			}
			r, err := m.SyncPod(context.Background(), pod, state, recordOf(m, pod.UID))
			if got := startErrorReason(err); got != c.wantReason || (err != nil) != (c.wantReason != "") {
				t.Fatalf("error %v, want reason %q", err, c.wantReason)
			}
			why, ok := r.Waiting["a"]
			switch {
			case !ok:
				t.Errorf("a's waiting reason not given")
			case c.wantWait == "-" && why != nil, c.wantWait != "-" && (why == nil || why.Reason != c.wantWait):
				t.Errorf("waiting %+v, want %q", why, c.wantWait)
			}
			if !r.RetryAt.IsZero() != c.wantRetry {
				t.Errorf("retry at %v, want a retry: %v", r.RetryAt, c.wantRetry)
			}
			calls := fake.Calls()
			stopped := slices.IndexFunc(calls, func(s string) bool { return strings.HasPrefix(s, "stop ") }) >= 0
			if stopped != c.wantStop {
				t.Errorf("calls %v: stopped %v, want %v", calls, stopped, c.wantStop)
			}
			if c.wantReason == reasonRunError && slices.IndexFunc(calls, func(s string) bool { return strings.HasPrefix(s, "remove ") }) >= 0 {
				t.Errorf("calls %v: the container that failed to start was removed", calls)
			}
			if n := counterValue(t, m.cfg.Metrics.StartedContainers.WithLabelValues("container")); n != 1 {
				t.Errorf("%v container starts counted, want 1", n)
			}
			if c.wantReason != "" {
				if n := counterValue(t, m.cfg.Metrics.StartedContainerErrors.WithLabelValues("container", c.wantReason)); n != 1 {
					t.Errorf("%v start errors counted, want 1", n)
				}
			}
		})
	}
}

// Init containers run one at a time, in order, before the app containers.
func TestSyncPodInitContainersInOrder(t *testing.T) {
	fake := containertest.NewFakeClient("img:1", "pause:1")
	m, clk := newSyncManager(t, Config{}, fake)
	pod := containertest.PodWithInit()
	b := &containertest.Builder{T0: clk.Now().Add(-time.Hour)}
	infra := b.C(pod, infraName, true, 0, "")
	i1, i2 := b.C(pod, "i1", false, 0, ""), b.C(pod, "i2", false, 0, "")
	for _, step := range []struct {
		state *kubecontainer.PodState
		want  []string
	}{
		{nil, []string{infraName, "i1"}},
		{containertest.State(infra), []string{"i1"}},
		{containertest.State(infra, i1), []string{"i2"}},
		{containertest.State(infra, i1, i2), []string{"a"}},
	} {
		if _, err := m.SyncPod(context.Background(), pod, step.state, recordOf(m, pod.UID)); err != nil {
			t.Fatal(err)
		}
		if got := created(fake.Calls()); !slices.Equal(got, step.want) {
			t.Errorf("created %v, want %v", got, step.want)
		}
	}
	if n := counterValue(t, m.cfg.Metrics.StartedContainers.WithLabelValues("init_container")); n != 3 {
		t.Errorf("%v init container starts counted, want 3", n)
	}
}

// A container that keeps crashing is restarted at once, then after 10 s:
// in between the sync waits and asks to be woken when the back-off ends.
func TestSyncPodCrashBackOff(t *testing.T) {
	fake := containertest.NewFakeClient("img:1", "pause:1")
	m, clk := newSyncManager(t, Config{}, fake)
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	b := &containertest.Builder{T0: clk.Now().Add(-time.Minute)}
	infra, crashed := b.C(pod, infraName, true, 0, ""), b.C(pod, "a", false, 1, "")
	state := containertest.State(infra, crashed)
	clk.SetTime(crashed.FinishedAt)

	r, err := m.SyncPod(context.Background(), pod, state, recordOf(m, pod.UID))
	if err != nil || !r.Acted || !r.RetryAt.IsZero() {
		t.Fatalf("first crash: acted %v, error %v, retry %v; want a restart", r.Acted, err, r.RetryAt)
	}
	if got := created(fake.Calls()); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("created %v", got)
	}
	if n := counterValue(t, m.cfg.Metrics.ContainerRestarts); n != 1 {
		t.Errorf("%v restarts counted, want 1", n)
	}
	// It crashed again at once.
	again := *crashed
	again.ID, again.RestartCount = "a-again", 1
	state = containertest.State(infra, &again, crashed)
	clk.Step(time.Second)
	r, err = m.SyncPod(context.Background(), pod, state, recordOf(m, pod.UID))
	if err != nil || r.Acted || !r.RetryAt.Equal(crashed.FinishedAt.Add(10*time.Second)) {
		t.Fatalf("second crash: acted %v, error %v, retry at %v; want a wait until the exit +10s", r.Acted, err, r.RetryAt.Sub(crashed.FinishedAt))
	}
	if calls := fake.Calls(); len(calls) != 0 {
		t.Errorf("in back-off, Docker was called: %v", calls)
	}
	clk.SetTime(crashed.FinishedAt.Add(10 * time.Second))
	if r, err = m.SyncPod(context.Background(), pod, state, recordOf(m, pod.UID)); err != nil || !r.Acted {
		t.Fatalf("back-off over: acted %v, %v", r.Acted, err)
	}
	if n := counterValue(t, m.cfg.Metrics.ContainerRestarts); n != 2 {
		t.Errorf("%v restarts counted, want 2", n)
	}
	// The back-off is the pod's record's, which goes with its worker.
	if recordOf(m, pod.UID).backoff.len() == 0 {
		t.Error("no back-off kept in the pod's record")
	}
}

// A pod whose infra container died has its containers killed at once,
// without their preStop hooks (nothing of the pod's network is left for
// them), and is recreated.
func TestSyncPodSandboxGoneKillsWithoutHooks(t *testing.T) {
	fake := containertest.NewFakeClient("img:1", "pause:1")
	m, clk := newSyncManager(t, Config{}, fake)
	pod := stopPod()
	pod.Spec.InitContainers = nil
	b := &containertest.Builder{T0: clk.Now().Add(-time.Hour)}
	infra, a := b.C(pod, infraName, false, 0, ""), b.C(pod, "a", true, 0, "")
	r, err := m.SyncPod(context.Background(), pod, containertest.State(infra, a), recordOf(m, pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Stopping[a.ID] {
		t.Errorf("stopping %v, want a", r.Stopping)
	}
	calls := fake.Calls()
	if fake.CountCalls("exec") != 0 || !slices.Contains(calls, "stop "+a.ID) {
		t.Errorf("calls %v: want a stopped without its hook", calls)
	}
	if got := created(calls); !slices.Equal(got, []string{infraName, "a", "b"}) {
		t.Errorf("created %v", got)
	}
}

// A pod's back-off forgets entries idle for long (each sync collects them).
func TestCollectBackoff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	bo := newBackoff(0, 0, clk)
	bo.restarted(backoffKey("a", "h"), clk.Now())
	bo.failed(backoffKey("b", "h"), clk.Now())
	bo.gc(clk.Now())
	if n := bo.len(); n != 2 {
		t.Fatalf("%d entries, want the fresh ones kept", n)
	}
	clk.Step(time.Hour)
	bo.gc(clk.Now())
	if n := bo.len(); n != 0 {
		t.Errorf("%d entries, want the stale one collected", n)
	}
}

// pullBackOffImages is an image manager whose image of container a is in
// pull back-off until until.
type pullBackOffImages struct{ until time.Time }

func (pullBackOffImages) Ensure(context.Context, *v1.Pod, *v1.Container, func() *credentialprovider.Keyring) (time.Duration, error) {
	return 0, nil
}

func (p pullBackOffImages) BackOff(_ *v1.Pod, c *v1.Container) (time.Time, *kubecontainer.StartError) {
	if c.Name != "a" {
		return time.Time{}, nil
	}
	return p.until, &kubecontainer.StartError{Reason: kubecontainer.ReasonImagePullBackOff, Message: "Back-off pulling image"}
}

// A container whose image is in pull back-off waits with that reason while
// the others start, and the pod is retried when the back-off ends.
func TestSyncPodImagePullBackOff(t *testing.T) {
	fake := containertest.NewFakeClient("img:1", "pause:1")
	m, clk := newSyncManager(t, Config{}, fake)
	until := clk.Now().Add(20 * time.Second)
	m.images = pullBackOffImages{until: until}
	pod := containertest.Pod(v1.RestartPolicyAlways, "a", "b")
	r, err := m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	if why := r.Waiting["a"]; why == nil || why.Reason != kubecontainer.ReasonImagePullBackOff {
		t.Errorf("a waits with %+v, want %s", why, kubecontainer.ReasonImagePullBackOff)
	}
	if !r.RetryAt.Equal(until) {
		t.Errorf("retry at %v, want when the pull back-off ends", r.RetryAt)
	}
	if got := created(fake.Calls()); !slices.Equal(got, []string{infraName, "b"}) {
		t.Errorf("created %v, want the infra container and b", got)
	}
	if got := imageOf(pod, "a"); got != "img:1" {
		t.Errorf("image of a %q", got)
	}
	if got := imageOf(pod, "none"); got != "" {
		t.Errorf("image of an unknown container %q", got)
	}
}

// sickProbes reports the containers of IDs as having failed their liveness
// probe.
type sickProbes map[string]bool

func (p sickProbes) Unhealthy(id string) (bool, string) { return p[id], "liveness" }
func (sickProbes) Started(*v1.Container, string) bool   { return true }

// The Killing event of each container a sync stops says why in the
// kubelet's words: the probe that failed, the changed definition, or the
// plain "Stopping container" for the rest.
func TestSyncPodKillingEvents(t *testing.T) {
	rec := events.New("n")
	fake := containertest.NewFakeClient("img:1", "pause:1")
	m, clk := newSyncManager(t, Config{Events: rec}, fake)
	pod := containertest.Pod(v1.RestartPolicyAlways, "a", "b")
	b := &containertest.Builder{T0: clk.Now().Add(-time.Hour)}
	infra, a, old, gone := b.C(pod, infraName, true, 0, ""), b.C(pod, "a", true, 0, ""), b.C(pod, "b", true, 0, "old"), b.C(pod, "gone", true, 0, "")
	m.probes = sickProbes{a.ID: true}
	r, err := m.SyncPod(context.Background(), pod, containertest.State(infra, a, old, gone), recordOf(m, pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Stopping[a.ID] || !r.Stopping[old.ID] || !r.Stopping[gone.ID] || len(r.Stopping) != 3 {
		t.Errorf("stopping %v, want a, b and gone", r.Stopping)
	}
	got := map[string]string{}
	for _, e := range rec.List().Items {
		if e.Reason == "Killing" {
			got[e.InvolvedObject.FieldPath] = e.Message
		}
	}
	want := map[string]string{
		"spec.containers{a}":    "Container a failed liveness probe, will be restarted",
		"spec.containers{b}":    "Container b definition changed, will be restarted",
		"spec.containers{gone}": "Stopping container gone",
	}
	if !maps.Equal(got, want) {
		t.Errorf("Killing events %v, want %v", got, want)
	}
}
