package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MachinesOptions configures StartMachines.
type MachinesOptions struct {
	// Agent is the agent binary. Required.
	Agent string
	// Nodes are the nodes' names, one machine each. Required.
	Nodes []string
	// CNIBinDir holds the reference CNI plugins (bridge, host-local,
	// portmap, loopback: hack/ensure-cni-plugins.sh). Required.
	CNIBinDir string
	// LAN is the machines' network; default 10.250.0.0/24 (the host is
	// .1, node i is .(i+1)).
	LAN string
	// Port is each agent's full-access port on its node IP; default 10250
	// (every machine has its own ports).
	Port int
	// AgentArgs come after the node and network flags (a later flag wins).
	AgentArgs []string
	// DNS is the cluster DNS (CoreDNS) deployed; its ClusterIP is every
	// agent's --cluster-dns.
	DNS DNSOptions
}

// Machines are the nodes of a cluster that is one as a real one is: each
// node a machine of its own on this host (Network), its agent in CNI mode
// (the pod network the agent's reference configuration makes, one bridge
// and podCIDR per machine, routed between machines), kube-proxy on every
// machine in iptables mode, and CoreDNS as the cluster DNS. See
// docs/kubernetes.md.
type Machines struct {
	Network *Network
	Nodes   []*Node
	// DNSIP is the kube-dns Service's address, the agents' --cluster-dns.
	DNSIP string

	c       *Cluster
	stopped sync.Once
}

// Node is one node of Machines.
type Node struct {
	Name string
	// IP is its InternalIP, its machine's address.
	IP string
	// NetNS is its machine's network namespace (a path).
	NetNS string
	// CNIConfDir is where its agent reads (and, there being none, writes)
	// its CNI configuration.
	CNIConfDir string
	Agent      *Agent

	proxy *process
}

// StartMachines makes the machines' network, starts an agent and a
// kube-proxy on every machine and deploys CoreDNS; it does not wait for
// them: WaitReady and WaitCoreDNS do. The control plane must have been
// started with a ClusterCIDR. On error, whatever was started is stopped.
// Stop stops it all and removes what it made; the control plane is the
// caller's.
func (c *Cluster) StartMachines(ctx context.Context, o MachinesOptions) (_ *Machines, retErr error) {
	if c.ClusterCIDR == "" {
		return nil, errors.New("machines: the control plane has no cluster CIDR (Options.ClusterCIDR)")
	}
	if o.Agent == "" || len(o.Nodes) == 0 || o.CNIBinDir == "" {
		return nil, errors.New("machines: Agent, Nodes and CNIBinDir are required")
	}
	if o.LAN == "" {
		o.LAN = "10.250.0.0/24"
	}
	if o.Port == 0 {
		o.Port = 10250
	}
	dnsIP := o.DNS.ClusterIP
	if dnsIP == "" {
		var err error
		if dnsIP, err = DNSClusterIP(c.ServiceCIDR); err != nil {
			return nil, err
		}
		o.DNS.ClusterIP = dnsIP
	}
	domain := o.DNS.Domain
	if domain == "" {
		domain = "cluster.local"
	}
	nw, err := NewNetwork(len(o.Nodes), o.LAN, c.ClusterCIDR)
	if err != nil {
		return nil, err
	}
	m := &Machines{Network: nw, DNSIP: dnsIP, c: c}
	defer func() {
		if retErr != nil {
			m.Stop()
		}
	}()
	proxyKubeconfig, err := c.UserKubeconfig(kubeProxyUser)
	if err != nil {
		return nil, err
	}
	for i, name := range o.Nodes {
		mach := nw.Machines[i]
		dir := filepath.Join(c.Dir, "nodes", name)
		n := &Node{Name: name, IP: mach.IP, NetNS: mach.NetNS, CNIConfDir: filepath.Join(dir, "cni", "net.d")}
		m.Nodes = append(m.Nodes, n)
		if err := os.MkdirAll(n.CNIConfDir, 0o755); err != nil {
			return nil, err
		}
		n.Agent, err = c.StartAgent(AgentOptions{
			Binary: o.Agent, Node: name, IP: mach.IP, Port: o.Port, NetNS: mach.NetNS,
			RootDir: filepath.Join(dir, "root"), LogPath: filepath.Join(dir, "kubelet.log"),
			Args: append([]string{
				"--network-plugin=cni", "--cni-conf-dir", n.CNIConfDir, "--cni-bin-dir", o.CNIBinDir,
				"--cni-cache-dir", filepath.Join(dir, "cni", "cache"),
				"--cluster-dns", dnsIP, "--cluster-domain", domain,
			}, o.AgentArgs...),
		})
		if err != nil {
			return nil, err
		}
		// kube-proxy finds its node's addresses in its Node object, which
		// the agent is registering meanwhile.
		if n.proxy, err = c.startKubeProxy(proxyKubeconfig, name, mach.NetNS, c.ClusterCIDR); err != nil {
			return nil, err
		}
	}
	if err := c.DeployCoreDNS(ctx, o.DNS); err != nil {
		return nil, err
	}
	return m, nil
}

