package kubeapi

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

type fakeLocal struct{ pods []*v1.Pod }

func (f *fakeLocal) GetPods() []*v1.Pod { return f.pods }
func (f *fakeLocal) SyncedStatus(uid types.UID) (v1.PodStatus, bool) {
	for _, p := range f.pods {
		if p.UID == uid {
			return p.Status, true
		}
	}
	return v1.PodStatus{}, false
}
func (f *fakeLocal) SubscribeStatus() <-chan struct{} { return nil }

type fakeRemote struct {
	c       *fake.Clientset
	invalid map[types.UID]string
}

func (f *fakeRemote) Pods() []*v1.Pod {
	l, _ := f.c.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	var out []*v1.Pod
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out
}
func (f *fakeRemote) Changed() <-chan struct{}             { return nil }
func (f *fakeRemote) Invalid(uid types.UID) (string, bool) { msg, ok := f.invalid[uid]; return msg, ok }

func apiPod(phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Status: v1.PodStatus{Phase: phase, Conditions: []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}}}
}

func localPod(phase v1.PodPhase) *v1.Pod {
	p := apiPod(phase)
	p.Annotations = map[string]string{api.ConfigSourceAnnotation: api.SourceAPIServer}
	p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.PodScheduled, Status: v1.ConditionTrue, Reason: "ours"}}
	p.Status.PodIP = "172.17.0.5"
	return p
}

func statusPatches(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if p, ok := a.(clienttesting.PatchAction); ok && p.GetSubresource() == "status" {
			out = append(out, string(p.GetPatch()))
		}
	}
	return out
}

func TestStatusWriter(t *testing.T) {
	for _, tc := range []struct {
		name        string
		remote      v1.PodPhase
		local       v1.PodPhase
		deleting    bool
		wantPatch   bool
		wantDeleted bool
	}{
		{"new status written", v1.PodPending, v1.PodRunning, false, true, false},
		{"finished pod never regressed", v1.PodSucceeded, v1.PodPending, false, false, false},
		{"deleted pod still running: status only", v1.PodRunning, v1.PodRunning, true, true, false},
		{"deleted pod stopped: deleted", v1.PodRunning, v1.PodFailed, true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote := apiPod(tc.remote)
			local := localPod(tc.local)
			if tc.deleting {
				now := metav1.Now()
				remote.DeletionTimestamp = &now
			}
			c := fake.NewClientset(remote)
			w := NewStatusWriter(c, &fakeLocal{pods: []*v1.Pod{local}}, &fakeRemote{c: c}, nil)
			ctx := context.Background()
			w.sync(ctx)
			w.sync(ctx) // nothing new: no second write
			ps := statusPatches(c)
			if got := len(ps) > 0; got != tc.wantPatch || len(ps) > 1 {
				t.Fatalf("patches %q, want one: %v", ps, tc.wantPatch)
			}
			if tc.wantPatch && !strings.Contains(ps[0], `"uid":"u1"`) {
				t.Errorf("patch %s carries no UID precondition", ps[0])
			}
			got, err := c.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
			if deleted := err != nil; deleted != tc.wantDeleted {
				t.Fatalf("deleted %v, want %v", deleted, tc.wantDeleted)
			}
			if tc.wantPatch && !tc.wantDeleted {
				if got.Status.Phase != tc.local || got.Status.PodIP != "172.17.0.5" {
					t.Errorf("status %+v", got.Status)
				}
				for _, cond := range got.Status.Conditions {
					if cond.Type == v1.PodScheduled && cond.Reason == "ours" {
						t.Errorf("the scheduler's PodScheduled was overwritten: %+v", got.Status.Conditions)
					}
				}
			}
		})
	}
}

// A pod the agent cannot run is reported Failed with the reason.
func TestStatusWriterInvalidPod(t *testing.T) {
	c := fake.NewClientset(apiPod(v1.PodPending))
	w := NewStatusWriter(c, &fakeLocal{}, &fakeRemote{c: c, invalid: map[types.UID]string{"u1": "spec.volumes[0].nfs: not supported"}}, nil)
	w.sync(context.Background())
	got, _ := c.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if got.Status.Phase != v1.PodFailed || !strings.Contains(got.Status.Message, "nfs") {
		t.Errorf("status %+v", got.Status)
	}
}

// staticRemote is the API server's pods as a (possibly stale) watch has
// them.
type staticRemote struct{ pods []*v1.Pod }

func (s *staticRemote) Pods() []*v1.Pod                  { return s.pods }
func (s *staticRemote) Changed() <-chan struct{}         { return nil }
func (s *staticRemote) Invalid(types.UID) (string, bool) { return "", false }

// A condition written and then dropped before the watch brought the first
// write back: the second patch, from the stale copy, cannot remove it, so
// once the watch shows it still there, the status is written again.
func TestStatusWriterRewritesOverStaleCopy(t *testing.T) {
	stale := apiPod(v1.PodRunning)
	stale.ResourceVersion = "1"
	c := fake.NewClientset(stale.DeepCopy())
	local := localPod(v1.PodRunning)
	inProgress := v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue}
	local.Status.Conditions = append(local.Status.Conditions, inProgress)
	remote := &staticRemote{pods: []*v1.Pod{stale}}
	w := NewStatusWriter(c, &fakeLocal{pods: []*v1.Pod{local}}, remote, nil)
	ctx := context.Background()
	w.sync(ctx)
	local.Status.Conditions = local.Status.Conditions[:len(local.Status.Conditions)-1]
	w.sync(ctx) // the watch has not brought the first write back
	w.sync(ctx) // nor now: nothing new to write
	if ps := statusPatches(c); len(ps) != 2 {
		t.Fatalf("patches %q, want two", ps)
	}
	seen := apiPod(v1.PodRunning) // the server's: both patches applied
	seen.ResourceVersion = "3"
	seen.Status = local.Status
	seen.Status.Conditions = []v1.PodCondition{stale.Status.Conditions[0], local.Status.Conditions[0], inProgress}
	remote.pods = []*v1.Pod{seen}
	w.sync(ctx)
	ps := statusPatches(c)
	if len(ps) != 3 || !strings.Contains(ps[2], `"$patch":"delete"`) || !strings.Contains(ps[2], "PodResizeInProgress") {
		t.Fatalf("patches %q, want a third removing PodResizeInProgress", ps)
	}
}
