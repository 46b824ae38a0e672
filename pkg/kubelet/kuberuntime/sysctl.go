package kuberuntime

import (
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

// safeSysctls are the sysctls every pod may set, as the kubelet's: each
// namespaced and isolated from other pods, with the kernel version from
// which it is namespaced.
var safeSysctls = []struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", ""},
	{"net.ipv4.tcp_wmem", ""},
}

// sysctlNamespace is the kernel namespace a sysctl belongs to ("ipc",
// "net"), "" if it is not known to be namespaced (then no pod may set it).
func sysctlNamespace(name string) string {
	switch {
	case name == "kernel.sem", strings.HasPrefix(name, "kernel.shm"), strings.HasPrefix(name, "kernel.msg"), strings.HasPrefix(name, "fs.mqueue."):
		return "ipc"
	case strings.HasPrefix(name, "net."):
		return "net"
	}
	return ""
}

// sysctlDots spells a sysctl with dots: "net/ipv4/tcp_rmem" and the
// mixed "net/ipv4/conf/eno2.100/rp_filter" as the kernel's dotted names
// (a dot inside a slash-separated name is part of a component: swapped).
func sysctlDots(name string) string {
	i := strings.IndexAny(name, "./")
	if i < 0 || name[i] == '.' {
		return name
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return '/'
		case '/':
			return '.'
		}
		return r
	}, name)
}

var sysctlPattern = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?(\*)?$`)

// SysctlAllowlist is what pods may set: the safe sysctls and the
// --allowed-unsafe-sysctls (names, or prefixes ending in *), each known
// to be namespaced.
type SysctlAllowlist struct {
	names    map[string]string // name → namespace
	prefixes map[string]string
}

// NewSysctlAllowlist builds the allowlist; an unsafe pattern that is not
// namespaced is an error naming it.
func NewSysctlAllowlist(unsafe []string) (*SysctlAllowlist, error) {
	w := &SysctlAllowlist{names: map[string]string{}, prefixes: map[string]string{}}
	kernel := kernelVersion()
	for _, s := range safeSysctls {
		if s.kernel == "" || kernel == nil || kernel.AtLeast(version.MustParseGeneric(s.kernel)) {
			w.names[s.name] = sysctlNamespace(s.name)
		}
	}
	for _, p := range unsafe {
		if len(p) > 253 || !sysctlPattern.MatchString(p) {
			return nil, fmt.Errorf("sysctl %q must have at most 253 characters and match %s", p, sysctlPattern)
		}
		p = sysctlDots(p)
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			ns := sysctlNamespace(prefix)
			if ns == "" {
				return nil, fmt.Errorf("the sysctls %q are not known to be namespaced", p)
			}
			w.prefixes[prefix] = ns
			continue
		}
		ns := sysctlNamespace(p)
		if ns == "" {
			return nil, fmt.Errorf("the sysctl %q is not known to be namespaced", p)
		}
		w.names[p] = ns
	}
	return w, nil
}

// admit refuses a pod setting a sysctl the list does not allow, or one of a
// namespace it shares with the host (reason SysctlForbidden, as the
// kubelet's).
func (w *SysctlAllowlist) admit(pod *v1.Pod) *lifecycle.Rejection {
	sc := pod.Spec.SecurityContext
	if w == nil || sc == nil {
		return nil
	}
	for _, s := range sc.Sysctls {
		name := sysctlDots(s.Name)
		ns, ok := w.names[name]
		if !ok {
			for p, pns := range w.prefixes {
				if strings.HasPrefix(name, p) {
					ns, ok = pns, true
				}
			}
		}
		var err string
		switch {
		case !ok:
			err = fmt.Sprintf("%q not allowlisted", name)
		case ns == "net" && pod.Spec.HostNetwork, ns == "ipc" && pod.Spec.HostIPC:
			err = fmt.Sprintf("%q not allowed with host %s enabled", name, ns)
		}
		if err != "" {
			return &lifecycle.Rejection{Reason: "SysctlForbidden", Message: "forbidden sysctl: " + err}
		}
	}
	return nil
}

func kernelVersion() *version.Version {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return nil
	}
	v, err := version.ParseGeneric(unix.ByteSliceToString(u.Release[:]))
	if err != nil {
		return nil
	}
	return v
}
