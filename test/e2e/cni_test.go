package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	docker "github.com/fsouza/go-dockerclient"
)

// cniTestNet is one test's private CNI network: its own conf, cache and
// IPAM directories, a bridge of its own and a private pod subnet
// (10.250.<n>.0/24, n unused by any route of the host or another test of
// this run), built from the reference plugins (hack/ensure-cni-plugins.sh).
// Its cleanup, which runs after the agent's (the agent stopped, its
// containers removed), DELs whatever attachment the cache still holds,
// removes the bridge, and checks that no iptables rule of the network is
// left (removing any it finds).
type cniTestNet struct {
	t                                  *testing.T
	name, bridge, subnet, prefix       string
	confDir, binDir, cacheDir, ipamDir string
}

var cniSubnets = struct {
	sync.Mutex
	used map[int64]bool
}{used: map[int64]bool{}}

func newCNITestNet(t *testing.T) *cniTestNet {
	t.Helper()
	out, err := exec.Command("../../hack/ensure-cni-plugins.sh", "--check").Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CNI plugins not built (hack/ensure-cni-plugins.sh): %v", err)
		}
		t.Skipf("CNI plugins not built: run hack/ensure-cni-plugins.sh (%v)", err)
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	n := &cniTestNet{t: t, name: "e2e-" + hex.EncodeToString(b[:]), bridge: "ck" + hex.EncodeToString(b[:]),
		binDir: strings.TrimSpace(string(out)), confDir: t.TempDir(), cacheDir: t.TempDir(), ipamDir: t.TempDir()}
	cniSubnets.Lock()
	for {
		i, _ := rand.Int(rand.Reader, big.NewInt(250))
		k := i.Int64() + 1
		n.prefix = fmt.Sprintf("10.250.%d.", k)
		n.subnet = n.prefix + "0/24"
		if routes, _ := exec.Command("ip", "route", "show", "to", "match", n.prefix+"1").Output(); !cniSubnets.used[k] &&
			!strings.Contains(string(routes), "10.250.") {
			cniSubnets.used[k] = true
			break
		}
	}
	cniSubnets.Unlock()
	t.Cleanup(n.cleanup)
	return n
}

// startAgent starts an agent on the network. Before the agent's own
// cleanup (which kills it and removes its containers), the test's pods are
// removed through the agent, so that it detaches them (DEL) as it does in
// production, in their namespaces; the network's cleanup DELs what is left.
func (n *cniTestNet) startAgent(t *testing.T, extraArgs ...string) *agent {
	t.Helper()
	a := startAgent(t, append(n.args(), extraArgs...)...)
	t.Cleanup(func() {
		a.mu.Lock()
		up := a.cmd != nil
		a.mu.Unlock()
		if !up {
			return
		}
		entries, _ := os.ReadDir(a.manifestDir)
		for _, e := range entries {
			_ = os.Remove(filepath.Join(a.manifestDir, e.Name()))
		}
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			list, err := dockerc.ListContainers(docker.ListContainersOptions{All: true,
				Filters: map[string][]string{"label": {ownerLabel + "=" + a.node}}})
			if err != nil || len(list) == 0 {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Logf("cleanup: the agent did not remove its pods within a minute")
	})
	return a
}

// args are the agent's flags for the network.
func (n *cniTestNet) args() []string {
	return []string{"--network-plugin=cni", "--cni-conf-dir", n.confDir, "--cni-bin-dir", n.binDir, "--cni-cache-dir", n.cacheDir}
}

// conflist is the network's configuration: the reference network's shape
// (bridge gateway with masquerade and hairpin, host-local, firewall,
// portmap, loopback) on the test's bridge, subnet and IPAM directory.
func (n *cniTestNet) conflist(subnet string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "firewall", "backend": "iptables"},
    {"type": "portmap", "capabilities": {"portMappings": true}},
    {"type": "loopback"}
  ]
}`, n.name, n.bridge, n.ipamDir, subnet)
}

func (n *cniTestNet) write(file, content string) {
	n.t.Helper()
	tmp := filepath.Join(n.confDir, "."+file)
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(n.confDir, file)); err != nil {
		n.t.Fatal(err)
	}
}

// leases are the IPs host-local holds for the network, sorted.
func (n *cniTestNet) leases() []string {
	entries, _ := os.ReadDir(filepath.Join(n.ipamDir, n.name))
	var out []string
	for _, e := range entries {
		if net.ParseIP(e.Name()) != nil {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// cached are the attachments libcni's cache holds (one file per ADD).
func (n *cniTestNet) cached() []string {
	entries, _ := os.ReadDir(filepath.Join(n.cacheDir, "results"))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// rules are the iptables rules of the network (bridge's masquerade,
// portmap's DNAT, firewall's accepts), as "table rule".
func (n *cniTestNet) rules() []string {
	var rules []string
	for _, table := range []string{"nat", "filter"} {
		out, _ := exec.Command("iptables-save", "-t", table).Output()
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "-A ") && (strings.Contains(line, `\"`+n.name+`\"`) || strings.Contains(line, n.prefix)) {
				rules = append(rules, table+" "+line)
			}
		}
	}
	return rules
}

