package nodestatus

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func condition(n *v1.Node, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		name                      string
		syncLoop, relist, network error
		shutdown                  error
		wantReady                 v1.ConditionStatus
		wantReason, wantM         string
	}{
		{"healthy", nil, nil, nil, nil, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"},
		{"sync loop stuck", errors.New("sync loop stuck"), nil, nil, nil, v1.ConditionFalse, "KubeletNotReady", "sync loop stuck"},
		{"both", errors.New("a"), errors.New("b"), nil, nil, v1.ConditionFalse, "KubeletNotReady", "a; b"},
		{"relist failing", nil, errors.New("docker down"), nil, nil, v1.ConditionFalse, "KubeletNotReady", "docker down"},
		// The kubelet's words for the runtime's NetworkReady condition,
		// the message cri-dockerd's.
		{"network not ready", nil, nil, errors.New("cni config uninitialized: no networks found in /etc/cni/net.d"), nil, v1.ConditionFalse, "KubeletNotReady",
			"container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: cni config uninitialized: no networks found in /etc/cni/net.d"},
		// The kubelet's words while its shutdown manager stops the pods.
		{"shutting down", nil, nil, nil, errors.New("node is shutting down"), v1.ConditionFalse, "KubeletNotReady", "node is shutting down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Builder{Name: "n1", RootDir: t.TempDir(), MaxPods: 7, HostIP: "10.0.0.1", Version: "v9",
				Network:        func() error { return tc.network },
				Shutdown:       func() error { return tc.shutdown },
				Health:         func() (error, error) { return tc.syncLoop, tc.relist },
				RuntimeVersion: func() (string, error) { return "20.10", nil }}
			n := b.Build()
			ready := condition(n, v1.NodeReady)
			if ready == nil || ready.Status != tc.wantReady || ready.Reason != tc.wantReason || ready.Message != tc.wantM {
				t.Errorf("Ready %+v, want %s %s %q", ready, tc.wantReady, tc.wantReason, tc.wantM)
			}
			for _, ct := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
				if condition(n, ct) == nil {
					t.Errorf("no %s condition", ct)
				}
			}
			if n.Name != "n1" || n.Labels["kubernetes.io/hostname"] != "n1" {
				t.Errorf("name %q labels %v", n.Name, n.Labels)
			}
			if got := n.Status.Capacity[v1.ResourcePods]; got.Value() != 7 {
				t.Errorf("pods capacity %v, want 7", got.String())
			}
			if a := n.Status.Addresses; len(a) == 0 || a[0].Type != v1.NodeInternalIP || a[0].Address != "10.0.0.1" {
				t.Errorf("addresses %v, want the InternalIP first", a)
			}
			if info := n.Status.NodeInfo; info.KubeletVersion != "v9" || info.ContainerRuntimeVersion != "docker://20.10" {
				t.Errorf("node info %+v", info)
			}
		})
	}
}

// The runtime's version is asked until it answers once, then kept.
func TestRuntimeVersionAskedUntilItAnswers(t *testing.T) {
	calls, answer := 0, errors.New("down")
	b := &Builder{Name: "n", RootDir: t.TempDir(), Health: func() (error, error) { return nil, nil },
		RuntimeVersion: func() (string, error) {
			calls++
			if answer != nil {
				return "", answer
			}
			return "24.0", nil
		}}
	if v := b.Build().Status.NodeInfo.ContainerRuntimeVersion; v != "" {
		t.Fatalf("runtime down: version %q, want none", v)
	}
	answer = nil
	for range 3 {
		if v := b.Build().Status.NodeInfo.ContainerRuntimeVersion; v != "docker://24.0" {
			t.Fatalf("version %q, want docker://24.0", v)
		}
	}
	if calls != 2 {
		t.Errorf("asked %d times, want twice (once down, once answering)", calls)
	}
}

