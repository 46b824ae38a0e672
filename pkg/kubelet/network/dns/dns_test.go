package dns

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
)

// fakeEvents records events as "Kind reason message".
type fakeEvents struct{ got []string }

func (f *fakeEvents) Event(ref events.Ref, warning bool, reason, format string, args ...any) {
	kind := ref.Kind
	if kind == "" {
		kind = "Pod"
	}
	f.got = append(f.got, kind+" "+reason+" "+fmt.Sprintf(format, args...))
}

// The values of upstream's TestGetPodDNSCustom: the host's file names
// 8.8.8.8 and host.domain; the cluster's nameserver is 10.0.0.10 in
// kubernetes.io; the pod's dnsConfig adds 10.0.0.11, my.domain, ndots:3 and
// debug.
const (
	hostNS      = "8.8.8.8"
	hostDomain  = "host.domain"
	clusterNS   = "10.0.0.10"
	domain      = "kubernetes.io"
	podNS       = "testNS"
	nsSvcDomain = podNS + ".svc." + domain
	svcDomain   = "svc." + domain
)

func hostResolvConf(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(p, []byte("nameserver "+hostNS+"\nsearch "+hostDomain+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func podWith(policy v1.DNSPolicy, hostNetwork bool, dc *v1.PodDNSConfig) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "test_pod", Namespace: podNS, UID: "uid-1"},
		Spec: v1.PodSpec{DNSPolicy: policy, HostNetwork: hostNetwork, DNSConfig: dc}}
}

func podConfig() *v1.PodDNSConfig {
	three := "3"
	return &v1.PodDNSConfig{Nameservers: []string{"10.0.0.11"}, Searches: []string{"my.domain"},
		Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: &three}, {Name: "debug"}}}
}

