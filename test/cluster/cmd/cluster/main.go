// Command cluster runs a real Kubernetes control plane with agents as its
// nodes, in the foreground, until Ctrl-C: `make cluster` (hack/cluster.sh)
// runs it. With one node (--network docker, the default) the agent runs on
// this host with docker0's address and Docker's bridge, as before; with
// --nodes n (--network cni) every node is a machine of its own on this host,
// its agent in CNI mode, with kube-proxy and CoreDNS (cluster.StartMachines,
// docs/kubernetes.md). It prints the KUBECONFIG to export. On exit it stops
// the agents, removes the nodes' containers (the cluster they belonged to
// goes with them) and everything it made on the host (machines, bridges,
// routes, iptables chains), stops the control plane and removes its
// directory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/classic-kubelet/kubelet/test/cluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run() error {
	host, _ := os.Hostname()
	binDir := flag.String("bin-dir", "", "Directory of kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kube-proxy (hack/ensure-control-plane.sh prints it).")
	dir := flag.String("dir", "/tmp/classic-kubelet-cluster", "Directory of the cluster's certificates, kubeconfigs, etcd data, logs and the agents' root dirs; emptied at start, removed at exit.")
	agentBin := flag.String("agent", "bin/kubelet", "The agent binary; empty: the control plane alone.")
	nodes := flag.Int("nodes", 1, "How many nodes (agents). More than one needs --network cni.")
	network := flag.String("network", "", "The pod network: docker (one node on docker0's address, pods on Docker's bridge, no add-ons: the default for one node) or cni (every node a machine of its own, the agents in CNI mode, kube-proxy and CoreDNS: the default for several).")
	node := flag.String("node-name", strings.ToLower(host), "The node's name (the agent's --hostname-override); with --network cni, the nodes are <name>-1 ... <name>-n.")
	port := flag.Int("port", 10250, "The agent's full-access port, on the node IP (the API server reaches it there).")
	cniBinDir := flag.String("cni-bin-dir", "", "With --network cni: the reference CNI plugins (hack/ensure-cni-plugins.sh prints it).")
	clusterCIDR := flag.String("cluster-cidr", "10.244.0.0/16", "With --network cni: the pods' range, a /24 per node.")
	lan := flag.String("lan", "10.250.0.0/24", "With --network cni: the machines' network (the host .1, node i .(i+1)).")
	dnsImage := flag.String("coredns-image", cluster.CoreDNSImage, "With --network cni: CoreDNS's image (hack/ensure-coredns.sh builds it).")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s [flags] [-- agent flags...]\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if *binDir == "" {
		return errors.New("--bin-dir is required")
	}
	if *network == "" {
		*network = "docker"
		if *nodes > 1 {
			*network = "cni"
		}
	}
	switch {
	case *nodes < 1:
		return errors.New("--nodes must be at least 1")
	case *network != "docker" && *network != "cni":
		return fmt.Errorf("--network %q: docker or cni", *network)
	case *network == "docker" && *nodes > 1:
		return errors.New("--network docker runs one node: pods on Docker's bridges of several nodes could not reach each other (--network cni)")
	case *network == "cni" && *agentBin == "":
		return errors.New("--network cni needs an agent")
	case *network == "cni" && *cniBinDir == "":
		return errors.New("--network cni needs --cni-bin-dir (hack/ensure-cni-plugins.sh prints it)")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// One cluster per directory: a second `make cluster` would otherwise
	// empty the first one's directory under it.
	unlock, err := lock(*dir + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	defer os.RemoveAll(*dir)

	began := time.Now()
	opts := cluster.Options{BinDir: *binDir}
	if *network == "cni" {
		opts.ClusterCIDR = *clusterCIDR
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	c, err := cluster.Start(startCtx, *dir, opts)
	cancel()
	if err != nil {
		return err
	}
	defer c.Stop()
	fmt.Fprintf(os.Stderr, "cluster: control plane up in %v at %s (logs: %s/*.log)\n", time.Since(began).Round(100*time.Millisecond), c.Server, c.Dir)

	watch := func(ctx context.Context) error { <-ctx.Done(); return nil }
	switch {
	case *agentBin == "":
	case *network == "docker":
		a, err := c.StartAgent(cluster.AgentOptions{Binary: *agentBin, Node: *node, IP: c.Address, Port: *port,
			RootDir: filepath.Join(c.Dir, "kubelet"), LogPath: filepath.Join(c.Dir, "kubelet.log"), Args: flag.Args()})
		if err != nil {
			return err
		}
		defer a.Stop()
		readyCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err = c.WaitNodeReady(readyCtx, *node, a.Exited)
		cancel()
		if err != nil {
			return fmt.Errorf("%w; last lines of %s:\n%s", err, a.LogPath, tail(a.LogPath, 30))
		}
		fmt.Fprintf(os.Stderr, "cluster: node %s Ready (agent log: %s)\n", *node, a.LogPath)
		watch = func(ctx context.Context) error {
			select {
			case <-ctx.Done():
				return nil
			case err := <-a.Exited:
				return fmt.Errorf("agent exited: %v", err)
			}
		}
	default:
		names := make([]string, *nodes)
		for i := range names {
			names[i] = fmt.Sprintf("%s-%d", *node, i+1)
		}
		m, err := c.StartMachines(ctx, cluster.MachinesOptions{Agent: *agentBin, Nodes: names, CNIBinDir: *cniBinDir,
			LAN: *lan, Port: *port, AgentArgs: flag.Args(), DNS: cluster.DNSOptions{Image: *dnsImage}})
		if err != nil {
			return err
		}
		defer m.Stop()
		readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := m.WaitReady(readyCtx); err != nil {
			return err
		}
		what := fmt.Sprintf("%d nodes", len(m.Nodes))
		if len(m.Nodes) == 1 {
			what = "the node"
		}
		fmt.Fprintf(os.Stderr, "cluster: %s Ready %v after start:\n", what, time.Since(began).Round(100*time.Millisecond))
		for _, n := range m.Nodes {
			fmt.Fprintf(os.Stderr, "cluster:   %s at %s (agent log: %s; shell on its machine: nsenter --net=%s)\n", n.Name, n.IP, n.Agent.LogPath, n.NetNS)
		}
		if err := m.WaitCoreDNS(readyCtx); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "cluster: CoreDNS Running and Ready %v after start (kube-dns at %s)\n", time.Since(began).Round(100*time.Millisecond), m.DNSIP)
		watch = m.Watch
	}
	fmt.Printf("export KUBECONFIG=%s\n", c.AdminKubeconfig)
	fmt.Fprintf(os.Stderr, "cluster: kubectl is %s; Ctrl-C stops the cluster\n", c.KubectlPath())
	if err := watch(ctx); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "cluster: stopping")
	return nil
}

// lock takes an exclusive lock on path, failing at once if it is held.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another cluster runs in this directory (%s is locked): %w", path, err)
	}
	return func() { f.Close() }, nil
}

func tail(path string, lines int) string {
	data, _ := os.ReadFile(path)
	parts := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
