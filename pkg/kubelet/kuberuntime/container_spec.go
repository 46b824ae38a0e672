package kuberuntime

// The step from a pod to what its containers are created with: everything is
// decided here, in the runtime-neutral kubecontainer.CreateSpec (hostname,
// DNS, ports, environment, command, mounts, resources, security, OOM score);
// the runtime only spells it its own way.

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// maxHostnameLen is the kernel's limit on a UTS hostname.
const maxHostnameLen = 63

// infraSpec is the pod's infra container: it holds the network and IPC
// namespaces, the hostname, DNS settings and, on Docker's bridge, the
// published ports (a CNI network publishes them itself: portmap); app
// containers join it. Their /etc/hosts is the pod's own (see hostsMount).
// mode is the Network's SandboxMode.
func (m *Manager) infraSpec(pod *v1.Pod, mode string) (*kubecontainer.CreateSpec, error) {
	hash := kubecontainer.HashInfra(pod)
	labels := kubecontainer.ContainerLabels(pod, m.cfg.NodeName, kubecontainer.InfraContainerName, hash, kubecontainer.TypeSandbox, 0)
	labels[kubecontainer.LabelSource] = podSourceOf(pod)
	adj := max(infraOOMScoreAdj, m.oomFloor)
	spec := &kubecontainer.CreateSpec{
		Name:   kubecontainer.BuildName(kubecontainer.ContainerName{Container: kubecontainer.InfraContainerName, Hash: hash, Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
		Image:  m.cfg.InfraImage,
		Labels: labels,
		// Shareable so app containers can join its IPC namespace.
		IpcMode:       "shareable",
		Resources:     kubecontainer.Resources{CPUShares: minShares},
		OOMScoreAdj:   &adj,
		CgroupParent:  m.cgroupParent(pod),
		SELinuxLabels: seLinuxLabels(pod, nil),
	}
	if pod.Spec.HostIPC {
		spec.IpcMode = "host"
	}
	if sc := pod.Spec.SecurityContext; sc != nil && len(sc.Sysctls) > 0 {
		spec.Sysctls = map[string]string{}
		for _, s := range sc.Sysctls {
			spec.Sysctls[sysctlDots(s.Name)] = s.Value
		}
	}
	spec.NetworkMode = mode
	var err error
	if spec.DNS, err = m.network.DNS(pod); err != nil {
		return nil, &kubecontainer.StartError{Reason: reasonConfigError, Message: err.Error()}
	}
	if pod.Spec.HostNetwork {
		// The host's hostname and ports; its resolver file unless the
		// pod's policy asks for another (ClusterFirstWithHostNet,
		// dnsConfig).
		return spec, nil
	}
	if spec.Hostname, spec.Domainname, err = m.podHostnameAndDomain(pod); err != nil {
		return nil, err
	}
	if mode != "" {
		return spec, nil // the network plugin publishes the host ports
	}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := "tcp"
			if p.Protocol == v1.ProtocolUDP {
				proto = "udp"
			}
			spec.Ports = append(spec.Ports, kubecontainer.PortMapping{ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIP: p.HostIP, Protocol: proto})
		}
	}
	return spec, nil
}

// maxFQDNLen is the longest FQDN setHostnameAsFQDN may make the hostname.
const maxFQDNLen = 64

// podHostnameAndDomain are the hostname and domain the pod sees, as the
// kubelet makes them: hostnameOverride alone if set; else the hostname
// (spec.hostname or the pod name) and, with a subdomain, its domain; with
// setHostnameAsFQDN the hostname is the whole FQDN.
func (m *Manager) podHostnameAndDomain(pod *v1.Pod) (string, string, error) {
	host, domain := m.podNames(pod)
	if pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN && domain != "" {
		fqdn := host + "." + domain
		if len(fqdn) > maxFQDNLen {
			return "", "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)",
				fqdn, maxFQDNLen, len(fqdn))
		}
		return fqdn, "", nil
	}
	return host, domain, nil
}

// podNames are the pod's hostname and domain, as its hosts file names it:
// hostnameOverride alone, or the hostname and the subdomain's domain.
func (m *Manager) podNames(pod *v1.Pod) (host, domain string) {
	if o := pod.Spec.HostnameOverride; o != nil && *o != "" {
		return *o, ""
	}
	return podHostname(pod), m.podDomain(pod)
}

// podDomain is the domain of a pod with a subdomain ("" without).
func (m *Manager) podDomain(pod *v1.Pod) string {
	if pod.Spec.Subdomain == "" {
		return ""
	}
	return fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, m.cfg.ClusterDomain)
}

// podHostname is spec.hostname, or the pod name cut to the kernel's limit
// without a trailing '-' or '.' the cut may leave.
func podHostname(pod *v1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	h := pod.Name
	if len(h) <= maxHostnameLen {
		return h
	}
	h = h[:maxHostnameLen]
	for len(h) > 0 && (h[len(h)-1] == '-' || h[len(h)-1] == '.') {
		h = h[:len(h)-1]
	}
	return h
}

