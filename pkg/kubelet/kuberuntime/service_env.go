package kuberuntime

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// ServiceLister gives the cluster's Services (node mode), and whether they
// have been listed once.
type ServiceLister interface {
	Services() (services []*v1.Service, synced bool)
}

// errServicesUnsynced holds back the containers of an API server's pod
// until the Services are known: started earlier, they would lack their
// service variables for good.
var errServicesUnsynced = errors.New("services have not yet been read at least once, cannot construct envvars")

// serviceEnv is the environment the kubelet gives every container for the
// Services it may reach: those of the pod's namespace (unless
// enableServiceLinks is false) and the master service `kubernetes` of the
// default namespace, each as {NAME}_SERVICE_HOST/_PORT[_PORTNAME] and the
// Docker link variables {NAME}_PORT[_<port>_<PROTO>[_PROTO|_PORT|_ADDR]].
// Headless services give none. Without an API server there is none.
func (m *Manager) serviceEnv(pod *v1.Pod) ([]v1.EnvVar, error) {
	if m.cfg.Services == nil {
		return nil, nil
	}
	all, synced := m.cfg.Services.Services()
	if !synced {
		if pod.Annotations[api.ConfigSourceAnnotation] == api.SourceAPIServer {
			return nil, errServicesUnsynced
		}
		return nil, nil // a static pod does not wait for an API server that may be down
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	byName := map[string]*v1.Service{}
	for _, s := range all {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == v1.ClusterIPNone {
			continue
		}
		switch {
		case s.Namespace == pod.Namespace && links:
			byName[s.Name] = s
		case s.Namespace == v1.NamespaceDefault && s.Name == "kubernetes":
			if _, ok := byName[s.Name]; !ok {
				byName[s.Name] = s
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []v1.EnvVar
	for _, n := range names {
		out = append(out, serviceVars(byName[n])...)
	}
	return out, nil
}

func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }

func serviceVars(s *v1.Service) []v1.EnvVar {
	if len(s.Spec.Ports) == 0 {
		return nil
	}
	prefix := envName(s.Name)
	ip := s.Spec.ClusterIP
	out := []v1.EnvVar{
		{Name: prefix + "_SERVICE_HOST", Value: ip},
		{Name: prefix + "_SERVICE_PORT", Value: strconv.Itoa(int(s.Spec.Ports[0].Port))},
	}
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			out = append(out, v1.EnvVar{Name: prefix + "_SERVICE_PORT_" + envName(p.Name), Value: strconv.Itoa(int(p.Port))})
		}
	}
	for i, p := range s.Spec.Ports {
		proto := strings.ToLower(string(p.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		url := fmt.Sprintf("%s://%s", proto, net.JoinHostPort(ip, strconv.Itoa(int(p.Port))))
		if i == 0 { // Docker's links name the first port alone too
			out = append(out, v1.EnvVar{Name: prefix + "_PORT", Value: url})
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out = append(out,
			v1.EnvVar{Name: pp, Value: url},
			v1.EnvVar{Name: pp + "_PROTO", Value: proto},
			v1.EnvVar{Name: pp + "_PORT", Value: strconv.Itoa(int(p.Port))},
			v1.EnvVar{Name: pp + "_ADDR", Value: ip})
	}
	return out
}
