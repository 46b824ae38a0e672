package e2e

import (
	"os"
	"strings"
	"testing"
)

// resolvLines are a resolv.conf's nameserver, search and options lines,
// each as one string ("nameserver a b", "search x y", "options o").
func resolvLines(content string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(content, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch f[0] {
		case "nameserver":
			out["nameserver"] = strings.TrimSpace(out["nameserver"] + " " + f[1])
		case "search", "options":
			out[f[0]] = strings.Join(f[1:], " ")
		}
	}
	return out
}

// With --cluster-dns a ClusterFirst pod's resolver is the cluster's: its
// nameservers alone, the cluster's search paths for its namespace before
// the host's, ndots:5; a Default pod keeps the host's; a pod's dnsConfig
// is merged in (options overriding by name).
func TestClusterDNSResolvConf(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--cluster-dns", "10.96.0.10,10.96.0.11", "--cluster-domain", "cluster.test")
	hostData, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	host := resolvLines(string(hostData))
	pod := func(name, extra string) string {
		return `apiVersion: v1
kind: Pod
metadata: {name: ` + name + `}
spec:
  terminationGracePeriodSeconds: 2
` + extra + `  containers:
  - name: app
    image: ` + testImage + `
    imagePullPolicy: IfNotPresent
    command: ` + sleeper + "\n"
	}
	a.writeManifest("cf.yaml", pod("cf", ""))
	a.writeManifest("dflt.yaml", pod("dflt", "  dnsPolicy: Default\n"))
	a.writeManifest("custom.yaml", pod("custom", `  dnsConfig:
    nameservers: [10.0.0.53]
    searches: [my.example]
    options: [{name: ndots, value: "2"}, {name: edns0}]
`))
	clusterSearch := strings.TrimSpace("default.svc.cluster.test svc.cluster.test cluster.test " + host["search"])
	for _, tc := range []struct {
		pod  string
		want map[string]string
	}{
		{"cf", map[string]string{"nameserver": "10.96.0.10 10.96.0.11", "search": clusterSearch, "options": "ndots:5"}},
		{"dflt", host},
		{"custom", map[string]string{"nameserver": "10.96.0.10 10.96.0.11 10.0.0.53", "search": clusterSearch + " my.example", "options": "ndots:2 edns0"}},
	} {
		a.waitRunning(tc.pod, "app")
		code, out := a.execIn(tc.pod, "app", "cat", "/etc/resolv.conf")
		if code != 0 {
			t.Fatalf("%s: cat /etc/resolv.conf: exit %d %q", tc.pod, code, out)
		}
		got := resolvLines(out)
		for _, k := range []string{"nameserver", "search", "options"} {
			if got[k] != tc.want[k] {
				t.Errorf("%s: %s %q, want %q (resolv.conf %q)", tc.pod, k, got[k], tc.want[k], out)
			}
		}
	}
}
