package kuberuntime

import (
	"context"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/images"
)

func summarize(pod *v1.Pod, a podActions) string {
	var parts []string
	if a.createInfra {
		parts = append(parts, "create-infra")
	}
	var kill []string
	for _, k := range a.kill {
		kill = append(kill, k.c.ID)
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
	for _, i := range a.ephemeral {
		parts = append(parts, "ephemeral:"+pod.Spec.EphemeralContainers[i].Name)
	}
	if len(a.waiting) > 0 {
		parts = append(parts, "backoff:"+strings.Join(a.waiting, ","))
	}
	return strings.Join(parts, " ")
}

// withDebugger adds the ephemeral container "dbg" (kubectl debug's) to a
// copy of pod.
func withDebugger(pod *v1.Pod) *v1.Pod {
	p := pod.DeepCopy()
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg", Image: "busybox:1"}}}
	return p
}

func TestComputePodActions(t *testing.T) {
	always := containertest.Pod(v1.RestartPolicyAlways, "a", "b")
	never := containertest.Pod(v1.RestartPolicyNever, "a")
	onFailure := containertest.Pod(v1.RestartPolicyOnFailure, "a")
	cases := []struct {
		name  string
		pod   *v1.Pod
		state func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState
		want  string
	}{
		{"new pod", always, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState { return nil }, "create-infra start:a#0 start:b#0"},
		{"steady state does nothing", always, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, ""), b.C(p, "b", true, 0, ""))
		}, ""},
		{"changed spec replaces only that container", always, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, "oldhash"), b.C(p, "b", true, 0, ""))
		}, "kill:a-2 start:a#1"},
		{"infra died: whole pod recreated", always, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, false, 0, ""), b.C(p, "a", true, 0, ""), b.C(p, "b", true, 0, ""))
		}, "create-infra kill:a-2,b-3 start:a#1 start:b#1"},
		{"infra hash changed (ports): whole pod recreated", always, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, "oldports"), b.C(p, "a", true, 0, ""), b.C(p, "b", true, 0, ""))
		}, "create-infra kill:POD-1,a-2,b-3 start:a#1 start:b#1"},
		{"two running instances: newest kept", always, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, ""), b.C(p, "a", true, 0, ""), b.C(p, "b", true, 0, ""))
		}, "kill:a-2"},
		{"exited under Always restarts", always, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", false, 0, ""), b.C(p, "b", true, 0, ""))
		}, "start:a#1"},
		{"succeeded under OnFailure: finished", onFailure, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", false, 0, ""))
		}, "finished"},
		{"failed under OnFailure restarts", onFailure, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", false, 1, ""))
		}, "start:a#1"},
		{"failed under Never: finished", never, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", false, 1, ""))
		}, "finished"},
		{"finished pod without infra stays finished", never, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, false, 0, ""), b.C(p, "a", false, 1, ""))
		}, "finished"},
		{"failed liveness: killed now, restarted on a later sync", always, func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			sick := b.C(p, "a", true, 0, "")
			sick.ID = "sick-a"
			return containertest.State(b.C(p, infraName, true, 0, ""), sick, b.C(p, "b", true, 0, ""))
		}, "kill:sick-a"},
		{"init: first runs first", containertest.PodWithInit(), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""))
		}, "init:i1#0"},
		{"init: waits for the running one", containertest.PodWithInit(), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "i1", true, 0, ""))
		}, ""},
		{"init: second after the first succeeded", containertest.PodWithInit(), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "i1", false, 0, ""))
		}, "init:i2#0"},
		{"init: failed one restarts under Always", containertest.PodWithInit(), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "i1", false, 1, ""))
		}, "init:i1#1"},
		{"init done: apps start", containertest.PodWithInit(), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "i1", false, 0, ""), b.C(p, "i2", false, 0, ""))
		}, "start:a#0"},
		{"init done before the agent restarted: nothing re-runs", containertest.PodWithInit(), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "i1", false, 0, ""), b.C(p, "i2", false, 0, ""), b.C(p, "a", true, 0, ""))
		}, ""},
		{"new infra: init runs again", containertest.PodWithInit(), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, "i1", false, 0, ""), b.C(p, "i2", false, 0, ""), b.C(p, infraName, false, 0, ""), b.C(p, "a", true, 0, ""))
		}, "create-infra kill:a-4 init:i1#1"},
		{"init failed under Never: finished", containertest.PodWithInit(v1.RestartPolicyNever), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "i1", false, 1, ""))
		}, "finished"},
		{"sidecar: started first", containertest.PodWithSidecar(v1.RestartPolicyNever), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""))
		}, "init:s1#0"},
		{"sidecar: the next init container starts once it runs", containertest.PodWithSidecar(v1.RestartPolicyNever), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "s1", true, 0, ""))
		}, "init:i2#0"},
		{"sidecar: waits for its startup probe", containertest.PodWithSidecar(v1.RestartPolicyNever), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			infra := b.C(p, infraName, true, 0, "")
			s1 := b.C(p, "s1", true, 0, "")
			s1.ID = "unstarted-s1"
			return containertest.State(infra, s1)
		}, ""},
		{"sidecar: kept running beside the apps", containertest.PodWithSidecar(v1.RestartPolicyNever), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "s1", true, 0, ""), b.C(p, "i2", false, 0, ""))
		}, "start:a#0"},
		{"sidecar: restarted under Never, apps untouched", containertest.PodWithSidecar(v1.RestartPolicyNever), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "s1", false, 1, ""), b.C(p, "i2", false, 0, ""), b.C(p, "a", true, 0, ""))
		}, "init:s1#1"},
		{"sidecar: failed liveness kills it", containertest.PodWithSidecar(v1.RestartPolicyAlways), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			infra := b.C(p, infraName, true, 0, "")
			s1 := b.C(p, "s1", true, 0, "")
			s1.ID = "sick-s1"
			return containertest.State(infra, s1, b.C(p, "i2", false, 0, ""), b.C(p, "a", true, 0, ""))
		}, "kill:sick-s1"},
		{"sidecar: pod done when its apps are; sidecar stopped", containertest.PodWithSidecar(v1.RestartPolicyNever), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "s1", true, 0, ""), b.C(p, "i2", false, 0, ""), b.C(p, "a", false, 0, ""))
		}, "finished"},
		{"ephemeral: started in the running sandbox", withDebugger(always), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, ""), b.C(p, "b", true, 0, ""))
		}, "ephemeral:dbg"},
		{"ephemeral: not before the sandbox runs", withDebugger(always), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState { return nil },
			"create-infra start:a#0 start:b#0"},
		{"ephemeral: started before the pod is initialized", withDebugger(containertest.PodWithInit()), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "i1", true, 0, ""))
		}, "ephemeral:dbg"},
		{"ephemeral: running, left alone", withDebugger(always), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, ""), b.C(p, "b", true, 0, ""), b.C(p, "dbg", true, 0, ""))
		}, ""},
		{"ephemeral: exited, never restarted (even under Always)", withDebugger(always), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, ""), b.C(p, "b", true, 0, ""), b.C(p, "dbg", false, 1, ""))
		}, ""},
		{"ephemeral: ran in an earlier sandbox, not started in the new one", withDebugger(always), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, "dbg", false, 137, ""), b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, ""), b.C(p, "b", true, 0, ""))
		}, ""},
		{"ephemeral: running when the sandbox died, stopped with it and not started in the new one", withDebugger(always), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, false, 137, ""), b.C(p, "a", true, 0, ""), b.C(p, "b", true, 0, ""), b.C(p, "dbg", true, 0, ""))
		}, "create-infra kill:a-2,b-3,dbg-4 start:a#1 start:b#1"},
		{"ephemeral: stopped with the pod when it is done", withDebugger(onFailure), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", false, 0, ""), b.C(p, "dbg", true, 0, ""))
		}, "finished"},
		{"container removed from spec is stopped and removed", containertest.Pod(v1.RestartPolicyAlways, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), b.C(p, "a", true, 0, ""), b.C(p, "gone", true, 0, "h"), b.C(p, "gone", false, 0, "h"))
		}, "kill:gone-3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
			unhealthy := func(id string) (bool, string) { return strings.HasPrefix(id, "sick"), "liveness" }
			started := func(_ *v1.Container, id string) bool { return !strings.HasPrefix(id, "unstarted") }
			state := c.state(b, c.pod)
			if finished := kubecontainer.PodFinished(c.pod, state); finished != (c.want == "finished") {
				t.Fatalf("finished %v: a finished pod is terminated by its worker (everything running stopped), never synced", finished)
			}
			if c.want == "finished" {
				return
			}
			a := computePodActions(c.pod, state, time.Now(), newBackoff(0, 0, clock.RealClock{}), podChecks{unhealthy: unhealthy, started: started})
			if got := summarize(c.pod, a); got != c.want {
				t.Errorf("actions %q, want %q", got, c.want)
			}
		})
	}
}