// WaitReady waits until every node is Ready, routing each node's podCIDR
// to its machine as soon as the controller-manager has allocated it. It
// fails at once if an agent or a kube-proxy exits.
func (m *Machines) WaitReady(ctx context.Context) error {
	pending := map[string]*Node{}
	for _, n := range m.Nodes {
		pending[n.Name] = n
	}
	for {
		for name, n := range pending {
			node, err := m.c.admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			if node.Spec.PodCIDR != "" {
				if err := m.Network.AddPodRoute(name, node.Spec.PodCIDR, n.IP); err != nil {
					return err
				}
			}
			if cond := nodeCondition(node, corev1.NodeReady); cond != nil && cond.Status == corev1.ConditionTrue && node.Spec.PodCIDR != "" {
				delete(pending, name)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if err := m.exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			var names []string
			for name := range pending {
				names = append(names, name)
			}
			return fmt.Errorf("machines: nodes %v not Ready: %w", names, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// exited reports an agent or kube-proxy that is no longer running, with
// its log's tail. An agent's exit is taken from its Exited channel: it is
// reported once.
func (m *Machines) exited() error {
	for _, n := range m.Nodes {
		select {
		case err := <-n.Agent.Exited:
			return fmt.Errorf("machines: agent of node %s exited: %v; last lines of %s:\n%s", n.Name, err, n.Agent.LogPath, logTail(n.Agent.LogPath, 30))
		default:
		}
		if !n.proxy.running() {
			return n.proxy.failure(errors.New("kube-proxy exited"))
		}
	}
	return nil
}

// WaitCoreDNS waits until CoreDNS's replicas are available (see
// Cluster.WaitCoreDNS).
func (m *Machines) WaitCoreDNS(ctx context.Context) error { return m.c.WaitCoreDNS(ctx) }

// Stop stops every kube-proxy and agent (removing the agents' containers,
// cgroups and mounts), then removes the machines and their network. It is
// idempotent; the control plane is left running.
func (m *Machines) Stop() {
	m.stopped.Do(func() {
		var wg sync.WaitGroup
		for _, n := range m.Nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if n.proxy != nil {
					n.proxy.stop(5 * time.Second)
				}
				if n.Agent != nil {
					n.Agent.Stop()
				}
			}()
		}
		wg.Wait()
		for _, n := range m.Nodes {
			removeIPAMLeases(n.CNIConfDir)
		}
		if err := m.Network.Remove(); err != nil {
			fmt.Fprintf(os.Stderr, "machines: remove network %s: %v\n", m.Network.ID, err)
		}
	})
}

// Watch blocks until ctx ends (nil) or an agent or kube-proxy exits (why).
func (m *Machines) Watch(ctx context.Context) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if err := m.exited(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// removeIPAMLeases removes the host-local leases of the networks configured
// in confDir: their pods' containers were removed with their agent, with
// no CNI DEL, and host-local keeps its leases on the host's disk
// (<dataDir>/<network name>, /var/lib/cni/networks by default), outside the
// cluster's directory.
func removeIPAMLeases(confDir string) {
	files, _ := filepath.Glob(filepath.Join(confDir, "*.conf*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		type plugin struct {
			IPAM struct {
				Type    string `json:"type"`
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		}
		var conf struct {
			Name    string   `json:"name"`
			Plugins []plugin `json:"plugins"`
			plugin
		}
		if json.Unmarshal(data, &conf) != nil || conf.Name == "" || strings.ContainsAny(conf.Name, "/") || conf.Name == ".." {
			continue
		}
		for _, p := range append(conf.Plugins, conf.plugin) {
			if p.IPAM.Type != "host-local" {
				continue
			}
			dir := p.IPAM.DataDir
			if dir == "" {
				dir = "/var/lib/cni/networks"
			}
			_ = os.RemoveAll(filepath.Join(dir, conf.Name))
		}
	}
}
