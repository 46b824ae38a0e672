package kuberuntime

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// DownwardNode is the node as the downward API shows it to its pods.
type DownwardNode struct {
	Name string
	// IP is status.hostIP, and a host-network pod's IP.
	IP string
	// CPUs and Memory (bytes) are the node's capacity: a container's
	// missing CPU or memory limit.
	CPUs   int
	Memory int64
	// RootDir is the agent's root directory: the size of its file system
	// is a container's missing ephemeral-storage limit.
	RootDir string
}

// Downward resolves the downward API's values of a pod: its fields and its
// containers' resources. The Manager reads them for containers'
// environment, the volume manager for downwardAPI volume files; it is
// built first and given to both.
type Downward struct{ node DownwardNode }

var _ volumes.DownwardValues = (*Downward)(nil)

// NewDownward returns the downward API of pods on node.
func NewDownward(node DownwardNode) *Downward { return &Downward{node: node} }

// FieldValue resolves a fieldPath for a volume file (which has no pod IP).
func (d *Downward) FieldValue(pod *v1.Pod, path string) (string, error) {
	return d.field(pod, path, "")
}

// ResourceValue resolves a resourceFieldRef for a volume file (which names
// its container).
func (d *Downward) ResourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	return d.resource(pod, ref, "")
}

// fieldKey matches metadata.labels['k'] and metadata.annotations['k'].
var fieldKey = regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)

// field resolves a downward fieldPath for a pod whose IP is podIP.
func (d *Downward) field(pod *v1.Pod, path, podIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return d.node.Name, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs": // one address family here: the list is that address
		if pod.Spec.HostNetwork && d.node.IP != "" {
			return d.node.IP, nil // the pod's IP is the node's, as its status says
		}
		return podIP, nil
	case "status.hostIP", "status.hostIPs":
		return d.node.IP, nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	if sub := fieldKey.FindStringSubmatch(path); sub != nil {
		if sub[1] == "labels" {
			return pod.Labels[sub[2]], nil
		}
		return pod.Annotations[sub[2]], nil
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
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// resource resolves a resourceFieldRef as Kubernetes does: the
// container's request or limit (a missing limit is the node's capacity),
// divided by the divisor and rounded up; self is the container asking ("":
// a volume file, which names its container).
func (d *Downward) resource(pod *v1.Pod, ref *v1.ResourceFieldSelector, self string) (string, error) {
	name := ref.ContainerName
	if name == "" {
		name = self
	}
	c := kubecontainer.ContainerSpec(pod, name)
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
			q = *resource.NewQuantity(int64(d.node.CPUs), resource.DecimalSI)
		case kind == "limits" && res == "memory":
			q = *resource.NewQuantity(d.node.Memory, resource.BinarySI)
		case kind == "limits" && res == "ephemeral-storage":
			q = *resource.NewQuantity(d.nodeEphemeralStorage(), resource.BinarySI)
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

// nodeEphemeralStorage is the node's allocatable ephemeral storage: the
// size of the file system holding the root dir (what the kubelet reports).
func (d *Downward) nodeEphemeralStorage() int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(d.node.RootDir, &st); err != nil {
		return 0
	}
	return int64(st.Blocks) * st.Bsize
}