func TestComputePodActionsBackoff(t *testing.T) {
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	bo := newBackoff(10*time.Second, 40*time.Second, clock.RealClock{})
	b := &containertest.Builder{T0: time.Now()}
	infra := b.C(pod, infraName, true, 0, "")
	crashed := b.C(pod, "a", false, 1, "")
	key := backoffKey("a", crashed.Hash)
	now := crashed.FinishedAt

	// The first restart is immediate.
	if got := summarize(pod, computePodActions(pod, containertest.State(infra, crashed), now, bo, podChecks{})); got != "start:a#1" {
		t.Fatalf("first crash: %q", got)
	}
	bo.restarted(key, now)
	// The next waits 10 s from the exit, then 20, then 40 (max), then 40.
	for _, wait := range []time.Duration{10, 20, 40, 40} {
		wait *= time.Second
		if got := summarize(pod, computePodActions(pod, containertest.State(infra, crashed), now.Add(wait-time.Millisecond), bo, podChecks{})); got != "backoff:a" {
			t.Fatalf("before %v: %q, want backoff", wait, got)
		}
		if got := summarize(pod, computePodActions(pod, containertest.State(infra, crashed), now.Add(wait), bo, podChecks{})); got != "start:a#1" {
			t.Fatalf("at %v: %q, want a restart", wait, got)
		}
		bo.restarted(key, now)
	}
	// A container that ran ten minutes resets the back-off.
	longRun := *crashed
	longRun.StartedAt = crashed.FinishedAt.Add(-backoffReset)
	if got := summarize(pod, computePodActions(pod, containertest.State(infra, &longRun), now, bo, podChecks{})); got != "start:a#1" {
		t.Errorf("after a long run: %q, want an immediate restart", got)
	}
}

