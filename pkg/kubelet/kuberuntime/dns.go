package kuberuntime

import (
	"bufio"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// podDNS is the pod's resolver configuration: its own under dnsPolicy None,
// else the node's (there is no cluster DNS) with the pod's dnsConfig added.
// The zero value leaves Docker to copy the node's /etc/resolv.conf itself.
func (m *Manager) podDNS(pod *v1.Pod) (kubecontainer.DNSSettings, error) {
	dc := pod.Spec.DNSConfig
	if pod.Spec.DNSPolicy == v1.DNSNone {
		return kubecontainer.DNSSettings{Nameservers: dc.Nameservers, Searches: dc.Searches, Options: dnsOptions(dc)}, nil
	}
	if dc == nil && m.cfg.ResolvConf == defaultResolvConf {
		return kubecontainer.DNSSettings{}, nil
	}
	base, err := parseResolvConf(m.cfg.ResolvConf)
	if err != nil {
		return base, &kubecontainer.StartError{Reason: reasonConfigError, Message: fmt.Sprintf("--resolv-conf: %v", err)}
	}
	if dc != nil {
		base.Nameservers = append(base.Nameservers, dc.Nameservers...)
		base.Searches = append(base.Searches, dc.Searches...)
		base.Options = append(base.Options, dnsOptions(dc)...)
	}
	return base, nil
}

const defaultResolvConf = "/etc/resolv.conf"

func dnsOptions(dc *v1.PodDNSConfig) []string {
	if dc == nil {
		return nil
	}
	var out []string
	for _, o := range dc.Options {
		if o.Value != nil {
			out = append(out, o.Name+":"+*o.Value)
		} else {
			out = append(out, o.Name)
		}
	}
	return out
}

// parseResolvConf reads nameservers, search domains and options.
func parseResolvConf(path string) (kubecontainer.DNSSettings, error) {
	var s kubecontainer.DNSSettings
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], ";") {
			continue
		}
		switch fields[0] {
		case "nameserver":
			s.Nameservers = append(s.Nameservers, fields[1])
		case "search", "domain":
			s.Searches = append(s.Searches, fields[1:]...)
		case "options":
			s.Options = append(s.Options, fields[1:]...)
		}
	}
	return s, sc.Err()
}
