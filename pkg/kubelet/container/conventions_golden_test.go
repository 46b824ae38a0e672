package container_test

// These goldens guard adoption identity: a running container is adopted
// after an upgrade only if the new agent names, labels and hashes it as the
// old one did. Every key and value is spelled out here, never taken from the
// constants under test. Change them only with a deliberate, documented break.

import (
	"errors"
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	conventions "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func TestContainerLabelsGolden(t *testing.T) {
	five := int64(5)
	pod := func(grace *int64) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "5b4dcdfd-c631-5112-a161-81f482ffd5f4"},
			Spec:       v1.PodSpec{TerminationGracePeriodSeconds: grace},
		}
	}
	for _, tc := range []struct {
		name      string
		pod       *v1.Pod
		container string
		hash      string
		kind      string
		restarts  int
		want      map[string]string
	}{
		{"app container, default grace", pod(nil), "server", "901bed06", conventions.TypeContainer, 3, map[string]string{
			"io.kubernetes.pod.name":                   "web",
			"io.kubernetes.pod.namespace":              "default",
			"io.kubernetes.pod.uid":                    "5b4dcdfd-c631-5112-a161-81f482ffd5f4",
			"io.kubernetes.container.name":             "server",
			"io.kubernetes.container.hash":             "901bed06",
			"io.kubernetes.container.restartCount":     "3",
			"io.kubernetes.docker.type":                "container",
			"io.classic-kubelet.node":                  "node-1",
			"io.kubernetes.pod.terminationGracePeriod": "30",
		}},
		{"infra container, grace set", pod(&five), "POD", "7c09dc20", conventions.TypeSandbox, 0, map[string]string{
			"io.kubernetes.pod.name":                   "web",
			"io.kubernetes.pod.namespace":              "default",
			"io.kubernetes.pod.uid":                    "5b4dcdfd-c631-5112-a161-81f482ffd5f4",
			"io.kubernetes.container.name":             "POD",
			"io.kubernetes.container.hash":             "7c09dc20",
			"io.kubernetes.container.restartCount":     "0",
			"io.kubernetes.docker.type":                "podsandbox",
			"io.classic-kubelet.node":                  "node-1",
			"io.kubernetes.pod.terminationGracePeriod": "5",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := conventions.ContainerLabels(tc.pod, "node-1", tc.container, tc.hash, tc.kind, tc.restarts)
			if !maps.Equal(got, tc.want) {
				t.Errorf("ContainerLabels =\n%v\nwant golden\n%v", got, tc.want)
			}
		})
	}
}

// The constants callers add to or match against the labels above.
func TestConventionConstantsGolden(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"LabelOwner", conventions.LabelOwner, "io.classic-kubelet.node"},
		{"LabelSource", conventions.LabelSource, "io.classic-kubelet.source"},
		{"LabelGracePeriod", conventions.LabelGracePeriod, "io.kubernetes.pod.terminationGracePeriod"},
		{"LabelRestartCount", conventions.LabelRestartCount, "io.kubernetes.container.restartCount"},
		{"TypeSandbox", conventions.TypeSandbox, "podsandbox"},
		{"TypeContainer", conventions.TypeContainer, "container"},
		{"InfraContainerName", conventions.InfraContainerName, "POD"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want golden %q", tc.name, tc.got, tc.want)
		}
	}
}

// BuildName with the random suffix fixed is the whole name Docker shows.
func TestBuildNameGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   conventions.ContainerName
		want string
	}{
		{"app", conventions.ContainerName{Container: "server", Hash: "901bed06", Pod: "web", Namespace: "default",
			UID: "5b4dcdfd-c631-5112-a161-81f482ffd5f4", Rand: "0badcafe"},
			"k8s_server.901bed06_web_default_5b4dcdfd-c631-5112-a161-81f482ffd5f4_0badcafe"},
		{"infra, dotted pod name", conventions.ContainerName{Container: "POD", Hash: "7c09dc20", Pod: "a.b.c", Namespace: "kube-system",
			UID: "u1", Rand: "12345678"},
			"k8s_POD.7c09dc20_a.b.c_kube-system_u1_12345678"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := conventions.BuildName(tc.in); got != tc.want {
				t.Errorf("BuildName = %q, want golden %q", got, tc.want)
			}
		})
	}
}

// Names as earlier agents made them (Docker reports them with a leading
// "/") still parse: they are how the relist recognizes its containers.
func TestParseNameOldNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		want conventions.ContainerName
	}{
		{"/k8s_server.901bed06_web_default_5b4dcdfd-c631-5112-a161-81f482ffd5f4_0badcafe", conventions.ContainerName{
			Container: "server", Hash: "901bed06", Pod: "web", Namespace: "default", UID: "5b4dcdfd-c631-5112-a161-81f482ffd5f4", Rand: "0badcafe"}},
		{"k8s_POD.5465b825_a.b.c_kube-system_u1_12345678", conventions.ContainerName{
			Container: "POD", Hash: "5465b825", Pod: "a.b.c", Namespace: "kube-system", UID: "u1", Rand: "12345678"}},
		{"/k8s_app.1_p_ns_u_0001", conventions.ContainerName{
			Container: "app", Hash: "1", Pod: "p", Namespace: "ns", UID: "u", Rand: "0001"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := conventions.ParseName(tc.name)
			if err != nil || got != tc.want {
				t.Errorf("ParseName = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := conventions.ParseName("/nginx"); !errors.Is(err, conventions.ErrNotOurName) {
		t.Errorf("ParseName(a foreign name) err = %v, want ErrNotOurName", err)
	}
}

func TestParseRestartCountGolden(t *testing.T) {
	for _, tc := range []struct {
		labels map[string]string
		want   int
	}{
		{map[string]string{"io.kubernetes.container.restartCount": "2"}, 2},
		{map[string]string{"io.kubernetes.container.restartCount": "-1"}, 0},
		{map[string]string{"io.kubernetes.container.restartCount": "x"}, 0},
		{nil, 0},
	} {
		if got := conventions.ParseRestartCount(tc.labels); got != tc.want {
			t.Errorf("ParseRestartCount(%v) = %d, want %d", tc.labels, got, tc.want)
		}
	}
}

// The resources-free hash's label is read back from running containers: a
// new spelling would have every container compared by its full hash again.
func TestSpecHashLabelGolden(t *testing.T) {
	if got, want := conventions.LabelSpecHash, "io.kubernetes.container.hashWithoutResources"; got != want {
		t.Errorf("LabelSpecHash = %q, want golden %q", got, want)
	}
}
