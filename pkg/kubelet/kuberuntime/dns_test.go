package kuberuntime

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
)

func TestPodDNS(t *testing.T) {
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("# comment\n; other comment\nnameserver 10.0.0.2\nsearch a.example b.example\ndomain c.example\noptions ndots:2 rotate\nnameserver\nsortlist 1.2.3.4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	five := "5"
	cfg := &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"pod.example"},
		Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &five}, {Name: "edns0"}}}
	node := kubecontainer.DNSSettings{Nameservers: []string{"10.0.0.2"}, Searches: []string{"a.example", "b.example", "c.example"}, Options: []string{"ndots:2", "rotate"}}
	cases := []struct {
		name       string
		resolvConf string
		policy     v1.DNSPolicy
		dc         *v1.PodDNSConfig
		want       kubecontainer.DNSSettings
		wantErr    bool
	}{
		{"default resolv.conf, no config: left to Docker", "", v1.DNSClusterFirst, nil, kubecontainer.DNSSettings{}, false},
		{"None: the pod's own alone", resolv, v1.DNSNone, cfg,
			kubecontainer.DNSSettings{Nameservers: []string{"1.1.1.1"}, Searches: []string{"pod.example"}, Options: []string{"ndots:5", "edns0"}}, false},
		{"the node's file", resolv, v1.DNSDefault, nil, node, false},
		{"the node's file with the pod's config added", resolv, v1.DNSClusterFirst, cfg, kubecontainer.DNSSettings{
			Nameservers: []string{"10.0.0.2", "1.1.1.1"}, Searches: []string{"a.example", "b.example", "c.example", "pod.example"},
			Options: []string{"ndots:2", "rotate", "ndots:5", "edns0"}}, false},
		{"unreadable --resolv-conf: a config error", filepath.Join(dir, "missing"), v1.DNSDefault, nil, kubecontainer.DNSSettings{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newTestManager(t, Config{ResolvConf: c.resolvConf}, nil)
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			pod.Spec.DNSPolicy, pod.Spec.DNSConfig = c.policy, c.dc
			got, err := m.podDNS(pod)
			if c.wantErr {
				var se *kubecontainer.StartError
				if !errors.As(err, &se) || se.Reason != reasonConfigError {
					t.Fatalf("error %v, want a %s", err, reasonConfigError)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%+v, want %+v", got, c.want)
			}
		})
	}
}
