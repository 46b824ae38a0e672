package kuberuntime

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
)

// stopPod has sidecars s1 and s2 (declared in that order), apps a and b,
// and a preStop exec hook on a.
func stopPod() *v1.Pod {
	p := containertest.Pod(v1.RestartPolicyAlways, "a", "b")
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []v1.Container{
		{Name: "s1", Image: "img:1", RestartPolicy: &always},
		{Name: "s2", Image: "img:1", RestartPolicy: &always},
	}
	p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
	return p
}

// callIndex is the position of call in calls, failing the test if absent.
func callIndex(t *testing.T, calls []string, call string) int {
	t.Helper()
	i := slices.Index(calls, call)
	if i < 0 {
		t.Fatalf("no call %q in %v", call, calls)
	}
	return i
}

// StopAll stops in the kubelet's order: an app after its preStop hook,
// sidecars once every app is stopped (the last declared first), the infra
// container last. A grace of 0 stops everything without hooks.
func TestStopAllOrder(t *testing.T) {
	pod := stopPod()
	b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
	infra := b.C(pod, infraName, true, 0, "")
	s1, s2 := b.C(pod, "s1", true, 0, ""), b.C(pod, "s2", true, 0, "")
	a, bb := b.C(pod, "a", true, 0, ""), b.C(pod, "b", true, 0, "")
	state := containertest.State(infra, s1, s2, a, bb)
	all := []*kubecontainer.ContainerState{infra, s1, s2, a, bb}

	t.Run("graceful", func(t *testing.T) {
		fake := containertest.NewFakeClient()
		m := newTestManager(t, Config{}, fake)
		if err := m.StopAll(context.Background(), pod, state, all, nil, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		calls := fake.Calls()
		hook := callIndex(t, calls, "exec "+a.ID+" drain")
		stopA, stopB := callIndex(t, calls, "stop "+a.ID), callIndex(t, calls, "stop "+bb.ID)
		stopS1, stopS2 := callIndex(t, calls, "stop "+s1.ID), callIndex(t, calls, "stop "+s2.ID)
		stopInfra := callIndex(t, calls, "stop "+infra.ID)
		if hook > stopA {
			t.Errorf("a stopped before its preStop hook ran: %v", calls)
		}
		if stopA > stopS2 || stopB > stopS2 || stopS2 > stopS1 || stopS1 > stopInfra {
			t.Errorf("order %v: want apps, then s2, s1, then the infra container", calls)
		}
		if len(calls) != 6 {
			t.Errorf("calls %v: want one hook and five stops", calls)
		}
	})
	t.Run("grace 0: no hooks", func(t *testing.T) {
		fake := containertest.NewFakeClient()
		m := newTestManager(t, Config{}, fake)
		if err := m.StopAll(context.Background(), pod, state, all, nil, 0); err != nil {
			t.Fatal(err)
		}
		if n, e := fake.CountCalls("stop"), fake.CountCalls("exec"); n != 5 || e != 0 {
			t.Errorf("%d stops and %d hooks, want 5 and none", n, e)
		}
	})
	t.Run("failures are joined, the rest still stopped", func(t *testing.T) {
		fake := containertest.NewFakeClient()
		m := newTestManager(t, Config{}, fake)
		boom := errors.New("boom")
		fake.InjectError("stop", boom)
		err := m.StopAll(context.Background(), pod, state, all, nil, 10*time.Second)
		if !errors.Is(err, boom) {
			t.Fatalf("error %v, want the runtime's", err)
		}
		if n := fake.CountCalls("stop"); n != 5 {
			t.Errorf("%d stops tried, want 5", n)
		}
	})
	t.Run("a failed hook does not keep the container running", func(t *testing.T) {
		fake := containertest.NewFakeClient()
		fake.SetExecResult(1, "no")
		m := newTestManager(t, Config{}, fake)
		if err := m.StopAll(context.Background(), pod, state, []*kubecontainer.ContainerState{a}, nil, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if calls := fake.Calls(); !slices.Equal(calls, []string{"exec " + a.ID + " drain", "stop " + a.ID}) {
			t.Errorf("calls %v", calls)
		}
	})
}

// StopPod stops the running containers and RemovePod (once StopPod
// succeeded, as a pod worker calls them: terminating, then forgotten)
// removes every container; with nothing there neither acts.
func TestStopAndRemovePod(t *testing.T) {
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
	infra, running, dead := b.C(pod, infraName, true, 0, ""), b.C(pod, "a", true, 0, ""), b.C(pod, "a", false, 1, "")
	state := containertest.State(infra, running, dead)
	cases := []struct {
		name      string
		state     *kubecontainer.PodState
		inject    string
		wantActed bool
		wantErr   bool
		wantCalls []string // sorted
	}{
		{"no state", nil, "", false, false, nil},
		{"no containers", containertest.State(), "", false, false, nil},
		{"stops the running, removes all", state, "", true, false,
			[]string{"remove " + dead.ID, "remove " + infra.ID, "remove " + running.ID, "stop " + infra.ID, "stop " + running.ID}},
		{"stop fails: nothing removed", state, "stop", true, true,
			[]string{"stop " + infra.ID, "stop " + running.ID}},
		{"remove fails: reported after the first (the newest)", state, "remove", true, true,
			[]string{"remove " + dead.ID, "stop " + infra.ID, "stop " + running.ID}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := containertest.NewFakeClient()
			m := newTestManager(t, Config{}, fake)
			if c.inject != "" {
				fake.InjectError(c.inject, errors.New("boom"))
			}
			acted, err := m.StopPod(context.Background(), pod, c.state, GracePeriod(pod))
			if err == nil {
				var removed bool
				removed, err = m.RemovePod(context.Background(), c.state)
				acted = acted || removed
			}
			if acted != c.wantActed || (err != nil) != c.wantErr {
				t.Errorf("acted %v, error %v; want %v, error %v", acted, err, c.wantActed, c.wantErr)
			}
			calls := fake.Calls()
			slices.Sort(calls)
			slices.Sort(c.wantCalls)
			if !slices.Equal(calls, c.wantCalls) {
				t.Errorf("calls %v, want %v", calls, c.wantCalls)
			}
		})
	}
}

func TestGracePeriod(t *testing.T) {
	secs := func(s int64) *int64 { return &s }
	cases := []struct {
		name           string
		spec, deletion *int64
		want           time.Duration
	}{
		{"default", nil, nil, 30 * time.Second},
		{"spec", secs(10), nil, 10 * time.Second},
		{"deletion overrides the spec", secs(60), secs(5), 5 * time.Second},
		{"0 is the minimum stop grace", secs(0), nil, MinStopGrace},
		{"deletion of 0 too", nil, secs(0), MinStopGrace},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			pod.Spec.TerminationGracePeriodSeconds, pod.DeletionGracePeriodSeconds = c.spec, c.deletion
			if got := GracePeriod(pod); got != c.want {
				t.Errorf("%v, want %v", got, c.want)
			}
		})
	}
}

