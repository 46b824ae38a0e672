package kubelet

import (
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func testPod(policy v1.RestartPolicy, names ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid1"}, Spec: v1.PodSpec{RestartPolicy: policy}}
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "img:1"})
	}
	return p
}

// builder makes container states with increasing creation times.
type builder struct {
	t0 time.Time
	n  int
}

func (b *builder) c(pod *v1.Pod, name string, running bool, exit int, hashOverride string) *kubecontainer.ContainerState {
	b.n++
	hash := hashOverride
	if hash == "" {
		if name == infraName {
			hash = dockertools.HashInfra(pod)
		} else {
			if c := containerSpec(pod, name); c != nil {
				hash = dockertools.HashContainer(pod, c)
			}
		}
	}
	created := b.t0.Add(time.Duration(b.n) * time.Second)
	return &kubecontainer.ContainerState{
		ID: name + "-" + string(rune('0'+b.n)), Name: name, Hash: hash, Running: running, ExitCode: exit,
		CreatedAt: created, StartedAt: created, FinishedAt: created.Add(time.Second),
	}
}

func state(cs ...*kubecontainer.ContainerState) *kubecontainer.PodState {
	s := &kubecontainer.PodState{UID: "uid1", Name: "p", Namespace: "default", Containers: cs}
	kubecontainer.SortNewestFirst(s.Containers)
	return s
}

func summarize(pod *v1.Pod, a podActions) string {
	var parts []string
	if a.createInfra {
		parts = append(parts, "create-infra")
	}
	var kill []string
	for _, c := range a.kill {
		kill = append(kill, c.ID)
	}
	sort.Strings(kill)
	if len(kill) > 0 {
		parts = append(parts, "kill:"+strings.Join(kill, ","))
	}
	if a.startInit >= 0 {
		n := pod.Spec.InitContainers[a.startInit].Name
		parts = append(parts, "init:"+n+"#"+string(rune('0'+a.restarts[n])))
	}
	for _, i := range a.start {
		n := pod.Spec.Containers[i].Name
		parts = append(parts, "start:"+n+"#"+string(rune('0'+a.restarts[n])))
	}
	if len(a.waiting) > 0 {
		parts = append(parts, "backoff:"+strings.Join(a.waiting, ","))
	}
	return strings.Join(parts, " ")
}

