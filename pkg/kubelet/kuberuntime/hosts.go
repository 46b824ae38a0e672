package kuberuntime

// The pod's /etc/hosts, made as the kubelet makes it: one file per pod in
// its directory, bind-mounted into each of its containers in place of the
// file Docker makes. On the pod network it names localhost, the pod's IP
// with its hostname and the pod's hostAliases; under hostNetwork it is the
// node's hosts file plus the hostAliases.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

const (
	etcHosts = "/etc/hosts"
	// podHostsFile is the pod's hosts file in its directory (the kubelet's name).
	podHostsFile = "etc-hosts"

	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// hostsMount writes the pod's hosts file and returns the mount that puts it
// on c's /etc/hosts. It returns nil, as the kubelet does, for a container
// that mounts a volume on /etc/hosts itself, and for a pod on the pod
// network whose IP is not known (Docker's file of the infra container stays).
func (m *Manager) hostsMount(pod *v1.Pod, c *v1.Container, podIP string) (*kubecontainer.Mount, error) {
	if !getsHostsFile(c) || (!pod.Spec.HostNetwork && podIP == "") {
		return nil, nil
	}
	var data []byte
	if pod.Spec.HostNetwork {
		node, err := os.ReadFile(etcHosts)
		if err != nil {
			return nil, fmt.Errorf("hosts file: %w", err)
		}
		data = nodeHostsContent(node, pod.Spec.HostAliases)
	} else {
		host, domain := m.podNames(pod)
		data = managedHostsContent(podIP, host, domain, pod.Spec.HostAliases)
	}
	dir := m.volumes.PodDir(pod.UID)
	if err := writeIfChanged(dir, podHostsFile, data); err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	return &kubecontainer.Mount{Source: filepath.Join(dir, podHostsFile), Target: etcHosts}, nil
}

// getsHostsFile reports whether c is given the pod's hosts file: not if it
// mounts a volume of its own there.
func getsHostsFile(c *v1.Container) bool {
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) == etcHosts {
			return false
		}
	}
	return true
}

// writeIfChanged replaces dir/name with data unless it holds data already,
// so the containers of a pod share one file while its content stays the
// same. The file is replaced atomically, never rewritten in place: a
// container reading its /etc/hosts never sees half a file, and one already
// running keeps the file it started with. Neither read nor write follows a
// link.
func writeIfChanged(dir, name string, data []byte) error {
	f, err := safefile.OpenBeneath(dir, name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err == nil {
		old, rerr := io.ReadAll(io.LimitReader(f, int64(len(data))+1))
		f.Close()
		if rerr == nil && bytes.Equal(old, data) {
			return nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return safefile.WriteBeneath(dir, name, data, 0o644, 0o750, -1)
}

// nodeHostsContent is a host-network pod's hosts file: the node's, then the
// pod's aliases.
func nodeHostsContent(node []byte, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderHostNetwork)
	b.Write(node)
	b.WriteString(hostAliasEntries(aliases))
	return b.Bytes()
}

// managedHostsContent is the hosts file of a pod on the pod network.
func managedHostsContent(podIP, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	if domain != "" {
		fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", podIP, hostname, domain, hostname)
	} else {
		fmt.Fprintf(&b, "%s\t%s\n", podIP, hostname)
	}
	b.WriteString(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostAliasEntries are the lines of the pod's hostAliases, one per IP.
// Validation keeps line breaks out of IPs and hostnames.
func hostAliasEntries(aliases []v1.HostAlias) string {
	if len(aliases) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.String()
}