func TestBackoffDefaults(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	bo := newBackoff(0, 0, clk)
	if p := bo.delays.Policy(); p.Initial != 10*time.Second || p.Max != 300*time.Second {
		t.Errorf("defaults %v/%v, want 10s/300s", p.Initial, p.Max)
	}
	key := backoffKey("a", "h")
	var delays []time.Duration
	for i := 0; i < 8; i++ {
		bo.restarted(key, clk.Now())
		delays = append(delays, bo.delays.Get(key))
	}
	want := []time.Duration{10, 20, 40, 80, 160, 300, 300, 300}
	for i := range want {
		if delays[i] != want[i]*time.Second {
			t.Errorf("delays %v, want %v seconds", delays, want)
			break
		}
	}
	clk.Step(11 * time.Minute)
	bo.gc(clk.Now())
	if bo.len() != 0 {
		t.Error("gc kept a stale entry")
	}
}

// TestComputePodActionsFailureBackoff covers failures that leave no running
// instance to date them: a container Docker could not start (created, exit
// code set, never started), a container that could not be created, and a
// sandbox that could not be made. Each is retried at once, then after 10 s,
// 20 s, ...
func TestComputePodActionsFailureBackoff(t *testing.T) {
	pod := containertest.Pod(v1.RestartPolicyOnFailure, "a")
	hash := kubecontainer.HashContainer(pod, &pod.Spec.Containers[0])
	t0 := time.Now()
	b := &containertest.Builder{T0: t0}
	infra := b.C(pod, infraName, true, 0, "")

	t.Run("start failed", func(t *testing.T) {
		bo := newBackoff(10*time.Second, 40*time.Second, clock.RealClock{})
		failed := b.C(pod, "a", false, 127, "")
		failed.Status, failed.Error = "created", "exec: \"/no/such\": not found"
		failed.StartedAt, failed.FinishedAt = time.Time{}, time.Time{}
		now := failed.CreatedAt
		if got := summarize(pod, computePodActions(pod, containertest.State(infra, failed), now, bo, podChecks{})); got != "start:a#1" {
			t.Fatalf("first failure: %q, want an immediate retry", got)
		}
		bo.restarted(backoffKey("a", hash), now)
		retry := *failed
		retry.ID, retry.CreatedAt, retry.RestartCount = "a-retry", now.Add(time.Millisecond), 1
		st := containertest.State(infra, &retry, failed)
		if got := summarize(pod, computePodActions(pod, st, now.Add(5*time.Second), bo, podChecks{})); got != "backoff:a" {
			t.Fatalf("second failure after 5 s: %q, want back-off", got)
		}
		if got := summarize(pod, computePodActions(pod, st, now.Add(11*time.Second), bo, podChecks{})); got != "start:a#2" {
			t.Fatalf("second failure after 11 s: %q, want a retry", got)
		}
		if kubecontainer.PodFinished(pod, st) {
			t.Error("an OnFailure pod whose container failed to start was declared finished")
		}
	})

	t.Run("create failed", func(t *testing.T) {
		bo := newBackoff(10*time.Second, 40*time.Second, clock.RealClock{})
		key := backoffKey("a", hash)
		now := t0
		bo.failed(key, now)
		a := computePodActions(pod, containertest.State(infra), now, bo, podChecks{})
		if got := summarize(pod, a); got != "start:a#0" || a.crashed["a"] != key {
			t.Fatalf("first create failure: %q (crashed %v), want an immediate retry counted as one", got, a.crashed)
		}
		for _, wait := range []time.Duration{10, 20, 40, 40} {
			bo.restarted(key, now)
			bo.failed(key, now)
			if got := summarize(pod, computePodActions(pod, containertest.State(infra), now.Add(wait*time.Second-time.Millisecond), bo, podChecks{})); got != "backoff:a" {
				t.Fatalf("before %v s: %q, want back-off", wait, got)
			}
			if got := summarize(pod, computePodActions(pod, containertest.State(infra), now.Add(wait*time.Second), bo, podChecks{})); got != "start:a#0" {
				t.Fatalf("at %v s: %q, want a retry", wait, got)
			}
		}
		bo.created(key)
		if got := summarize(pod, computePodActions(pod, containertest.State(infra), now, bo, podChecks{})); got != "start:a#0" {
			t.Fatalf("after a create succeeded: %q, want no wait", got)
		}
	})

	t.Run("sandbox failed", func(t *testing.T) {
		bo := newBackoff(10*time.Second, 40*time.Second, clock.RealClock{})
		key := backoffKey(infraName, kubecontainer.HashInfra(pod))
		now := t0
		bo.failed(key, now)
		a := computePodActions(pod, nil, now, bo, podChecks{})
		if got := summarize(pod, a); got != "create-infra start:a#0" || a.crashed[infraName] != key {
			t.Fatalf("first sandbox failure: %q, want an immediate retry", got)
		}
		bo.restarted(key, now)
		bo.failed(key, now)
		a = computePodActions(pod, nil, now.Add(9*time.Second), bo, podChecks{})
		if got := summarize(pod, a); got != "backoff:POD" || !a.retryAt.Equal(now.Add(10*time.Second)) {
			t.Fatalf("second sandbox failure: %q retry at %v, want back-off until +10 s", got, a.retryAt.Sub(now))
		}
	})
}

