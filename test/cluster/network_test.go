package cluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestNthIP(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		i    int
		want string
	}{
		{"10.250.0.0/24", 1, "10.250.0.1"},
		{"10.250.0.0/24", 3, "10.250.0.3"},
		{"10.96.0.0/16", 10, "10.96.0.10"},
		{"10.96.0.0/12", 300, "10.96.1.44"},
	} {
		_, n, err := net.ParseCIDR(tc.cidr)
		if err != nil {
			t.Fatal(err)
		}
		if got := nthIP(n, tc.i).String(); got != tc.want {
			t.Errorf("nthIP(%s, %d) = %s, want %s", tc.cidr, tc.i, got, tc.want)
		}
	}
}

func TestDNSClusterIP(t *testing.T) {
	for cidr, want := range map[string]string{"10.96.0.0/16": "10.96.0.10", "10.0.0.0/24": "10.0.0.10"} {
		if got, err := DNSClusterIP(cidr); err != nil || got != want {
			t.Errorf("DNSClusterIP(%s) = %q, %v; want %s", cidr, got, err, want)
		}
	}
	if _, err := DNSClusterIP("fd00::/108"); err == nil {
		t.Error("DNSClusterIP of an IPv6 range: no error")
	}
}

func TestOverlaps(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"10.244.0.0/16", "10.244.3.0/24", true},
		{"10.244.3.0/24", "10.244.0.0/16", true},
		{"10.244.0.0/16", "10.245.0.0/16", false},
		{"10.250.0.0/24", "10.250.0.7/32", true},
	} {
		_, a, _ := net.ParseCIDR(tc.a)
		_, b, _ := net.ParseCIDR(tc.b)
		if got := overlaps(a, b); got != tc.want {
			t.Errorf("overlaps(%s, %s) = %v", tc.a, tc.b, got)
		}
	}
}

// The names a Network gives are recognized by the sweep of dead owners,
// and nobody else's are.
func TestStaleName(t *testing.T) {
	for name, pid := range map[string]string{
		"ckn1234a":      "1234",
		"ckn1234a-2":    "1234",
		"ckn1234av2":    "1234",
		"ck12345a":      "", // the CNI tests' bridges: ck<hex>
		"CK-LAN-99b":    "99",
		"ckl3fa2b1":     "", // the Docker restart test's bridge
		"cbr-1a2b3c4d":  "", // the agent's reference bridge
		"docker0":       "",
		"ckn1234":       "", // no sequence letter
		"CK-LAN-":       "",
		"KUBE-SERVICES": "",
	} {
		m := staleName.FindStringSubmatch(name)
		got := ""
		if m != nil {
			got = m[1]
		}
		if got != pid {
			t.Errorf("staleName(%q) = %q, want %q", name, got, pid)
		}
	}
}

