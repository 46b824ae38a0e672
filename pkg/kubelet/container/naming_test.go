package container

import (
	"errors"
	"regexp"
	"testing"
)

func TestNameRoundTrip(t *testing.T) {
	cases := []ContainerName{
		{Container: "server", Hash: "1a2b3c4d", Pod: "web", Namespace: "default", UID: "5b4dcdfd-c631-5112-a161-81f482ffd5f4", Rand: "0badcafe"},
		{Container: InfraContainerName, Hash: "00000000", Pod: "a.b.c", Namespace: "kube-system", UID: "x", Rand: "12345678"},
	}
	for _, want := range cases {
		t.Run(want.Container+"/"+want.Pod, func(t *testing.T) {
			name := BuildName(want)
			got, err := ParseName("/" + name)
			if err != nil {
				t.Fatalf("ParseName(%q): %v", name, err)
			}
			if got != want {
				t.Errorf("ParseName(BuildName(%+v)) = %+v", want, got)
			}
		})
	}
}

func TestBuildNameRandomSuffix(t *testing.T) {
	n := ContainerName{Container: "c", Hash: "h", Pod: "p", Namespace: "ns", UID: "u"}
	a, b := BuildName(n), BuildName(n)
	if a == b {
		t.Errorf("two names for a new container are equal: %q", a)
	}
	if !regexp.MustCompile(`^k8s_c\.h_p_ns_u_[0-9a-f]{8}$`).MatchString(a) {
		t.Errorf("BuildName = %q, want k8s_c.h_p_ns_u_<8 hex>", a)
	}
}

func TestParseNameRejectsForeignNames(t *testing.T) {
	for _, name := range []string{
		"", "nginx", "/k8s_", "k8s_server_web_default_uid_rand", // no hash
		"k8s_.h_p_ns_u_r", "k8s_c.h_p_ns_u", // empty container, too few parts
		"k8s_c.h_p_ns_u_r_extra", "k9s_c.h_p_ns_u_r", "k8s_c.h__ns_u_r",
	} {
		if _, err := ParseName(name); !errors.Is(err, ErrNotOurName) {
			t.Errorf("ParseName(%q) err = %v, want ErrNotOurName", name, err)
		}
	}
}
