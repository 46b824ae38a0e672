package kuberuntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "a", "B": "bee", "EMPTY": ""}
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	cases := map[string]string{
		"plain":              "plain",
		"$(A)":               "a",
		"x$(A)y$(B)z":        "xaybeez",
		"$(UNDEFINED)":       "$(UNDEFINED)",
		"$$(A)":              "$(A)",
		"$$":                 "$",
		"$":                  "$",
		"a$b":                "a$b",
		"$(A":                "$(A",
		"$(EMPTY)-":          "-",
		"$()":                "$()",
		"$(A)$(A)":           "aa",
		"cost: $$5 for $(B)": "cost: $5 for bee",
	}
	for in, want := range cases {
		if got := expand(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestContainerEnv(t *testing.T) {
	m := newTestManager(t, Config{NodeName: "node-1", NodeIP: "10.0.0.1"}, nil)
	m.downward = NewDownward(DownwardNode{Name: "node-1", IP: "10.0.0.1", CPUs: 4})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "x"}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c",
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"memory": resource.MustParse("64Mi")}},
			Env: []v1.EnvVar{
				{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "APP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
				{Name: "IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "HOST", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
				{Name: "NODE", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
				{Name: "MEM_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
				{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.cpu"}}},
				{Name: "GREETING", Value: "hello $(POD) from $(NODE) $(LATER)"},
				{Name: "LATER", Value: "late"},
			}}}}}
	env, _, err := m.containerEnv(context.Background(), pod, &pod.Spec.Containers[0], "172.17.0.5", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "POD=web APP=x IP=172.17.0.5 HOST=10.0.0.1 NODE=node-1 MEM_MI=64 CPU=4 GREETING=hello web from node-1 $(LATER) LATER=late"
	if got := strings.Join(env, " "); got != want {
		t.Errorf("env\n got %s\nwant %s", got, want)
	}
	// A host-network pod's IP is the node's, as its status reports.
	pod.Spec.HostNetwork = true
	if env, _, err = m.containerEnv(context.Background(), pod, &pod.Spec.Containers[0], HostNetworkIP, nil); err != nil || env[2] != "IP=10.0.0.1" {
		t.Errorf("host network: %v %v, want IP=10.0.0.1", env, err)
	}
}

func TestSecurityOptions(t *testing.T) {
	i64 := func(v int64) *int64 { return &v }
	yes, no := true, false
	cases := []struct {
		name       string
		pod        *v1.PodSecurityContext
		c          *v1.SecurityContext
		privileged bool // the agent allows it
		wantUser   string
		wantErr    string
	}{
		{"none", nil, nil, false, "", ""},
		{"pod user, container group", &v1.PodSecurityContext{RunAsUser: i64(1000)}, &v1.SecurityContext{RunAsGroup: i64(3000)}, false, "1000:3000", ""},
		{"container wins", &v1.PodSecurityContext{RunAsUser: i64(1000)}, &v1.SecurityContext{RunAsUser: i64(2000)}, false, "2000", ""},
		{"group only uses the image user", nil, &v1.SecurityContext{RunAsGroup: i64(5)}, false, "0:5", ""},
		{"non-root with root image", &v1.PodSecurityContext{RunAsNonRoot: &yes}, nil, false, "", "will run as root"},
		{"non-root with uid 0", nil, &v1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: i64(0)}, false, "", "runAsUser 0"},
		{"non-root satisfied", nil, &v1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: i64(1)}, false, "1", ""},
		{"container overrides non-root", &v1.PodSecurityContext{RunAsNonRoot: &yes}, &v1.SecurityContext{RunAsNonRoot: &no}, false, "", ""},
		{"privileged refused", nil, &v1.SecurityContext{Privileged: &yes}, false, "", "--allow-privileged=false"},
		{"privileged allowed", nil, &v1.SecurityContext{Privileged: &yes}, true, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newTestManager(t, Config{NodeName: "n", AllowPrivileged: c.privileged}, nil)
			pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: c.pod, Containers: []v1.Container{{Name: "c", Image: "i", SecurityContext: c.c}}}}
			var o kubecontainer.CreateSpec
			err := m.securityOptions(context.Background(), pod, &pod.Spec.Containers[0], &o)
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), reasonConfigError)):
				t.Fatalf("error %v, want %q with reason %s", err, c.wantErr, reasonConfigError)
			case c.wantErr == "" && o.User != c.wantUser:
				t.Errorf("user %q, want %q", o.User, c.wantUser)
			}
		})
	}
}