// The leases of host-local networks configured in a conf dir are removed,
// wherever their dataDir is; other directories stay.
func TestRemoveIPAMLeases(t *testing.T) {
	conf, data := t.TempDir(), t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(conf, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10-list.conflist", `{"cniVersion":"1.0.0","name":"pods","plugins":[{"type":"bridge","ipam":{"type":"host-local","dataDir":"`+data+`"}},{"type":"portmap"}]}`)
	write("20-single.conf", `{"cniVersion":"1.0.0","name":"single","type":"bridge","ipam":{"type":"host-local","dataDir":"`+data+`"}}`)
	write("30-escape.conflist", `{"cniVersion":"1.0.0","name":"../keep","plugins":[{"type":"bridge","ipam":{"type":"host-local","dataDir":"`+data+`"}}]}`)
	for _, d := range []string{"pods", "single", "other", "keep"} {
		if err := os.MkdirAll(filepath.Join(data, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removeIPAMLeases(conf)
	for d, want := range map[string]bool{"pods": false, "single": false, "other": true, "keep": true} {
		_, err := os.Stat(filepath.Join(data, d))
		if got := err == nil; got != want {
			t.Errorf("%s exists: %v, want %v", d, got, want)
		}
	}
}

// needNetworkTools skips a test that makes network namespaces, bridges and
// iptables chains where it cannot.
func needNetworkTools(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: needs root (ip netns, iptables)")
	}
	for _, tool := range []string{"ip", "iptables", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPING: %v", err)
		}
	}
}

// A network's machines reach each other and the host on the LAN, and pod
// routes lead to a machine from the host and the other machines; a second
// network on the same ranges is refused; Remove leaves nothing behind.
func TestNetwork(t *testing.T) {
	needNetworkTools(t)
	nw, err := NewNetwork(2, "10.255.250.0/24", "10.255.0.0/20")
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Remove()
	if len(nw.Machines) != 2 || nw.Gateway != "10.255.250.1" || nw.Machines[0].IP != "10.255.250.2" || nw.Machines[1].IP != "10.255.250.3" {
		t.Fatalf("network %+v", nw)
	}
	if _, err := NewNetwork(1, "10.255.250.0/24", "10.255.64.0/20"); err == nil {
		t.Error("a second network on the same LAN was made")
	}
	// A TCP connection from one machine (or the host, "") to an address.
	connect := func(fromNS, toNS, ip string) error {
		var l net.Listener
		listen := func() (err error) { l, err = net.Listen("tcp", net.JoinHostPort(ip, "0")); return err }
		if err := inNS(toNS, listen); err != nil {
			return fmt.Errorf("listen on %s: %w", ip, err)
		}
		defer l.Close()
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}()
		return inNS(fromNS, func() error {
			c, err := net.DialTimeout("tcp", l.Addr().String(), 2*time.Second)
			if err != nil {
				return fmt.Errorf("from %q to %s: %w", fromNS, l.Addr(), err)
			}
			return c.Close()
		})
	}
	m0, m1 := nw.Machines[0], nw.Machines[1]
	for _, tc := range []struct{ from, to, ip string }{
		{m0.NetNS, m1.NetNS, m1.IP}, {m1.NetNS, m0.NetNS, m0.IP}, {m0.NetNS, "", nw.Gateway}, {"", m1.NetNS, m1.IP},
	} {
		if err := connect(tc.from, tc.to, tc.ip); err != nil {
			t.Error(err)
		}
	}
	if err := nw.AddPodRoute("b", "10.255.1.0/24", nw.Machines[1].IP); err != nil {
		t.Fatal(err)
	}
	if err := nw.AddPodRoute("b", "10.255.1.0/24", nw.Machines[1].IP); err != nil {
		t.Errorf("the same route again: %v", err)
	}
	if err := nw.AddPodRoute("b", "10.255.2.0/24", nw.Machines[1].IP); err == nil {
		t.Error("a node's pod range changed: no error")
	}
	if err := nw.AddPodRoute("c", "10.254.1.0/24", nw.Machines[1].IP); err == nil {
		t.Error("a pod range outside the cluster CIDR: no error")
	}
	for _, args := range [][]string{{"-4", "route", "get", "10.255.1.7"}, {"-n", nw.Machines[0].Name, "-4", "route", "get", "10.255.1.7"}} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "via "+nw.Machines[1].IP) {
			t.Errorf("ip %v: %s %v, want via %s", args, out, err, nw.Machines[1].IP)
		}
	}
	if err := nw.Remove(); err != nil {
		t.Fatal(err)
	}
	assertNetworkGone(t, nw.ID)
}

func assertNetworkGone(t *testing.T, id string) {
	t.Helper()
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	netns, _ := exec.Command("ip", "netns", "list").Output()
	rules, _ := exec.Command("iptables", "-S").Output()
	routes, _ := exec.Command("ip", "-4", "route").Output()
	for what, out := range map[string][]byte{"links": links, "namespaces": netns, "iptables": rules, "routes": routes} {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "ckn"+id) || strings.Contains(line, "CK-LAN-"+id) {
				t.Errorf("%s left: %s", what, line)
			}
		}
	}
}

// What a network whose owner died made is removed by the next network.
func TestSweepStale(t *testing.T) {
	needNetworkTools(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%da", dead.Process.Pid)
	for _, s := range [][]string{
		{"ip", "link", "add", "ckn" + id, "type", "bridge"},
		{"ip", "netns", "add", "ckn" + id + "-1"},
		{"iptables", "-N", "CK-LAN-" + id},
		{"iptables", "-A", "FORWARD", "-j", "CK-LAN-" + id},
	} {
		if err := run(s[0], s[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	sweepStale()
	assertNetworkGone(t, id)
}

// inNS runs fn on an OS thread in the network namespace at path ("": this
// one); the thread ends with it.
func inNS(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: Go ends the thread
		f, err := os.Open(path)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", path, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
