// Package podresources serves the kubelet's pod-resources API (v1: List,
// Get, GetAllocatableResources) on <root-dir>/pod-resources/kubelet.sock,
// where node agents (device monitoring, NUMA-aware schedulers' exporters)
// find which devices each container holds. The agent assigns no exclusive
// CPUs or memory (it has no CPU or memory manager), so those lists are
// empty, as a kubelet's with the policies none; nor dynamic resources.
package podresources

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// SocketName is the API's socket in <root-dir>/pod-resources.
const SocketName = "kubelet.sock"

// Pods are the pods the node runs: those desired and not finished.
type Pods interface {
	ActivePods() []*v1.Pod
}

// Devices are the devices of the device plugins (devices.Manager).
type Devices interface {
	Devices(uid types.UID, container string) []*podresourcesapi.ContainerDevices
	Allocatable() []*podresourcesapi.ContainerDevices
}

// Server is the PodResourcesLister service.
type Server struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	pods    Pods
	devices Devices
}

var _ podresourcesapi.PodResourcesListerServer = (*Server)(nil)

// NewServer lists pods and their devices.
func NewServer(pods Pods, devices Devices) *Server {
	return &Server{pods: pods, devices: devices}
}

// List lists every active pod with its containers' devices.
func (s *Server) List(_ context.Context, _ *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	pods := s.pods.ActivePods()
	out := &podresourcesapi.ListPodResourcesResponse{PodResources: make([]*podresourcesapi.PodResources, 0, len(pods))}
	for _, pod := range pods {
		out.PodResources = append(out.PodResources, s.podResources(pod))
	}
	return out, nil
}

// Get is one pod's List entry, by namespace and name.
func (s *Server) Get(_ context.Context, r *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	for _, pod := range s.pods.ActivePods() {
		if pod.Namespace == r.PodNamespace && pod.Name == r.PodName {
			return &podresourcesapi.GetPodResourcesResponse{PodResources: s.podResources(pod)}, nil
		}
	}
	return nil, fmt.Errorf("pod %s in namespace %s not found", r.PodName, r.PodNamespace)
}

// GetAllocatableResources lists the node's healthy devices.
func (s *Server) GetAllocatableResources(_ context.Context, _ *podresourcesapi.AllocatableResourcesRequest) (*podresourcesapi.AllocatableResourcesResponse, error) {
	return &podresourcesapi.AllocatableResourcesResponse{Devices: s.devices.Allocatable()}, nil
}

// podResources are a pod's containers, sidecars first, as the kubelet lists
// them (init containers that run to completion hold nothing for long).
func (s *Server) podResources(pod *v1.Pod) *podresourcesapi.PodResources {
	pr := &podresourcesapi.PodResources{Name: pod.Name, Namespace: pod.Namespace}
	add := func(c *v1.Container) {
		pr.Containers = append(pr.Containers, &podresourcesapi.ContainerResources{Name: c.Name, Devices: s.devices.Devices(pod.UID, c.Name)})
	}
	for i := range pod.Spec.InitContainers {
		if api.IsSidecar(&pod.Spec.InitContainers[i]) {
			add(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return pr
}

// Listen makes the API's socket in dir, replacing one left by the agent
// before.
func Listen(dir string) (net.Listener, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("pod-resources directory: %w", err)
	}
	path := filepath.Join(dir, SocketName)
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("pod-resources socket: %w", err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("pod-resources socket: %w", err)
	}
	return l, nil
}

// Serve serves s on l until ctx ends.
func Serve(ctx context.Context, l net.Listener, s *Server) {
	srv := grpc.NewServer()
	podresourcesapi.RegisterPodResourcesListerServer(srv, s)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(l); err != nil {
			klog.Errorf("Pod resources API: %v", err)
		}
	})
	klog.Infof("Serving the pod resources API on %s", l.Addr())
	<-ctx.Done()
	srv.Stop()
	wg.Wait()
}
