package network

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"

	"github.com/containernetworking/cni/libcni"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// ReferenceConfFile is the file of the reference network the agent writes
// when the conf directory holds none: last in lexical order, so a network
// add-on's own configuration (10-flannel.conflist, ...) written later is
// the one pods join.
const ReferenceConfFile = "99-classic-kubelet.conflist"

// BridgeName is the bridge of node's reference network: "cbr-" and eight
// hex digits of the node name's SHA-256, so that agents of several nodes on
// one host (make cluster) each have their own within Linux's 15 characters.
func BridgeName(node string) string {
	sum := sha256.Sum256([]byte(node))
	return "cbr-" + hex.EncodeToString(sum[:4])
}

// NetworkName is the name of node's reference network: host-local keeps
// its leases in /var/lib/cni/networks/<name>, one directory per node.
func NetworkName(node string) string { return "classic-kubelet-" + node }

// ReferenceConf is the reference network of a node with podCIDRs, as
// kubenet made it: a bridge that is the pods' gateway and masquerades
// their traffic to addresses beyond the pod CIDR (ipMasq), with hairpin mode
// so a pod reaches itself through a Service; host-local IPAM on the pod
// CIDRs with a default route; then firewall (accepting the pods' forwarded
// traffic where Docker drops what it does not know), portmap (host ports),
// bandwidth (the pods' bandwidth annotations) and loopback.
func ReferenceConf(node string, podCIDRs []string) ([]byte, error) {
	var ranges [][]map[string]string
	var routes []map[string]string
	for _, cidr := range podCIDRs {
		ip, _, err := net.ParseCIDR(cidr)
		if err != nil {
			return nil, fmt.Errorf("pod CIDR %q: %w", cidr, err)
		}
		ranges = append(ranges, []map[string]string{{"subnet": cidr}})
		dst := "0.0.0.0/0"
		if ip.To4() == nil {
			dst = "::/0"
		}
		routes = append(routes, map[string]string{"dst": dst})
	}
	if len(ranges) == 0 {
		return nil, fmt.Errorf("no pod CIDR")
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       NetworkName(node),
		"plugins": []any{
			map[string]any{"type": "bridge", "bridge": BridgeName(node), "isGateway": true, "ipMasq": true, "hairpinMode": true,
				"ipam": map[string]any{"type": "host-local", "ranges": ranges, "routes": routes}},
			// Docker's FORWARD policy is DROP, and bridged traffic passes
			// FORWARD (br_netfilter): the firewall plugin accepts the
			// pod's.
			map[string]any{"type": "firewall", "backend": "iptables"},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
			map[string]any{"type": "bandwidth", "capabilities": map[string]bool{"bandwidth": true}},
			map[string]any{"type": "loopback"},
		},
	}
	return json.MarshalIndent(conf, "", "  ")
}

// SetPodCIDRs takes the Node's pod CIDRs (spec.podCIDRs, node mode), each
// time the Node is read. The first ones are the node's: they go to plugins
// that ask for ipRanges and, with CNI and no network configuration in the
// conf directory, into the reference network the agent writes (as kubenet
// did; a configuration present is never touched). A change later is an
// event on the Node: running pods keep their IPs, and the network keeps
// its configuration (remove it and restart the agent to take the new
// CIDRs), as cri-dockerd ignores a changed pod CIDR.
func (m *Manager) SetPodCIDRs(cidrs []string) {
	if m.cni == nil || len(cidrs) == 0 {
		return
	}
	c := m.cni
	c.mu.Lock()
	had := c.podCIDRs
	if had == nil {
		c.podCIDRs = slices.Clone(cidrs)
		if ours := c.referenceCIDRs(); ours != nil {
			had, c.podCIDRs = ours, ours // written before a restart
		}
	}
	c.mu.Unlock()
	if had != nil {
		if !slices.Equal(had, cidrs) && m.cfg.Events != nil {
			m.cfg.Events.Event(events.NodeRef(m.cfg.NodeName), true, "PodCIDRChanged",
				"Node %s: spec.podCIDRs changed from %v to %v; the pod network keeps %v (running pods are untouched): remove %s and restart the agent to take the new CIDRs",
				m.cfg.NodeName, had, cidrs, had, filepath.Join(c.confDir, ReferenceConfFile))
		}
		return
	}
	if err := c.writeReference(m.cfg.NodeName, cidrs); err != nil {
		klog.Errorf("CNI: %v", err)
	}
}

// referenceCIDRs are the subnets of the reference network the agent wrote
// before, nil if there is none.
func (c *cniNetwork) referenceCIDRs() []string {
	list, err := libcni.NetworkConfFromFile(filepath.Join(c.confDir, ReferenceConfFile))
	if err != nil || len(list.Plugins) == 0 {
		return nil
	}
	var conf struct {
		IPAM struct {
			Ranges [][]struct {
				Subnet string `json:"subnet"`
			} `json:"ranges"`
		} `json:"ipam"`
	}
	if json.Unmarshal(list.Plugins[0].Bytes, &conf) != nil {
		return nil
	}
	var out []string
	for _, r := range conf.IPAM.Ranges {
		if len(r) > 0 {
			out = append(out, r[0].Subnet)
		}
	}
	return out
}

// writeReference writes the reference network if the conf directory holds
// no configuration.
func (c *cniNetwork) writeReference(node string, cidrs []string) error {
	files, err := libcni.ConfFiles(c.confDir, confExtensions)
	if err != nil {
		return fmt.Errorf("read %s: %w", c.confDir, err)
	}
	if len(files) > 0 {
		klog.V(2).Infof("CNI: %s holds a network configuration; the reference network is not written", c.confDir)
		return nil
	}
	data, err := ReferenceConf(node, cidrs)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.confDir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(c.confDir, ReferenceConfFile)
	if err := safefile.WriteAtomic(path, data); err != nil {
		return fmt.Errorf("write the reference network: %w", err)
	}
	_ = os.Chmod(path, 0o644)
	klog.Infof("CNI: wrote the reference network %s: bridge %s, pod CIDRs %v", path, BridgeName(node), cidrs)
	return nil
}