// Without the pod's spec, a pod's grace is the one on its containers'
// labels.
func TestLabelGrace(t *testing.T) {
	cases := []struct {
		labels []string // each container's grace label ("-": none)
		want   time.Duration
	}{
		{[]string{"-"}, 30 * time.Second},
		{[]string{"7"}, 7 * time.Second},
		{[]string{"-", "x", "12"}, 12 * time.Second},
		{[]string{"0"}, MinStopGrace},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.labels, ","), func(t *testing.T) {
			st := &kubecontainer.PodState{}
			for i, l := range c.labels {
				cs := &kubecontainer.ContainerState{ID: strconv.Itoa(i), Labels: map[string]string{}}
				if l != "-" {
					cs.Labels[kubecontainer.LabelGracePeriod] = l
				}
				st.Containers = append(st.Containers, cs)
			}
			if got := LabelGrace(st); got != c.want {
				t.Errorf("%v, want %v", got, c.want)
			}
		})
	}
}

// A pod stopped without its spec is stopped within the grace on its
// labels, without hooks to run.
func TestStopPodWithoutSpec(t *testing.T) {
	fake := containertest.NewFakeClient()
	m := newTestManager(t, Config{}, fake)
	pod := stopPod()
	b := &containertest.Builder{}
	a := b.C(pod, "a", true, 0, "")
	a.Labels = map[string]string{kubecontainer.LabelGracePeriod: "3"}
	state := containertest.State(a)
	acted, err := m.StopPod(context.Background(), nil, state, LabelGrace(state))
	if !acted || err != nil {
		t.Fatalf("stop: acted %v, %v", acted, err)
	}
	if acted, err = m.RemovePod(context.Background(), state); !acted || err != nil {
		t.Fatalf("remove: acted %v, %v", acted, err)
	}
	if calls := fake.Calls(); !slices.Equal(calls, []string{"stop " + a.ID, "remove " + a.ID}) {
		t.Errorf("calls %v: want a stopped without its hook, then removed", calls)
	}
}

