package server

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// lookupPods are default/web (UID u1) with an init container and two app
// containers: server has two instances (abc newest, old before it), side
// none; its infra container runs as infra.
func lookupPods() *fakePods {
	return &fakePods{
		desired: []*v1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
			Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "init"}},
				Containers: []v1.Container{{Name: "server"}, {Name: "side"}}},
		}},
		cache: map[types.UID]*kubecontainer.PodState{"u1": {UID: "u1", Name: "web", Namespace: "default",
			Containers: []*kubecontainer.ContainerState{
				{ID: "abc", Name: "server", Running: true},
				{ID: "old", Name: "server"},
				{ID: "in1", Name: "init"},
				{ID: "infra", Name: kubecontainer.InfraContainerName, Running: true},
			}}},
	}
}

func TestPodViewFindContainer(t *testing.T) {
	cases := []struct {
		name                string
		ns, pod, uid, cname string
		previous            bool
		wantID              string
		wantNoInstance      bool // ErrNotFound because the relist found none
	}{
		{name: "newest instance", ns: "default", pod: "web", cname: "server", wantID: "abc"},
		{name: "with the pod's UID", ns: "default", pod: "web", uid: "u1", cname: "server", wantID: "abc"},
		{name: "previous instance", ns: "default", pod: "web", cname: "server", previous: true, wantID: "old"},
		{name: "init container", ns: "default", pod: "web", cname: "init", wantID: "in1"},
		{name: "infra container, not in the spec", ns: "default", pod: "web", cname: "POD", wantID: "infra"},
		{name: "another UID", ns: "default", pod: "web", uid: "u2", cname: "server"},
		{name: "unknown pod", ns: "default", pod: "nope", cname: "server"},
		{name: "unknown container", ns: "default", pod: "web", cname: "nope"},
		{name: "no name with two containers", ns: "default", pod: "web"},
		{name: "no previous instance", ns: "default", pod: "web", cname: "init", previous: true, wantNoInstance: true},
		{name: "no instance", ns: "default", pod: "web", cname: "side", wantNoInstance: true},
	}
	v := lookupPods().view()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref, err := v.FindContainer(c.ns, c.pod, c.uid, c.cname, c.previous)
			if c.wantID != "" {
				if err != nil || ref.ID != c.wantID || ref.Pod == nil || ref.Pod.Name != "web" {
					t.Fatalf("FindContainer = %+v, %v; want %s", ref, err, c.wantID)
				}
				return
			}
			if !errors.Is(err, ErrNotFound) || errors.Is(err, errNoInstance) != c.wantNoInstance {
				t.Fatalf("FindContainer = %+v, %v; want not found (no instance: %v)", ref, err, c.wantNoInstance)
			}
		})
	}
	if ref, err := NewPodView(PodSources{Desired: fakeDesired{&fakePods{desired: []*v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "default", UID: "u9"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "only"}}}}}}},
		Cache: fakeCache{&fakePods{cache: map[types.UID]*kubecontainer.PodState{"u9": {Containers: []*kubecontainer.ContainerState{
			{ID: "x", Name: "only"}}}}}}}).FindContainer("default", "one", "", "", false); err != nil || ref.ID != "x" {
		t.Errorf("no name with one container: %+v, %v; want that container", ref, err)
	}
}

// A request that needs the container running relists once when the last
// relist shows no instance (it may have started a moment ago); a container
// the pod lacks, or one that is there, is not waited for.
func TestPodViewFindRunningContainer(t *testing.T) {
	started := map[types.UID]*kubecontainer.PodState{"u1": {UID: "u1", Containers: []*kubecontainer.ContainerState{
		{ID: "new", Name: "side", Running: true}}}}
	cases := []struct {
		name        string
		cname       string
		fresh       map[types.UID]*kubecontainer.PodState // what a relist finds; nil: nothing new
		wantID      string
		wantRelists int
	}{
		{name: "running", cname: "server", wantID: "abc"},
		{name: "started since the last relist", cname: "side", fresh: started, wantID: "new", wantRelists: 1},
		{name: "not started yet", cname: "side", wantRelists: 1},
		{name: "not in the pod", cname: "nope"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pods := lookupPods()
			pods.fresh = c.fresh
			ref, err := pods.view().FindRunningContainer(context.Background(), "default", "web", "", c.cname)
			if c.wantID != "" && (err != nil || ref.ID != c.wantID || !ref.Running) {
				t.Errorf("FindRunningContainer = %+v, %v; want %s running", ref, err, c.wantID)
			}
			if c.wantID == "" && !errors.Is(err, ErrNotFound) {
				t.Errorf("FindRunningContainer = %+v, %v; want not found", ref, err)
			}
			if pods.relists != c.wantRelists {
				t.Errorf("%d relists, want %d", pods.relists, c.wantRelists)
			}
		})
	}
}

