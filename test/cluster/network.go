package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Network is the network of a cluster whose nodes are machines of their
// own on this host. Each machine is a network namespace (its own
// interfaces, routing table, iptables and sysctls, as a host has), with
// one interface, eth0, on a bridge in the host's namespace: the machines'
// LAN, on which the host has the gateway address. A node's InternalIP is
// its eth0 address; its agent and its kube-proxy run in its namespace (the
// agent's CNI plugins make its pod bridge there), so NodePorts, hostPorts
// and a node's iptables are its own, and a packet between pods of two nodes
// leaves one machine's routing table and enters the other's, as between
// hosts. The host is the LAN's router to the control plane (the API server
// listens on docker0's address) and holds a route to every node's pod range,
// as the machines do to each other's: AddPodRoute plays the part of a
// host-gw network add-on, and no packet between two pods is masqueraded.
// Nothing is forwarded beyond the LAN: Docker's
// FORWARD policy (DROP) stays, and a chain of the network's own accepts
// what crosses the LAN bridge only.
//
// Every name carries the owner's process ID (ckn<pid><seq>...), so that a
// network whose owner died without removing it (kill -9) is recognized and
// removed by the next one (sweepStale), and two clusters on one host never
// touch each other's.
type Network struct {
	// ID names the network's objects: bridge ckn<ID>, namespaces
	// ckn<ID>-<i>, host-side veths ckn<ID>v<i>, iptables chain CK-LAN-<ID>.
	ID string
	// Bridge is the LAN bridge in the host's namespace.
	Bridge string
	// Gateway is the host's address on the LAN.
	Gateway string
	// ClusterCIDR is the pods' range, which kube-controller-manager cuts
	// into the nodes' podCIDRs.
	ClusterCIDR string
	// Machines are the nodes' machines, in order.
	Machines []Machine

	lan         *net.IPNet
	chain       string
	mu          sync.Mutex
	hostRoutes  []string // pod ranges routed from the host's namespace
	routedNodes map[string]string
}

// Machine is one node's machine: a network namespace with one address on
// the LAN.
type Machine struct {
	// Name is the network namespace's name (ip netns).
	Name string
	// NetNS is its path, for nsenter --net.
	NetNS string
	// IP is its address on the LAN: the node's InternalIP.
	IP string
	// veth is the host side of its interface.
	veth string
}

// networkSeq tells apart the networks of one process.
var networkSeq atomic.Int32