func TestPressure(t *testing.T) {
	under := map[v1.NodeConditionType]bool{v1.NodeDiskPressure: true}
	for _, tc := range []struct {
		name     string
		pressure func(v1.NodeConditionType) bool
		want     map[v1.NodeConditionType]string // status reason: message
	}{
		{"no eviction manager", nil, map[v1.NodeConditionType]string{
			v1.NodeMemoryPressure: "False KubeletHasSufficientMemory: kubelet has sufficient memory available",
			v1.NodeDiskPressure:   "False KubeletHasNoDiskPressure: kubelet has no disk pressure",
			v1.NodePIDPressure:    "False KubeletHasSufficientPID: kubelet has sufficient PID available"}},
		{"disk pressure", func(c v1.NodeConditionType) bool { return under[c] }, map[v1.NodeConditionType]string{
			v1.NodeMemoryPressure: "False KubeletHasSufficientMemory: kubelet has sufficient memory available",
			v1.NodeDiskPressure:   "True KubeletHasDiskPressure: kubelet has disk pressure",
			v1.NodePIDPressure:    "False KubeletHasSufficientPID: kubelet has sufficient PID available"}},
		{"all", func(v1.NodeConditionType) bool { return true }, map[v1.NodeConditionType]string{
			v1.NodeMemoryPressure: "True KubeletHasInsufficientMemory: kubelet has insufficient memory available",
			v1.NodeDiskPressure:   "True KubeletHasDiskPressure: kubelet has disk pressure",
			v1.NodePIDPressure:    "True KubeletHasInsufficientPID: kubelet has insufficient PID available"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &Builder{Name: "n", Health: func() (error, error) { return nil, nil },
				RuntimeVersion: func() (string, error) { return "", nil }, Pressure: tc.pressure}
			n := b.Build()
			for ct, want := range tc.want {
				c := condition(n, ct)
				if got := string(c.Status) + " " + c.Reason + ": " + c.Message; got != want {
					t.Errorf("%s: %q, want %q", ct, got, want)
				}
			}
		})
	}
}

func TestAllocatable(t *testing.T) {
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourcePods: resource.MustParse("110")}
	for _, tc := range []struct {
		name                string
		reserved            v1.ResourceList
		wantCPU, wantMemory string
	}{
		{"nothing reserved", nil, "2", "8Gi"},
		{"cpu and memory", v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1124Mi")}, "1500m", "7068Mi"},
		{"more than the node: zero", v1.ResourceList{v1.ResourceMemory: resource.MustParse("9Gi")}, "2", "0"},
		{"a resource the node lacks", v1.ResourceList{"pid": resource.MustParse("1000")}, "2", "8Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Allocatable(capacity, tc.reserved)
			if c, m := got[v1.ResourceCPU], got[v1.ResourceMemory]; c.Cmp(resource.MustParse(tc.wantCPU)) != 0 || m.Cmp(resource.MustParse(tc.wantMemory)) != 0 {
				t.Errorf("cpu %s memory %s, want %s %s", c.String(), m.String(), tc.wantCPU, tc.wantMemory)
			}
			if _, ok := got["pid"]; ok || len(got) != 3 {
				t.Errorf("allocatable lists %v, want capacity's resources", got)
			}
			if p := got[v1.ResourcePods]; p.Value() != 110 {
				t.Errorf("pods %s", p.String())
			}
			if m := capacity[v1.ResourceMemory]; m.Cmp(resource.MustParse("8Gi")) != 0 {
				t.Errorf("capacity changed: %s", m.String())
			}
		})
	}
	b := &Builder{Name: "n", RootDir: t.TempDir(), MaxPods: 7, Health: func() (error, error) { return nil, nil },
		RuntimeVersion: func() (string, error) { return "", nil }, Reserved: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}
	n := b.Build()
	c, a := n.Status.Capacity[v1.ResourceCPU], n.Status.Allocatable[v1.ResourceCPU]
	if c.MilliValue()-a.MilliValue() != 100 {
		t.Errorf("Build: cpu capacity %s, allocatable %s; want 100m less", c.String(), a.String())
	}
}

// The device plugins' resources join the capacity and allocatable: every
// device counted, only the healthy ones allocatable.
func TestBuildExtendedResources(t *testing.T) {
	b := &Builder{Name: "n1", RootDir: t.TempDir(), MaxPods: 7, Health: func() (error, error) { return nil, nil },
		RuntimeVersion: func() (string, error) { return "20.10", nil },
		Extended: func() (v1.ResourceList, v1.ResourceList) {
			return v1.ResourceList{"example.com/dev": resource.MustParse("3")}, v1.ResourceList{"example.com/dev": resource.MustParse("2")}
		}}
	n := b.Build()
	c, a := n.Status.Capacity["example.com/dev"], n.Status.Allocatable["example.com/dev"]
	if c.String() != "3" || a.String() != "2" {
		t.Errorf("example.com/dev capacity %s allocatable %s, want 3 and 2", c.String(), a.String())
	}
	if cpu := n.Status.Allocatable[v1.ResourceCPU]; cpu.IsZero() {
		t.Errorf("cpu allocatable lost: %v", n.Status.Allocatable)
	}
}
