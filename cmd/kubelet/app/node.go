package app

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/pkg/dockertools"
)

// Pressure thresholds, the kubelet's default hard eviction thresholds
// (memory.available < 100Mi, nodefs.available < 10%) and, for PIDs, 10 %
// of the kernel's limit left.
const (
	memoryPressureBytes  = 100 << 20
	diskPressureFraction = 0.10
	pidPressureFraction  = 0.10
)

// nodeBuilder builds the Node the agent writes to etcd.
type nodeBuilder struct {
	name    string
	rootDir string
	maxPods int
	hostIP  string
	health  func() (syncLoop, relist error)
	docker  interface {
		DaemonInfo() (dockertools.DaemonInfo, error)
	}

	mu            sync.Mutex
	dockerVersion string // "" until Docker answered once
}

func (b *nodeBuilder) build() *v1.Node {
	memTotal, memAvail := meminfo()
	cpu := resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI)
	mem := resource.NewQuantity(memTotal, resource.BinarySI)
	pods := resource.NewQuantity(int64(b.maxPods), resource.DecimalSI)
	capacity := v1.ResourceList{v1.ResourceCPU: *cpu, v1.ResourceMemory: *mem, v1.ResourcePods: *pods}
	host, _ := os.Hostname()
	n := &v1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: b.name, Labels: map[string]string{
			"kubernetes.io/hostname": b.name, "kubernetes.io/os": runtime.GOOS, "kubernetes.io/arch": runtime.GOARCH,
		}},
		Status: v1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Addresses:   []v1.NodeAddress{{Type: v1.NodeHostName, Address: host}},
			NodeInfo: v1.NodeSystemInfo{
				MachineID:               readTrim("/etc/machine-id"),
				BootID:                  readTrim("/proc/sys/kernel/random/boot_id"),
				KernelVersion:           kernelVersion(),
				OSImage:                 osImage(),
				ContainerRuntimeVersion: b.runtimeVersion(),
				KubeletVersion:          Version,
				OperatingSystem:         runtime.GOOS,
				Architecture:            runtime.GOARCH,
			},
		},
	}
	if ip := b.hostIP; ip != "" {
		n.Status.Addresses = append([]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}, n.Status.Addresses...)
	}
	ready := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if syncLoop, relist := b.health(); syncLoop != nil || relist != nil {
		ready = v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: "KubeletNotReady",
			Message: strings.Trim(fmt.Sprintf("%v; %v", errString(syncLoop), errString(relist)), "; ")}
	}
	n.Status.Conditions = []v1.NodeCondition{
		ready,
		pressure(v1.NodeMemoryPressure, memAvail < memoryPressureBytes, "KubeletHasSufficientMemory", "KubeletHasInsufficientMemory",
			fmt.Sprintf("%d bytes available", memAvail)),
		pressure(v1.NodeDiskPressure, diskAvailFraction(b.rootDir) < diskPressureFraction, "KubeletHasNoDiskPressure", "KubeletHasDiskPressure",
			"on the file system of "+b.rootDir),
		pressure(v1.NodePIDPressure, pidAvailFraction() < pidPressureFraction, "KubeletHasSufficientPID", "KubeletHasInsufficientPID", ""),
	}
	return n
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func pressure(t v1.NodeConditionType, under bool, okReason, badReason, detail string) v1.NodeCondition {
	if under {
		return v1.NodeCondition{Type: t, Status: v1.ConditionTrue, Reason: badReason, Message: detail}
	}
	return v1.NodeCondition{Type: t, Status: v1.ConditionFalse, Reason: okReason, Message: detail}
}

// runtimeVersion is docker://<version>, asked until Docker answers once.
func (b *nodeBuilder) runtimeVersion() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dockerVersion == "" {
		if info, err := b.docker.DaemonInfo(); err == nil {
			b.dockerVersion = info.Version
		}
	}
	if b.dockerVersion == "" {
		return ""
	}
	return "docker://" + b.dockerVersion
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

// meminfo is the node's memory and what is available, in bytes.
func meminfo() (total, available int64) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "MemTotal:":
			total = kb << 10
		case "MemAvailable:":
			available = kb << 10
		}
	}
	return total, available
}

func diskAvailFraction(dir string) float64 {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil || st.Blocks == 0 {
		return 1
	}
	return float64(st.Bavail) / float64(st.Blocks)
}

// pidAvailFraction is the share of the kernel's PID limit still free
// (/proc/loadavg's fourth field counts the threads that exist).
func pidAvailFraction() float64 {
	limit, _ := strconv.ParseFloat(readTrim("/proc/sys/kernel/pid_max"), 64)
	fields := strings.Fields(readTrim("/proc/loadavg"))
	if limit == 0 || len(fields) < 4 {
		return 1
	}
	_, total, _ := strings.Cut(fields[3], "/")
	used, _ := strconv.ParseFloat(total, 64)
	return 1 - used/limit
}