// NewNetwork makes the LAN lan (a /24 or larger: the host takes its first
// address, machine i the (i+1)th) with n machines on it, for pods in
// clusterCIDR. It fails, having made nothing, if either range overlaps a
// route or an address the host has (another cluster's network, Docker's).
// It needs root (ip, iptables).
func NewNetwork(n int, lan, clusterCIDR string) (_ *Network, retErr error) {
	for _, tool := range []string{"ip", "iptables", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("network: %s is needed (iproute2, iptables, util-linux): %w", tool, err)
		}
	}
	_, lanNet, err := net.ParseCIDR(lan)
	if err != nil {
		return nil, fmt.Errorf("network: LAN: %w", err)
	}
	_, podNet, err := net.ParseCIDR(clusterCIDR)
	if err != nil {
		return nil, fmt.Errorf("network: cluster CIDR: %w", err)
	}
	if ones, bits := lanNet.Mask.Size(); bits != 32 || n < 1 || 1<<(bits-ones)-2 < n+1 {
		return nil, fmt.Errorf("network: LAN %s: not an IPv4 range with room for the host and %d machines", lan, n)
	}
	sweepStale()
	for _, r := range []*net.IPNet{lanNet, podNet} {
		if used, err := hostRangeInUse(r); err != nil {
			return nil, err
		} else if used != "" {
			return nil, fmt.Errorf("network: %s overlaps %s on this host (another cluster's network?)", r, used)
		}
	}
	if overlaps(lanNet, podNet) {
		return nil, fmt.Errorf("network: LAN %s overlaps the cluster CIDR %s", lan, clusterCIDR)
	}
	id := strconv.Itoa(os.Getpid()) + string(rune('a'+networkSeq.Add(1)-1))
	nw := &Network{ID: id, Bridge: "ckn" + id, ClusterCIDR: podNet.String(), lan: lanNet, chain: "CK-LAN-" + id,
		routedNodes: map[string]string{}}
	nw.Gateway = nthIP(lanNet, 1).String()
	ones, _ := lanNet.Mask.Size()
	defer func() {
		if retErr != nil {
			nw.Remove()
		}
	}()
	if err := run("ip", "link", "add", nw.Bridge, "type", "bridge"); err != nil {
		return nil, err
	}
	for _, args := range [][]string{
		{"addr", "add", fmt.Sprintf("%s/%d", nw.Gateway, ones), "dev", nw.Bridge},
		{"link", "set", nw.Bridge, "up"},
	} {
		if err := run("ip", args...); err != nil {
			return nil, err
		}
	}
	// Frames between machines cross the bridge, and with br_netfilter on
	// (as Docker and kube-proxy want it) the host's FORWARD chain, whose
	// policy Docker sets to DROP: they are accepted here, as Docker accepts
	// docker0's. Nothing else is: a packet from a machine to beyond the
	// host (CoreDNS forwarding a name to the host's resolver, say) is
	// dropped, and everything stays on this host.
	for _, args := range [][]string{
		{"-N", nw.chain},
		{"-A", nw.chain, "-i", nw.Bridge, "-o", nw.Bridge, "-j", "ACCEPT"},
		{"-I", "FORWARD", "1", "-j", nw.chain},
	} {
		if err := run("iptables", args...); err != nil {
			return nil, err
		}
	}
	for i := range n {
		m := Machine{Name: fmt.Sprintf("ckn%s-%d", id, i+1), IP: nthIP(lanNet, i+2).String(), veth: fmt.Sprintf("ckn%sv%d", id, i+1)}
		m.NetNS = filepath.Join("/run/netns", m.Name)
		nw.Machines = append(nw.Machines, m)
		if err := run("ip", "netns", "add", m.Name); err != nil {
			return nil, err
		}
		steps := [][]string{
			{"ip", "link", "add", m.veth, "type", "veth", "peer", "name", "eth0", "netns", m.Name},
			{"ip", "link", "set", m.veth, "master", nw.Bridge, "up"},
			{"ip", "-n", m.Name, "link", "set", "lo", "up"},
			{"ip", "-n", m.Name, "addr", "add", fmt.Sprintf("%s/%d", m.IP, ones), "dev", "eth0"},
			{"ip", "-n", m.Name, "link", "set", "eth0", "up"},
			{"ip", "-n", m.Name, "route", "add", "default", "via", nw.Gateway},
			// A machine routes its pods' packets (the bridge plugin turns
			// it on too), and its pod bridge's frames go through its
			// iptables, for kube-proxy's rules between pods of one node.
			{"ip", "netns", "exec", m.Name, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1"},
			{"ip", "netns", "exec", m.Name, "sysctl", "-q", "-w", "net.bridge.bridge-nf-call-iptables=1"},
			// Pods see each other's addresses across machines: nothing
			// between two pod ranges is masqueraded (the agent's reference
			// network masquerades what leaves its own range), as flannel
			// makes it. kube-proxy's own masquerade rule (hairpin, NodePort)
			// goes before this one as it starts.
			{"ip", "netns", "exec", m.Name, "iptables", "-t", "nat", "-I", "POSTROUTING", "1",
				"-s", podNet.String(), "-d", podNet.String(), "-j", "RETURN"},
		}
		for _, s := range steps {
			if err := run(s[0], s[1:]...); err != nil {
				return nil, err
			}
		}
	}
	return nw, nil
}

// Command is a command run in machine i's network namespace only (nsenter
// --net: the mount namespace stays the host's, so that what the agent
// mounts for its pods is what Docker sees).
func (nw *Network) Command(i int, bin string, args ...string) (string, []string) {
	return "nsenter", append([]string{"--net=" + nw.Machines[i].NetNS, "--", bin}, args...)
}

// AddPodRoute routes a node's pod range to its machine from the host and
// from every other machine, as a host-gw network add-on does (flannel's
// host-gw backend, say): the node's own machine reaches its pods on its
// pod bridge. A node already routed to the same range is left as it is.
func (nw *Network) AddPodRoute(node, podCIDR, nodeIP string) error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.routedNodes[node] == podCIDR {
		return nil
	}
	if old, ok := nw.routedNodes[node]; ok {
		return fmt.Errorf("network: node %s moved from pod range %s to %s: not supported", node, old, podCIDR)
	}
	_, pods, err := net.ParseCIDR(podCIDR)
	if err != nil {
		return fmt.Errorf("network: node %s pod range: %w", node, err)
	}
	_, cluster, _ := net.ParseCIDR(nw.ClusterCIDR)
	if !cluster.Contains(pods.IP) {
		return fmt.Errorf("network: node %s pod range %s is outside the cluster CIDR %s", node, podCIDR, nw.ClusterCIDR)
	}
	self := -1
	for i, m := range nw.Machines {
		if m.IP == nodeIP {
			self = i
		}
	}
	if self < 0 {
		return fmt.Errorf("network: node %s: %s is no machine's address", node, nodeIP)
	}
	if err := run("ip", "route", "replace", pods.String(), "via", nodeIP, "dev", nw.Bridge); err != nil {
		return err
	}
	nw.hostRoutes = append(nw.hostRoutes, pods.String())
	for i, m := range nw.Machines {
		if i == self {
			continue
		}
		if err := run("ip", "-n", m.Name, "route", "replace", pods.String(), "via", nodeIP); err != nil {
			return err
		}
	}
	nw.routedNodes[node] = podCIDR
	return nil
}

