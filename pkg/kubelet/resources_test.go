package kubelet

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func TestCPUSharesAndQuota(t *testing.T) {
	cases := []struct {
		milli         int64
		shares, quota int64
	}{
		{0, 2, 0},
		{1, 2, 1000}, // minimum shares; quota floor of 1 ms
		{5, 5, 1000},
		{9, 9, 1000},
		{10, 10, 1000},
		{100, 102, 10000},
		{250, 256, 25000},
		{1000, 1024, 100000},
		{1500, 1536, 150000},
		{4000, 4096, 400000},
		{1000000, 262144, 100000000}, // shares clamped to the kernel's maximum
	}
	for _, c := range cases {
		if got := cpuShares(c.milli); got != c.shares {
			t.Errorf("cpuShares(%dm) = %d, want %d", c.milli, got, c.shares)
		}
		if got := cpuQuota(c.milli); got != c.quota {
			t.Errorf("cpuQuota(%dm) = %d, want %d", c.milli, got, c.quota)
		}
	}
}

func TestContainerResources(t *testing.T) {
	q := resource.MustParse
	cases := []struct {
		name string
		res  v1.ResourceRequirements
		want kubecontainer.Resources
	}{
		{"none", v1.ResourceRequirements{}, kubecontainer.Resources{CPUShares: 2}},
		{"request only", v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("500m")}}, kubecontainer.Resources{CPUShares: 512}},
		{"limit only: request defaults to it", v1.ResourceRequirements{Limits: v1.ResourceList{"cpu": q("2")}},
			kubecontainer.Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: quotaPeriod}},
		{"both", v1.ResourceRequirements{Requests: v1.ResourceList{"cpu": q("100m")}, Limits: v1.ResourceList{"cpu": q("300m"), "memory": q("64Mi")}},
			kubecontainer.Resources{CPUShares: 102, CPUQuota: 30000, CPUPeriod: quotaPeriod, Memory: 64 << 20}},
		{"memory only", v1.ResourceRequirements{Limits: v1.ResourceList{"memory": q("1Gi")}}, kubecontainer.Resources{CPUShares: 2, Memory: 1 << 30}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := containerResources(&v1.Container{Resources: c.res}); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
