// Package dns gives each pod its resolver configuration as the kubelet's
// DNS configurer does (pkg/kubelet/network/dns upstream), case by case:
//
//   - ClusterFirst (and ClusterFirstWithHostNet, which is ClusterFirst for
//     host-network pods too): the cluster's nameservers (--cluster-dns)
//     alone, the search list <namespace>.svc.<domain>, svc.<domain>,
//     <domain> followed by the host's, and ndots:5. Without --cluster-dns it
//     falls back to Default, with the MissingClusterDNS event.
//   - ClusterFirst on the host network is Default.
//   - Default: the host's resolver file (--resolv-conf); with
//     --resolv-conf="" nameserver 127.0.0.1 (::1 on an IPv6 node) and the
//     search list ".", which leaves names unsearched.
//   - None: the pod's dnsConfig alone.
//
// The pod's dnsConfig is then merged in (nameservers and searches appended
// without duplicates, options overriding by name), and the result fitted to
// the resolver's limits: 3 nameservers, 32 search paths of at most 253
// characters and 2048 in all, each cut announced by a DNSConfigForming
// event with the kubelet's message.
package dns

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
)

// The resolver's limits the kubelet holds pods to (validation's
// MaxDNSNameservers, MaxDNSSearchPaths and MaxDNSSearchListChars, and a
// DNS-1123 subdomain's length: glibc aborts on a longer search path).
const (
	maxNameservers     = 3
	maxSearchPaths     = 32
	maxSearchListChars = 2048
	maxSearchPathChars = 253
	// maxResolvConfSize bounds what is read of --resolv-conf, as the
	// kubelet's 10 MB.
	maxResolvConfSize = 10 << 20
)

// DefaultResolvConf is the host's resolver file, --resolv-conf's default.
const DefaultResolvConf = "/etc/resolv.conf"

// defaultOptions are the options of a ClusterFirst pod: a name with fewer
// than five dots is tried in the cluster's domains first.
var defaultOptions = []string{"ndots:5"}

// Events is where the configurer's warnings go (*events.Recorder).
type Events interface {
	Event(ref events.Ref, warning bool, reason, format string, args ...any)
}

// Configurer computes pods' resolver settings. Its fields are set before
// first use and never changed.
type Configurer struct {
	// ClusterDNS are the cluster's nameservers (--cluster-dns); none: the
	// node has no cluster DNS.
	ClusterDNS []string
	// ClusterDomain is the cluster's domain (--cluster-domain); "" adds no
	// cluster search paths.
	ClusterDomain string
	// ResolvConf is the host's resolver file (--resolv-conf); "" means
	// none.
	ResolvConf string
	// NodeIP decides the loopback nameserver of --resolv-conf="": ::1 on an
	// IPv6 node, else 127.0.0.1.
	NodeIP string
	// NodeName names the node in the MissingClusterDNS event.
	NodeName string
	// WarnMissingClusterDNS records the MissingClusterDNS events on the
	// node and the pod when a ClusterFirst pod falls back to Default. The
	// kubelet always does; the agent does in node mode only, where a
	// cluster DNS is expected: a standalone node has no cluster, and every
	// pod's dnsPolicy defaults to ClusterFirst.
	WarnMissingClusterDNS bool
	// Events receives the warnings (nil: none are recorded).
	Events Events
}

// PodDNS is the resolver configuration of the pod's sandbox. The zero value
// stands for the host's own file as Docker copies it: returned when the pod
// gets exactly the host's settings from the default file, so that Docker's
// handling of a host resolver on loopback (systemd-resolved) applies, as it
// always has for pods here.
func (c *Configurer) PodDNS(pod *v1.Pod) (kubecontainer.DNSSettings, error) {
	var s kubecontainer.DNSSettings
	switch policy(pod) {
	case policyNone:
	case policyCluster:
		if len(c.ClusterDNS) > 0 {
			host, err := c.hostSettings()
			if err != nil {
				return s, err
			}
			s.Nameservers = append([]string(nil), c.ClusterDNS...)
			s.Searches = c.clusterSearches(pod, host.Searches)
			s.Options = append([]string(nil), defaultOptions...)
			break
		}
		c.warnMissingClusterDNS(pod)
		fallthrough
	case policyHost:
		if pod.Spec.DNSConfig == nil && c.ResolvConf == DefaultResolvConf {
			return s, nil // Docker copies the host's file
		}
		var err error
		if s, err = c.hostSettings(); err != nil {
			return s, err
		}
		if c.ResolvConf == "" {
			// No host resolver: the loopback nameserver, and no search.
			s.Nameservers = []string{"127.0.0.1"}
			if ip := net.ParseIP(c.NodeIP); ip != nil && ip.To4() == nil {
				s.Nameservers = []string{"::1"}
			}
			s.Searches = []string{"."}
		}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		s.Nameservers = withoutDuplicates(append(s.Nameservers, dc.Nameservers...))
		s.Searches = withoutDuplicates(append(s.Searches, dc.Searches...))
		s.Options = mergeOptions(s.Options, dc.Options)
	}
	s.Nameservers = c.fitNameservers(pod, s.Nameservers)
	s.Searches = c.fitSearches(pod, s.Searches)
	return s, nil
}

type podPolicy int

const (
	policyCluster podPolicy = iota
	policyHost
	policyNone
)

// policy is how the pod's dnsPolicy resolves: ClusterFirst on the host
// network is Default; an unknown policy (the API server refuses those) is
// taken as ClusterFirst, as the kubelet takes it.
func policy(pod *v1.Pod) podPolicy {
	switch pod.Spec.DNSPolicy {
	case v1.DNSNone:
		return policyNone
	case v1.DNSDefault:
		return policyHost
	case v1.DNSClusterFirst, "":
		if pod.Spec.HostNetwork {
			return policyHost
		}
	}
	return policyCluster
}

