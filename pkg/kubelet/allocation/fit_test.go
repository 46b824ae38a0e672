package allocation

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// withInit adds an init container (a sidecar if restartAlways) with cpu
// and memory requests to p.
func withInit(p *v1.Pod, name, cpu, mem string, restartAlways bool) *v1.Pod {
	c := v1.Container{Name: name, Image: "img", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}}}
	if restartAlways {
		always := v1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	return p
}

// A pod fits beside the admitted pods when each resource it requests is
// within what they leave of the node's allocatable; what it lacks is told
// in the kubelet's words, cpu first.
func TestFit(t *testing.T) {
	allocatable := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi")}
	overhead := pod("p", "500m", "1Gi")
	overhead.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("600m")}
	limitOnly := pod("p", "", "")
	limitOnly.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1500m")}
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		admitted    []*v1.Pod
		allocatable v1.ResourceList
		want        []string // messages, in order
		reason      string   // of the first
	}{
		{"alone, within", pod("p", "2", "4Gi"), nil, allocatable, nil, ""},
		{"beside others, within", pod("p", "1", "1Gi"), []*v1.Pod{pod("a", "500m", "1Gi"), pod("b", "500m", "2Gi")}, allocatable, nil, ""},
		{"cpu short", pod("p", "1500m", "1Gi"), []*v1.Pod{pod("a", "1", "")}, allocatable,
			[]string{"Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"}, ReasonOutOfCPU},
		{"memory short", pod("p", "100m", "3Gi"), []*v1.Pod{pod("a", "", "2Gi")}, allocatable,
			[]string{"Node didn't have enough resource: memory, requested: 3221225472, used: 2147483648, capacity: 4294967296"}, ReasonOutOfMemory},
		{"both short: cpu first", pod("p", "2", "4Gi"), []*v1.Pod{pod("a", "1", "1Gi")}, allocatable, []string{
			"Node didn't have enough resource: cpu, requested: 2000, used: 1000, capacity: 2000",
			"Node didn't have enough resource: memory, requested: 4294967296, used: 1073741824, capacity: 4294967296"}, ReasonOutOfCPU},
		{"a limit stands for the request it lacks", limitOnly, []*v1.Pod{pod("a", "1", "")}, allocatable,
			[]string{"Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"}, ReasonOutOfCPU},
		{"the overhead counts", overhead, []*v1.Pod{pod("a", "1", "")}, allocatable,
			[]string{"Node didn't have enough resource: cpu, requested: 1100, used: 1000, capacity: 2000"}, ReasonOutOfCPU},
		{"an init container counts alone, if larger", withInit(pod("p", "200m", "1Gi"), "init", "1500m", "1Gi", false), []*v1.Pod{pod("a", "1", "")}, allocatable,
			[]string{"Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000"}, ReasonOutOfCPU},
		{"a sidecar adds to the app containers", withInit(pod("p", "600m", "1Gi"), "side", "500m", "1Gi", true), []*v1.Pod{pod("a", "1", "")}, allocatable,
			[]string{"Node didn't have enough resource: cpu, requested: 1100, used: 1000, capacity: 2000"}, ReasonOutOfCPU},
		{"admitted pods' init containers count as theirs", pod("p", "1", ""), []*v1.Pod{withInit(pod("a", "100m", ""), "init", "1500m", "1Gi", false)}, allocatable,
			[]string{"Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"}, ReasonOutOfCPU},
		{"what the pod does not request is never short", pod("p", "", "1Gi"), []*v1.Pod{pod("a", "3", "")}, allocatable, nil, ""},
		{"a pod that requests nothing fits a full node", pod("p", "", ""), []*v1.Pod{pod("a", "3", "5Gi")}, allocatable, nil, ""},
		{"no allocatable known: anything fits", pod("p", "64", "1Ti"), []*v1.Pod{pod("a", "64", "")}, nil, nil, ""},
		{"only cpu known", pod("p", "1", "1Ti"), nil, v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			short := Fit(tc.pod, tc.admitted, tc.allocatable)
			var got []string
			for _, s := range short {
				got = append(got, s.Message())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Fit = %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("shortfall %d: %q, want %q", i, got[i], tc.want[i])
				}
			}
			if len(short) > 0 && short[0].Reason() != tc.reason {
				t.Errorf("reason %q, want %q", short[0].Reason(), tc.reason)
			}
		})
	}
}

// Sum counts each pod as the kubelet's resource helpers do.
func TestSum(t *testing.T) {
	got := Sum([]*v1.Pod{pod("a", "500m", "1Gi"), withInit(pod("b", "100m", "1Gi"), "init", "1", "512Mi", false), pod("c", "", "")})
	if want := (Used{MilliCPU: 1500, Memory: 2 << 30}); got != want {
		t.Errorf("Sum = %+v, want %+v", got, want)
	}
}

func TestHostPortConflict(t *testing.T) {
	pod := func(ports ...v1.ContainerPort) *v1.Pod {
		return &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Ports: ports}}}}
	}
	port := func(hostIP string, proto v1.Protocol, p int32) v1.ContainerPort {
		return v1.ContainerPort{ContainerPort: 80, HostIP: hostIP, Protocol: proto, HostPort: p}
	}
	held := []*v1.Pod{pod(port("127.0.0.1", "", 8080)), pod(port("", v1.ProtocolUDP, 53)), pod(v1.ContainerPort{ContainerPort: 9000})}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"no host port", pod(v1.ContainerPort{ContainerPort: 8080}), false},
		{"same port, IP and protocol", pod(port("127.0.0.1", v1.ProtocolTCP, 8080)), true},
		{"all addresses against one", pod(port("", "", 8080)), true},
		{"another IP", pod(port("10.0.0.1", "", 8080)), false},
		{"another protocol", pod(port("127.0.0.1", v1.ProtocolUDP, 8080)), false},
		{"one IP against all addresses", pod(port("10.0.0.1", v1.ProtocolUDP, 53)), true},
		{"another port", pod(port("", "", 8081)), false},
	} {
		if got := HostPortConflict(tc.pod, held); got != tc.want {
			t.Errorf("%s: conflict %v, want %v", tc.name, got, tc.want)
		}
	}
}
