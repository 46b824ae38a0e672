package dockertools

// The agent decides what a container gets (pkg/kubelet builds a
// runtime-neutral CreateSpec from the pod); this file only spells it the way
// the Engine API wants it.

import (
	"fmt"
	"maps"
	"strconv"

	docker "github.com/fsouza/go-dockerclient"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// annotationLabelPrefix is cri-dockerd's label prefix of a container's
// annotations.
const annotationLabelPrefix = "annotation."

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
		Sysctls:        s.Sysctls,
		PidMode:        s.PidMode,
		Binds:          s.Binds,
		DNS:            s.DNS.Nameservers,
		DNSSearch:      s.DNS.Searches,
		DNSOptions:     s.DNS.Options,
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
	for _, l := range s.SELinuxLabels {
		hc.SecurityOpt = append(hc.SecurityOpt, "label="+l)
	}
	hc.CgroupParent = s.CgroupParent
	hc.Runtime = s.Runtime
	if s.OOMScoreAdj != nil {
		hc.OomScoreAdj = *s.OOMScoreAdj
	}
	for _, m := range s.Mounts {
		hc.Mounts = append(hc.Mounts, docker.HostMount{Type: "bind", Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	for _, d := range s.Devices {
		hc.Devices = append(hc.Devices, docker.Device{PathOnHost: d.PathOnHost, PathInContainer: d.PathInContainer, CgroupPermissions: d.Permissions})
	}
	if len(s.CDIDevices) > 0 {
		hc.DeviceRequests = append(hc.DeviceRequests, docker.DeviceRequest{Driver: "cdi", DeviceIDs: s.CDIDevices})
	}
	if len(s.Annotations) > 0 {
		// Docker before API 1.43 has no container annotations: they are
		// kept as labels too, under cri-dockerd's prefix, as a kubelet
		// on cri-dockerd shows them.
		hc.Annotations = s.Annotations
		labels := make(map[string]string, len(s.Labels)+len(s.Annotations))
		maps.Copy(labels, s.Labels)
		cfg.Labels = labels
		for k, v := range s.Annotations {
			if _, taken := cfg.Labels[annotationLabelPrefix+k]; !taken {
				cfg.Labels[annotationLabelPrefix+k] = v
			}
		}
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