// appSpec is an app (init, ephemeral) container of the pod, joining the
// infra container's namespaces: its environment (with downward values), its
// command and args with $(VAR) expanded, its mounts, resources and security.
func (m *Manager) appSpec(ctx context.Context, pod *v1.Pod, c *v1.Container, sb sandbox, restartCount int) (*kubecontainer.CreateSpec, error) {
	infraID, podIP := sb.infraID, sb.podIP
	hash := kubecontainer.HashContainer(pod, c)
	labels := kubecontainer.ContainerLabels(pod, m.cfg.NodeName, c.Name, hash, kubecontainer.TypeContainer, restartCount)
	labels[kubecontainer.LabelSource] = podSourceOf(pod)
	labels[kubecontainer.LabelSpecHash] = kubecontainer.HashContainerSpec(pod, c)
	adj := max(oomScoreAdj(pod, c, m.cfg.NodeMemory), m.oomFloor)
	logs := m.logs.Get()
	spec := &kubecontainer.CreateSpec{
		Name:         kubecontainer.BuildName(kubecontainer.ContainerName{Container: c.Name, Hash: hash, Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
		Image:        c.Image,
		WorkingDir:   c.WorkingDir,
		Labels:       labels,
		NetworkMode:  "container:" + infraID,
		IpcMode:      "container:" + infraID,
		Resources:    containerResources(c),
		Tty:          c.TTY,
		OpenStdin:    c.Stdin,
		StdinOnce:    c.StdinOnce,
		OOMScoreAdj:  &adj,
		LogMaxSize:   logs.MaxSize,
		LogMaxFiles:  logs.MaxFiles,
		CgroupParent: m.cgroupParent(pod),
		Runtime:      sb.handler,
	}
	if pod.Spec.HostIPC {
		spec.IpcMode = "host"
	}
	var target string // kubectl debug --target
	if ec := kubecontainer.Ephemeral(pod, c.Name); ec != nil {
		target = ec.TargetContainerName
	}
	switch {
	case pod.Spec.HostPID:
		spec.PidMode = "host"
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		// The pause program is PID 1 of the pod and reaps its orphans.
		spec.PidMode = "container:" + infraID
	case target != "":
		// kubectl debug --target: the ephemeral container sees the
		// target's processes.
		id := runningID(sb.state, target)
		if id == "" {
			return nil, &kubecontainer.StartError{Reason: reasonConfigError, Message: fmt.Sprintf("target container %q is not running", target)}
		}
		spec.PidMode = "container:" + id
	}
	env, vars, err := m.containerEnv(ctx, pod, c, podIP, sb.hostPaths)
	if err != nil {
		return nil, &kubecontainer.StartError{Reason: reasonConfigError, Message: err.Error()}
	}
	spec.Env = env
	lookup := func(n string) (string, bool) { v, ok := vars[n]; return v, ok }
	for _, a := range c.Command {
		spec.Entrypoint = append(spec.Entrypoint, expand(a, lookup))
	}
	for _, a := range c.Args {
		spec.Cmd = append(spec.Cmd, expand(a, lookup))
	}
	if spec.Binds, err = m.volumes.Binds(pod, c, sb.hostPaths, func(s string) string { return expand(s, lookup) }, restartCount); err != nil {
		return nil, err
	}
	hosts, err := m.hostsMount(pod, c, podIP)
	if err != nil {
		return nil, &kubecontainer.StartError{Reason: reasonConfigError, Message: err.Error()}
	}
	if hosts != nil {
		spec.Mounts = append(spec.Mounts, *hosts)
	}
	if err := m.securityOptions(ctx, pod, c, spec); err != nil {
		return nil, err
	}
	if err := m.deviceOptions(ctx, pod, c, spec); err != nil {
		return nil, err
	}
	return spec, nil
}

// deviceOptions gives the container what the device plugins' Allocate
// answered for it: device nodes, mounts, annotations, and environment
// variables set before the container's own (which win a name, as the
// kubelet's order has them).
func (m *Manager) deviceOptions(ctx context.Context, pod *v1.Pod, c *v1.Container, spec *kubecontainer.CreateSpec) error {
	if m.devices == nil {
		return nil
	}
	opts, err := m.devices.ContainerOptions(ctx, pod, c)
	if err != nil {
		return &kubecontainer.StartError{Reason: reasonConfigError, Message: fmt.Sprintf("device plugin: %v", err)}
	}
	if opts == nil {
		return nil
	}
	spec.Env = append(append([]string(nil), opts.Env...), spec.Env...)
	spec.Mounts = append(spec.Mounts, opts.Mounts...)
	spec.Devices = opts.Devices
	spec.CDIDevices = opts.CDIDevices
	spec.Annotations = opts.Annotations
	return nil
}

// runningID is the ID of the running instance of the pod's container name
// ("" if none runs).
func runningID(state *kubecontainer.PodState, name string) string {
	for _, inst := range state.Instances(name) {
		if inst.Running {
			return inst.ID
		}
	}
	return ""
}

// podSourceOf is the config source the pod came from, recorded on its
// containers (a pod whose source is silent is not killed).
func podSourceOf(pod *v1.Pod) string {
	if s := pod.Annotations[api.ConfigSourceAnnotation]; s != "" {
		return s
	}
	return api.SourceFile
}

// usesPodIP reports whether starting the pod's containers needs its IP: the
// hosts file of a pod on the pod network names it, and so do an environment
// value from status.podIP and a postStart HTTP hook aimed at the pod. Pods
// that need none of these (host-network pods, containers that mount their
// own /etc/hosts) skip an inspect on the way to running.
func usesPodIP(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if !pod.Spec.HostNetwork && getsHostsFile(&c) {
				return true
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && (e.ValueFrom.FieldRef.FieldPath == "status.podIP" || e.ValueFrom.FieldRef.FieldPath == "status.podIPs") {
					return true
				}
			}
			if l := c.Lifecycle; l != nil && l.PostStart != nil && l.PostStart.HTTPGet != nil && l.PostStart.HTTPGet.Host == "" {
				return true
			}
		}
	}
	return false
}
