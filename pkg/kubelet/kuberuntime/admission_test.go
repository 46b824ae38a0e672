package kuberuntime

import (
	"context"
	"errors"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/devices"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

func TestAppArmor(t *testing.T) {
	local := "k8s-deny-write"
	field := func(typ v1.AppArmorProfileType) *v1.AppArmorProfile {
		p := &v1.AppArmorProfile{Type: typ}
		if typ == v1.AppArmorProfileTypeLocalhost {
			p.LocalhostProfile = &local
		}
		return p
	}
	for _, tc := range []struct {
		name                string
		pod, container      *v1.AppArmorProfile
		annotation          string
		docker              string
		rejectedWithoutHost bool
	}{
		{"nothing asked", nil, nil, "", "", false},
		{"pod RuntimeDefault", field(v1.AppArmorProfileTypeRuntimeDefault), nil, "", "docker-default", true},
		{"container Unconfined wins", field(v1.AppArmorProfileTypeRuntimeDefault), field(v1.AppArmorProfileTypeUnconfined), "", "unconfined", false},
		{"annotation localhost", nil, nil, "localhost/k8s-deny-write", "k8s-deny-write", true},
		{"annotation beats the pod field", field(v1.AppArmorProfileTypeRuntimeDefault), nil, "unconfined", "unconfined", false},
		{"container field beats the annotation", nil, field(v1.AppArmorProfileTypeLocalhost), "unconfined", "k8s-deny-write", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			if tc.pod != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: tc.pod}
			}
			if tc.container != nil {
				pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: tc.container}
			}
			if tc.annotation != "" {
				pod.Annotations = map[string]string{appArmorAnnotationPrefix + "a": tc.annotation}
			}
			if got := dockerAppArmor(appArmorProfile(pod, &pod.Spec.Containers[0])); got != tc.docker {
				t.Errorf("Docker's apparmor option %q, want %q", got, tc.docker)
			}
			m := newTestManager(t, Config{NodeName: "n"}, nil)
			m.appArmor = func() bool { return true }
			if rej := m.Admit(context.Background(), pod, nil); rej != nil {
				t.Errorf("rejected on a host with AppArmor: %+v", rej)
			}
			m.appArmor = func() bool { return false }
			rej := m.Admit(context.Background(), pod, nil)
			if (rej != nil) != tc.rejectedWithoutHost || (rej != nil && (rej.Reason != "AppArmor" || rej.Message != "Cannot enforce AppArmor: AppArmor is not enabled on the host")) {
				t.Errorf("without AppArmor on the host: rejection %+v, want rejected=%v", rej, tc.rejectedWithoutHost)
			}
		})
	}
}

func TestSupplementalGroupsPolicy(t *testing.T) {
	m := newTestManager(t, Config{NodeName: "n"}, nil)
	for _, tc := range []struct {
		policy v1.SupplementalGroupsPolicy
		reason string
	}{{"", ""}, {v1.SupplementalGroupsPolicyMerge, ""}, {v1.SupplementalGroupsPolicyStrict, "SupplementalGroupsPolicyNotSupported"}} {
		pod := containertest.Pod(v1.RestartPolicyAlways, "a")
		if tc.policy != "" {
			pol := tc.policy
			pod.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &pol}
		}
		got := ""
		if rej := m.Admit(context.Background(), pod, nil); rej != nil {
			got = rej.Reason
		}
		if got != tc.reason {
			t.Errorf("policy %q: rejection %q, want %q", tc.policy, got, tc.reason)
		}
	}
}

// A pod for another OS is refused with the kubelet's reasons.
func TestAdmitPodOS(t *testing.T) {
	for _, tc := range []struct {
		name     string
		os       v1.OSName
		selector string
		reason   string
	}{
		{"no OS", "", "", ""},
		{"linux", v1.Linux, "linux", ""},
		{"windows", v1.Windows, "", "PodOSNotSupported"},
		{"windows nodes selected", "", "windows", "PodOSSelectorNodeLabelDoesNotMatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			if tc.os != "" {
				pod.Spec.OS = &v1.PodOS{Name: tc.os}
			}
			if tc.selector != "" {
				pod.Spec.NodeSelector = map[string]string{v1.LabelOSStable: tc.selector}
			}
			m := newTestManager(t, Config{NodeName: "n"}, nil)
			m.appArmor = func() bool { return true }
			got := ""
			if rej := m.Admit(context.Background(), pod, nil); rej != nil {
				got = rej.Reason
			}
			if got != tc.reason {
				t.Errorf("rejection reason %q, want %q", got, tc.reason)
			}
		})
	}
}

type fakeDevices struct{ err error }

func (f fakeDevices) Allocate(context.Context, *v1.Pod) error { return f.err }
func (f fakeDevices) ContainerOptions(context.Context, *v1.Pod, *v1.Container) (*devices.ContainerOptions, error) {
	return &devices.ContainerOptions{Env: []string{"A=plugin", "B=plugin"}, Devices: []kubecontainer.Device{{PathOnHost: "/dev/x", PathInContainer: "/dev/x", Permissions: "rw"}}}, nil
}

// A pod whose devices cannot be allocated is refused as the kubelet
// refuses it; the plugin's answer reaches the container's spec, its env
// before the container's own (which wins a name).
func TestDevicesAdmissionAndSpec(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want *lifecycle.Rejection
	}{
		{"allocated", nil, nil},
		{"too few free", errors.New("requested number of devices unavailable for example.com/dev. Requested: 3, Available: 1"),
			&lifecycle.Rejection{Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to requested number of devices unavailable for example.com/dev. Requested: 3, Available: 1, which is unexpected"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, Config{NodeName: "n"}, nil)
			m.devices = fakeDevices{err: tc.err}
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			if got := m.Admit(context.Background(), pod, nil); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rejection %+v, want %+v", got, tc.want)
			}
			// A pod with containers was admitted before (the agent
			// restarted, its plugin not registered again): it is not
			// refused, whatever the allocation says.
			started := &kubecontainer.PodState{UID: pod.UID, Containers: []*kubecontainer.ContainerState{{ID: "c1", Name: "a", Running: true}}}
			if got := m.Admit(context.Background(), pod, started); got != nil {
				t.Errorf("a started pod: rejection %+v, want none", got)
			}
		})
	}
	m := newTestManager(t, Config{NodeName: "n"}, nil)
	m.devices = fakeDevices{}
	pod := containertest.Pod(v1.RestartPolicyAlways, "a")
	spec := &kubecontainer.CreateSpec{Env: []string{"A=own"}}
	if err := m.deviceOptions(context.Background(), pod, &pod.Spec.Containers[0], spec); err != nil {
		t.Fatal(err)
	}
	if want := []string{"A=plugin", "B=plugin", "A=own"}; !reflect.DeepEqual(spec.Env, want) {
		t.Errorf("env %v, want %v (Docker takes the last of a name)", spec.Env, want)
	}
	if len(spec.Devices) != 1 {
		t.Errorf("devices %v", spec.Devices)
	}
}
