package kubelet

import (
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
)

// A volume that cannot be set up makes the kubelet's Warning FailedMount
// event at each try, its repeats folded into one event's count; nothing
// is started.
func TestVolumeSetupFailureEvent(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	rec := events.New("n")
	k, parts := newKubelet(t, fake, testOptions{Events: rec, SyncFrequency: 20 * time.Millisecond, RelistPeriod: 50 * time.Millisecond,
		BackoffInitial: 10 * time.Millisecond, BackoffMax: 10 * time.Millisecond})
	updates, stop := parts.run(k)
	defer stop()

	missing := filepath.Join(t.TempDir(), "missing")
	pod := desiredPod("web", "img:1")
	dir := v1.HostPathDirectory
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: missing, Type: &dir}}}}
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{pod}}

	want := `MountVolume.SetUp failed for volume "data" : hostPath ` + missing + ` doesn't exist`
	var mounts []v1.Event
	waitUntil(t, func() bool {
		mounts = nil
		for _, e := range rec.List().Items {
			if e.Reason == "FailedMount" {
				mounts = append(mounts, e)
			}
		}
		return len(mounts) == 1 && mounts[0].Count >= 3
	})
	if e := mounts[0]; e.Type != v1.EventTypeWarning || e.Message != want || e.InvolvedObject.Name != "web" || e.InvolvedObject.FieldPath != "" {
		t.Errorf("event %s %q about %s %q, want a Warning %q about the pod", e.Type, e.Message, e.InvolvedObject.Name, e.InvolvedObject.FieldPath, want)
	}
	if n := len(fake.RunningNames()); n != 0 {
		t.Errorf("%d containers run without their volume", n)
	}
}
