package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

// Every way a pod ends is one request to its worker, which stops it the one
// way (its preStop hooks within the termination's grace period), tears down
// its volumes, and shows what the kubelet shows for that cause: the event,
// the status's phase and reason. A pod the config removes (or one found on
// the node without a spec) is then forgotten: its containers and directory
// removed.
func TestTerminateCauses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pod    func(p *v1.Pod)
		end    func(k *Kubelet, updates chan<- api.PodUpdate, fake *containertest.FakeClient, pod *v1.Pod)
		noRun  bool   // the pod never runs (refused at admission)
		event  string // the pod's event besides Killing ("": none)
		phase  v1.PodPhase
		reason string
		hook   bool // its preStop hook ran (and a Killing event was made)
		gone   bool // removed from the node: containers, directory, status
		// running is how many containers run before it ends (default 2:
		// infra and app); sidecarKilled: a sidecar is among those stopped.
		running       int
		sidecarKilled bool
	}{
		{name: "removed from its source", end: func(_ *Kubelet, u chan<- api.PodUpdate, _ *containertest.FakeClient, p *v1.Pod) {
			u <- api.PodUpdate{Op: api.REMOVE, Pods: []*v1.Pod{p}}
		}, hook: true, gone: true},
		{name: "deleted in the API server", end: func(_ *Kubelet, u chan<- api.PodUpdate, _ *containertest.FakeClient, p *v1.Pod) {
			deleted := p.DeepCopy()
			now, grace := metav1.Now(), int64(5)
			deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &now, &grace
			u <- api.PodUpdate{Op: api.UPDATE, Pods: []*v1.Pod{deleted}}
		}, phase: v1.PodFailed, hook: true},
		{name: "evicted", end: func(k *Kubelet, _ chan<- api.PodUpdate, _ *containertest.FakeClient, p *v1.Pod) {
			evictionPods{k}.Evict(p.UID, "The node was low on resource: memory. ", 0)
		}, phase: v1.PodFailed, reason: "Evicted", hook: true},
		{name: "stopped by the node's shutdown", end: func(k *Kubelet, _ chan<- api.PodUpdate, fake *containertest.FakeClient, p *v1.Pod) {
			// The graceful node shutdown's way: the request, then the
			// wait until nothing of the pod runs.
			stopped := shutdownPods{k}.TerminatePod(p.UID, lifecycle.Termination{Cause: lifecycle.Shutdown, Grace: 6 * time.Second,
				Reason: "Terminated", Message: "Pod was terminated in response to imminent node shutdown."})
			select {
			case <-stopped:
			case <-time.After(30 * time.Second):
				t.Error("the shutdown's wait never ended")
			}
			if n := len(fake.RunningNames()); n != 0 {
				t.Errorf("the shutdown's wait ended with %d containers running", n)
			}
		}, phase: v1.PodFailed, reason: "Terminated", hook: true},
		{name: "past its active deadline", pod: func(p *v1.Pod) {
			secs := int64(1)
			p.Spec.ActiveDeadlineSeconds = &secs
		}, event: "DeadlineExceeded", phase: v1.PodFailed, reason: "DeadlineExceeded", hook: true},
		{name: "rejected at admission", pod: func(p *v1.Pod) {
			p.Spec.OS = &v1.PodOS{Name: "windows"}
		}, noRun: true, event: "PodOSNotSupported", phase: v1.PodFailed, reason: "PodOSNotSupported"},
		{name: "finished as its restart policy says", pod: func(p *v1.Pod) {
			p.Spec.RestartPolicy = v1.RestartPolicyNever
		}, end: func(_ *Kubelet, _ chan<- api.PodUpdate, fake *containertest.FakeClient, p *v1.Pod) {
			fake.Exit(containerID(fake, "a"), 0)
		}, phase: v1.PodSucceeded},
		{name: "finished, its sidecar stopped with it", pod: func(p *v1.Pod) {
			p.Spec.RestartPolicy = v1.RestartPolicyNever
			always := v1.ContainerRestartPolicyAlways
			p.Spec.InitContainers = []v1.Container{{Name: "s", Image: "img:1", RestartPolicy: &always}}
		}, end: func(_ *Kubelet, _ chan<- api.PodUpdate, fake *containertest.FakeClient, p *v1.Pod) {
			fake.Exit(containerID(fake, "a"), 0)
		}, running: 3, phase: v1.PodSucceeded, sidecarKilled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := containertest.NewFakeClient("pause:1", "img:1")
			rec := events.New("n")
			k, updates, stop := newEventKubelet(t, fake, rec)
			defer stop()
			pod := desiredPod("web", "img:1")
			pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
			pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			if tc.pod != nil {
				tc.pod(pod)
			}
			vols := filepath.Join(k.volumes.PodDir(pod.UID), "volumes")
			updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{pod}}
			if !tc.noRun {
				running := max(tc.running, 2)
				waitUntil(t, func() bool { return len(fake.RunningNames()) == running })
				if _, err := os.Stat(vols); err != nil {
					t.Fatalf("the pod's volumes directory: %v", err)
				}
			}
			if tc.end != nil {
				tc.end(k, updates, fake, pod)
			}
			waitUntil(t, func() bool {
				if tc.gone {
					l, _ := fake.List(context.Background(), kubecontainer.LabelOwner, "n")
					return len(l) == 0 && !k.workers.Known(pod.UID)
				}
				ph, _ := k.workers.Phase(pod.UID)
				return ph == lifecycle.Terminated && !k.workers.Busy(pod.UID)
			})

			if n := len(fake.RunningNames()); n != 0 {
				t.Errorf("%d containers still run", n)
			}
			if tc.noRun && fake.CountCalls("create") != 0 {
				t.Error("a refused pod got containers")
			}
			if ran := fake.CountCalls("exec") > 0; ran != tc.hook {
				t.Errorf("preStop hook ran: %v, want %v", ran, tc.hook)
			}
			reasons := podEventReasons(rec, pod.Name)
			if killed := slices.Contains(reasons, "Killing"); killed != (tc.hook || tc.sidecarKilled) {
				t.Errorf("events %v: Killing %v, want %v", reasons, killed, tc.hook)
			}
			if tc.event != "" && !slices.Contains(reasons, tc.event) {
				t.Errorf("events %v, want %s", reasons, tc.event)
			}
			st, ok := k.status.Get(pod.UID)
			if tc.gone {
				if ok {
					t.Errorf("status of a removed pod kept: %s", st.Phase)
				}
				if _, err := os.Stat(k.volumes.PodDir(pod.UID)); !os.IsNotExist(err) {
					t.Errorf("pod directory: %v, want it removed", err)
				}
				return
			}
			if !ok || st.Phase != tc.phase || st.Reason != tc.reason {
				t.Errorf("status %s %q (%v), want %s %q", st.Phase, st.Reason, ok, tc.phase, tc.reason)
			}
			if _, err := os.Stat(vols); !tc.noRun && !os.IsNotExist(err) {
				t.Errorf("volumes of the terminated pod: %v, want them torn down", err)
			}
			if l, _ := fake.List(context.Background(), kubecontainer.LabelOwner, "n"); !tc.noRun && len(l) == 0 {
				t.Error("the terminated pod's containers were removed: their logs go with them")
			}
			// Terminated is final: a resync starts nothing.
			creates := fake.CountCalls("create")
			updates <- api.PodUpdate{Op: api.UPDATE, Pods: []*v1.Pod{pod}}
			waitUntil(t, func() bool { return !k.workers.Busy(pod.UID) })
			if fake.CountCalls("create") != creates || fake.CountCalls("start") != creates {
				t.Error("a terminated pod was started again")
			}
		})
	}
}