func TestComputePodActions(t *testing.T) {
	always := testPod(v1.RestartPolicyAlways, "a", "b")
	never := testPod(v1.RestartPolicyNever, "a")
	onFailure := testPod(v1.RestartPolicyOnFailure, "a")
	cases := []struct {
		name  string
		pod   *v1.Pod
		state func(b *builder, p *v1.Pod) *kubecontainer.PodState
		want  string
	}{
		{"new pod", always, func(b *builder, p *v1.Pod) *kubecontainer.PodState { return nil }, "create-infra start:a#0 start:b#0"},
		{"steady state does nothing", always, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "a", true, 0, ""), b.c(p, "b", true, 0, ""))
		}, ""},
		{"changed spec replaces only that container", always, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "a", true, 0, "oldhash"), b.c(p, "b", true, 0, ""))
		}, "kill:a-2 start:a#1"},
		{"infra died: whole pod recreated", always, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, false, 0, ""), b.c(p, "a", true, 0, ""), b.c(p, "b", true, 0, ""))
		}, "create-infra kill:a-2,b-3 start:a#1 start:b#1"},
		{"infra hash changed (ports): whole pod recreated", always, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, "oldports"), b.c(p, "a", true, 0, ""), b.c(p, "b", true, 0, ""))
		}, "create-infra kill:POD-1,a-2,b-3 start:a#1 start:b#1"},
		{"two running instances: newest kept", always, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "a", true, 0, ""), b.c(p, "a", true, 0, ""), b.c(p, "b", true, 0, ""))
		}, "kill:a-2"},
		{"exited under Always restarts", always, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "a", false, 0, ""), b.c(p, "b", true, 0, ""))
		}, "start:a#1"},
		{"succeeded under OnFailure stays; pod done, infra stopped", onFailure, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "a", false, 0, ""))
		}, "kill:POD-1"},
		{"failed under OnFailure restarts", onFailure, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "a", false, 1, ""))
		}, "start:a#1"},
		{"failed under Never stays", never, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "a", false, 1, ""))
		}, "kill:POD-1"},
		{"finished pod without infra stays finished", never, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, false, 0, ""), b.c(p, "a", false, 1, ""))
		}, ""},
		{"failed liveness: killed now, restarted on a later sync", always, func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			sick := b.c(p, "a", true, 0, "")
			sick.ID = "sick-a"
			return state(b.c(p, infraName, true, 0, ""), sick, b.c(p, "b", true, 0, ""))
		}, "kill:sick-a"},
		{"init: first runs first", withInit(), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""))
		}, "init:i1#0"},
		{"init: waits for the running one", withInit(), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "i1", true, 0, ""))
		}, ""},
		{"init: second after the first succeeded", withInit(), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "i1", false, 0, ""))
		}, "init:i2#0"},
		{"init: failed one restarts under Always", withInit(), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "i1", false, 1, ""))
		}, "init:i1#1"},
		{"init done: apps start", withInit(), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "i1", false, 0, ""), b.c(p, "i2", false, 0, ""))
		}, "start:a#0"},
		{"init done before the agent restarted: nothing re-runs", withInit(), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "i1", false, 0, ""), b.c(p, "i2", false, 0, ""), b.c(p, "a", true, 0, ""))
		}, ""},
		{"new infra: init runs again", withInit(), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, "i1", false, 0, ""), b.c(p, "i2", false, 0, ""), b.c(p, infraName, false, 0, ""), b.c(p, "a", true, 0, ""))
		}, "create-infra kill:a-4 init:i1#1"},
		{"init failed under Never: pod failed, infra stopped", withInit(v1.RestartPolicyNever), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "i1", false, 1, ""))
		}, "kill:POD-1"},
		{"sidecar: started first", withSidecar(v1.RestartPolicyNever), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""))
		}, "init:s1#0"},
		{"sidecar: the next init container starts once it runs", withSidecar(v1.RestartPolicyNever), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "s1", true, 0, ""))
		}, "init:i2#0"},
		{"sidecar: waits for its startup probe", withSidecar(v1.RestartPolicyNever), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			infra := b.c(p, infraName, true, 0, "")
			s1 := b.c(p, "s1", true, 0, "")
			s1.ID = "unstarted-s1"
			return state(infra, s1)
		}, ""},
		{"sidecar: kept running beside the apps", withSidecar(v1.RestartPolicyNever), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "s1", true, 0, ""), b.c(p, "i2", false, 0, ""))
		}, "start:a#0"},
		{"sidecar: restarted under Never, apps untouched", withSidecar(v1.RestartPolicyNever), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "s1", false, 1, ""), b.c(p, "i2", false, 0, ""), b.c(p, "a", true, 0, ""))
		}, "init:s1#1"},
		{"sidecar: failed liveness kills it", withSidecar(v1.RestartPolicyAlways), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			infra := b.c(p, infraName, true, 0, "")
			s1 := b.c(p, "s1", true, 0, "")
			s1.ID = "sick-s1"
			return state(infra, s1, b.c(p, "i2", false, 0, ""), b.c(p, "a", true, 0, ""))
		}, "kill:sick-s1"},
		{"sidecar: pod done when its apps are; sidecar stopped", withSidecar(v1.RestartPolicyNever), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "s1", true, 0, ""), b.c(p, "i2", false, 0, ""), b.c(p, "a", false, 0, ""))
		}, "kill:POD-1,s1-2"},
		{"container removed from spec is stopped and removed", testPod(v1.RestartPolicyAlways, "a"), func(b *builder, p *v1.Pod) *kubecontainer.PodState {
			return state(b.c(p, infraName, true, 0, ""), b.c(p, "a", true, 0, ""), b.c(p, "gone", true, 0, "h"), b.c(p, "gone", false, 0, "h"))
		}, "kill:gone-3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &builder{t0: time.Now().Add(-time.Hour)}
			unhealthy := func(id string) bool { return strings.HasPrefix(id, "sick") }
			started := func(_ *v1.Container, id string) bool { return !strings.HasPrefix(id, "unstarted") }
			a := computePodActions(c.pod, c.state(b, c.pod), time.Now(), newBackoff(0, 0), unhealthy, started)
			if got := summarize(c.pod, a); got != c.want {
				t.Errorf("actions %q, want %q", got, c.want)
			}
		})
	}
}