// A log request whose instance the last relist lacks (a restart the
// worker made and reported before the periodic relist saw it) relists once;
// a present instance or a container the pod lacks is not waited for.
func TestPodViewFindLoggedContainer(t *testing.T) {
	restarted := map[types.UID]*kubecontainer.PodState{"u1": {UID: "u1", Containers: []*kubecontainer.ContainerState{
		{ID: "in2", Name: "init"}, {ID: "in1", Name: "init"}}}}
	cases := []struct {
		name        string
		cname       string
		previous    bool
		fresh       map[types.UID]*kubecontainer.PodState
		wantID      string
		wantRelists int
	}{
		{name: "present", cname: "server", previous: true, wantID: "old"},
		{name: "previous made since the last relist", cname: "init", previous: true, fresh: restarted, wantID: "in1", wantRelists: 1},
		{name: "no previous yet", cname: "init", previous: true, wantRelists: 1},
		{name: "not in the pod", cname: "nope", previous: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pods := lookupPods()
			pods.fresh = c.fresh
			ref, err := pods.view().FindLoggedContainer(context.Background(), "default", "web", c.cname, c.previous)
			if c.wantID != "" && (err != nil || ref.ID != c.wantID) {
				t.Errorf("FindLoggedContainer = %+v, %v; want %s", ref, err, c.wantID)
			}
			if c.wantID == "" && !errors.Is(err, ErrNotFound) {
				t.Errorf("FindLoggedContainer = %+v, %v; want not found", ref, err)
			}
			if pods.relists != c.wantRelists {
				t.Errorf("%d relists, want %d", pods.relists, c.wantRelists)
			}
		})
	}
}

// GetPods lists the desired pods by namespace/name, each with its produced
// status, or the fallback's before its first sync; GetPod finds one.
func TestPodViewGetPods(t *testing.T) {
	pods := &fakePods{
		desired: []*v1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "default", UID: "ub"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "kube-system", UID: "ua"}},
			{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", UID: "ua2"}},
		},
		statuses: map[types.UID]v1.PodStatus{"ub": {Phase: v1.PodRunning}, "ua": {Phase: v1.PodSucceeded}},
	}
	v := pods.view()
	var got []string
	for _, p := range v.GetPods() {
		got = append(got, p.Namespace+"/"+p.Name+" "+string(p.Status.Phase)+" "+p.Status.Message)
	}
	want := []string{"default/a Pending fallback of a", "default/b Running ", "kube-system/a Succeeded "}
	if len(got) != len(want) {
		t.Fatalf("GetPods = %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("GetPods[%d] = %q, want %q", i, got[i], want[i])
		}
	}
	if pods.desired[0].Status.Phase != "" {
		t.Error("GetPods wrote the status into the desired pod (it must hand out copies)")
	}
	if p, ok := v.GetPod("default", "b"); !ok || p.UID != "ub" || p.Status.Phase != v1.PodRunning {
		t.Errorf("GetPod(default/b) = %+v, %v", p, ok)
	}
	if _, ok := v.GetPod("default", "nope"); ok {
		t.Error("GetPod found a pod that is not desired")
	}
}

// RunningPods are the pods with running containers in Docker, desired or
// not, without their infra containers.
func TestPodViewRunningPods(t *testing.T) {
	pods := &fakePods{cache: map[types.UID]*kubecontainer.PodState{
		"u2": {Name: "b", Namespace: "default", Containers: []*kubecontainer.ContainerState{
			{ID: "c2", Name: "app", Image: "img:2", ImageID: "sha256:2", Running: true},
			{ID: "i2", Name: kubecontainer.InfraContainerName, Running: true},
			{ID: "d2", Name: "done", Image: "img:2"},
		}},
		"u1": {Name: "a", Namespace: "default", Containers: []*kubecontainer.ContainerState{{ID: "c1", Name: "app", Image: "img:1", Running: true}}},
		"u3": {Name: "infra-only", Namespace: "default", Containers: []*kubecontainer.ContainerState{
			{ID: "i3", Name: kubecontainer.InfraContainerName, Running: true}}},
	}}
	got := pods.view().RunningPods()
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" || got[1].UID != "u2" {
		t.Fatalf("RunningPods = %+v, want default/a and default/b", got)
	}
	b := got[1]
	if len(b.Spec.Containers) != 1 || b.Spec.Containers[0].Name != "app" || b.Spec.Containers[0].Image != "img:2" {
		t.Errorf("containers %+v, want app alone", b.Spec.Containers)
	}
	if cs := b.Status.ContainerStatuses; len(cs) != 1 || cs[0].ContainerID != "docker://c2" || cs[0].ImageID != "docker://sha256:2" || cs[0].State.Running == nil {
		t.Errorf("statuses %+v", cs)
	}
}

func TestPodViewIsContainerLogFile(t *testing.T) {
	pods := &fakePods{cache: map[types.UID]*kubecontainer.PodState{"u1": {Containers: []*kubecontainer.ContainerState{
		{ID: "a", LogPath: "/var/lib/docker/containers/a/a-json.log"}, {ID: "b"}}}}}
	v := pods.view()
	for path, want := range map[string]bool{
		"/var/lib/docker/containers/a/a-json.log":      true,
		"/var/lib/docker/containers/a/../a/a-json.log": true,
		"/var/lib/docker/containers/b/b-json.log":      false,
		"": false,
	} {
		if got := v.IsContainerLogFile(path); got != want {
			t.Errorf("IsContainerLogFile(%q) = %v, want %v", path, got, want)
		}
	}
}
