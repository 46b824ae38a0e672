package app

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// standalone is a KubeletConfiguration head for a node without an API
// server: the kubelet's defaults (webhook authentication and authorization,
// every address) need one.
const standalone = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
authentication:
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
`

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKubeletConfiguration(t *testing.T) {
	dir := t.TempDir()
	kubeadm, err := filepath.Abs("testdata/kubeadm-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	file := func(name, body string) string { return writeFile(t, filepath.Join(dir, name), standalone+body) }
	dropIns := filepath.Join(dir, "conf.d")
	writeFile(t, filepath.Join(dropIns, "20-b.conf"), standalone+"maxPods: 20\n")
	writeFile(t, filepath.Join(dropIns, "10-a.conf"), standalone+"maxPods: 10\nsyncFrequency: 5s\nclusterDNS: [10.0.0.10]\n")
	writeFile(t, filepath.Join(dropIns, "15-sub", "x.conf"), standalone+"maxPods: 15\nhealthzPort: 0\n")
	writeFile(t, filepath.Join(dropIns, "99-notes.txt"), "not a configuration\n")
	manifest := writeFile(t, filepath.Join(dir, "pod.yaml"), "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
	base := []string{"--hostname-override=n1", "--root-dir", root}
	cases := []struct {
		name    string
		args    []string
		check   func(o *Options) bool
		wantErr string
	}{
		{"kubeadm's config.yaml", []string{"--config", kubeadm, "--kubeconfig", "/etc/kubernetes/kubelet.conf"}, func(o *Options) bool {
			return o.KubeletConfigFile == kubeadm && o.PodManifestPath == "/etc/kubernetes/manifests" &&
				strings.Join(o.ClusterDNS, ",") == "10.96.0.10" && o.ClusterDomain == "cluster.local" &&
				o.ClientCAFile == "/etc/kubernetes/pki/ca.crt" && o.AuthenticationTokenWebhook && !o.AnonymousAuth &&
				o.AuthorizationMode == "Webhook" && o.AuthenticationTokenWebhookCacheTTL == 2*time.Minute &&
				o.Address == "0.0.0.0" && o.Port == 10250 && o.ReadOnlyPort == 0 && o.HealthzPort == 10248 &&
				o.HealthzBindAddress == "127.0.0.1" && o.SyncFrequency == time.Minute && o.FileCheckFrequency == 20*time.Second &&
				o.NodeStatusUpdateFrequency == 10*time.Second && o.EvictionPressureTransitionPeriod == 5*time.Minute &&
				o.CgroupDriver == "systemd" && !o.SeccompDefault && o.Profiling && o.DockerEndpoint == "unix:///var/run/docker.sock" &&
				o.SelfSignedCert && o.TLSCertFile == filepath.Join(root, "pki", "kubelet.crt") &&
				o.RotateCertificates && !o.RotateServerCertificates && o.CertDir == filepath.Join(root, "pki") && len(o.Warnings) == 0
		}, ""},
		{"drop-ins in lexical order, subdirectories too", []string{"--config", file("c.yaml", "maxPods: 5\n"), "--config-dir", dropIns},
			func(o *Options) bool {
				return o.MaxPods == 20 && o.SyncFrequency == 5*time.Second && o.HealthzPort == 0 && o.ClusterDNS[0] == "10.0.0.10"
			}, ""},
		{"drop-ins without --config", []string{"--config-dir", dropIns, "--config", dir},
			func(o *Options) bool { return o.MaxPods == 20 && o.PodManifestPath == dir && o.KubeletConfigFile == "" }, ""},
		{"flags win", []string{"--config", file("w.yaml", "maxPods: 50\nsyncFrequency: 3s\nfeatureGates: {APIServingWithRoutine: true, ComponentFlagz: false}\n"),
			"--max-pods=7", "--feature-gates=APIServingWithRoutine=false"},
			func(o *Options) bool {
				gate, given := o.FeatureGates["ComponentFlagz"]
				return o.MaxPods == 7 && o.SyncFrequency == 3*time.Second && !o.FeatureGates["APIServingWithRoutine"] &&
					given && !gate && len(o.FeatureGates) == 2
			}, ""},
		{"fields mapped to flags", []string{"--config", file("m.yaml", `staticPodURL: http://example.test/pods
