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
