package kuberuntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
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

// The pod cgroup's bounds, as the kubelet's ResourceConfigForPod computes
// them.
func TestPodCgroupResources(t *testing.T) {
	res := func(req, lim string) v1.ResourceRequirements {
		var r v1.ResourceRequirements
		parse := func(s string) v1.ResourceList {
			if s == "" {
				return nil
			}
			l := v1.ResourceList{}
			for _, kv := range strings.Split(s, ",") {
				k, v, _ := strings.Cut(kv, "=")
				l[v1.ResourceName(k)] = resource.MustParse(v)
			}
			return l
		}
		r.Requests, r.Limits = parse(req), parse(lim)
		return r
	}
	always := v1.ContainerRestartPolicyAlways
	cases := []struct {
		name string
		pod  v1.PodSpec
		qos  v1.PodQOSClass
		want cgroups.Resources
	}{
		{"best effort", v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}, v1.PodQOSBestEffort,
			cgroups.Resources{CPUShares: 2, CPUQuota: -1, CPUPeriod: 100000}},
		{"guaranteed: sums", v1.PodSpec{Containers: []v1.Container{
			{Name: "a", Resources: res("", "cpu=500m,memory=64Mi")},
			{Name: "b", Resources: res("", "cpu=250m,memory=32Mi")}}}, v1.PodQOSGuaranteed,
			cgroups.Resources{CPUShares: 768, CPUQuota: 75000, CPUPeriod: 100000, Memory: 96 << 20}},
		{"burstable: memory only where every container has a limit", v1.PodSpec{Containers: []v1.Container{
			{Name: "a", Resources: res("cpu=100m", "memory=64Mi")},
			{Name: "b", Resources: res("cpu=100m", "cpu=1,memory=64Mi")}}}, v1.PodQOSBurstable,
			cgroups.Resources{CPUShares: 204, CPUQuota: -1, CPUPeriod: 100000, Memory: 128 << 20}},
		{"burstable: no bounds when one container has none", v1.PodSpec{Containers: []v1.Container{
			{Name: "a", Resources: res("cpu=100m", "cpu=1,memory=64Mi")}, {Name: "b"}}}, v1.PodQOSBurstable,
			cgroups.Resources{CPUShares: 102, CPUQuota: -1, CPUPeriod: 100000}},
		{"guaranteed: the RuntimeClass's overhead added", v1.PodSpec{
			Containers: []v1.Container{{Name: "a", Resources: res("", "cpu=500m,memory=64Mi")}},
			Overhead:   res("cpu=250m,memory=32Mi", "").Requests}, v1.PodQOSGuaranteed,
			cgroups.Resources{CPUShares: 768, CPUQuota: 75000, CPUPeriod: 100000, Memory: 96 << 20}},
		{"burstable: overhead added to the requests and to the limits that are set", v1.PodSpec{
			Containers: []v1.Container{{Name: "a", Resources: res("cpu=100m", "memory=64Mi")}},
			Overhead:   res("cpu=100m,memory=16Mi", "").Requests}, v1.PodQOSBurstable,
			cgroups.Resources{CPUShares: 204, CPUQuota: -1, CPUPeriod: 100000, Memory: 80 << 20}},
		{"init containers as a maximum, sidecars added", v1.PodSpec{
			InitContainers: []v1.Container{
				{Name: "init", Resources: res("cpu=2", "cpu=2,memory=512Mi")},
				{Name: "side", RestartPolicy: &always, Resources: res("cpu=100m", "cpu=100m,memory=16Mi")}},
			Containers: []v1.Container{{Name: "a", Resources: res("cpu=250m", "cpu=500m,memory=64Mi")}}}, v1.PodQOSBurstable,
			cgroups.Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, Memory: 512 << 20}},
		{"pod-level resources win", v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: v1.ResourceList{
			v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}},
			Containers: []v1.Container{{Name: "a", Resources: res("cpu=100m", "")}, {Name: "b"}}}, v1.PodQOSGuaranteed,
			cgroups.Resources{CPUShares: 2048, CPUQuota: 200000, CPUPeriod: 100000, Memory: 1 << 30}},
		{"pod-level memory limit alone: burstable", v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: v1.ResourceList{
			v1.ResourceMemory: resource.MustParse("256Mi")}},
			Containers: []v1.Container{{Name: "a", Resources: res("cpu=100m", "")}}}, v1.PodQOSBurstable,
			cgroups.Resources{CPUShares: 102, CPUQuota: -1, CPUPeriod: 100000, Memory: 256 << 20}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: c.pod}
			if q := kubecontainer.QOSClass(pod); q != c.qos {
				t.Fatalf("QoS %s, want %s", q, c.qos)
			}
			if got := podCgroupResources(pod); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}