func TestComputePodActionsBackoff(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, "a")
	bo := newBackoff(10*time.Second, 40*time.Second)
	b := &builder{t0: time.Now()}
	infra := b.c(pod, infraName, true, 0, "")
	crashed := b.c(pod, "a", false, 1, "")
	key := backoffKey(pod.UID, "a", crashed.Hash)
	now := crashed.FinishedAt

	// The first restart is immediate.
	if got := summarize(pod, computePodActions(pod, state(infra, crashed), now, bo, nil, nil)); got != "start:a#1" {
		t.Fatalf("first crash: %q", got)
	}
	bo.restarted(key, now)
	// The next waits 10 s from the exit, then 20, then 40 (max), then 40.
	for _, wait := range []time.Duration{10, 20, 40, 40} {
		wait *= time.Second
		if got := summarize(pod, computePodActions(pod, state(infra, crashed), now.Add(wait-time.Millisecond), bo, nil, nil)); got != "backoff:a" {
			t.Fatalf("before %v: %q, want backoff", wait, got)
		}
		if got := summarize(pod, computePodActions(pod, state(infra, crashed), now.Add(wait), bo, nil, nil)); got != "start:a#1" {
			t.Fatalf("at %v: %q, want a restart", wait, got)
		}
		bo.restarted(key, now)
	}
	// A container that ran ten minutes resets the back-off.
	longRun := *crashed
	longRun.StartedAt = crashed.FinishedAt.Add(-backoffReset)
	if got := summarize(pod, computePodActions(pod, state(infra, &longRun), now, bo, nil, nil)); got != "start:a#1" {
		t.Errorf("after a long run: %q, want an immediate restart", got)
	}
}

func TestBackoffDefaults(t *testing.T) {
	bo := newBackoff(0, 0)
	if bo.initial != 10*time.Second || bo.max != 300*time.Second {
		t.Errorf("defaults %v/%v, want 10s/300s", bo.initial, bo.max)
	}
	var delays []time.Duration
	for i := 0; i < 8; i++ {
		bo.restarted("k", time.Now())
		delays = append(delays, bo.entries["k"].delay)
	}
	want := []time.Duration{10, 20, 40, 80, 160, 300, 300, 300}
	for i := range want {
		if delays[i] != want[i]*time.Second {
			t.Errorf("delays %v, want %v seconds", delays, want)
			break
		}
	}
	bo.gc(time.Now().Add(11 * time.Minute))
	if len(bo.entries) != 0 {
		t.Error("gc kept a stale entry")
	}
}

// withSidecar is a pod with init containers s1 (a sidecar) then i2, and
// app a.
func withSidecar(policy v1.RestartPolicy) *v1.Pod {
	p := withInit(policy)
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers[0].Name, p.Spec.InitContainers[0].RestartPolicy = "s1", &always
	return p
}

func withInit(policy ...v1.RestartPolicy) *v1.Pod {
	p := testPod(v1.RestartPolicyAlways, "a")
	if len(policy) > 0 {
		p.Spec.RestartPolicy = policy[0]
	}
	p.Spec.InitContainers = []v1.Container{{Name: "i1", Image: "img:1"}, {Name: "i2", Image: "img:1"}}
	return p
}