// A pod found on the node without a spec, once its source has spoken, is
// terminated (within the grace on its labels, no hook to run) and removed.
func TestTerminateOrphan(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	pod := desiredPod("web", "img:1")
	for _, name := range []string{kubecontainer.InfraContainerName, "a"} {
		fake.AddContainer(kubecontainer.ContainerDetail{
			Name:  kubecontainer.BuildName(kubecontainer.ContainerName{Container: name, Hash: "1", Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
			Image: "img:1", Running: true,
			Labels: kubecontainer.ContainerLabels(pod, "n", name, "1", kubecontainer.TypeContainer, 0),
		})
	}
	k, _, stop := newEventKubelet(t, fake, events.New("n"))
	defer stop()
	waitUntil(t, func() bool {
		l, _ := fake.List(context.Background(), kubecontainer.LabelOwner, "n")
		return len(l) == 0 && !k.workers.Known(pod.UID)
	})
	if n := fake.CountCalls("stop"); n != 2 {
		t.Errorf("%d stops, want the two running containers stopped before their removal", n)
	}
	if n := fake.CountCalls("exec"); n != 0 {
		t.Errorf("%d execs: a pod without its spec has no hook to run", n)
	}
}

// newEventKubelet runs a Kubelet on the real clock with events recorded.
func newEventKubelet(t *testing.T, fake *containertest.FakeClient, rec *events.Recorder) (*Kubelet, chan<- api.PodUpdate, func()) {
	t.Helper()
	k, parts := newKubelet(t, fake, testOptions{Events: rec, SyncFrequency: 100 * time.Millisecond, RelistPeriod: 20 * time.Millisecond})
	updates, stop := parts.run(k)
	return k, updates, stop
}

// containerID is the ID of the running container of that name.
func containerID(fake *containertest.FakeClient, name string) string {
	l, _ := fake.List(context.Background(), kubecontainer.LabelOwner, "n")
	for _, c := range l {
		if c.Labels[kubecontainer.LabelContainerName] == name && c.Running {
			return c.ID
		}
	}
	return ""
}

// podEventReasons are the reasons of the events about the pod (or its
// containers).
func podEventReasons(rec *events.Recorder, pod string) []string {
	var out []string
	for _, e := range rec.List().Items {
		if e.InvolvedObject.Name == pod && !strings.HasPrefix(e.Reason, "Pull") && e.Reason != "Created" && e.Reason != "Started" && e.Reason != "Scheduled" {
			out = append(out, e.Reason)
		}
	}
	return out
}

// A Job's pod with a sidecar (a restartable init container): once its app
// container has exited 0, its status shows it terminated and the pod
// Running while the sidecar stops (never Pending, never the app waiting
// again), then Succeeded once the sidecar is gone, as the kubelet's
// getPhase (pkg/kubelet/kubelet_pods.go) over the status produced at the
// start of the sync that stops the pod.
func TestSidecarJobPhase(t *testing.T) {
	for _, policy := range []v1.RestartPolicy{v1.RestartPolicyNever, v1.RestartPolicyOnFailure} {
		t.Run(string(policy), func(t *testing.T) {
			fake := containertest.NewFakeClient("pause:1", "img:1")
			k, updates, stop := newEventKubelet(t, fake, events.New("n"))
			defer stop()
			release := fake.HoldStops("s") // the sidecar takes its time to stop
			defer release()
			pod := desiredPod("job", "img:1")
			pod.Spec.RestartPolicy = policy
			always := v1.ContainerRestartPolicyAlways
			pod.Spec.InitContainers = []v1.Container{{Name: "s", Image: "img:1", RestartPolicy: &always}}
			updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{pod}}
			waitUntil(t, func() bool { return len(fake.RunningNames()) == 3 })
			fake.Exit(containerID(fake, "a"), 0)

			var st v1.PodStatus
			waitUntil(t, func() bool {
				st, _ = k.status.Get(pod.UID)
				return len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Terminated != nil
			})
			if st.Phase != v1.PodRunning {
				t.Errorf("phase %s while the sidecar stops, want Running", st.Phase)
			}
			if len(st.InitContainerStatuses) != 1 || st.InitContainerStatuses[0].State.Running == nil {
				t.Errorf("sidecar status %+v, want it running until it has stopped", st.InitContainerStatuses)
			}
			if code := st.ContainerStatuses[0].State.Terminated.ExitCode; code != 0 {
				t.Errorf("app container exit %d, want 0", code)
			}

			release()
			waitUntil(t, func() bool {
				st, _ = k.status.Get(pod.UID)
				return st.Phase == v1.PodSucceeded
			})
			if c := st.ContainerStatuses[0]; c.State.Terminated == nil || c.State.Terminated.ExitCode != 0 {
				t.Errorf("app container %+v, want terminated with 0", c.State)
			}
		})
	}
}
