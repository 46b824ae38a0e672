package container

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func hashPod() *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{
		Volumes: []v1.Volume{
			{Name: "data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv"}}},
			{Name: "unused", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		},
		Containers: []v1.Container{{
			Name:         "server",
			Image:        "classic-kubelet/testserver:1",
			Args:         []string{"/testserver"},
			Ports:        []v1.ContainerPort{{ContainerPort: 8080, HostPort: 80}},
			Env:          []v1.EnvVar{{Name: "A", Value: "b"}},
			Resources:    v1.ResourceRequirements{Limits: v1.ResourceList{"cpu": resource.MustParse("500m")}},
			VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}},
		}},
	}}
}

// The golden hashes below are what running containers carry in their names:
// if this test fails, an upgrade would restart every container. Change them
// only with a deliberate, documented break.
func TestHashGolden(t *testing.T) {
	pod := hashPod()
	if got, want := HashContainer(pod, &pod.Spec.Containers[0]), "901bed06"; got != want {
		t.Errorf("HashContainer = %s, want golden %s", got, want)
	}
	if got, want := HashInfra(pod), "7c09dc20"; got != want {
		t.Errorf("HashInfra = %s, want golden %s", got, want)
	}
	empty := &v1.Pod{}
	if got, want := HashInfra(empty), "5465b825"; got != want {
		t.Errorf("HashInfra(empty pod) = %s, want golden %s", got, want)
	}
}

func TestHashSensitivity(t *testing.T) {
	base := hashPod()
	baseHash := HashContainer(base, &base.Spec.Containers[0])
	cases := []struct {
		name    string
		mutate  func(p *v1.Pod)
		changes bool
	}{
		{"env value", func(p *v1.Pod) { p.Spec.Containers[0].Env[0].Value = "c" }, true},
		{"image", func(p *v1.Pod) { p.Spec.Containers[0].Image = "other:1" }, true},
		{"mounted volume source", func(p *v1.Pod) { p.Spec.Volumes[0].HostPath.Path = "/other" }, true},
		{"unmounted volume", func(p *v1.Pod) { p.Spec.Volumes[1].EmptyDir.Medium = "Memory" }, false},
		{"pod labels", func(p *v1.Pod) { p.Labels = map[string]string{"a": "b"} }, false},
		{"restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = v1.RestartPolicyNever }, false},
		{"same quantity written differently", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits["cpu"] = resource.MustParse("0.5")
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := hashPod()
			c.mutate(p)
			got := HashContainer(p, &p.Spec.Containers[0])
			if (got != baseHash) != c.changes {
				t.Errorf("hash changed = %v, want %v", got != baseHash, c.changes)
			}
		})
	}
}

// The resources-free hash (LabelSpecHash) is also what running containers
// carry: if this golden fails, an upgrade would replace every container
// made since in-place resize. It ignores resources and resizePolicy, and
// nothing else.
func TestHashContainerSpec(t *testing.T) {
	base := hashPod()
	baseHash := HashContainerSpec(base, &base.Spec.Containers[0])
	if want := "091ec82d"; baseHash != want {
		t.Errorf("HashContainerSpec = %s, want golden %s", baseHash, want)
	}
	for _, c := range []struct {
		name    string
		mutate  func(p *v1.Pod)
		changes bool
	}{
		{"cpu limit", func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits["cpu"] = resource.MustParse("2") }, false},
		{"memory request", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{"memory": resource.MustParse("1Gi")}
		}, false},
		{"resources removed", func(p *v1.Pod) { p.Spec.Containers[0].Resources = v1.ResourceRequirements{} }, false},
		{"resizePolicy", func(p *v1.Pod) {
			p.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: "memory", RestartPolicy: v1.RestartContainer}}
		}, false},
		{"image", func(p *v1.Pod) { p.Spec.Containers[0].Image = "other:1" }, true},
		{"env value", func(p *v1.Pod) { p.Spec.Containers[0].Env[0].Value = "c" }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := hashPod()
			c.mutate(p)
			if got := HashContainerSpec(p, &p.Spec.Containers[0]); (got != baseHash) != c.changes {
				t.Errorf("hash changed = %v, want %v", got != baseHash, c.changes)
			}
		})
	}
}

// SameSpec compares a container carrying the resources-free hash by it,
// and one made before it existed by its full hash, as before.
func TestSameSpec(t *testing.T) {
	was := hashPod()
	resized := hashPod()
	resized.Spec.Containers[0].Resources.Limits["cpu"] = resource.MustParse("2")
	changed := hashPod()
	changed.Spec.Containers[0].Image = "other:1"
	c := &was.Spec.Containers[0]
	current := &ContainerState{Hash: HashContainer(was, c), SpecHash: HashContainerSpec(was, c)}
	legacy := &ContainerState{Hash: HashContainer(was, c)}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		inst *ContainerState
		want bool
	}{
		{"unchanged", was, current, true},
		{"resources changed: kept, to resize", resized, current, true},
		{"image changed", changed, current, false},
		{"older agent's, unchanged: adopted", was, legacy, true},
		{"older agent's, resources changed: replaced", resized, legacy, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SameSpec(tc.pod, &tc.pod.Spec.Containers[0], tc.inst); got != tc.want {
				t.Errorf("SameSpec = %v, want %v", got, tc.want)
			}
		})
	}
}
