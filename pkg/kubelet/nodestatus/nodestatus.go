// Package nodestatus computes the Node object the agent reports for its
// node: capacity, addresses, system info, the Ready and pressure
// conditions, and what its runtime offers (handlers, images, features). One computation serves every place the Node is written.
package nodestatus

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Builder builds the Node; its fields are set before the first Build.
type Builder struct {
	Name    string
	RootDir string
	MaxPods int
	HostIP  string
	// Version is the agent's, reported as the kubelet's.
	Version string
	// Health reports what keeps the node from being Ready.
	Health func() (syncLoop, relist error)
	// Network, if set, reports why pods cannot get a network (the network
	// plugin is not ready): the node is then not Ready either.
	Network func() error
	// Shutdown, if set, reports that the machine is shutting down (the
	// graceful node shutdown): the node is then not Ready.
	Shutdown func() error
	// RuntimeVersion is the container runtime's version (Docker's).
	RuntimeVersion func() (string, error)
	// Reserved is kept from pods: Allocatable is Capacity less it.
	Reserved v1.ResourceList
	// Pressure says whether the node is under a pressure condition: the
	// eviction manager's view (its thresholds and transition period). Nil:
	// never.
	Pressure func(v1.NodeConditionType) bool
	// Runtimes lists the runtime's handlers (Docker's runtimes), reported
	// after the default one; nil: none reported.
	Runtimes func() ([]string, error)
	// Images lists the node's images; nil: none reported. MaxImages
	// bounds how many are reported, the largest (-1: all).
	Images    func() ([]kubecontainer.Image, error)
	MaxImages int
	// Extended reports the device plugins' resources (capacity: every
	// device; allocatable: the healthy ones); nil: none.
	Extended func() (capacity, allocatable v1.ResourceList)
	// Clock times the refreshes of the runtime's handlers and images (nil:
	// the real clock).
	Clock clock.PassiveClock

	mu      sync.Mutex
	runtime string // "" until the runtime answered once

	handlers listed[string]
	images   listed[kubecontainer.Image]
}

// Addresses are the node's: its InternalIP (HostIP), if known, and the
// host's name.
func (b *Builder) Addresses() []v1.NodeAddress {
	host, _ := os.Hostname()
	addrs := []v1.NodeAddress{{Type: v1.NodeHostName, Address: host}}
	if ip := b.HostIP; ip != "" {
		addrs = append([]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}, addrs...)
	}
	return addrs
}

// Build computes the Node as it is now.
func (b *Builder) Build() *v1.Node {
	capacity := Capacity(b.MaxPods)
	if size := fsSize(b.RootDir); size > 0 {
		capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(size, resource.BinarySI)
	}
	allocatable := Allocatable(capacity, b.Reserved)
	if b.Extended != nil {
		c, a := b.Extended()
		for name, q := range c {
			capacity[name] = q
			allocatable[name] = a[name]
		}
	}
	n := &v1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Labels: map[string]string{
			"kubernetes.io/hostname": b.Name, "kubernetes.io/os": runtime.GOOS, "kubernetes.io/arch": runtime.GOARCH,
		}},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Addresses:   b.Addresses(),
			NodeInfo: v1.NodeSystemInfo{
				MachineID:               readTrim("/etc/machine-id"),
				SystemUUID:              strings.ToLower(readTrim("/sys/class/dmi/id/product_uuid")),
				BootID:                  readTrim("/proc/sys/kernel/random/boot_id"),
				KernelVersion:           kernelVersion(),
				OSImage:                 osImage(),
				ContainerRuntimeVersion: b.runtimeVersion(),
				KubeletVersion:          b.Version,
				OperatingSystem:         runtime.GOOS,
				Architecture:            runtime.GOARCH,
			},
		},
	}
	b.setRuntime(&n.Status)
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	syncLoop, relist := b.Health()
	var problems []string
	var shutdown error
	if b.Shutdown != nil {
		shutdown = b.Shutdown()
	}
	for _, err := range []error{syncLoop, relist, b.networkError(), shutdown} {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		ready = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady", Message: strings.Join(problems, "; ")}
	}
	n.Status.Conditions = []v1.NodeCondition{
		ready,
		b.pressure(v1.NodeMemoryPressure, "KubeletHasSufficientMemory", "kubelet has sufficient memory available",
			"KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
		b.pressure(v1.NodeDiskPressure, "KubeletHasNoDiskPressure", "kubelet has no disk pressure",
			"KubeletHasDiskPressure", "kubelet has disk pressure"),
		b.pressure(v1.NodePIDPressure, "KubeletHasSufficientPID", "kubelet has sufficient PID available",
			"KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
	}
	return n
}

// Capacity is the node's CPUs, memory and pods.
func Capacity(maxPods int) v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		v1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
}

