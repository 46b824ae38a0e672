package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// kubeadmLike is /var/lib/kubelet/config.yaml as kubeadm writes it, for a
// node without an API server: webhook authentication and authorization
// off, the full-access port on loopback, and the ports the test picked.
// Every zero field is the kubelet's "take the default".
func kubeadmLike(a *agent) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: false
authorization:
  mode: AlwaysAllow
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: %d
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
port: %d
readOnlyPort: %d
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: %s
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
`, a.healthzPort, a.port, a.roPort, a.manifestDir)
}

// configz is the kubeletconfig section of an agent's /configz.
func configz(t *testing.T, a *agent) map[string]any {
	t.Helper()
	var body string
	waitFor(t, time.Minute, func() (bool, string) {
		var code int
		code, body = httpGet(a.api(false) + "/configz")
		return code == 200, fmt.Sprintf("GET /configz = %d %.300s", code, body)
	})
	var cz struct {
		KC map[string]any `json:"kubeletconfig"`
	}
	if err := json.Unmarshal([]byte(body), &cz); err != nil {
		t.Fatalf("/configz: %v", err)
	}
	return cz.KC
}

// An agent started with kubeadm's KubeletConfiguration runs with the same
// settings, and runs a pod the same way, as one given the equivalent flags
// (the kubelet's defaults where the file leaves a field to them).
func TestKubeletConfigMatchesFlags(t *testing.T) {
	t.Parallel()
	fromFile := startAgentWith(t, func(a *agent) {
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(cfg, []byte(kubeadmLike(a)), 0o644); err != nil {
			t.Fatal(err)
		}
		a.extraArgs = append(a.extraArgs, "--config", cfg)
	})
	fromFlags := startAgent(t, "--address=127.0.0.1", "--authorization-mode=AlwaysAllow", "--cluster-dns=10.96.0.10",
		"--cluster-domain=cluster.local", "--sync-frequency=1m", "--seccomp-default=false", "--profiling", "--rotate-certificates")

	file, flags := configz(t, fromFile), configz(t, fromFlags)
	if file["kind"] != "KubeletConfiguration" || file["apiVersion"] != "kubelet.config.k8s.io/v1beta1" {
		t.Errorf("/configz kind %v, apiVersion %v", file["kind"], file["apiVersion"])
	}
	if file["cgroupDriver"] != "systemd" {
		t.Errorf("/configz cgroupDriver %v, want the file's systemd", file["cgroupDriver"])
	}
	// What differs by construction: each agent's own paths and ports, and
	// the cgroup driver only the file names.
	for _, k := range []string{"staticPodPath", "port", "readOnlyPort", "healthzPort", "cgroupDriver"} {
		delete(file, k)
		delete(flags, k)
	}
	var diff []string
	for k := range file {
		if !reflect.DeepEqual(file[k], flags[k]) {
			diff = append(diff, fmt.Sprintf("%s: file %v, flags %v", k, file[k], flags[k]))
		}
	}
	for k := range flags {
		if _, ok := file[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: only with flags (%v)", k, flags[k]))
		}
	}
	sort.Strings(diff)
	if len(diff) > 0 {
		t.Errorf("/configz differs:\n%s", strings.Join(diff, "\n"))
	}
	// kubeadm's file asks for rotation, and this standalone agent has no
	// client certificate to rotate: said once, as for the flag.
	for _, a := range []*agent{fromFile, fromFlags} {
		if !strings.Contains(a.log(), "--rotate-certificates without --kubeconfig") {
			t.Errorf("%s: no warning that there is no client certificate to rotate", a.node)
		}
	}

	// The same pod runs alike: the cluster's resolver, from the file's clusterDNS.
	pod := `apiVersion: v1
kind: Pod
metadata: {name: dns}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: ` + testImage + `
    imagePullPolicy: IfNotPresent
    command: ` + sleeper + "\n"
	for _, a := range []*agent{fromFile, fromFlags} {
		a.writeManifest("dns.yaml", pod)
		a.waitRunning("dns", "app")
		code, out := a.execIn("dns", "app", "cat", "/etc/resolv.conf")
		if code != 0 || resolvLines(out)["nameserver"] != "10.96.0.10" {
			t.Errorf("%s: resolv.conf exit %d %q, want nameserver 10.96.0.10", a.node, code, out)
		}
	}
}