func (n *cniTestNet) cleanup() {
	t := n.t
	cni := libcni.NewCNIConfigWithCacheDir([]string{n.binDir}, n.cacheDir, nil)
	if atts, err := cni.GetCachedAttachments(""); err == nil {
		for _, a := range atts {
			list, err := libcni.NetworkConfFromBytes(a.Config)
			if err != nil {
				continue
			}
			rt := &libcni.RuntimeConf{ContainerID: a.ContainerID, IfName: a.IfName, Args: a.CniArgs, CapabilityArgs: a.CapabilityArgs}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := cni.DelNetworkList(ctx, list, rt); err != nil {
				t.Logf("cleanup: DEL %s: %v", a.ContainerID, err)
			}
			cancel()
		}
	}
	if err := exec.Command("ip", "link", "del", n.bridge).Run(); err == nil {
		t.Logf("cleanup: removed bridge %s", n.bridge)
	}
	for _, r := range n.rules() {
		t.Errorf("iptables rule of the network left after its pods' DELs: %s", r)
		table, rule, _ := strings.Cut(r, " ")
		_ = exec.Command("sh", "-c", "iptables -t "+table+" "+strings.Replace(rule, "-A ", "-D ", 1)).Run()
	}
	if l := n.leases(); len(l) > 0 {
		t.Errorf("IPAM leases left after the DELs: %v", l)
	}
}

// podIP waits for the pod's status to show an IP and returns it.
func (a *agent) podIP(pod string) string {
	a.t.Helper()
	var ip string
	waitFor(a.t, startupWait, func() (bool, string) {
		ip = a.status(pod).PodIP
		return ip != "", "pod " + pod + " has no IP in its status"
	})
	return ip
}

// bridgeIP is an address of the host a pod's host port is reached on
// (docker0's, as on a node whose address is its bridge's).
func bridgeIP(t *testing.T) string {
	t.Helper()
	ifi, err := net.InterfaceByName("docker0")
	if err != nil {
		t.Skipf("no docker0: %v", err)
	}
	addrs, _ := ifi.Addrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Skip("docker0 has no IPv4 address")
	return ""
}