func TestUsesPodIP(t *testing.T) {
	fieldEnv := func(path string) v1.Container {
		return v1.Container{Name: "c", Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}}}
	}
	hook := func(host string) v1.Container {
		return v1.Container{Name: "c", Lifecycle: &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: host, Path: "/"}}}}
	}
	for _, tc := range []struct {
		name       string
		init, apps []v1.Container
		want       bool
	}{
		{"plain", nil, []v1.Container{{Name: "c"}}, false},
		{"status.podIP env", nil, []v1.Container{fieldEnv("status.podIP")}, true},
		{"status.podIP env of an init container", []v1.Container{fieldEnv("status.podIP")}, []v1.Container{{Name: "c"}}, true},
		{"other field env", nil, []v1.Container{fieldEnv("metadata.name")}, false},
		{"postStart HTTP hook to the pod", nil, []v1.Container{hook("")}, true},
		{"postStart HTTP hook to a named host", nil, []v1.Container{hook("example.test")}, false},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{InitContainers: tc.init, Containers: tc.apps}}
		if got := usesPodIP(pod); got != tc.want {
			t.Errorf("%s: usesPodIP = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestComputePodActionsFailureBackoff covers failures that leave no running
// instance to date them: a container Docker could not start (created, exit
// code set, never started), a container that could not be created, and a
// sandbox that could not be made. Each is retried at once, then after 10 s,
// 20 s, ...
func TestComputePodActionsFailureBackoff(t *testing.T) {
	pod := testPod(v1.RestartPolicyOnFailure, "a")
	hash := dockertools.HashContainer(pod, &pod.Spec.Containers[0])
	t0 := time.Now()
	b := &builder{t0: t0}
	infra := b.c(pod, infraName, true, 0, "")

	t.Run("start failed", func(t *testing.T) {
		bo := newBackoff(10*time.Second, 40*time.Second)
		failed := b.c(pod, "a", false, 127, "")
		failed.Status, failed.Error = "created", "exec: \"/no/such\": not found"
		failed.StartedAt, failed.FinishedAt = time.Time{}, time.Time{}
		now := failed.CreatedAt
		if got := summarize(pod, computePodActions(pod, state(infra, failed), now, bo, nil, nil)); got != "start:a#1" {
			t.Fatalf("first failure: %q, want an immediate retry", got)
		}
		bo.restarted(backoffKey(pod.UID, "a", hash), now)
		retry := *failed
		retry.ID, retry.CreatedAt, retry.RestartCount = "a-retry", now.Add(time.Millisecond), 1
		st := state(infra, &retry, failed)
		if got := summarize(pod, computePodActions(pod, st, now.Add(5*time.Second), bo, nil, nil)); got != "backoff:a" {
			t.Fatalf("second failure after 5 s: %q, want back-off", got)
		}
		if got := summarize(pod, computePodActions(pod, st, now.Add(11*time.Second), bo, nil, nil)); got != "start:a#2" {
			t.Fatalf("second failure after 11 s: %q, want a retry", got)
		}
		if podFinished(pod, st) {
			t.Error("an OnFailure pod whose container failed to start was declared finished")
		}
	})

	t.Run("create failed", func(t *testing.T) {
		bo := newBackoff(10*time.Second, 40*time.Second)
		key := backoffKey(pod.UID, "a", hash)
		now := t0
		bo.failed(key, now)
		a := computePodActions(pod, state(infra), now, bo, nil, nil)
		if got := summarize(pod, a); got != "start:a#0" || a.crashed["a"] != key {
			t.Fatalf("first create failure: %q (crashed %v), want an immediate retry counted as one", got, a.crashed)
		}
		for _, wait := range []time.Duration{10, 20, 40, 40} {
			bo.restarted(key, now)
			bo.failed(key, now)
			if got := summarize(pod, computePodActions(pod, state(infra), now.Add(wait*time.Second-time.Millisecond), bo, nil, nil)); got != "backoff:a" {
				t.Fatalf("before %v s: %q, want back-off", wait, got)
			}
			if got := summarize(pod, computePodActions(pod, state(infra), now.Add(wait*time.Second), bo, nil, nil)); got != "start:a#0" {
				t.Fatalf("at %v s: %q, want a retry", wait, got)
			}
		}
		bo.created(key)
		if got := summarize(pod, computePodActions(pod, state(infra), now, bo, nil, nil)); got != "start:a#0" {
			t.Fatalf("after a create succeeded: %q, want no wait", got)
		}
	})

	t.Run("sandbox failed", func(t *testing.T) {
		bo := newBackoff(10*time.Second, 40*time.Second)
		key := backoffKey(pod.UID, infraName, dockertools.HashInfra(pod))
		now := t0
		bo.failed(key, now)
		a := computePodActions(pod, nil, now, bo, nil, nil)
		if got := summarize(pod, a); got != "create-infra start:a#0" || a.crashed[infraName] != key {
			t.Fatalf("first sandbox failure: %q, want an immediate retry", got)
		}
		bo.restarted(key, now)
		bo.failed(key, now)
		a = computePodActions(pod, nil, now.Add(9*time.Second), bo, nil, nil)
		if got := summarize(pod, a); got != "backoff:POD" || !a.retryAt.Equal(now.Add(10*time.Second)) {
			t.Fatalf("second sandbox failure: %q retry at %v, want back-off until +10 s", got, a.retryAt.Sub(now))
		}
	})
}