staticPodURLHeader: {X-A: [one, two]}
evictionHard: {memory.available: 200Mi, nodefs.available: 5%}
evictionSoft: {memory.available: 300Mi}
evictionSoftGracePeriod: {memory.available: 1m}
systemReserved: {cpu: 100m, memory: 1Gi}
registerWithTaints: [{key: k, value: v, effect: NoSchedule}]
podPidsLimit: 100
imageGCHighThresholdPercent: 90
imageGCLowThresholdPercent: 70
containerLogMaxSize: 20Mi
containerLogMaxFiles: 3
podLogsDir: /srv/log/pods
resolvConf: ""
`)}, func(o *Options) bool {
			return o.ManifestURL == "http://example.test/pods" && strings.Join(o.ManifestURLHeader, ";") == "X-A:one;X-A:two" &&
				o.EvictionHard == "memory.available<200Mi,nodefs.available<5%" && o.EvictionSoftGracePeriod == "memory.available=1m" &&
				o.SystemReserved == "cpu=100m,memory=1Gi" && strings.Join(o.RegisterWithTaints, ",") == "k=v:NoSchedule" &&
				o.PodMaxPids == 100 && o.ImageGCHighThreshold == 90 && o.ImageGCLowThreshold == 70 &&
				o.ContainerLogMaxSize == "20Mi" && o.ContainerLogMaxFiles == 3 && o.ResolvConf == "" &&
				o.PodLogsDir == "/srv/log/pods" && len(o.Warnings) == 0
		}, ""},
		{"logging section", []string{"--config", file("lg.yaml", "logging:\n  format: json\n  flushFrequency: 2s\n  verbosity: 4\n"+
			"  options: {json: {infoBufferSize: \"0\"}, text: {infoBufferSize: \"0\"}}\n")}, func(o *Options) bool {
			return o.Logging.Format == "json" && o.Logging.FlushFrequency.Duration.Duration == 2*time.Second && o.Logging.Verbosity == 4 &&
				len(o.Warnings) == 0
		}, ""},
		{"logging vmodule", []string{"--config", file("lv.yaml", "logging:\n  vmodule: [{filePattern: sync*, verbosity: 4}]\n")},
			func(o *Options) bool {
				return len(o.Logging.VModule) == 1 && o.Logging.VModule[0].FilePattern == "sync*" && o.Logging.VModule[0].Verbosity == 4
			}, ""},
		{"podLogsDir must be absolute, as the kubelet's", []string{"--config", file("pl.yaml", "podLogsDir: logs/pods\n")}, nil, `--pod-logs-dir "logs/pods"`},
		{"relative paths from the file's directory", []string{"--config", file("r.yaml", "staticPodPath: manifests\n")},
			func(o *Options) bool { return o.PodManifestPath == filepath.Join(dir, "manifests") }, ""},
		{"unknown field names file and field", []string{"--config", file("u.yaml", "maxPodz: 3\n")}, nil, `u.yaml: unknown field "maxPodz"`},
		{"unknown nested field", []string{"--config", file("n.yaml", "logging:\n  bogus: 1\n")}, nil, `unknown field "logging.bogus"`},
		{"duplicate field", []string{"--config", file("d.yaml", "maxPods: 3\nmaxPods: 4\n")}, nil, `d.yaml`},
		{"unknown field in a drop-in", []string{"--config-dir", filepath.Dir(file("bad.d/1.conf", "nope: true\n"))}, nil, `1.conf: unknown field "nope"`},
		{"wrong apiVersion", []string{"--config", writeFile(t, filepath.Join(dir, "v.yaml"),
			strings.Replace(standalone, "v1beta1", "v1alpha1", 1))}, nil, "v.yaml: kind KubeletConfiguration, apiVersion kubelet.config.k8s.io/v1alpha1: want"},
		{"a 2014 manifest file is the manifest path", []string{"--config", manifest}, func(o *Options) bool {
			return o.PodManifestPath == manifest && o.KubeletConfigFile == "" && o.ReadOnlyPort == 10255 && o.Address == "127.0.0.1"
		}, ""},
		{"a KubeletConfiguration as the manifest path", []string{"--pod-manifest-path", kubeadm}, nil, "pass it as --config"},
		{"unknown feature gate", []string{"--feature-gates=NoSuchGate=true"}, nil, "unrecognized feature gate: NoSuchGate"},
		{"unknown feature gate in the file", []string{"--config", file("g.yaml", "featureGates: {NoSuchGate: true}\n")}, nil, "unrecognized feature gate: NoSuchGate"},
		{"locked feature gate", []string{"--feature-gates=ImageVolume=false"}, nil, "locked to true"},
		{"known gate away from its default warns", []string{"--feature-gates=APIServingWithRoutine=true,AllAlpha=false,ComponentFlagz=true"}, func(o *Options) bool {
			return len(o.Warnings) == 1 && strings.Contains(o.Warnings[0], "feature gate APIServingWithRoutine=true is accepted")
		}, ""},
		{"containerd's socket refused with a hint", []string{"--container-runtime-endpoint=unix:///run/containerd/containerd.sock"}, nil,
			"the socket of containerd: this agent runs pods on Docker"},
		{"containerd's socket in the file", []string{"--config", file("e.yaml", "containerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n")},
			nil, "this agent runs pods on Docker"},
		{"Docker's socket accepted and used", []string{"--container-runtime-endpoint=/run/docker.sock"}, func(o *Options) bool {
			return o.DockerEndpoint == "unix:///run/docker.sock"
		}, ""},
		{"--docker-endpoint wins over the runtime endpoint", []string{"--container-runtime-endpoint=/run/docker.sock", "--docker-endpoint=unix:///x/docker.sock"},
			func(o *Options) bool { return o.DockerEndpoint == "unix:///x/docker.sock" }, ""},
		{"unimplemented fields warn", []string{"--config", file("i.yaml", "failSwapOn: false\nhairpinMode: hairpin-veth\nruntimeRequestTimeout: 0s\n")},
			func(o *Options) bool {
				return len(o.Warnings) == 2 && strings.Contains(o.Warnings[0], "failSwapOn is not implemented") &&
					strings.Contains(o.Warnings[1], "hairpinMode is not implemented")
			}, ""},
		{"graceful node shutdown periods", []string{"--config", file("gs.yaml", "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 4s\n")},
			func(o *Options) bool {
				return o.ShutdownGracePeriod == 10*time.Second && o.ShutdownGracePeriodCriticalPods == 4*time.Second &&
					o.ShutdownTable == nil && len(o.Warnings) == 0
			}, ""},
		{"graceful node shutdown by priority", []string{"--config", file("gp.yaml", `shutdownGracePeriodByPodPriority:
