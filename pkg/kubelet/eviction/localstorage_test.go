package eviction

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestLocalStorageViolation(t *testing.T) {
	q := resource.MustParse
	size := func(s string) *resource.Quantity { v := q(s); return &v }
	limited := func(name, limit string) v1.Container {
		return v1.Container{Name: name, Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceEphemeralStorage: q(limit)}}}
	}
	withVolumes := func(containers []v1.Container, vols ...v1.Volume) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: containers, Volumes: vols}}
	}
	disk := v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: size("10Mi")}}}
	mem := v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: size("1Mi")}}}
	unlimited := v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}
	for _, tc := range []struct {
		name    string
		pod     *v1.Pod
		usage   LocalUsage
		limited bool
		want    string
	}{
		{"emptyDir within its limit", withVolumes([]v1.Container{{Name: "c"}}, disk), LocalUsage{Volumes: map[string]int64{"data": 10 << 20}}, true, ""},
		{"emptyDir over its limit", withVolumes([]v1.Container{{Name: "c"}}, disk), LocalUsage{Volumes: map[string]int64{"data": 10<<20 + 1}}, true,
			`Usage of EmptyDir volume "data" exceeds the limit "10Mi". `},
		{"Memory emptyDir: its tmpfs bounds it", withVolumes([]v1.Container{{Name: "c"}}, mem), LocalUsage{Volumes: map[string]int64{"mem": 5 << 20}}, false, ""},
		{"container over its limit", withVolumes([]v1.Container{limited("a", "100Mi"), limited("b", "10Mi")}),
			LocalUsage{Containers: map[string]int64{"a": 1 << 20, "b": 11 << 20}}, true, `Container b exceeded its local ephemeral storage limit "10Mi". `},
		{"pod over the sum, counting its emptyDirs", withVolumes([]v1.Container{limited("a", "10Mi"), limited("b", "10Mi")}, unlimited),
			LocalUsage{Containers: map[string]int64{"a": 5 << 20, "b": 5 << 20}, Volumes: map[string]int64{"scratch": 11 << 20}}, true,
			"Pod ephemeral local storage usage exceeds the total limit of containers 20Mi. "},
		{"nothing limited", withVolumes([]v1.Container{{Name: "c"}}, unlimited), LocalUsage{Volumes: map[string]int64{"scratch": 1 << 40}}, false, ""},
		// Limits past what an int64 holds are never reached (before: their
		// Value was 0 or negative, and the pod was evicted at once).
		{"emptyDir sizeLimit past int64", withVolumes([]v1.Container{{Name: "c"}},
			v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: size("1e30")}}}),
			LocalUsage{Volumes: map[string]int64{"data": 1 << 40}}, true, ""},
		{"containers' limits summing past int64", withVolumes([]v1.Container{limited("a", "8Ei"), limited("b", "8Ei")}, unlimited),
			LocalUsage{Containers: map[string]int64{"a": 1, "b": 1}, Volumes: map[string]int64{"scratch": 1 << 40}}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := HasLocalStorageLimits(tc.pod); got != tc.limited {
				t.Errorf("HasLocalStorageLimits = %v, want %v", got, tc.limited)
			}
			if got := LocalStorageViolation(tc.pod, tc.usage); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
