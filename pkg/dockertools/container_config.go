package dockertools

import (
	"fmt"
	"strconv"

	docker "github.com/fsouza/go-dockerclient"
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// maxHostnameLen is the kernel's limit on a UTS hostname.
const maxHostnameLen = 63

// InfraOptions are what the agent resolved for a pod's infra container.
type InfraOptions struct {
	Hostname   string
	Domainname string
	DNS        kubecontainer.DNSSettings
	ExtraHosts []string // "host:ip"
	HostIPC    bool
}

// AppOptions are what the agent resolved for one app container: its
// environment and command after expansion, its mounts and its security.
type AppOptions struct {
	Env             []string
	Command, Args   []string
	Binds           []string
	User            string // "uid", "uid:gid", or "" for the image's
	GroupAdd        []string
	CapAdd, CapDrop []string
	Privileged      bool
	ReadOnlyRootfs  bool
	NoNewPrivileges bool
	HostPID         bool
	HostIPC         bool
	Seccomp         kubecontainer.SeccompProfile
	AppArmorProfile string // Docker's apparmor= value ("": Docker's default)
}

func baseLabels(pod *v1.Pod, node, container, hash, kind string, restartCount int) map[string]string {
	grace := int64(30)
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	return map[string]string{
		LabelPodName:       pod.Name,
		LabelPodNamespace:  pod.Namespace,
		LabelPodUID:        string(pod.UID),
		LabelContainerName: container,
		LabelContainerHash: hash,
		LabelRestartCount:  strconv.Itoa(restartCount),
		LabelType:          kind,
		LabelOwner:         node,
		LabelGracePeriod:   strconv.FormatInt(grace, 10),
	}
}

// InfraSpec is the pod's infra container: it holds the network and IPC
// namespaces, the hostname, DNS settings and the published ports; app
// containers join it.
func InfraSpec(pod *v1.Pod, image, node, source string, o InfraOptions) *kubecontainer.CreateSpec {
	hash := HashInfra(pod)
	labels := baseLabels(pod, node, InfraContainerName, hash, TypeSandbox, 0)
	labels[LabelSource] = source
	spec := &kubecontainer.CreateSpec{
		Name:   BuildName(ContainerName{Container: InfraContainerName, Hash: hash, Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
		Image:  image,
		Labels: labels,
		// Shareable so app containers can join its IPC namespace.
		IpcMode:   "shareable",
		Resources: kubecontainer.Resources{CPUShares: minShares},
	}
	if o.HostIPC {
		spec.IpcMode = "host"
	}
	if pod.Spec.HostNetwork {
		// The host's hostname, resolver files and ports: nothing to set.
		spec.NetworkMode = "host"
		return spec
	}
	spec.Hostname, spec.Domainname = o.Hostname, o.Domainname
	spec.DNS, spec.ExtraHosts = o.DNS, o.ExtraHosts
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
	return spec
}

// PodHostname is the hostname of a pod's infra container: spec.hostname, or
// the pod name cut to the kernel's limit without a trailing '-' or '.'.
func PodHostname(pod *v1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return podHostname(pod.Name)
}

// podHostname is the pod name cut to the kernel's limit, without a trailing
// '-' or '.' the cut may leave.
func podHostname(name string) string {
	if len(name) <= maxHostnameLen {
		return name
	}
	h := name[:maxHostnameLen]
	for len(h) > 0 && (h[len(h)-1] == '-' || h[len(h)-1] == '.') {
		h = h[:len(h)-1]
	}
	return h
}

// AppSpec is an app (or init) container of the pod, joining the infra
// container's namespaces, with what the agent resolved for it in o.
func AppSpec(pod *v1.Pod, c *v1.Container, infraID, node string, o AppOptions, restartCount int) *kubecontainer.CreateSpec {
	hash := HashContainer(pod, c)
	spec := &kubecontainer.CreateSpec{
		Name:            BuildName(ContainerName{Container: c.Name, Hash: hash, Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
		Image:           c.Image,
		Entrypoint:      o.Command,
		Cmd:             o.Args,
		Env:             o.Env,
		WorkingDir:      c.WorkingDir,
		Labels:          baseLabels(pod, node, c.Name, hash, TypeContainer, restartCount),
		NetworkMode:     "container:" + infraID,
		IpcMode:         "container:" + infraID,
		Binds:           o.Binds,
		Resources:       ContainerResources(c),
		User:            o.User,
		GroupAdd:        o.GroupAdd,
		CapAdd:          o.CapAdd,
		CapDrop:         o.CapDrop,
		Privileged:      o.Privileged,
		ReadOnlyRootfs:  o.ReadOnlyRootfs,
		NoNewPrivileges: o.NoNewPrivileges,
		Seccomp:         o.Seccomp,
		AppArmorProfile: o.AppArmorProfile,
		Tty:             c.TTY,
		OpenStdin:       c.Stdin,
		StdinOnce:       c.StdinOnce,
	}
	if o.HostIPC {
		spec.IpcMode = "host"
	}
	switch {
	case o.HostPID:
		spec.PidMode = "host"
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		// The pause program is PID 1 of the pod and reaps its orphans.
		spec.PidMode = "container:" + infraID
	}
	return spec
}

// dockerOptions translates a create spec into Docker's create options.
func dockerOptions(s *kubecontainer.CreateSpec) docker.CreateContainerOptions {
	cfg := &docker.Config{
		Image:      s.Image,
		Entrypoint: s.Entrypoint,
		Cmd:        s.Cmd,
		Env:        s.Env,
		WorkingDir: s.WorkingDir,
		Labels:     s.Labels,
		Hostname:   s.Hostname,
		Domainname: s.Domainname,
		User:       s.User,
		Tty:        s.Tty,
		OpenStdin:  s.OpenStdin,
		StdinOnce:  s.StdinOnce,
	}
	hc := &docker.HostConfig{
		NetworkMode:    s.NetworkMode,
		IpcMode:        s.IpcMode,
		PidMode:        s.PidMode,
		Binds:          s.Binds,
		DNS:            s.DNS.Nameservers,
		DNSSearch:      s.DNS.Searches,
		DNSOptions:     s.DNS.Options,
		ExtraHosts:     s.ExtraHosts,
		GroupAdd:       s.GroupAdd,
		CapAdd:         s.CapAdd,
		CapDrop:        s.CapDrop,
		Privileged:     s.Privileged,
		ReadonlyRootfs: s.ReadOnlyRootfs,
		CPUShares:      s.Resources.CPUShares,
		CPUQuota:       s.Resources.CPUQuota,
		CPUPeriod:      s.Resources.CPUPeriod,
		Memory:         s.Resources.Memory,
		// The agent decides restarts; each restart is a new container.
		RestartPolicy: docker.RestartPolicy{Name: "no"},
	}
	if s.LogMaxSize > 0 {
		hc.LogConfig = docker.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": strconv.FormatInt(s.LogMaxSize, 10),
			"max-file": strconv.Itoa(max(s.LogMaxFiles, 1)),
		}}
	}
	if s.NoNewPrivileges {
		hc.SecurityOpt = append(hc.SecurityOpt, "no-new-privileges")
	}
	switch s.Seccomp.Kind {
	case kubecontainer.SeccompUnconfined:
		hc.SecurityOpt = append(hc.SecurityOpt, "seccomp=unconfined")
	case kubecontainer.SeccompLocalhost:
		hc.SecurityOpt = append(hc.SecurityOpt, "seccomp="+string(s.Seccomp.Content))
	}
	if s.AppArmorProfile != "" {
		hc.SecurityOpt = append(hc.SecurityOpt, "apparmor="+s.AppArmorProfile)
	}
	hc.CgroupParent = s.CgroupParent
	if s.OOMScoreAdj != nil {
		hc.OomScoreAdj = *s.OOMScoreAdj
	}
	for _, m := range s.Mounts {
		hc.Mounts = append(hc.Mounts, docker.HostMount{Type: "bind", Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	if s.Resources.Memory > 0 {
		// No swap beyond the limit, as Kubernetes.
		hc.MemorySwap = s.Resources.Memory
	}
	if len(s.Ports) > 0 {
		cfg.ExposedPorts = map[docker.Port]struct{}{}
		hc.PortBindings = map[docker.Port][]docker.PortBinding{}
		for _, p := range s.Ports {
			port := docker.Port(fmt.Sprintf("%d/%s", p.ContainerPort, p.Protocol))
			cfg.ExposedPorts[port] = struct{}{}
			hc.PortBindings[port] = append(hc.PortBindings[port], docker.PortBinding{HostIP: p.HostIP, HostPort: strconv.Itoa(int(p.HostPort))})
		}
	}
	return docker.CreateContainerOptions{Name: s.Name, Config: cfg, HostConfig: hc}
}