- {priority: 100000, shutdownGracePeriodSeconds: 120}
- {priority: 0, shutdownGracePeriodSeconds: 30}
`)}, func(o *Options) bool {
			return len(o.ShutdownTable) == 2 && o.ShutdownTable[0].Priority == 100000 && o.ShutdownTable[0].Grace == 2*time.Minute &&
				o.ShutdownTable[1].Grace == 30*time.Second && o.ShutdownGracePeriod == 0 && len(o.Warnings) == 0
		}, ""},
		{"critical pods longer than the period", []string{"--config", file("gc.yaml", "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n")},
			nil, "shutdownGracePeriodCriticalPods 20s must be <= shutdownGracePeriod 10s"},
		{"a period under a second", []string{"--config", file("gm.yaml", "shutdownGracePeriod: 500ms\n")},
			nil, "shutdownGracePeriod 500ms must be either zero or otherwise >= 1 sec"},
		{"both the periods and the table", []string{"--config", file("gb.yaml", "shutdownGracePeriod: 10s\nshutdownGracePeriodByPodPriority: [{priority: 0, shutdownGracePeriodSeconds: 5}]\n")},
			nil, "Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at the same time"},
		{"a period with its gate off", []string{"--config", file("gg.yaml", "shutdownGracePeriod: 10s\n"), "--feature-gates=GracefulNodeShutdown=false"},
			nil, "requires feature gate GracefulNodeShutdown"},
		{"cgroupRoot the agent cannot honour", []string{"--config", file("cr.yaml", "cgroupRoot: /custom\n")}, nil, `cgroupRoot "/custom"`},
		{"a cgroup driver that is none", []string{"--config", file("cd.yaml", "cgroupDriver: lxc\n")}, nil, `cgroupDriver "lxc"`},
		{"the kubelet's defaults need an API server", []string{"--config", writeFile(t, filepath.Join(dir, "k.yaml"),
			"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")}, nil, "set --kubeconfig"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := ParseFlags(append(append([]string{}, base...), c.args...))
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

// /configz holds the effective settings as a KubeletConfiguration, which
// the kubelet's clients decode, beside the agent's own.
func TestConfigz(t *testing.T) {
	o, err := ParseFlags([]string{"--hostname-override=n1", "--max-pods=12", "--eviction-hard=memory.available<1Gi",
		"--feature-gates=APIServingWithRoutine=true", "--manifest-url=http://h/p", "--manifest-url-header=A: b", "--logging-format=json"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(o.Configz())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		KC struct {
			Kind, APIVersion   string
			MaxPods            int
			EvictionHard       map[string]string
			FeatureGates       map[string]bool
			StaticPodURLHeader map[string][]string
			SyncFrequency      string
			Logging            struct{ Format string }
			Authentication     struct{ Anonymous struct{ Enabled bool } }
		} `json:"kubeletconfig"`
		Agent map[string]any `json:"classickubelet"`
	}
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	kc := got.KC
	if kc.Kind != "KubeletConfiguration" || kc.APIVersion != "kubelet.config.k8s.io/v1beta1" || kc.MaxPods != 12 ||
		kc.EvictionHard["memory.available"] != "1Gi" || !kc.FeatureGates["APIServingWithRoutine"] || kc.SyncFrequency != "10s" ||
		kc.Logging.Format != "json" || kc.StaticPodURLHeader["A"][0] != "b" || got.Agent["hostnameOverride"] != "n1" {
		t.Errorf("/configz %s", data)
	}
}
