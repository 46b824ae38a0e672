package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(kc, []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		check   func(o *Options) bool
		wantErr string
	}{
		{"defaults", []string{"--hostname-override", "N1"}, func(o *Options) bool {
			return o.HostnameOverride == "n1" && o.RootDir == "/var/lib/kubelet" && o.SyncFrequency == 10*time.Second &&
				o.FileCheckFrequency == 20*time.Second && o.RelistPeriod == time.Second && o.PodInfraContainerImage == DefaultInfraImage && o.AllowPrivileged
		}, ""},
		{"privileged refused on request", []string{"--hostname-override=x", "--allow-privileged=false"}, func(o *Options) bool { return !o.AllowPrivileged }, ""},
		{"underscores accepted", []string{"--pod_manifest_path", dir, "--sync_frequency=3s", "--hostname_override=x"}, func(o *Options) bool {
			return o.PodManifestPath == dir && o.SyncFrequency == 3*time.Second
		}, ""},
		{"--config is the manifest path", []string{"--config", dir, "--hostname-override=x"}, func(o *Options) bool { return o.PodManifestPath == dir }, ""},
		{"KubeletConfiguration as the manifest path refused with a hint", []string{"--pod-manifest-path", kc, "--hostname-override=x"}, nil, "pass it as --config"},
		{"bad duration", []string{"--relist-period=0s", "--hostname-override=x"}, nil, "--relist-period must be positive"},
		{"stray argument", []string{"--hostname-override=x", "extra"}, nil, "unexpected arguments"},
		{"node name with a slash refused", []string{"--hostname-override=../etc"}, nil, "node name"},
		{"pid and reservation defaults", []string{"--hostname-override=x"}, func(o *Options) bool {
			return o.PodMaxPids == -1 && o.KubeReserved == "" && len(o.EnforceNodeAllocatable) == 1 && o.EnforceNodeAllocatable[0] == "pods"
		}, ""},
		{"reservations", []string{"--hostname-override=x", "--pod-max-pids=100", "--kube-reserved=cpu=100m,memory=100Mi,pid=1000",
			"--system-reserved=memory=1Gi", "--enforce-node-allocatable=none"}, func(o *Options) bool {
			return o.PodMaxPids == 100 && o.KubeReserved == "cpu=100m,memory=100Mi,pid=1000" && o.SystemReserved == "memory=1Gi"
		}, ""},
		{"bad --pod-max-pids", []string{"--hostname-override=x", "--pod-max-pids=-2"}, nil, "--pod-max-pids must be -1"},
		{"bad --kube-reserved", []string{"--hostname-override=x", "--kube-reserved=disk=1Gi"}, nil, `--kube-reserved: "disk=1Gi"`},
		{"bad --system-reserved", []string{"--hostname-override=x", "--system-reserved=memory=x"}, nil, "--system-reserved: memory: want a quantity"},
		{"eviction defaults", []string{"--hostname-override=x"}, func(o *Options) bool {
			th, err := o.evictionThresholds()
			return err == nil && len(th) == 4 && o.EvictionPressureTransitionPeriod == 5*time.Minute
		}, ""},
		{"--eviction-hard= turns eviction off", []string{"--hostname-override=x", "--eviction-hard="}, func(o *Options) bool {
			th, err := o.evictionThresholds()
			return err == nil && len(th) == 0
		}, ""},
		{"bad eviction threshold", []string{"--hostname-override=x", "--eviction-hard=memory.available>1Gi"}, nil, "--eviction-hard"},
		{"soft threshold without grace", []string{"--hostname-override=x", "--eviction-soft=memory.available<1Gi"}, nil, "grace period must be specified"},
		{"verbosity", []string{"--hostname-override=x", "-v", "3"}, func(o *Options) bool { return o.Logging.Verbosity == 3 && o.Logging.Format == "text" }, ""},
		{"JSON log format", []string{"--hostname-override=x", "--logging-format=json", "--v=2", "--log-flush-frequency=1s"}, func(o *Options) bool {
			return o.Logging.Format == "json" && o.Logging.Verbosity == 2 && o.Logging.FlushFrequency.Duration.Duration == time.Second
		}, ""},
		{"unknown log format", []string{"--hostname-override=x", "--logging-format=xml"}, nil, `format: Invalid value: "xml": Unsupported log format`},
		{"vmodule beside JSON", []string{"--hostname-override=x", "--logging-format=json", "--vmodule=sync*=4"}, nil, "vmodule: Forbidden: Only supported for text log format"},
		{"legacy klog flag beside JSON", []string{"--hostname-override=x", "--logging-format=json", "--logtostderr=true"}, nil,
			"--logtostderr: only with --logging-format=text"},
		{"alpha logging option without its gate", []string{"--hostname-override=x", "--logging-format=json", "--log-json-split-stream"}, nil,
			"LoggingAlphaOptions"},
		{"network defaults: Docker's bridge, no cluster DNS", []string{"--hostname-override=x"}, func(o *Options) bool {
			return o.NetworkPlugin == "" && len(o.ClusterDNS) == 0 && o.ClusterDomain == "cluster.local" && o.CNIConfDir == "/etc/cni/net.d" &&
				o.CNIBinDir == "/opt/cni/bin" && o.CNICacheDir == "/var/lib/cni/cache"
		}, ""},
		{"CNI and cluster DNS", []string{"--hostname-override=x", "--network-plugin=cni", "--cni-bin-dir=/a,/b", "--cluster-dns=10.96.0.10,fd00::a"},
			func(o *Options) bool {
				return o.NetworkPlugin == "cni" && o.CNIBinDir == "/a,/b" && len(o.ClusterDNS) == 2 && o.ClusterDNS[1] == "fd00::a"
			}, ""},
		{"unknown network plugin", []string{"--hostname-override=x", "--network-plugin=kubenet"}, nil, `--network-plugin "kubenet"`},
		{"CNI without a bin dir", []string{"--hostname-override=x", "--network-plugin=cni", "--cni-bin-dir=,"}, nil, "needs --cni-conf-dir and --cni-bin-dir"},
		{"bad --cluster-dns", []string{"--hostname-override=x", "--cluster-dns=kube-dns"}, nil, `--cluster-dns "kube-dns": want IP addresses`},
		{"node-mode defaults", []string{"--hostname-override=x"}, func(o *Options) bool {
			return o.RegisterNode && o.NodeStatusUpdateFrequency == 10*time.Second && o.NodeStatusReportFrequency == 5*time.Minute &&
				o.NodeLeaseDurationSeconds == 40 && o.KubeAPIQPS == 50 && o.KubeAPIBurst == 100 && o.AuthorizationMode == "AlwaysAllow" && !o.AnonymousAuth
		}, ""},
		{"node labels and taints", []string{"--hostname-override=x", "--node-labels=a=b,example.com/c=d", "--register-with-taints=k=v:NoSchedule,x:NoExecute"},
			func(o *Options) bool {
				taints, err := ParseTaints(o.RegisterWithTaints)
				return err == nil && o.NodeLabels["example.com/c"] == "d" && len(taints) == 2 && taints[1].Key == "x" && taints[1].Value == ""
			}, ""},
		{"bad taint effect", []string{"--hostname-override=x", "--register-with-taints=k=v:Sometimes"}, nil, "effect must be NoSchedule"},
		{"loopback --node-ip", []string{"--hostname-override=x", "--node-ip=127.0.0.1"}, nil, "--node-ip"},
		{"webhook without kubeconfig", []string{"--hostname-override=x", "--authorization-mode=Webhook"}, nil, "set --kubeconfig"},
		{"unknown authorization mode", []string{"--hostname-override=x", "--authorization-mode=RBAC"}, nil, "want AlwaysAllow or Webhook"},
		{"token webhook without a certificate gets a self-signed one", []string{"--hostname-override=x", "--root-dir=/r", "--kubeconfig=k", "--authentication-token-webhook"},
			func(o *Options) bool {
				return o.SelfSignedCert && o.TLSCertFile == "/r/pki/kubelet.crt" && o.TLSPrivateKeyFile == "/r/pki/kubelet.key"
			}, ""},
		{"anonymous AlwaysAllow off loopback refused", []string{"--hostname-override=x", "--address=10.0.0.1", "--tls-cert-file=c", "--tls-private-key-file=k",
			"--client-ca-file=ca", "--anonymous-auth"}, nil, "refusing to serve the full-access port"},
		{"unsafe sysctl not namespaced", []string{"--hostname-override=x", "--allowed-unsafe-sysctls=vm.swappiness"}, nil, "--allowed-unsafe-sysctls"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := ParseFlags(c.args)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(o) {
				t.Errorf("options %+v", o)
			}
		})
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(content string) string {
		p := filepath.Join(dir, "kubelet.yaml")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := write("hostname-override: from-file\nsync-frequency: 7s\nrelist_period: 2s\nmanifest-url-header: ['A: 1', 'B: 2']\nport: 0\n")
	o, err := ParseFlags([]string{"--kubelet-config", p, "--sync-frequency", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if o.HostnameOverride != "from-file" || o.SyncFrequency != 3*time.Second || o.RelistPeriod != 2*time.Second ||
		len(o.ManifestURLHeader) != 2 || o.Port != 0 || o.ConfigFile != p {
		t.Errorf("options %+v", o)
	}
	// The network's settings are keys too, --cluster-dns a list.
	p = write("cluster-dns: [10.96.0.10, 10.96.0.11]\ncluster-domain: example.test\nnetwork-plugin: cni\ncni-conf-dir: /c\ncni-bin-dir: /b1,/b2\ncni-cache-dir: /k\nport: 0\n")
	if o, err = ParseFlags([]string{"--kubelet-config", p, "--hostname-override", "x"}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.ClusterDNS, ",") != "10.96.0.10,10.96.0.11" || o.ClusterDomain != "example.test" || o.NetworkPlugin != "cni" ||
		o.CNIConfDir != "/c" || o.CNIBinDir != "/b1,/b2" || o.CNICacheDir != "/k" {
		t.Errorf("network options from the file: %+v", o)
	}
	for content, want := range map[string]string{
		"no-such-flag: 1\n":        `unknown key "no-such-flag"`,
		"sync-frequency: soon\n":   "sync-frequency",
		"port: 1\nport: 2\n":       "already",
		"kubelet-config: x.yaml\n": "unknown key",
	} {
		if _, err := ParseFlags([]string{"--kubelet-config", write(content), "--hostname-override", "x"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: err %v, want %q", content, err, want)
		}
	}
	if _, err := ParseFlags([]string{"--version"}); err != ErrVersion {
		t.Errorf("--version: %v", err)
	}
}
