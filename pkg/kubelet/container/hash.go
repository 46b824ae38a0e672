package container

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"sort"

	v1 "k8s.io/api/core/v1"
)

// HashContainer hashes a container's spec as written plus the pod volumes it
// mounts. A container whose hash changes is replaced; one whose hash is the
// same is adopted as is. The input is canonical JSON of the undefaulted spec
// (keys sorted, empty fields omitted), so new defaults or a new field in a
// library upgrade leave hashes, and so running containers, alone.
func HashContainer(pod *v1.Pod, c *v1.Container) string {
	mounted := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mounted[m.Name] = true
	}
	var volumes []v1.Volume
	for _, v := range pod.Spec.Volumes {
		if mounted[v.Name] {
			volumes = append(volumes, v)
		}
	}
	sort.Slice(volumes, func(i, j int) bool { return volumes[i].Name < volumes[j].Name })
	return hashCanonical(struct {
		Container *v1.Container `json:"container"`
		Volumes   []v1.Volume   `json:"volumes,omitempty"`
	}{c, volumes})
}

// HashContainerSpec is HashContainer without the container's resources and
// resizePolicy: what a running container must keep for the agent to resize
// it in place rather than replace it. It is recorded beside the full hash
// (LabelSpecHash) on the containers this agent makes; containers made
// before that label existed are compared by their full hash (SameSpec), so
// an upgrade restarts nothing.
func HashContainerSpec(pod *v1.Pod, c *v1.Container) string {
	cp := *c
	cp.Resources, cp.ResizePolicy = v1.ResourceRequirements{}, nil
	return HashContainer(pod, &cp)
}

// SameSpec reports whether instance inst was made from container c's spec
// as it is now, resources aside for an instance that records its
// resources-free hash (LabelSpecHash): such an instance is resized in
// place. One without it (made by an older agent) must match the full hash,
// resources included, as before: its resources as written are not known.
func SameSpec(pod *v1.Pod, c *v1.Container, inst *ContainerState) bool {
	if inst.SpecHash != "" {
		return inst.SpecHash == HashContainerSpec(pod, c)
	}
	return inst.Hash == HashContainer(pod, c)
}

// HashInfra hashes what the infra container carries: the network mode, the
// published ports, the hostname and resolver settings, the IPC mode. The
// infra image is deliberately left out, so changing
// --pod-infra-container-image does not recreate running pods; fields left
// empty drop out of the canonical JSON, so fields added here later keep
// existing hashes.
func HashInfra(pod *v1.Pod) string {
	var ports []v1.ContainerPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				ports = append(ports, p)
			}
		}
	}
	return hashCanonical(struct {
		HostNetwork bool               `json:"hostNetwork,omitempty"`
		Ports       []v1.ContainerPort `json:"ports,omitempty"`
		Hostname    string             `json:"hostname,omitempty"`
		Subdomain   string             `json:"subdomain,omitempty"`
		HostAliases []v1.HostAlias     `json:"hostAliases,omitempty"`
		DNSPolicy   v1.DNSPolicy       `json:"dnsPolicy,omitempty"`
		DNSConfig   *v1.PodDNSConfig   `json:"dnsConfig,omitempty"`
		HostIPC     bool               `json:"hostIPC,omitempty"`
		Sysctls     []v1.Sysctl        `json:"sysctls,omitempty"`
		Override    *string            `json:"hostnameOverride,omitempty"`
		FQDN        *bool              `json:"setHostnameAsFQDN,omitempty"`
	}{pod.Spec.HostNetwork, ports, pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.HostAliases, pod.Spec.DNSPolicy, pod.Spec.DNSConfig, pod.Spec.HostIPC,
		podSysctls(pod), pod.Spec.HostnameOverride, pod.Spec.SetHostnameAsFQDN})
}

func podSysctls(pod *v1.Pod) []v1.Sysctl {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.Sysctls
	}
	return nil
}

func hashCanonical(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal spec for hashing: %v", err)) // API types always marshal
	}
	// Round-trip through a generic value: encoding/json sorts map keys, so the
	// bytes no longer depend on the Go struct's field order; and prune empty
	// values, so a struct field a newer library adds (marshalled as {} even
	// when unset) leaves the hash alone.
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		panic(fmt.Sprintf("unmarshal spec for hashing: %v", err))
	}
	canonical, err := json.Marshal(prune(generic))
	if err != nil {
		panic(fmt.Sprintf("marshal canonical spec: %v", err))
	}
	h := fnv.New32a()
	h.Write(canonical)
	return fmt.Sprintf("%08x", h.Sum32())
}

// prune drops empty objects, empty arrays and nulls from a decoded JSON value.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			e = prune(e)
			if isEmpty(e) {
				delete(t, k)
				continue
			}
			t[k] = e
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = prune(e)
		}
		return t
	default:
		return v
	}
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}
