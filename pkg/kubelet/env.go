package kubelet

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// expand replaces $(VAR) in s as Kubernetes does: a defined variable is
// replaced by its value, an undefined reference is left as written, and $$
// escapes a $.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok && name != "" {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// fieldKey matches metadata.labels['k'] and metadata.annotations['k'].
var fieldKey = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

// fieldValue resolves a downward fieldPath for a pod.
func (k *Kubelet) fieldValue(pod *v1.Pod, path, podIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return k.cfg.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs": // one address family here: the list is that address
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return k.hostIP, nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	if m := fieldKey.FindStringSubmatch(path); m != nil {
		if m[1] == "labels" {
			return pod.Labels[m[2]], nil
		}
		return pod.Annotations[m[2]], nil
	}
	return "", fmt.Errorf("unsupported fieldPath %q", path)
}

// formatMap renders labels or annotations as the downward API does:
// key="value" lines, sorted.
func formatMap(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for key, v := range m {
		lines = append(lines, fmt.Sprintf("%s=%q", key, v))
	}
	sortStrings(lines)
	return strings.Join(lines, "\n")
}

// resourceValue resolves a resourceFieldRef as Kubernetes does: the
// container's request or limit (a missing limit is the node's capacity),
// divided by the divisor and rounded up.
func (k *Kubelet) resourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector, self string) (string, error) {
	name := ref.ContainerName
	if name == "" {
		name = self
	}
	c := containerSpec(pod, name)
	if c == nil {
		return "", fmt.Errorf("no container %q", name)
	}
	kind, res, _ := strings.Cut(ref.Resource, ".")
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[v1.ResourceName(res)]
	if !ok {
		switch {
		case kind == "limits" && res == "cpu":
			q = *resource.NewQuantity(int64(k.nodeCPUs), resource.DecimalSI)
		case kind == "limits" && res == "memory":
			q = *resource.NewQuantity(k.nodeMemory, resource.BinarySI)
		case kind == "limits" && res == "ephemeral-storage":
			q = *resource.NewQuantity(k.nodeEphemeralStorage(), resource.BinarySI)
		case kind == "requests":
			// A request defaults to the limit when only a limit is written.
			if lim, ok := c.Resources.Limits[v1.ResourceName(res)]; ok {
				q = lim
			}
		}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if res == "cpu" {
		return fmt.Sprint(int64(math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue())))), nil
	}
	return fmt.Sprint(int64(math.Ceil(float64(q.Value()) / float64(divisor.Value())))), nil
}

// containerEnv resolves a container's environment in order: each value may
// refer to the variables before it with $(VAR).
func (k *Kubelet) containerEnv(pod *v1.Pod, c *v1.Container, podIP string) ([]string, map[string]string, error) {
	vars := map[string]string{}
	env := make([]string, 0, len(c.Env))
	for _, e := range c.Env {
		var v string
		var err error
		switch {
		case e.ValueFrom == nil:
			v = expand(e.Value, func(n string) (string, bool) { x, ok := vars[n]; return x, ok })
		case e.ValueFrom.FieldRef != nil:
			v, err = k.fieldValue(pod, e.ValueFrom.FieldRef.FieldPath, podIP)
		case e.ValueFrom.ResourceFieldRef != nil:
			v, err = k.resourceValue(pod, e.ValueFrom.ResourceFieldRef, c.Name)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	return env, vars, nil
}

// downwardValues gives the volume manager the pod's downward API values
// (volume files have no container of their own, nor the pod IP).
type downwardValues struct{ k *Kubelet }

func (d downwardValues) FieldValue(pod *v1.Pod, path string) (string, error) {
	return d.k.fieldValue(pod, path, "")
}

func (d downwardValues) ResourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	return d.k.resourceValue(pod, ref, "")
}

// nodeEphemeralStorage is the node's allocatable ephemeral storage: the
// size of the file system holding the root dir (what the kubelet reports).
func (k *Kubelet) nodeEphemeralStorage() int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(k.cfg.RootDir, &st); err != nil {
		return 0
	}
	return int64(st.Blocks) * st.Bsize
}
