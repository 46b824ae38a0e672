package kubelet

// The step from a pod to what its containers are created with: everything is
// decided here, in the runtime-neutral kubecontainer.CreateSpec (hostname,
// DNS, ports, environment, command, mounts, resources, security, OOM score);
// the runtime only spells it its own way.

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// maxHostnameLen is the kernel's limit on a UTS hostname.
const maxHostnameLen = 63

// infraSpec is the pod's infra container: it holds the network and IPC
// namespaces, the hostname, DNS settings and the published ports; app
// containers join it.
func (k *Kubelet) infraSpec(pod *v1.Pod) (*kubecontainer.CreateSpec, error) {
	hash := dockertools.HashInfra(pod)
	labels := dockertools.ContainerLabels(pod, k.cfg.NodeName, dockertools.InfraContainerName, hash, dockertools.TypeSandbox, 0)
	labels[dockertools.LabelSource] = podSourceOf(pod)
	adj := max(infraOOMScoreAdj, k.oomFloor)
	spec := &kubecontainer.CreateSpec{
		Name:   dockertools.BuildName(dockertools.ContainerName{Container: dockertools.InfraContainerName, Hash: hash, Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
		Image:  k.cfg.InfraImage,
		Labels: labels,
		// Shareable so app containers can join its IPC namespace.
		IpcMode:      "shareable",
		Resources:    kubecontainer.Resources{CPUShares: minShares},
		OOMScoreAdj:  &adj,
		CgroupParent: k.cgroupParent(pod),
	}
	if pod.Spec.HostIPC {
		spec.IpcMode = "host"
	}
	if pod.Spec.HostNetwork {
		// The host's hostname, resolver files and ports: nothing to set.
		spec.NetworkMode = "host"
		return spec, nil
	}
	spec.Hostname = podHostname(pod)
	if pod.Spec.Subdomain != "" {
		spec.Domainname = fmt.Sprintf("%s.%s.svc.%s", pod.Spec.Subdomain, pod.Namespace, k.cfg.ClusterDomain)
	}
	for _, ha := range pod.Spec.HostAliases {
		for _, h := range ha.Hostnames {
			spec.ExtraHosts = append(spec.ExtraHosts, h+":"+ha.IP)
		}
	}
	var err error
	if spec.DNS, err = k.podDNS(pod); err != nil {
		return nil, err
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

// appSpec is an app (or init) container of the pod, joining the infra
// container's namespaces: its environment (with downward values), its
// command and args with $(VAR) expanded, its mounts, resources and security.
func (k *Kubelet) appSpec(ctx context.Context, pod *v1.Pod, c *v1.Container, infraID, podIP string, hostPaths map[string]string, restartCount int) (*kubecontainer.CreateSpec, error) {
	hash := dockertools.HashContainer(pod, c)
	labels := dockertools.ContainerLabels(pod, k.cfg.NodeName, c.Name, hash, dockertools.TypeContainer, restartCount)
	labels[dockertools.LabelSource] = podSourceOf(pod)
	adj := max(oomScoreAdj(pod, c, k.nodeMemory), k.oomFloor)
	hk := k.housekeeping()
	spec := &kubecontainer.CreateSpec{
		Name:         dockertools.BuildName(dockertools.ContainerName{Container: c.Name, Hash: hash, Pod: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)}),
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
		LogMaxSize:   hk.LogMaxSize,
		LogMaxFiles:  hk.LogMaxFiles,
		CgroupParent: k.cgroupParent(pod),
	}
	if pod.Spec.HostIPC {
		spec.IpcMode = "host"
	}
	switch {
	case pod.Spec.HostPID:
		spec.PidMode = "host"
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		// The pause program is PID 1 of the pod and reaps its orphans.
		spec.PidMode = "container:" + infraID
	}
	env, vars, err := k.containerEnv(pod, c, podIP)
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
	if spec.Binds, err = k.volumes.Binds(pod, c, hostPaths, func(s string) string { return expand(s, lookup) }, restartCount); err != nil {
		return nil, err
	}
	if err := k.securityOptions(ctx, pod, c, spec); err != nil {
		return nil, err
	}
	return spec, nil
}
