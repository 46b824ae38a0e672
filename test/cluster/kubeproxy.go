package cluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// kubeProxyUser is kube-proxy's identity: the bootstrap policy binds the
// user of this name to system:node-proxier.
const kubeProxyUser = "system:kube-proxy"

// startKubeProxy starts kube-proxy (from BinDir, built by
// hack/ensure-control-plane.sh) for node in mode iptables, in the network
// namespace netns (a machine's: "" is the host's). Its iptables rules,
// sysctls and NodePorts are that namespace's, as kube-proxy's are a host's;
// its log is Dir/kube-proxy-<node>.log. kubeconfig authenticates it as
// kubeProxyUser. The caller stops it.
//
// NodePorts answer on the node's IP (nodePortAddresses: primary, which
// kube-proxy recommends), and the configuration leaves conntrack's table
// size alone (maxPerCore 0): it is the host's, shared by every namespace,
// and read-only in a machine's.
func (c *Cluster) startKubeProxy(kubeconfig, node, netns, clusterCIDR string) (*process, error) {
	bin := filepath.Join(c.binDir, "kube-proxy")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("kube-proxy: %w (hack/ensure-control-plane.sh builds it)", err)
	}
	cfg := filepath.Join(c.Dir, "kube-proxy-"+node+".yaml")
	if err := writeFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
mode: iptables
clusterCIDR: %q
detectLocalMode: ClusterCIDR
nodePortAddresses: [primary]
conntrack:
  maxPerCore: 0
`, kubeconfig, node, clusterCIDR))); err != nil {
		return nil, err
	}
	args := []string{"--config", cfg}
	if netns != "" {
		args = append([]string{"--net=" + netns, "--", bin}, args...)
		bin = "nsenter"
	}
	return startProcess(c.Dir, "kube-proxy-"+node, bin, args...)
}