// killOf is the kill of container id among a's, if any.
func killOf(a podActions, id string) (containerKill, bool) {
	for _, k := range a.kill {
		if k.c.ID == id {
			return k, true
		}
	}
	return containerKill{}, false
}

// A container killed for a reason of its own has that reason, which says so
// in the kubelet's words (its Killing event's message).
func TestKillReasonsAsTheKubelet(t *testing.T) {
	unhealthy := func(id string) (bool, string) {
		switch {
		case strings.HasPrefix(id, "sick"):
			return true, "liveness"
		case strings.HasPrefix(id, "slow"):
			return true, "startup"
		}
		return false, ""
	}
	named := func(c *kubecontainer.ContainerState, id string) *kubecontainer.ContainerState { c.ID = id; return c }
	cases := []struct {
		name   string
		pod    *v1.Pod
		state  func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState
		id     string
		reason killReason
		want   string
	}{
		{"liveness, restarted", containertest.Pod(v1.RestartPolicyAlways, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), named(b.C(p, "a", true, 0, ""), "sick-a"))
		}, "sick-a", killReason{kind: killProbe, probe: "liveness", restart: true}, "Container a failed liveness probe, will be restarted"},
		{"startup, restarted", containertest.Pod(v1.RestartPolicyOnFailure, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), named(b.C(p, "a", true, 0, ""), "slow-a"))
		}, "slow-a", killReason{kind: killProbe, probe: "startup", restart: true}, "Container a failed startup probe, will be restarted"},
		{"liveness under Never", containertest.Pod(v1.RestartPolicyNever, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), named(b.C(p, "a", true, 0, ""), "sick-a"))
		}, "sick-a", killReason{kind: killProbe, probe: "liveness"}, "Container a failed liveness probe"},
		{"sidecar liveness", containertest.PodWithSidecar(v1.RestartPolicyAlways), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), named(b.C(p, "s1", true, 0, ""), "sick-s1"), b.C(p, "i2", false, 0, ""), b.C(p, "a", true, 0, ""))
		}, "sick-s1", killReason{kind: killProbe, probe: "liveness", sidecar: true}, "Init container s1 failed liveness probe"},
		{"spec changed", containertest.Pod(v1.RestartPolicyAlways, "a"), func(b *containertest.Builder, p *v1.Pod) *kubecontainer.PodState {
			return containertest.State(b.C(p, infraName, true, 0, ""), named(b.C(p, "a", true, 0, "old"), "old-a"))
		}, "old-a", killReason{kind: killSpecChanged}, "Container a definition changed, will be restarted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
			a := computePodActions(c.pod, c.state(b, c.pod), time.Now(), newBackoff(0, 0, clock.RealClock{}), podChecks{unhealthy: unhealthy})
			k, killed := killOf(a, c.id)
			if !killed || k.reason != c.reason {
				t.Fatalf("killed %v for %v, want %v", killed, k.reason, c.reason)
			}
			if got := k.reason.event(k.c.Name); got != c.want {
				t.Errorf("Killing event %q, want %q", got, c.want)
			}
		})
	}
}

