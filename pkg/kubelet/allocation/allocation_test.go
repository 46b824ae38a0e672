package allocation

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pod is a pod of one container "a" with cpu and memory requests ("" for
// none).
func pod(uid, cpu, mem string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Image: "img"}}}}
	reqs := v1.ResourceList{}
	if cpu != "" {
		reqs[v1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		reqs[v1.ResourceMemory] = resource.MustParse(mem)
	}
	p.Spec.Containers[0].Resources.Requests = reqs
	return p
}

// A resize is allocated when the node holds it, Infeasible when it could
// never, Deferred while the other pods hold what it needs; the messages are
// the kubelet's.
func TestDecide(t *testing.T) {
	allocatable := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}
	for _, tc := range []struct {
		name        string
		was, now    *v1.Pod
		others      []*v1.Pod
		allocatable v1.ResourceList
		reason, msg string
	}{
		{"fits", pod("p", "500m", "1Gi"), pod("p", "1", "2Gi"), nil, allocatable, "", ""},
		{"memory past the node", pod("p", "500m", "1Gi"), pod("p", "500m", "5Gi"), nil, allocatable, ReasonInfeasible,
			"Node didn't have enough capacity: memory, requested: 5368709120, capacity: 4294967296"},
		{"cpu past the node", pod("p", "500m", "1Gi"), pod("p", "3", "1Gi"), nil, allocatable, ReasonInfeasible,
			"Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000"},
		{"memory checked first", pod("p", "500m", "1Gi"), pod("p", "3", "5Gi"), nil, allocatable, ReasonInfeasible,
			"Node didn't have enough capacity: memory, requested: 5368709120, capacity: 4294967296"},
		{"cpu held by others", pod("p", "500m", "1Gi"), pod("p", "1500m", "1Gi"), []*v1.Pod{pod("o", "1", "")}, allocatable, ReasonDeferred,
			"Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"},
		{"memory held by others", pod("p", "500m", "1Gi"), pod("p", "500m", "3Gi"), []*v1.Pod{pod("o", "", "2Gi")}, allocatable, ReasonDeferred,
			"Node didn't have enough resource: memory, requested: 3221225472, used: 2147483648, capacity: 4294967296"},
		{"a shrink is never deferred", pod("p", "1", "1Gi"), pod("p", "500m", "1Gi"), []*v1.Pod{pod("o", "2", "")}, allocatable, "", ""},
		{"no allocatable known: anything fits", pod("p", "1", "1Gi"), pod("p", "64", "1Ti"), nil, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := Decide(tc.now, tc.was, tc.others, tc.allocatable)
			if ok != (tc.reason == "") || why.Reason != tc.reason || why.Message != tc.msg {
				t.Errorf("Decide = %v, %+v; want reason %q, message %q", ok, why, tc.reason, tc.msg)
			}
		})
	}
}

// Apply gives a pod its allocation; equal quantities spelled otherwise are
// the same allocation.
func TestApply(t *testing.T) {
	was, now := pod("p", "500m", "1Gi"), pod("p", "1", "2Gi")
	got := Apply(now, Of(was))
	if got == now || !got.Spec.Containers[0].Resources.Requests.Cpu().Equal(resource.MustParse("500m")) {
		t.Errorf("Apply = %v, want the old requests on a copy", got.Spec.Containers[0].Resources)
	}
	if now.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" {
		t.Error("Apply changed the desired pod")
	}
	if Apply(now, nil) != now || Apply(now, Of(pod("p", "1000m", "2048Mi"))) != now {
		t.Error("an allocation equal to the spec should leave the pod as is")
	}
}
