package config

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// An update the agent cannot run leaves the pod running with its last
// valid spec (and its new metadata); a pod never valid is left out and
// reported.
func TestAPIServerSourceKeepsTheLastValidSpec(t *testing.T) {
	m, err := NewMerger(t.TempDir(), MergerOptions{}, api.SourceAPIServer)
	if err != nil {
		t.Fatal(err)
	}
	stop := drain(m)
	defer stop()
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{}, &v1.Pod{}, 0, cache.Indexers{})
	s := &APIServerSource{node: "n", sink: m, inf: inf, invalid: map[types.UID]string{}, changed: make(chan struct{}, 1)}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "11111111-2222-3333-4444-555555555555"},
		Spec: v1.PodSpec{NodeName: "n", Containers: []v1.Container{{Name: "app", Image: "img:1"}}}}
	ctx := context.Background()
	_ = inf.GetStore().Add(pod)
	s.send(ctx)
	if got := m.Snapshot(api.SourceAPIServer); len(got) != 1 {
		t.Fatalf("valid pod: snapshot %d pods, want 1", len(got))
	}

	updated := pod.DeepCopy()
	updated.Labels = map[string]string{"new": "label"}
	// An ephemeral container with a block device: the agent has none.
	updated.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "img:1",
		VolumeDevices: []v1.VolumeDevice{{Name: "disk", DevicePath: "/dev/xvdb"}}}}}
	_ = inf.GetStore().Update(updated)
	s.send(ctx)
	got := m.Snapshot(api.SourceAPIServer)
	if len(got) != 1 || len(got[0].Spec.EphemeralContainers) != 0 || got[0].Labels["new"] != "label" {
		t.Fatalf("after an update it cannot run: %+v, want the pod with its last valid spec and its new labels", got)
	}
	if _, bad := s.Invalid(pod.UID); !bad {
		t.Error("the update it cannot run is not reported")
	}

	never := updated.DeepCopy()
	never.Name, never.UID = "never", "66666666-2222-3333-4444-555555555555"
	_ = inf.GetStore().Add(never)
	s.send(ctx)
	if got := m.Snapshot(api.SourceAPIServer); len(got) != 1 || got[0].Name != "web" {
		t.Errorf("a pod never valid is run: %d pods", len(got))
	}
	if _, bad := s.Invalid(never.UID); !bad {
		t.Error("the pod never valid is not reported")
	}
}