func cniServerPod(name string, hostPort int) string {
	ports := ""
	if hostPort > 0 {
		ports = fmt.Sprintf("\n    ports: [{containerPort: 8080, hostPort: %d}]", hostPort)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: server
    image: %s
    imagePullPolicy: IfNotPresent
    args: ["/testserver", "-listen", ":8080"]%s
`, name, testImage, ports)
}

// In CNI mode a pod's IP is its network's: another pod reaches it by that
// IP, its host port answers on the node's address through portmap, an
// agent restarted mid-way adopts its pods without attaching them again (no
// ADD, the same IPs), and a sandbox removed while the agent was down is
// detached at its start (DEL: its IPAM lease goes).
func TestCNIPodNetwork(t *testing.T) {
	t.Parallel()
	n := newCNITestNet(t)
	n.write("10-e2e.conflist", n.conflist(n.subnet))
	a := n.startAgent(t)
	hostPort := freePort(t)
	a.writeManifest("web.yaml", cniServerPod("web", hostPort))
	a.writeManifest("client.yaml", cniServerPod("client", 0))
	web := a.waitRunning("web", "server")
	a.waitRunning("client", "server")
	webIP, clientIP := a.podIP("web"), a.podIP("client")
	for _, ip := range []string{webIP, clientIP} {
		if !strings.HasPrefix(ip, n.prefix) {
			t.Fatalf("pod IP %s is not in the network's subnet %s", ip, n.subnet)
		}
	}
	if mode := inspect(t, web["POD"].ID).HostConfig.NetworkMode; mode != "none" {
		t.Errorf("infra container's network mode %q, want none", mode)
	}
	if got, want := n.leases(), sorted(webIP, clientIP); !equal(got, want) {
		t.Errorf("IPAM leases %v, want %v", got, want)
	}

	// Pod to pod, by pod IP.
	waitFor(t, 20*time.Second, func() (bool, string) {
		// (The image's busybox wget crashes; nc speaks HTTP/1.0 well enough.)
		code, out := a.execIn("client", "server", "sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 `+webIP+` 8080`)
		if i := strings.Index(out, "\r\n\r\n"); i >= 0 {
			out = out[i+4:]
		}
		return code == 0 && strings.HasPrefix(out, "ok web"), fmt.Sprintf("client → %s:8080: exit %d %q", webIP, code, out)
	})
	// The host port, on the node's address, through portmap.
	hostURL := fmt.Sprintf("http://%s:%d/", bridgeIP(t), hostPort)
	waitFor(t, 20*time.Second, func() (bool, string) {
		code, body := httpGet(hostURL)
		return code == 200 && strings.HasPrefix(body, "ok web"), fmt.Sprintf("GET %s = %d %q", hostURL, code, body)
	})

	// The agent restarts; meanwhile the client pod goes (its manifest and
	// its containers, sandbox included).
	adds := strings.Count(a.log(), "attached to network")
	if adds != 2 {
		t.Errorf("%d attachments logged before the restart, want 2", adds)
	}
	cachedBefore, clientSandbox := n.cached(), a.running("client")["POD"].ID
	a.stop(syscall.SIGTERM)
	a.removeManifest("client.yaml")
	for _, c := range a.containers("client") {
		if err := dockerc.RemoveContainer(docker.RemoveContainerOptions{ID: c.ID, Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	a.start()
	a.waitAPI()
	if len(cachedBefore) != 2 {
		t.Errorf("libcni cache before the restart %v, want the two pods' attachments", cachedBefore)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		got, cached := n.leases(), n.cached()
		var clientRules []string
		for _, r := range n.rules() {
			if strings.Contains(r, clientSandbox) || strings.Contains(r, clientIP+"/") {
				clientRules = append(clientRules, r)
			}
		}
		return equal(got, []string{webIP}) && len(cached) == 1 && len(clientRules) == 0,
			fmt.Sprintf("IPAM leases %v, libcni cache %v, the client's iptables rules %v; want the web pod's alone (%s): the removed sandbox's DEL",
				got, cached, clientRules, webIP)
	})
	a.waitRounds(3)
	if ip := a.status("web").PodIP; ip != webIP {
		t.Errorf("web's pod IP after the restart %q, want %q", ip, webIP)
	}
	if now := a.running("web")["POD"].ID; now != web["POD"].ID {
		t.Errorf("web's sandbox replaced across the restart (%s, was %s)", now, web["POD"].ID)
	}
	if got := strings.Count(a.log(), "attached to network"); got != adds {
		t.Errorf("%d attachments after the restart, want none (adopted as they were)", got-adds)
	}
	if code, body := httpGet(hostURL); code != 200 || !strings.HasPrefix(body, "ok web") {
		t.Errorf("host port after the restart: GET %s = %d %q", hostURL, code, body)
	}

	// Deleting the pod detaches it: no lease, no cached attachment, no
	// iptables rule.
	a.removeManifest("web.yaml")
	waitFor(t, 30*time.Second, func() (bool, string) {
		return len(a.containers("web")) == 0 && len(n.leases()) == 0 && len(n.cached()) == 0 && len(n.rules()) == 0,
			fmt.Sprintf("containers %d, leases %v, cached %v, iptables rules %v", len(a.containers("web")), n.leases(), n.cached(), n.rules())
	})
}

func sorted(s ...string) []string { sort.Strings(s); return s }

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A network that is not ready — no configuration, a broken one, one whose
// plugin is missing — keeps CNI pods Pending (ContainerCreating, the
// FailedCreatePodSandBox event naming the cause), with no container made
// for them, while a host-network pod runs and /healthz answers; once the
// configuration is fixed the pod starts at its next try.
func TestCNINetworkNotReady(t *testing.T) {
	for _, tc := range []struct {
		name, file, content, want string
	}{
		{name: "no configuration", want: "no networks found in"},
		{name: "broken configuration", file: "10-broken.conflist", content: `{"cniVersion": "1.0.0", "name": "broken", "plugins": [`,
			want: "error parsing configuration list"},
		{name: "missing plugin", file: "10-missing.conflist", content: `{"cniVersion": "1.0.0", "name": "missing", "plugins": [{"type": "no-such-plugin"}]}`,
			want: `failed to find plugin "no-such-plugin"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newCNITestNet(t)
			if tc.file != "" {
				n.write(tc.file, tc.content)
			}
			a := n.startAgent(t, "--backoff-initial", "2s", "--backoff-max", "4s")
			a.writeManifest("net.yaml", cniServerPod("net", 0))
			a.writeManifest("host.yaml", `apiVersion: v1
kind: Pod
metadata: {name: host}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
`)
			a.waitRunning("host", "app")
			waitFor(t, 30*time.Second, func() (bool, string) {
				e, ok := a.findEvent("net", "FailedCreatePodSandBox")
				reason, _ := a.waitingReason("net", "server")
				return ok && strings.Contains(e.Message, tc.want) && reason == "ContainerCreating",
					fmt.Sprintf("event %+v, waiting %q; want FailedCreatePodSandBox naming %q", e, reason, tc.want)
			})
			if phase := a.status("net").Phase; phase != "Pending" {
				t.Errorf("phase %q, want Pending", phase)
			}
			if cs := a.containers("net"); len(cs) != 0 {
				t.Errorf("%d containers made for a pod whose network is not ready", len(cs))
			}
			if code, body := httpGet(fmt.Sprintf("http://127.0.0.1:%d/healthz", a.healthzPort)); code != 200 {
				t.Errorf("/healthz = %d %q, want 200", code, body)
			}
			// Fixed: the pod starts.
			if tc.file != "" {
				if err := os.Remove(filepath.Join(n.confDir, tc.file)); err != nil {
					t.Fatal(err)
				}
			}
			n.write("20-e2e.conflist", n.conflist(n.subnet))
			a.waitRunning("net", "server")
			if ip := a.podIP("net"); !strings.HasPrefix(ip, n.prefix) {
				t.Errorf("pod IP %s, want one of %s", ip, n.subnet)
			}
			a.removeManifest("net.yaml")
			waitFor(t, 30*time.Second, func() (bool, string) {
				return len(a.containers("net")) == 0 && len(n.leases()) == 0, fmt.Sprintf("leases %v", n.leases())
			})
		})
	}
}

// A pod whose CNI ADD fails (here host-local refuses a /31) is the pod's
// sandbox failure: the FailedCreatePodSandBox event names the plugin's
// error, the infra container made for it is removed, and between its
// retries (a back-off of 30 s) it costs the node nothing: no Docker call
// beyond the node's relist, no CPU beyond an idle agent's, no attempt.
func TestCNIFailedAddCostsNothing(t *testing.T) {
	const window = 10 * time.Second
	n := newCNITestNet(t)
	n.write("10-e2e.conflist", n.conflist(n.prefix+"0/31"))
	a, idle := n.startAgent(t, "--backoff-initial", "30s", "--backoff-max", "30s"), n.startAgent(t, "--backoff-initial", "30s", "--backoff-max", "30s")
	a.writeManifest("fail.yaml", cniServerPod("fail", 0))
	waitFor(t, 60*time.Second, func() (bool, string) {
		e, ok := a.findEvent("fail", "FailedCreatePodSandBox")
		errs := a.metric("kubelet_started_pods_errors_total", nil)
		return ok && strings.Contains(e.Message, "too small to allocate from") && errs >= 2,
			fmt.Sprintf("event %+v, %v sandbox failures; want FailedCreatePodSandBox naming host-local's error, the first try and its retry", e, errs)
	})
	a.waitRounds(3)
	if cs := a.containers("fail"); len(cs) != 0 {
		t.Errorf("%d containers left by failed attachments, want the infra containers removed", len(cs))
	}
	lists := func() float64 {
		return a.metric("kubelet_runtime_operations_total", map[string]string{"operation_type": "list_containers"})
	}
	calls := func() float64 { return a.metric("kubelet_runtime_operations_total", nil) }
	attempts := a.attempts()
	idle.waitRounds(1)
	ops0 := a.operations()
	lists0, calls0, cpu0, idle0, t0 := lists(), calls(), a.cpu(), idle.cpu(), time.Now()
	time.Sleep(window)
	took := time.Since(t0)
	nLists, nCalls, cpu, idleCPU := lists()-lists0, calls()-calls0, a.cpu()-cpu0, idle.cpu()-idle0
	cores := func(d time.Duration) float64 { return d.Seconds() / took.Seconds() }
	t.Logf("failed CNI ADD: %v list calls, %v Docker calls, %.4f cores (an idle agent %.4f) in %v", nLists, nCalls, cores(cpu), cores(idleCPU), took.Round(time.Millisecond))
	if limit := float64(window/(5*time.Second)) + 2; nLists > limit || nCalls > nLists {
		t.Errorf("%v Docker calls (%v lists) in %v while waiting, want only the relist's lists (at most %v); by operation since: %v",
			nCalls, nLists, window, limit, a.operationsSince(ops0))
	}
	if extra := cores(cpu - idleCPU); extra > 0.01 {
		t.Errorf("%.4f cores beyond an idle agent's while waiting, want at most 0.01", extra)
	}
	if got := a.attempts(); got != attempts {
		t.Errorf("%v attempts while waiting for a back-off of 30 s, want none", got-attempts)
	}
	if l := n.leases(); len(l) != 0 {
		t.Errorf("IPAM leases %v after failed ADDs, want none", l)
	}
}