// Remove deletes what NewNetwork and AddPodRoute made: the machines'
// namespaces (and with them their interfaces, routes, iptables rules and
// pod bridges), the host's routes, the LAN bridge and the FORWARD chain.
// Every process in a machine should have stopped first. It is idempotent
// and goes on past errors, which it returns joined.
func (nw *Network) Remove() error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	var errs []error
	for _, r := range nw.hostRoutes {
		// Gone with the bridge anyway; removed first so that no route
		// outlives it for a moment.
		_ = run("ip", "route", "del", r, "dev", nw.Bridge)
	}
	nw.hostRoutes = nil
	for _, m := range nw.Machines {
		// The veth first (its peer, the machine's eth0, goes with it): a
		// namespace's interfaces are deleted after the namespace, in the
		// background.
		if linkExists(m.veth) {
			if err := run("ip", "link", "del", m.veth); err != nil && linkExists(m.veth) {
				errs = append(errs, err)
			}
		}
		if _, err := os.Stat(m.NetNS); err == nil {
			errs = append(errs, run("ip", "netns", "del", m.Name))
		}
	}
	if linkExists(nw.Bridge) {
		errs = append(errs, run("ip", "link", "del", nw.Bridge))
	}
	errs = append(errs, removeChain(nw.chain))
	return errors.Join(errs...)
}

// removeChain unhooks a chain of the filter table from FORWARD and deletes
// it; a chain that is not there is no error.
func removeChain(chain string) error {
	if exec.Command("iptables", "-n", "-L", chain).Run() != nil {
		return nil
	}
	for exec.Command("iptables", "-D", "FORWARD", "-j", chain).Run() == nil {
	}
	if err := run("iptables", "-F", chain); err != nil {
		return err
	}
	return run("iptables", "-X", chain)
}

// staleName matches the names a Network gives (ckn<pid><seq>..., and
// CK-LAN-<pid><seq>), capturing the owner's process ID. "ckn" is no
// hexadecimal digit's prefix: other tests name their bridges ck<hex>.
var staleName = regexp.MustCompile(`^(?:ckn|CK-LAN-)([0-9]+)[a-z]`)

// sweepStale removes the networks of owners that are gone: a cluster
// killed before it could remove its own.
func sweepStale() {
	dead := func(name string) bool {
		m := staleName.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid == os.Getpid() {
			return false
		}
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			if dead(e.Name()) {
				_ = run("ip", "netns", "del", e.Name())
			}
		}
	}
	if out, err := exec.Command("ip", "-o", "link", "show").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			// "12: ck123a: <...": the name, without a veth's @peer.
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			if dead(name) {
				_ = run("ip", "link", "del", name)
			}
		}
	}
	if out, err := exec.Command("iptables", "-S").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if name, ok := strings.CutPrefix(line, "-N "); ok && dead(name) {
				_ = removeChain(name)
			}
		}
	}
}

// hostRangeInUse names a route or an address of the host's namespace that
// overlaps r, or returns "".
func hostRangeInUse(r *net.IPNet) (string, error) {
	out, err := exec.Command("ip", "-4", "-o", "route", "show", "table", "main").Output()
	if err != nil {
		return "", fmt.Errorf("network: list routes: %w", err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "default" {
			continue
		}
		dst := f[0]
		if !strings.Contains(dst, "/") {
			dst += "/32"
		}
		if _, n, err := net.ParseCIDR(dst); err == nil && overlaps(n, r) {
			return "route " + line, nil
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("network: list addresses: %w", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && r.Contains(n.IP) {
			return "address " + n.String(), nil
		}
	}
	return "", nil
}

func overlaps(a, b *net.IPNet) bool { return a.Contains(b.IP) || b.Contains(a.IP) }

// nthIP is the network's address at offset i (i = 1: the first host).
func nthIP(n *net.IPNet, i int) net.IP {
	ip := make(net.IP, 4)
	copy(ip, n.IP.To4())
	v := uint32(ip[0])<<24 | uint32(ip[1])<<16 | uint32(ip[2])<<8 | uint32(ip[3])
	v += uint32(i)
	return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func linkExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// run runs a command, its combined output in the error.
func run(bin string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}
