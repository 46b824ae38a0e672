package dockertools

import (
	"fmt"
	"strconv"

	docker "github.com/fsouza/go-dockerclient"
	v1 "k8s.io/api/core/v1"
)

// maxHostnameLen is the kernel's limit on a UTS hostname.
const maxHostnameLen = 63

// CreateSpec is everything the agent sets on a container it creates.
type CreateSpec struct {
	Name        string
	Image       string
	Entrypoint  []string
	Cmd         []string
	Env         []string
	WorkingDir  string
	Labels      map[string]string
	Hostname    string
	NetworkMode string
	IpcMode     string
	Ports       []PortMapping
	Binds       []string
	Resources   Resources
}

// PortMapping publishes ContainerPort on the node's HostIP:HostPort.
type PortMapping struct {
	ContainerPort int32
	HostPort      int32
	HostIP        string
	Protocol      string // "tcp" or "udp"
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
// namespaces, the hostname and the published ports; app containers join it.
func InfraSpec(pod *v1.Pod, image, node, source string) *CreateSpec {
	hash := HashInfra(pod)
	labels := baseLabels(pod, node, InfraContainerName, hash, TypeSandbox, 0)
	labels[LabelSource] = source
	spec := &CreateSpec{
		Name:   BuildName(ContainerName{Container: InfraContainerName, Hash: hash, Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
		Image:  image,
		Labels: labels,
		// Shareable so app containers can join its IPC namespace.
		IpcMode:   "shareable",
		Resources: Resources{CPUShares: minShares},
	}
	if pod.Spec.HostNetwork {
		// The host's hostname and ports: nothing to publish.
		spec.NetworkMode = "host"
		return spec
	}
	spec.Hostname = podHostname(pod.Name)
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort == 0 {
				continue
			}
			proto := "tcp"
			if p.Protocol == v1.ProtocolUDP {
				proto = "udp"
			}
			spec.Ports = append(spec.Ports, PortMapping{ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIP: p.HostIP, Protocol: proto})
		}
	}
	return spec
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

// AppSpec is an app container of the pod, joining the infra container's
// namespaces. binds are "host:container[:ro]" strings for its volume mounts.
func AppSpec(pod *v1.Pod, c *v1.Container, infraID, node string, binds []string, restartCount int) *CreateSpec {
	hash := HashContainer(pod, c)
	spec := &CreateSpec{
		Name:        BuildName(ContainerName{Container: c.Name, Hash: hash, Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
		Image:       c.Image,
		Entrypoint:  c.Command,
		Cmd:         c.Args,
		WorkingDir:  c.WorkingDir,
		Labels:      baseLabels(pod, node, c.Name, hash, TypeContainer, restartCount),
		NetworkMode: "container:" + infraID,
		IpcMode:     "container:" + infraID,
		Binds:       binds,
		Resources:   ContainerResources(c),
	}
	for _, e := range c.Env {
		spec.Env = append(spec.Env, e.Name+"="+e.Value)
	}
	return spec
}

func (s *CreateSpec) dockerOptions() docker.CreateContainerOptions {
	cfg := &docker.Config{
		Image:      s.Image,
		Entrypoint: s.Entrypoint,
		Cmd:        s.Cmd,
		Env:        s.Env,
		WorkingDir: s.WorkingDir,
		Labels:     s.Labels,
		Hostname:   s.Hostname,
	}
	hc := &docker.HostConfig{
		NetworkMode: s.NetworkMode,
		IpcMode:     s.IpcMode,
		Binds:       s.Binds,
		CPUShares:   s.Resources.CPUShares,
		CPUQuota:    s.Resources.CPUQuota,
		CPUPeriod:   s.Resources.CPUPeriod,
		Memory:      s.Resources.Memory,
		// The agent decides restarts; each restart is a new container.
		RestartPolicy: docker.RestartPolicy{Name: "no"},
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