// A container whose image is in pull back-off waits for it, like a crash
// loop: nothing starts, the retry is due when the pull back-off ends, and
// the sandbox is kept for it.
func TestComputePodActionsPullBackOff(t *testing.T) {
	now := time.Now()
	until := now.Add(20 * time.Second)
	why := &kubecontainer.StartError{Reason: kubecontainer.ReasonImagePullBackOff, Message: "Back-off pulling image"}
	pullBackOff := func(c *v1.Container) (time.Time, *kubecontainer.StartError) {
		if c.Name == "a" {
			return until, why
		}
		return time.Time{}, nil
	}
	pod := containertest.Pod(v1.RestartPolicyAlways, "a", "b")
	initPod := containertest.Pod(v1.RestartPolicyAlways, "b")
	initPod.Spec.InitContainers = []v1.Container{{Name: "a", Image: "img:1"}}
	b := &containertest.Builder{T0: now.Add(-time.Hour)}
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		state *kubecontainer.PodState
		at    time.Time
		want  string
		retry time.Time
	}{
		{"in back-off: the other container starts", pod, nil, now, "create-infra start:b#0 backoff:a", until},
		{"in back-off, the other running: the sandbox is kept", pod, containertest.State(b.C(pod, infraName, true, 0, ""), b.C(pod, "b", true, 0, "")), now, "backoff:a", until},
		{"back-off over: pulled again", pod, containertest.State(b.C(pod, infraName, true, 0, ""), b.C(pod, "b", true, 0, "")), until, "start:a#0", time.Time{}},
		{"init container in back-off: the app waits", initPod, containertest.State(b.C(initPod, infraName, true, 0, "")), now, "backoff:a", until},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := computePodActions(tc.pod, tc.state, tc.at, newBackoff(0, 0, clock.RealClock{}), podChecks{pullBackOff: pullBackOff})
			if got := summarize(tc.pod, a); got != tc.want {
				t.Errorf("actions %q, want %q", got, tc.want)
			}
			if !a.retryAt.Equal(tc.retry) {
				t.Errorf("retry at %v, want %v", a.retryAt, tc.retry)
			}
			if wait := tc.retry.IsZero(); (a.pullWaits["a"] == nil) != wait {
				t.Errorf("pull waits %v", a.pullWaits)
			}
		})
	}
}