// hostSettings are the host's resolver settings: --resolv-conf's, none
// without one.
func (c *Configurer) hostSettings() (kubecontainer.DNSSettings, error) {
	if c.ResolvConf == "" {
		return kubecontainer.DNSSettings{}, nil
	}
	f, err := os.Open(c.ResolvConf)
	if err != nil {
		return kubecontainer.DNSSettings{}, fmt.Errorf("--resolv-conf: %w", err)
	}
	defer f.Close()
	s, err := ParseResolvConf(f)
	if err != nil {
		return s, fmt.Errorf("--resolv-conf %s: %w", c.ResolvConf, err)
	}
	return s, nil
}

// clusterSearches are the cluster's search paths for the pod's namespace,
// then the host's, without duplicates.
func (c *Configurer) clusterSearches(pod *v1.Pod, host []string) []string {
	if c.ClusterDomain == "" {
		return append([]string(nil), host...)
	}
	out := []string{pod.Namespace + ".svc." + c.ClusterDomain, "svc." + c.ClusterDomain, c.ClusterDomain}
	return withoutDuplicates(append(out, host...))
}

// warnMissingClusterDNS records the kubelet's MissingClusterDNS events.
func (c *Configurer) warnMissingClusterDNS(pod *v1.Pod) {
	if !c.WarnMissingClusterDNS || c.Events == nil {
		return
	}
	msg := fmt.Sprintf("kubelet does not have ClusterDNS IP configured and cannot create Pod using %q policy. Falling back to %q policy.", v1.DNSClusterFirst, v1.DNSDefault)
	c.Events.Event(events.NodeRef(c.NodeName), true, "MissingClusterDNS", "%s", msg)
	c.Events.Event(events.PodRef(pod, ""), true, "MissingClusterDNS", "pod: %q. %s", fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID), msg)
}

// fitNameservers keeps the first three nameservers.
func (c *Configurer) fitNameservers(pod *v1.Pod, ns []string) []string {
	if len(ns) <= maxNameservers {
		return ns
	}
	ns = ns[:maxNameservers]
	c.warnForming(pod, "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: %s", strings.Join(ns, " "))
	return ns
}

// fitSearches keeps the first 32 search paths, drops those longer than a
// domain name may be, then drops paths from the end until the line fits
// 2048 characters.
func (c *Configurer) fitSearches(pod *v1.Pod, searches []string) []string {
	cut := false
	if len(searches) > maxSearchPaths {
		searches, cut = searches[:maxSearchPaths], true
	}
	kept := searches[:0:0]
	for _, s := range searches {
		if len(s) > maxSearchPathChars {
			cut = true
			continue
		}
		kept = append(kept, s)
	}
	searches = kept
	for n := len(strings.Join(searches, " ")); n > maxSearchListChars; n = len(strings.Join(searches, " ")) {
		searches, cut = searches[:len(searches)-1], true
	}
	if cut {
		c.warnForming(pod, "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: %s", strings.Join(searches, " "))
	}
	return searches
}

func (c *Configurer) warnForming(pod *v1.Pod, format string, arg string) {
	klog.Errorf("Pod %s/%s: "+format, pod.Namespace, pod.Name, arg)
	if c.Events != nil {
		c.Events.Event(events.PodRef(pod, ""), true, "DNSConfigForming", format, arg)
	}
}

// withoutDuplicates keeps the first of each value, in order.
func withoutDuplicates(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := list[:0:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mergeOptions overrides existing options by name with the pod's (name or
// name:value) and appends the pod's others, in order.
func mergeOptions(existing []string, pod []v1.PodDNSConfigOption) []string {
	out := append([]string(nil), existing...)
	index := map[string]int{}
	for i, o := range out {
		name, _, _ := strings.Cut(o, ":")
		index[name] = i
	}
	for _, o := range pod {
		v := o.Name
		if o.Value != nil && *o.Value != "" {
			v += ":" + *o.Value
		}
		if i, ok := index[o.Name]; ok {
			out[i] = v
			continue
		}
		index[o.Name] = len(out)
		out = append(out, v)
	}
	return out
}

// ParseResolvConf reads nameservers, searches and options as the kubelet
// does: nameserver lines accumulate, the last search line and the last
// options line win (a search path's trailing dot dropped), comments and
// other lines are skipped; a nameserver line without an address is an
// error.
func ParseResolvConf(r io.Reader) (kubecontainer.DNSSettings, error) {
	var s kubecontainer.DNSSettings
	data, err := io.ReadAll(io.LimitReader(r, maxResolvConfSize+1))
	if err != nil {
		return s, err
	}
	if len(data) > maxResolvConfSize {
		return s, fmt.Errorf("larger than %d bytes", maxResolvConfSize)
	}
	var errs []error
	for _, line := range bytes.Split(data, []byte("\n")) {
		text := strings.TrimSpace(string(line))
		if strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				errs = append(errs, errors.New("nameserver list is empty"))
				continue
			}
			s.Nameservers = append(s.Nameservers, fields[1])
		case "search":
			s.Searches = s.Searches[:0:0]
			for _, d := range fields[1:] {
				s.Searches = append(s.Searches, strings.TrimSuffix(d, "."))
			}
		case "options":
			s.Options = append([]string(nil), fields[1:]...)
		}
	}
	return s, errors.Join(errs...)
}
