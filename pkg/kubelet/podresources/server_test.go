package podresources

import (
	"context"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

type fakePods []*v1.Pod

func (f fakePods) ActivePods() []*v1.Pod { return f }

type fakeDevices map[string][]*podresourcesapi.ContainerDevices // by uid/container

func (f fakeDevices) Devices(uid types.UID, c string) []*podresourcesapi.ContainerDevices {
	return f[string(uid)+"/"+c]
}
func (f fakeDevices) Allocatable() []*podresourcesapi.ContainerDevices { return f["node"] }

func TestServer(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init"}, {Name: "sidecar", RestartPolicy: &always}},
		Containers:     []v1.Container{{Name: "app"}},
	}}
	gpu := []*podresourcesapi.ContainerDevices{{ResourceName: "example.com/dev", DeviceIds: []string{"d1"}}}
	s := NewServer(fakePods{pod}, fakeDevices{"u/app": gpu, "node": gpu})
	want := &podresourcesapi.PodResources{Name: "p", Namespace: "ns", Containers: []*podresourcesapi.ContainerResources{
		{Name: "sidecar"}, {Name: "app", Devices: gpu}}}
	for _, tc := range []struct {
		name string
		call func() (*podresourcesapi.PodResources, error)
	}{
		{"List", func() (*podresourcesapi.PodResources, error) {
			r, err := s.List(context.Background(), &podresourcesapi.ListPodResourcesRequest{})
			if err != nil || len(r.PodResources) != 1 {
				return nil, err
			}
			return r.PodResources[0], nil
		}},
		{"Get", func() (*podresourcesapi.PodResources, error) {
			r, err := s.Get(context.Background(), &podresourcesapi.GetPodResourcesRequest{PodName: "p", PodNamespace: "ns"})
			if err != nil {
				return nil, err
			}
			return r.PodResources, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.call()
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %v (%v), want %v", tc.name, got, err, want)
			}
		})
	}
	if _, err := s.Get(context.Background(), &podresourcesapi.GetPodResourcesRequest{PodName: "q", PodNamespace: "ns"}); err == nil || err.Error() != "pod q in namespace ns not found" {
		t.Errorf("Get of an unknown pod: %v", err)
	}
	if r, err := s.GetAllocatableResources(context.Background(), &podresourcesapi.AllocatableResourcesRequest{}); err != nil || !reflect.DeepEqual(r.Devices, gpu) {
		t.Errorf("GetAllocatableResources: %v (%v)", r, err)
	}
}