// failed says when the next attempt may be made: at once after a first
// failure, then as the back-off grows.
func TestBackoffFailedReturnsNextAttempt(t *testing.T) {
	bo := newBackoff(10*time.Second, 40*time.Second, clock.RealClock{})
	now := time.Now()
	if next := bo.failed(backoffKey("k", "h"), now); !next.Equal(now) {
		t.Fatalf("first failure: next attempt at %v, want at once", next.Sub(now))
	}
	for _, want := range []time.Duration{10, 20, 40, 40} {
		bo.restarted(backoffKey("k", "h"), now)
		if next := bo.failed(backoffKey("k", "h"), now); !next.Equal(now.Add(want * time.Second)) {
			t.Fatalf("next attempt at +%v, want +%v s", next.Sub(now), want)
		}
	}
}

type noProbes struct{}

func (noProbes) Unhealthy(string) (bool, string)    { return false, "" }
func (noProbes) Started(*v1.Container, string) bool { return true }

type noRelist struct{}

func (noRelist) Starting(string) func() { return func() {} }
func (noRelist) Refresh(string)         {}

// SyncPod returns what the Kubelet records rather than recording it: the
// container that cannot start is waiting with its reason, and the pod is to
// be retried when its back-off ends.
func TestSyncPodResult(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1")
	m := newTestManager(t, Config{NodeName: "n", InfraImage: "pause:1"}, fake)
	m.images = images.NewManager(images.Config{Policy: images.Policy{}, InfraImage: "pause:1", RecordPath: filepath.Join(t.TempDir(), "images.json")}, images.Deps{Runtime: fake})
	m.probes, m.relist = noProbes{}, noRelist{}
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	r, err := m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID))
	if err == nil {
		t.Fatal("a container whose image is absent under Never started")
	}
	if !r.Acted || len(fake.RunningNames()) != 1 {
		t.Errorf("acted %v, running %v; want the infra container started", r.Acted, fake.RunningNames())
	}
	if why, ok := r.Waiting["a"]; !ok || why == nil || why.Reason != kubecontainer.ReasonErrImageNeverPull {
		t.Errorf("waiting %+v, want a with %s", r.Waiting, kubecontainer.ReasonErrImageNeverPull)
	}
	if r.RetryAt.IsZero() {
		t.Error("no retry asked for: nothing would wake the pod when its back-off ends")
	}
}

// A container killed by a probe with a terminationGracePeriodSeconds of its
// own is given that grace; by a probe without, the pod's.
func TestKillGraceOfProbes(t *testing.T) {
	unhealthy := func(id string) (bool, string) {
		if strings.HasPrefix(id, "slow") {
			return true, "startup"
		}
		return strings.HasPrefix(id, "sick"), "liveness"
	}
	ten := int64(10)
	for _, tc := range []struct {
		name, id string
		probe    func(c *v1.Container) // sets the probes
		want     time.Duration         // 0: the pod's
	}{
		{"liveness with its grace", "sick-a", func(c *v1.Container) {
			c.LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: &ten}
		}, 10 * time.Second},
		{"startup with its grace", "slow-a", func(c *v1.Container) {
			c.StartupProbe = &v1.Probe{TerminationGracePeriodSeconds: &ten}
			c.LivenessProbe = &v1.Probe{}
		}, 10 * time.Second},
		{"liveness without", "sick-a", func(c *v1.Container) { c.LivenessProbe = &v1.Probe{} }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			tc.probe(&pod.Spec.Containers[0])
			b := &containertest.Builder{T0: time.Now().Add(-time.Hour)}
			c := b.C(pod, "a", true, 0, "")
			c.ID = tc.id
			a := computePodActions(pod, containertest.State(b.C(pod, infraName, true, 0, ""), c), time.Now(), newBackoff(0, 0, clock.RealClock{}), podChecks{unhealthy: unhealthy})
			k, _ := killOf(a, tc.id)
			if len(a.kill) != 1 || k.grace != tc.want || k.ownGrace != (tc.want != 0) {
				t.Errorf("killed %d, grace %v (own %v), want %v", len(a.kill), k.grace, k.ownGrace, tc.want)
			}
		})
	}
}
