package dockertools

import (
	"reflect"
	"testing"

	docker "github.com/fsouza/go-dockerclient"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// A device plugin's answer reaches Docker: device nodes with their cgroup
// permissions, CDI devices as a cdi device request, annotations as such
// and as cri-dockerd's labels (the spec's labels left as they were).
func TestDockerOptionsDevices(t *testing.T) {
	labels := map[string]string{"io.kubernetes.pod.name": "p"}
	o := dockerOptions(&kubecontainer.CreateSpec{Name: "c", Image: "i", Labels: labels,
		Devices:     []kubecontainer.Device{{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", Permissions: "rwm"}},
		CDIDevices:  []string{"example.com/resource=Dev-1"},
		Annotations: map[string]string{"example.com/dev": "Dev-1"}})
	if want := []docker.Device{{PathOnHost: "/dev/fuse", PathInContainer: "/dev/fuse", CgroupPermissions: "rwm"}}; !reflect.DeepEqual(o.HostConfig.Devices, want) {
		t.Errorf("devices %+v, want %+v", o.HostConfig.Devices, want)
	}
	if want := []docker.DeviceRequest{{Driver: "cdi", DeviceIDs: []string{"example.com/resource=Dev-1"}}}; !reflect.DeepEqual(o.HostConfig.DeviceRequests, want) {
		t.Errorf("device requests %+v, want %+v", o.HostConfig.DeviceRequests, want)
	}
	if o.HostConfig.Annotations["example.com/dev"] != "Dev-1" || o.Config.Labels["annotation.example.com/dev"] != "Dev-1" || o.Config.Labels["io.kubernetes.pod.name"] != "p" {
		t.Errorf("annotations %v, labels %v", o.HostConfig.Annotations, o.Config.Labels)
	}
	if len(labels) != 1 {
		t.Errorf("the spec's labels changed: %v", labels)
	}
}