// Allocatable is capacity less reserved, resource by resource, never below
// zero (the kubelet's GetNodeAllocatableReservation applied).
func Allocatable(capacity, reserved v1.ResourceList) v1.ResourceList {
	out := capacity.DeepCopy()
	for name, q := range out {
		r, ok := reserved[name]
		if !ok {
			continue
		}
		q.Sub(r)
		if q.Sign() < 0 {
			q.Set(0)
		}
		out[name] = q
	}
	return out
}

// PidMax is the kernel's limit of process IDs (the kubelet's pid capacity).
func PidMax() int64 {
	n, _ := strconv.ParseInt(readTrim("/proc/sys/kernel/pid_max"), 10, 64)
	return n
}

// networkError is the network's reason for the node not to be Ready, in
// the kubelet's words: the runtime's NetworkReady condition, false with
// reason NetworkPluginNotReady, and the plugin's message (cri-dockerd's).
func (b *Builder) networkError() error {
	if b.Network == nil {
		return nil
	}
	if err := b.Network(); err != nil {
		return fmt.Errorf("container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: %w", err)
	}
	return nil
}

// pressure is a pressure condition, with the kubelet's reasons and
// messages.
func (b *Builder) pressure(t v1.NodeConditionType, okReason, okMsg, badReason, badMsg string) v1.NodeCondition {
	if b.Pressure != nil && b.Pressure(t) {
		return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: badReason, Message: badMsg}
	}
	return v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: okReason, Message: okMsg}
}

// runtimeVersion is docker://<version>, asked until the runtime answers
// once.
func (b *Builder) runtimeVersion() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.runtime == "" {
		if v, err := b.RuntimeVersion(); err == nil {
			b.runtime = v
		}
	}
	if b.runtime == "" {
		return ""
	}
	return "docker://" + b.runtime
}

func readTrim(path string) string {
	data, _ := os.ReadFile(path)
	return strings.TrimSpace(string(data))
}

func kernelVersion() string {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// osImage is /etc/os-release's PRETTY_NAME.
func osImage() string {
	for _, line := range strings.Split(readTrim("/etc/os-release"), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// memTotal is the node's memory in bytes (/proc/meminfo's MemTotal).
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// fsSize is the size of the file system holding dir: the node's
// ephemeral-storage capacity when dir is the root dir, as the kubelet's.
func fsSize(dir string) int64 {
	var st unix.Statfs_t
	if dir == "" || unix.Statfs(dir, &st) != nil {
		return 0
	}
	return int64(st.Blocks) * st.Bsize
}

// DefaultIP is the node's address as the kubelet picks it without
// --node-ip: an IPv4 address of the interface of the default route, else
// the first IPv4 address that is not loopback.
func DefaultIP() string {
	if data, err := os.ReadFile("/proc/net/route"); err == nil {
		for _, line := range strings.Split(string(data), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 2 || f[1] != "00000000" {
				continue
			}
			if ifi, err := net.InterfaceByName(f[0]); err == nil {
				if ip := firstIPv4(ifi.Addrs()); ip != "" {
					return ip
				}
			}
		}
	}
	return firstIPv4(net.InterfaceAddrs())
}

func firstIPv4(addrs []net.Addr, err error) string {
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	return ""
}