// TestPodDNS is every dnsPolicy × hostNetwork × dnsConfig case, with and
// without a cluster DNS. Each row names the upstream test case
// (pkg/kubelet/network/dns/dns_test.go) whose expectation it holds, or
// "getPodDNSType: <case>" where upstream fixes only the policy the case
// resolves to, or "derived" where the row combines the two.
func TestPodDNS(t *testing.T) {
	host := kubecontainer.DNSSettings{Nameservers: []string{hostNS}, Searches: []string{hostDomain}}
	cluster := kubecontainer.DNSSettings{Nameservers: []string{clusterNS}, Searches: []string{nsSvcDomain, svcDomain, domain, hostDomain},
		Options: []string{"ndots:5"}}
	clusterMerged := kubecontainer.DNSSettings{Nameservers: []string{clusterNS, "10.0.0.11"},
		Searches: []string{nsSvcDomain, svcDomain, domain, hostDomain, "my.domain"}, Options: []string{"ndots:3", "debug"}}
	hostMerged := kubecontainer.DNSSettings{Nameservers: []string{hostNS, "10.0.0.11"}, Searches: []string{hostDomain, "my.domain"},
		Options: []string{"ndots:3", "debug"}}
	podOnly := kubecontainer.DNSSettings{Nameservers: []string{"10.0.0.11"}, Searches: []string{"my.domain"}, Options: []string{"ndots:3", "debug"}}
	missing := []string{
		`Node MissingClusterDNS kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`,
		`Pod MissingClusterDNS pod: "test_pod_testNS(uid-1)". kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`,
	}
	cases := []struct {
		upstream    string
		policy      v1.DNSPolicy
		hostNetwork bool
		dnsConfig   bool
		clusterDNS  bool
		want        kubecontainer.DNSSettings
		events      []string
	}{
		{"getPodDNSType: valid DNSClusterFirst without hostnetwork; TestGetPodDNS pods[2]", v1.DNSClusterFirst, false, false, true, cluster, nil},
		{"TestGetPodDNSCustom: DNSClusterFirst with DNSConfig should have a merged DNS settings", v1.DNSClusterFirst, false, true, true, clusterMerged, nil},
		{"getPodDNSType: DNSClusterFirst with hostnetwork, fallback to DNSDefault; TestGetPodDNS pods[1]", v1.DNSClusterFirst, true, false, true, host, nil},
		{"derived: DNSClusterFirst with hostnetwork falls back to DNSDefault, which merges DNSConfig", v1.DNSClusterFirst, true, true, true, hostMerged, nil},
		{"getPodDNSType: valid DNSClusterFirstWithHostNet without hostnetwork", v1.DNSClusterFirstWithHostNet, false, false, true, cluster, nil},
		{"derived: DNSClusterFirstWithHostNet without hostnetwork is DNSClusterFirst, with DNSConfig merged", v1.DNSClusterFirstWithHostNet, false, true, true, clusterMerged, nil},
		{"getPodDNSType: valid DNSClusterFirstWithHostNet with hostnetwork; TestGetPodDNS pods[0]", v1.DNSClusterFirstWithHostNet, true, false, true, cluster, nil},
		{"TestGetPodDNSCustom: DNSClusterFirstWithHostNet with DNSConfig should have a merged DNS settings", v1.DNSClusterFirstWithHostNet, true, true, true, clusterMerged, nil},
		{"getPodDNSType: valid DNSDefault without hostnetwork; TestGetPodDNS pods[3]", v1.DNSDefault, false, false, true, host, nil},
		{"TestGetPodDNSCustom: DNSDefault with DNSConfig should have a merged DNS settings", v1.DNSDefault, false, true, true, hostMerged, nil},
		{"getPodDNSType: valid DNSDefault with hostnetwork", v1.DNSDefault, true, false, true, host, nil},
		{"derived: DNSDefault with hostnetwork merges DNSConfig", v1.DNSDefault, true, true, true, hostMerged, nil},
		{"TestGetPodDNSCustom: DNSNone without DNSConfig should have empty DNS settings", v1.DNSNone, false, false, true, kubecontainer.DNSSettings{}, nil},
		{"TestGetPodDNSCustom: DNSNone with DNSConfig should have a merged DNS settings", v1.DNSNone, false, true, true, podOnly, nil},
		{"getPodDNSType: valid DNSNone (host network alike)", v1.DNSNone, true, false, true, kubecontainer.DNSSettings{}, nil},
		{"derived: DNSNone with hostnetwork and DNSConfig", v1.DNSNone, true, true, true, podOnly, nil},
		// Without --cluster-dns: GetPodDNS's fallback to DNSDefault with
		// the MissingClusterDNS events on the node and the pod.
		{"GetPodDNS: clusterDNS is not known, fallback to DNSDefault", v1.DNSClusterFirst, false, false, false, host, missing},
		{"GetPodDNS: clusterDNS is not known, fallback to DNSDefault, DNSConfig merged", v1.DNSClusterFirst, false, true, false, hostMerged, missing},
		{"GetPodDNS: clusterDNS is not known (ClusterFirstWithHostNet)", v1.DNSClusterFirstWithHostNet, true, false, false, host, missing},
		{"GetPodDNS: ClusterFirst on the host network is DNSDefault: no event", v1.DNSClusterFirst, true, false, false, host, nil},
		{"GetPodDNS: DNSNone needs no cluster DNS", v1.DNSNone, false, true, false, podOnly, nil},
	}
	resolv := hostResolvConf(t)
	for _, c := range cases {
		name := fmt.Sprintf("%s/hostNetwork=%t/dnsConfig=%t/clusterDNS=%t", c.policy, c.hostNetwork, c.dnsConfig, c.clusterDNS)
		t.Run(name, func(t *testing.T) {
			ev := &fakeEvents{}
			conf := &Configurer{ClusterDomain: domain, ResolvConf: resolv, NodeName: "testNode", WarnMissingClusterDNS: true, Events: ev}
			if c.clusterDNS {
				conf.ClusterDNS = []string{clusterNS}
			}
			var dc *v1.PodDNSConfig
			if c.dnsConfig {
				dc = podConfig()
			}
			got, err := conf.PodDNS(podWith(c.policy, c.hostNetwork, dc))
			if err != nil {
				t.Fatalf("%s: %v", c.upstream, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s:\n got  %+v\n want %+v", c.upstream, got, c.want)
			}
			if !reflect.DeepEqual(ev.got, c.events) {
				t.Errorf("%s: events %q, want %q", c.upstream, ev.got, c.events)
			}
		})
	}
}

// TestPodDNSResolvConf holds the cases of the host's file: upstream's
// TestGetPodDNS with an empty resolver config (nameserver 127.0.0.1 and
// search "."), the zero value that leaves Docker to copy the default file,
// and errors.
func TestPodDNSResolvConf(t *testing.T) {
	resolv := hostResolvConf(t)
	cases := []struct {
		name       string
		resolvConf string
		nodeIP     string
		policy     v1.DNSPolicy
		dnsConfig  bool
		want       kubecontainer.DNSSettings
		wantErr    bool
	}{
		{"TestGetPodDNS: no resolver config, DNSDefault: 127.0.0.1 and search .", "", "", v1.DNSDefault, false,
			kubecontainer.DNSSettings{Nameservers: []string{"127.0.0.1"}, Searches: []string{"."}}, false},
		{"TestGetPodDNS: no resolver config, IPv6 node: ::1", "", "fd00::1", v1.DNSDefault, false,
			kubecontainer.DNSSettings{Nameservers: []string{"::1"}, Searches: []string{"."}}, false},
		{"TestGetPodDNS: no resolver config, ClusterFirst: cluster domains only", "", "", v1.DNSClusterFirst, false,
			kubecontainer.DNSSettings{Nameservers: []string{clusterNS}, Searches: []string{nsSvcDomain, svcDomain, domain}, Options: []string{"ndots:5"}}, false},
		{"the default file without dnsConfig: Docker copies it", DefaultResolvConf, "", v1.DNSDefault, false, kubecontainer.DNSSettings{}, false},
		{"the default file with dnsConfig: read and merged", resolv, "", v1.DNSDefault, true,
			kubecontainer.DNSSettings{Nameservers: []string{hostNS, "10.0.0.11"}, Searches: []string{hostDomain, "my.domain"}, Options: []string{"ndots:3", "debug"}}, false},
		{"an unreadable --resolv-conf fails the sandbox", filepath.Join(t.TempDir(), "missing"), "", v1.DNSDefault, false, kubecontainer.DNSSettings{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conf := &Configurer{ClusterDNS: []string{clusterNS}, ClusterDomain: domain, ResolvConf: c.resolvConf, NodeIP: c.nodeIP}
			var dc *v1.PodDNSConfig
			if c.dnsConfig {
				dc = podConfig()
			}
			got, err := conf.PodDNS(podWith(c.policy, false, dc))
			if (err != nil) != c.wantErr {
				t.Fatalf("error %v, want error %t", err, c.wantErr)
			}
			if !c.wantErr && !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestFitSearches holds upstream's TestFormDNSSearchFitsLimits (with
// ExpandedDNSConfig, now the only limits).
func TestFitSearches(t *testing.T) {
	list2048 := []string{strings.Repeat("A", 128)}
	for range 15 {
		list2048 = append(list2048, strings.Repeat("A", 127))
	}
	paths := func(n int) []string {
		out := []string{"testNS.svc.TEST", "svc.TEST", "TEST"}
		for i := 4; i <= n; i++ {
			out = append(out, strconv.Itoa(i))
		}
		return out
	}
	const omitted = "Pod DNSConfigForming Search Line limits were exceeded, some search paths have been omitted, the applied search line is: "
	cases := []struct {
		upstream  string
		in, want  []string
		wantEvent bool
	}{
		{"valid: 3 search paths", paths(3), paths(3), false},
		{"valid: 5 search paths", []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}, []string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}, false},
		{"invalid: longer than 256 characters in search path list",
			[]string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", strings.Repeat("B", 256), "BBB"},
			[]string{"testNS.svc.TEST", "svc.TEST", "TEST", "AAA", "BBB"}, true},
		{"valid ExpandedDNSConfig: 2048 characters in search path list", list2048, list2048, false},
		{"invalid ExpandedDNSConfig: 2050 characters in search path list", append(append([]string(nil), list2048...), "B"), list2048, true},
		{"valid ExpandedDNSConfig: 32 search paths", paths(32), paths(32), false},
		{"invalid ExpandedDNSConfig: 33 search paths", paths(33), paths(32), true},
	}
	for _, c := range cases {
		t.Run(c.upstream, func(t *testing.T) {
			ev := &fakeEvents{}
			conf := &Configurer{Events: ev}
			got := conf.fitSearches(podWith(v1.DNSClusterFirst, false, nil), append([]string(nil), c.in...))
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %d paths %q, want %d", len(got), got, len(c.want))
			}
			var want []string
			if c.wantEvent {
				want = []string{omitted + strings.Join(c.want, " ")}
			}
			if !reflect.DeepEqual(ev.got, want) {
				t.Errorf("events %q, want %q", ev.got, want)
			}
		})
	}
}

// TestFitNameservers holds upstream's TestFormDNSNameserversFitsLimits.
func TestFitNameservers(t *testing.T) {
	cases := []struct {
		upstream  string
		in, want  []string
		wantEvent bool
	}{
		{"valid: 1 nameserver", []string{"127.0.0.1"}, []string{"127.0.0.1"}, false},
		{"valid: 3 nameservers", []string{"127.0.0.1", "10.0.0.10", "8.8.8.8"}, []string{"127.0.0.1", "10.0.0.10", "8.8.8.8"}, false},
		{"invalid: 4 nameservers, trimmed to 3", []string{"127.0.0.1", "10.0.0.10", "8.8.8.8", "1.2.3.4"}, []string{"127.0.0.1", "10.0.0.10", "8.8.8.8"}, true},
	}
	for _, c := range cases {
		t.Run(c.upstream, func(t *testing.T) {
			ev := &fakeEvents{}
			got := (&Configurer{Events: ev}).fitNameservers(podWith(v1.DNSNone, false, nil), c.in)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
			var want []string
			if c.wantEvent {
				want = []string{"Pod DNSConfigForming Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 127.0.0.1 10.0.0.10 8.8.8.8"}
			}
			if !reflect.DeepEqual(ev.got, want) {
				t.Errorf("events %q, want %q", ev.got, want)
			}
		})
	}
}

// TestMergeOptions holds upstream's TestMergeDNSOptions (which compares as
// sets: here the order is kept, overridden in place).
func TestMergeOptions(t *testing.T) {
	three := "3"
	cases := []struct {
		upstream string
		existing []string
		pod      []v1.PodDNSConfigOption
		want     []string
	}{
		{"Empty dnsConfigOptions", []string{"ndots:5", "debug"}, nil, []string{"ndots:5", "debug"}},
		{"No duplicated entries", []string{"ndots:5", "debug"}, []v1.PodDNSConfigOption{{Name: "single-request"}, {Name: "attempts", Value: &three}},
			[]string{"ndots:5", "debug", "single-request", "attempts:3"}},
		{"Overwrite duplicated entries", []string{"ndots:5", "debug"},
			[]v1.PodDNSConfigOption{{Name: "ndots", Value: &three}, {Name: "debug"}, {Name: "single-request"}, {Name: "attempts", Value: &three}},
			[]string{"ndots:3", "debug", "single-request", "attempts:3"}},
	}
	for _, c := range cases {
		t.Run(c.upstream, func(t *testing.T) {
			if got := mergeOptions(c.existing, c.pod); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestParseResolvConf holds upstream's TestParseResolvConf.
func TestParseResolvConf(t *testing.T) {
	cases := []struct {
		data                          string
		nameservers, searches, option []string
		wantErr                       bool
	}{
		{"", nil, nil, nil, false},
		{" ", nil, nil, nil, false},
		{"\n", nil, nil, nil, false},
		{"\t\n\t", nil, nil, nil, false},
		{"#comment\n", nil, nil, nil, false},
		{" #comment\n", nil, nil, nil, false},
		{"#comment\n#comment", nil, nil, nil, false},
		{"#comment\nnameserver", nil, nil, nil, true},
		{"#comment\nnameserver\nsearch", nil, nil, nil, true},
		{"#comment\nnameserver 1.2.3.4\nsearch", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{" nameserver 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"\tnameserver 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver\t1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver \t 1.2.3.4", []string{"1.2.3.4"}, nil, nil, false},
		{"nameserver 1.2.3.4\nnameserver 5.6.7.8", []string{"1.2.3.4", "5.6.7.8"}, nil, nil, false},
		{"nameserver 1.2.3.4 #comment", []string{"1.2.3.4"}, nil, nil, false},
		{"search ", nil, nil, nil, false},
		{"search foo", nil, []string{"foo"}, nil, false},
		{"search foo bar", nil, []string{"foo", "bar"}, nil, false},
		{"search foo. bar", nil, []string{"foo", "bar"}, nil, false},
		{"search foo bar bat\n", nil, []string{"foo", "bar", "bat"}, nil, false},
		{"search foo\nsearch bar", nil, []string{"bar"}, nil, false},
		{"nameserver 1.2.3.4\nsearch foo bar", []string{"1.2.3.4"}, []string{"foo", "bar"}, nil, false},
		{"nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar", []string{"1.2.3.4", "5.6.7.8"}, []string{"bar"}, nil, false},
		{"#comment\nnameserver 1.2.3.4\n#comment\nsearch foo\ncomment", []string{"1.2.3.4"}, []string{"foo"}, nil, false},
		{"options ", nil, nil, nil, false},
		{"options ndots:5 attempts:2", nil, nil, []string{"ndots:5", "attempts:2"}, false},
		{"options ndots:1\noptions ndots:5 attempts:3", nil, nil, []string{"ndots:5", "attempts:3"}, false},
		{"nameserver 1.2.3.4\nsearch foo\nnameserver 5.6.7.8\nsearch bar\noptions ndots:5 attempts:4", []string{"1.2.3.4", "5.6.7.8"}, []string{"bar"}, []string{"ndots:5", "attempts:4"}, false},
	}
	norm := func(s []string) []string {
		if len(s) == 0 {
			return nil
		}
		return s
	}
	for i, c := range cases {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			got, err := ParseResolvConf(strings.NewReader(c.data))
			if c.wantErr {
				if err == nil {
					t.Fatalf("%q: no error", c.data)
				}
				return
			}
			if err != nil {
				t.Fatalf("%q: %v", c.data, err)
			}
			if !reflect.DeepEqual(norm(got.Nameservers), c.nameservers) || !reflect.DeepEqual(norm(got.Searches), c.searches) ||
				!reflect.DeepEqual(norm(got.Options), c.option) {
				t.Errorf("%q: got %+v", c.data, got)
			}
		})
	}
}
