package gc

import (
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func TestDeadContainersToRemove(t *testing.T) {
	now := time.Now()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid1"}, Spec: v1.PodSpec{
		InitContainers:      []v1.Container{{Name: "init", Image: "img:1"}},
		Containers:          []v1.Container{{Name: "a", Image: "img:1"}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "img:1"}}},
	}}
	// dead makes a dead container (ID: name-minutes) that finished ago before now.
	dead := func(name string, ago time.Duration) *kubecontainer.ContainerState {
		return &kubecontainer.ContainerState{ID: name + "-" + ago.String(), Name: name, CreatedAt: now.Add(-ago - time.Second), FinishedAt: now.Add(-ago)}
	}
	run := func(name string) *kubecontainer.ContainerState {
		return &kubecontainer.ContainerState{ID: name + "-run", Name: name, Running: true, CreatedAt: now}
	}
	// created makes a container created ago before now that never ran.
	created := func(name string, ago time.Duration) *kubecontainer.ContainerState {
		return &kubecontainer.ContainerState{ID: name + "-created-" + ago.String(), Name: name, Status: "created", CreatedAt: now.Add(-ago)}
	}
	mk := func(cs ...*kubecontainer.ContainerState) map[types.UID]*kubecontainer.PodState {
		kubecontainer.SortNewestFirst(cs)
		return map[types.UID]*kubecontainer.PodState{pod.UID: {UID: pod.UID, Containers: cs}}
	}
	desired := func(uid types.UID) *v1.Pod {
		if uid == pod.UID {
			return pod
		}
		return nil
	}
	cases := []struct {
		name   string
		pods   map[types.UID]*kubecontainer.PodState
		policy Policy
		want   string
	}{
		{"newest dead kept, older removed", mk(run("a"), dead("a", time.Minute), dead("a", 2*time.Minute), dead("a", 3*time.Minute)),
			Policy{MaxPerContainer: 1, MaxTotal: -1}, "a-2m0s,a-3m0s"},
		{"keep three", mk(dead("a", time.Minute), dead("a", 2*time.Minute), dead("a", 3*time.Minute), dead("a", 4*time.Minute)),
			Policy{MaxPerContainer: 3, MaxTotal: -1}, "a-4m0s"},
		{"min age protects the young", mk(dead("a", time.Second), dead("a", 2*time.Second), dead("a", time.Hour)),
			Policy{MinAge: 10 * time.Second, MaxPerContainer: 1, MaxTotal: -1}, "a-1h0m0s"},
		{"completed init container kept", mk(run("a"), dead("init", time.Hour)), Policy{MaxPerContainer: 1, MaxTotal: -1}, ""},
		{"gone from the spec", mk(run("a"), dead("old", time.Hour)), Policy{MaxPerContainer: 1, MaxTotal: -1}, "old-1h0m0s"},
		{"exited ephemeral container kept: it never runs again", mk(run("a"), dead("debug", time.Hour)), Policy{MaxPerContainer: 1, MaxTotal: -1}, ""},
		{"global cap never takes the newest", mk(dead("a", time.Minute), dead("a", 2*time.Minute), dead("init", time.Hour), dead("POD", time.Hour)),
			Policy{MaxPerContainer: 5, MaxTotal: 1}, "a-2m0s"},
		{"never-started infra older than the running one", mk(run("POD"), run("a"), created("POD", time.Minute)),
			Policy{MaxPerContainer: 1, MaxTotal: -1}, "POD-created-1m0s"},
		{"newest infra kept even if it never ran, older ones go", mk(created("POD", time.Minute), dead("POD", time.Hour), created("POD", 2*time.Hour)),
			Policy{MaxPerContainer: 5, MaxTotal: -1}, "POD-1h0m0s,POD-created-2h0m0s"},
		{"dead infra kept while a container of its time is", mk(run("POD"), run("a"), dead("a", time.Hour), dead("POD", time.Hour)),
			Policy{MaxPerContainer: 1, MaxTotal: -1}, ""},
		{"min age protects a never-started infra", mk(run("POD"), created("POD", time.Second)),
			Policy{MinAge: time.Minute, MaxPerContainer: 1, MaxTotal: -1}, ""},
		{"pods not desired are left to their worker", map[types.UID]*kubecontainer.PodState{"other": {UID: "other", Containers: []*kubecontainer.ContainerState{dead("a", time.Hour), dead("a", 2*time.Hour)}}},
			Policy{MaxPerContainer: 1, MaxTotal: 0}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ids []string
			for _, x := range DeadContainersToRemove(c.pods, desired, c.policy, now) {
				ids = append(ids, x.ID)
			}
			sort.Strings(ids)
			if got := strings.Join(ids, ","); got != c.want {
				t.Errorf("removed %q, want %q", got, c.want)
			}
		})
	}
}