func TestSeccompProfile(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "seccomp")
	if err := os.MkdirAll(filepath.Join(dir, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "profiles", "audit.json"), []byte(`{"defaultAction":"SCMP_ACT_LOG"}`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"defaultAction":`), 0o644)
	_ = os.Symlink("/etc/hostname", filepath.Join(dir, "link.json"))
	profile := func(typ v1.SeccompProfileType, lp string) *v1.SeccompProfile {
		sp := &v1.SeccompProfile{Type: typ}
		if lp != "" {
			sp.LocalhostProfile = &lp
		}
		return sp
	}
	for _, tc := range []struct {
		name             string
		seccompDefault   bool
		pod, container   *v1.SeccompProfile
		kind, errContain string
	}{
		{"none, --seccomp-default", true, nil, nil, kubecontainer.SeccompRuntimeDefault, ""},
		{"none, --seccomp-default=false", false, nil, nil, kubecontainer.SeccompUnconfined, ""},
		{"pod RuntimeDefault", false, profile(v1.SeccompProfileTypeRuntimeDefault, ""), nil, kubecontainer.SeccompRuntimeDefault, ""},
		{"container wins", true, profile(v1.SeccompProfileTypeRuntimeDefault, ""), profile(v1.SeccompProfileTypeUnconfined, ""), kubecontainer.SeccompUnconfined, ""},
		{"localhost", true, nil, profile(v1.SeccompProfileTypeLocalhost, "profiles/audit.json"), kubecontainer.SeccompLocalhost, ""},
		{"localhost missing", true, nil, profile(v1.SeccompProfileTypeLocalhost, "nope.json"), "", "seccomp/nope.json"},
		{"localhost invalid", true, nil, profile(v1.SeccompProfileTypeLocalhost, "broken.json"), "", "not valid JSON"},
		{"localhost through a link", true, nil, profile(v1.SeccompProfileTypeLocalhost, "link.json"), "", "link.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestManager(t, Config{NodeName: "n", RootDir: root, SeccompDefault: tc.seccompDefault}, nil)
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			if tc.pod != nil {
				pod.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: tc.pod}
			}
			if tc.container != nil {
				pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: tc.container}
			}
			got, err := m.seccompProfile(pod, &pod.Spec.Containers[0])
			if tc.errContain != "" {
				var se *kubecontainer.StartError
				if !errors.As(err, &se) || se.Reason != "CreateContainerError" || !strings.Contains(se.Message, tc.errContain) {
					t.Fatalf("error %v, want a CreateContainerError naming %q", err, tc.errContain)
				}
				return
			}
			if err != nil || got.Kind != tc.kind {
				t.Fatalf("profile %+v %v, want kind %s", got, err, tc.kind)
			}
			if tc.kind == kubecontainer.SeccompLocalhost && string(got.Content) != `{"defaultAction":"SCMP_ACT_LOG"}` {
				t.Errorf("content %q", got.Content)
			}
		})
	}
}

// SELinux options become Docker's label options: the container's replace
// the pod's whole; the sandbox takes the pod's.
func TestSELinuxLabels(t *testing.T) {
	podOpts := &v1.SELinuxOptions{User: "system_u", Level: "s0:c1,c2"}
	cOpts := &v1.SELinuxOptions{Type: "spc_t"}
	for _, tc := range []struct {
		name    string
		pod, c  *v1.SELinuxOptions
		sandbox bool
		want    string
	}{
		{"none", nil, nil, false, ""},
		{"pod's", podOpts, nil, false, "user:system_u level:s0:c1,c2"},
		{"container's replace the pod's", podOpts, cOpts, false, "type:spc_t"},
		{"sandbox takes the pod's", podOpts, cOpts, true, "user:system_u level:s0:c1,c2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{SELinuxOptions: tc.pod},
				Containers: []v1.Container{{Name: "c", SecurityContext: &v1.SecurityContext{SELinuxOptions: tc.c}}}}}
			c := &pod.Spec.Containers[0]
			if tc.sandbox {
				c = nil
			}
			if got := strings.Join(seLinuxLabels(pod, c), " "); got != tc.want {
				t.Errorf("labels %q, want %q", got, tc.want)
			}
		})
	}
}
