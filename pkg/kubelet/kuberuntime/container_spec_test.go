package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestUsesPodIP(t *testing.T) {
	fieldEnv := func(path string) v1.Container {
		return v1.Container{Name: "c", Env: []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}}}}
	}
	hook := func(host string) v1.Container {
		return v1.Container{Name: "c", Lifecycle: &v1.Lifecycle{PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: host, Path: "/"}}}}
	}
	ownHosts := v1.Container{Name: "c", VolumeMounts: []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts/"}}}
	for _, tc := range []struct {
		name        string
		hostNetwork bool
		init, apps  []v1.Container
		want        bool
	}{
		{"pod network: its hosts file names the IP", false, nil, []v1.Container{{Name: "c"}}, true},
		{"pod network, the container mounts its own /etc/hosts", false, nil, []v1.Container{ownHosts}, false},
		{"pod network, one of two mounts its own /etc/hosts", false, []v1.Container{{Name: "i"}}, []v1.Container{ownHosts}, true},
		{"host network", true, nil, []v1.Container{{Name: "c"}}, false},
		{"status.podIP env", true, nil, []v1.Container{fieldEnv("status.podIP")}, true},
		{"status.podIP env of an init container", true, []v1.Container{fieldEnv("status.podIP")}, []v1.Container{{Name: "c"}}, true},
		{"other field env", true, nil, []v1.Container{fieldEnv("metadata.name")}, false},
		{"postStart HTTP hook to the pod", true, nil, []v1.Container{hook("")}, true},
		{"postStart HTTP hook to a named host", true, nil, []v1.Container{hook("example.test")}, false},
		{"own /etc/hosts but status.podIP env", false, nil, []v1.Container{func() v1.Container { c := fieldEnv("status.podIP"); c.VolumeMounts = ownHosts.VolumeMounts; return c }()}, true},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: tc.hostNetwork, InitContainers: tc.init, Containers: tc.apps}}
		if got := usesPodIP(pod); got != tc.want {
			t.Errorf("%s: usesPodIP = %v, want %v", tc.name, got, tc.want)
		}
	}
}