// RemoveContainer removes the container and its log link; a failed remove
// keeps the link.
func TestRemoveContainerDropsLogLink(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run("fail="+strconv.FormatBool(fail), func(t *testing.T) {
			fake := containertest.NewFakeClient()
			m := newTestManager(t, Config{}, fake)
			dir := t.TempDir()
			m.logLinks = NewLogLinks(NewLogSettings(ContainerLogs{Dir: dir}))
			id := strings.Repeat("ab", 32)
			logPath := filepath.Join(t.TempDir(), id+"-json.log")
			if err := os.WriteFile(logPath, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			c := &kubecontainer.ContainerState{ID: id, Name: "a", LogPath: logPath, Running: true,
				Labels: map[string]string{kubecontainer.LabelPodName: "p", kubecontainer.LabelPodNamespace: "default"}}
			m.logLinks.Link(c)
			link := filepath.Join(dir, "p_default_a-"+id+".log")
			if target, err := os.Readlink(link); err != nil || target != logPath {
				t.Fatalf("link %q %v, want to %s", target, err, logPath)
			}
			if fail {
				fake.InjectError("remove", errors.New("boom"))
			}
			err := m.RemoveContainer(context.Background(), c)
			if (err != nil) != fail {
				t.Fatalf("error %v", err)
			}
			if _, err := os.Lstat(link); os.IsNotExist(err) != !fail {
				t.Errorf("link exists: %v, want %v", !os.IsNotExist(err), fail)
			}
		})
	}
}

// runHook runs each kind of handler and fails as the hook does.
func TestRunHook(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			http.Error(w, "nope", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	p, _ := strconv.Atoi(port)
	get := func(path string) *v1.LifecycleHandler {
		return &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(int32(p))}}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name     string
		ctx      context.Context
		h        *v1.LifecycleHandler
		execCode int
		execErr  error
		wantErr  string // "" for success
	}{
		{"exec succeeds", context.Background(), &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"ok"}}}, 0, nil, ""},
		{"exec exits non-zero", context.Background(), &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"bad"}}}, 3, nil, "command 'bad' exited with 3: out"},
		{"exec cannot run", context.Background(), &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}, 0, errors.New("no such container"), "no such container"},
		{"http ok", context.Background(), get("/"), 0, nil, ""},
		{"http 500", context.Background(), get("/bad"), 0, nil, "GET http://"},
		{"http named port unknown", context.Background(), &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("web")}}, 0, nil, "web"},
		{"sleep ends with the context", cancelled, &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 3600}}, 0, nil, ""},
		{"no action", context.Background(), &v1.LifecycleHandler{}, 0, nil, "no action"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := containertest.NewFakeClient()
			fake.SetExecResult(c.execCode, "out\n")
			if c.execErr != nil {
				fake.InjectError("exec", c.execErr)
			}
			m := newTestManager(t, Config{}, fake)
			err := m.runHook(c.ctx, containertest.Pod(v1.RestartPolicyAlways, "a"), &v1.Container{Name: "a"}, "cid", host, c.h)
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Errorf("error %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestDeadlineOr(t *testing.T) {
	def := time.Now().Add(time.Hour)
	if got := deadlineOr(context.Background(), def); !got.Equal(def) {
		t.Errorf("no deadline: %v, want the default", got)
	}
	d := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), d)
	defer cancel()
	if got := deadlineOr(ctx, def); !got.Equal(d) {
		t.Errorf("%v, want the context's deadline", got)
	}
}
