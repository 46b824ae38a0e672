package kubelet

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/dockertools/dockertest"
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
			pod := testPod(v1.RestartPolicyAlways, "a")
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
			k := New(Config{NodeName: "n", RootDir: t.TempDir()}, dockertest.NewFakeClient(), seenAll{})
			k.appArmor = func() bool { return true }
			if rej := k.admit(pod); rej != nil {
				t.Errorf("rejected on a host with AppArmor: %+v", rej)
			}
			k.appArmor = func() bool { return false }
			rej := k.admit(pod)
			if (rej != nil) != tc.rejectedWithoutHost || (rej != nil && (rej.reason != "AppArmor" || rej.message != "Cannot enforce AppArmor: AppArmor is not enabled on the host")) {
				t.Errorf("without AppArmor on the host: rejection %+v, want rejected=%v", rej, tc.rejectedWithoutHost)
			}
			if rej != nil {
				k.records.setRejected(pod.UID, rej)
				st := k.podStatus(pod, nil)
				if st.Phase != v1.PodFailed || st.Reason != "AppArmor" || st.Message != "Pod was rejected: "+rej.message || len(st.ContainerStatuses) != 0 {
					t.Errorf("status of the rejected pod %+v", st)
				}
			}
		})
	}
}

func TestSupplementalGroupsPolicy(t *testing.T) {
	k := New(Config{NodeName: "n", RootDir: t.TempDir()}, dockertest.NewFakeClient(), seenAll{})
	for _, tc := range []struct {
		policy v1.SupplementalGroupsPolicy
		reason string
	}{{"", ""}, {v1.SupplementalGroupsPolicyMerge, ""}, {v1.SupplementalGroupsPolicyStrict, "SupplementalGroupsPolicyNotSupported"}} {
		pod := testPod(v1.RestartPolicyAlways, "a")
		if tc.policy != "" {
			pol := tc.policy
			pod.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &pol}
		}
		got := ""
		if rej := k.admit(pod); rej != nil {
			got = rej.reason
		}
		if got != tc.reason {
			t.Errorf("policy %q: rejection %q, want %q", tc.policy, got, tc.reason)
		}
	}
}
