package devices

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/await"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// TestMain checks that the manager stops every goroutine it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestChoose(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       request
		want    []string
		wantErr string
	}{
		{"free in ID order", request{resource: "x/y", need: 2, healthy: newSet("c", "a", "b"), inUse: set{}}, []string{"a", "b"}, ""},
		{"in use skipped", request{resource: "x/y", need: 1, healthy: newSet("a", "b"), inUse: newSet("a")}, []string{"b"}, ""},
		{"reusable first", request{resource: "x/y", need: 1, healthy: newSet("a", "b"), inUse: newSet("b"), reusable: newSet("b")}, []string{"b"}, ""},
		{"unhealthy reusable skipped", request{resource: "x/y", need: 1, healthy: newSet("a"), inUse: newSet("b"), reusable: newSet("b")}, []string{"a"}, ""},
		{"preferred", request{resource: "x/y", need: 1, healthy: newSet("a", "b", "c"), inUse: set{}, preferred: []string{"c"}}, []string{"c"}, ""},
		{"preferred in use ignored", request{resource: "x/y", need: 1, healthy: newSet("a", "b"), inUse: newSet("b"), preferred: []string{"b"}}, []string{"a"}, ""},
		{"preferred too few: filled", request{resource: "x/y", need: 2, healthy: newSet("a", "b", "c"), inUse: set{}, preferred: []string{"c"}}, []string{"a", "c"}, ""},
		{"too few", request{resource: "x/y", need: 3, healthy: newSet("a", "b"), inUse: newSet("a")}, nil,
			"requested number of devices unavailable for x/y. Requested: 3, Available: 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := choose(tc.r)
			if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("chose %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	assigned := map[types.UID]podAssignments{}
	assign(assigned, "u1", "app", "x/y", &assignment{IDs: []string{"a", "b"}, NUMA: map[string][]int64{"a": {0}, "b": nil},
		Response: &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"K": "V"}}})
	data, err := encodeCheckpoint(assigned, map[string][]string{"x/y": {"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	got, registered, err := decodeCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	a := got["u1"]["app"]["x/y"]
	if a == nil || !reflect.DeepEqual(a.IDs, []string{"a", "b"}) || !reflect.DeepEqual(a.NUMA["a"], []int64{0}) || a.Response.Envs["K"] != "V" {
		t.Errorf("decoded %+v", a)
	}
	if !reflect.DeepEqual(registered, map[string][]string{"x/y": {"a", "b"}}) {
		t.Errorf("registered %v", registered)
	}
	corrupt := strings.Replace(string(data), `"a"`, `"z"`, 1)
	if _, _, err := decodeCheckpoint([]byte(corrupt)); !errors.Is(err, errCheckpointCorrupt) {
		t.Errorf("corrupt checkpoint: %v, want %v", err, errCheckpointCorrupt)
	}
}

// fakePlugin is a device plugin served in process on a unix socket, with
// the calls it received.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	opts   *pluginapi.DevicePluginOptions
	socket string
	srv    *grpc.Server

	mu        sync.Mutex
	devs      []*pluginapi.Device
	updates   chan struct{}
	allocated [][]string
	preStarts [][]string
	preferred []string // answered to GetPreferredAllocation
}

func newFakePlugin(t *testing.T, dir, name string, opts *pluginapi.DevicePluginOptions, devs ...*pluginapi.Device) *fakePlugin {
	t.Helper()
	p := &fakePlugin{opts: opts, socket: filepath.Join(dir, name), devs: devs, updates: make(chan struct{}, 10)}
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	done := make(chan struct{})
	go func() { defer close(done); _ = p.srv.Serve(l) }()
	t.Cleanup(func() { p.srv.Stop(); <-done })
	return p
}

func (p *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.opts, nil
}

func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		p.mu.Lock()
		devs := p.devs
		p.mu.Unlock()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-p.updates:
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *fakePlugin) setDevices(devs ...*pluginapi.Device) {
	p.mu.Lock()
	p.devs = devs
	p.mu.Unlock()
	p.updates <- struct{}{}
}

func (p *fakePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		p.allocated = append(p.allocated, c.DevicesIds)
		resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"DEVS": strings.Join(c.DevicesIds, ",")},
			Annotations: map[string]string{"example.com/devs": strings.Join(c.DevicesIds, ",")}}
		for _, id := range c.DevicesIds {
			resp.Mounts = append(resp.Mounts, &pluginapi.Mount{HostPath: "/tmp/" + id, ContainerPath: "/dev-" + id, ReadOnly: true})
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{HostPath: "/dev/null", ContainerPath: "/dev/" + id, Permissions: "rw"})
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func (p *fakePlugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: p.preferred}}}, nil
}

func (p *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preStarts = append(p.preStarts, r.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

func healthy(ids ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range ids {
		out = append(out, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	return out
}

// runManager runs a manager on dir until the test ends.
func runManager(t *testing.T, dir string, clk *clocktesting.FakePassiveClock) *Manager {
	t.Helper()
	m := New(dir, clk)
	l, err := m.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

func register(t *testing.T, m *Manager, resource, endpoint string) error {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+m.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: endpoint, ResourceName: resource})
	return err
}

func quantities(m *Manager, name string) (string, string) {
	c, a := m.Capacity()
	cq, aq := c[v1.ResourceName(name)], a[v1.ResourceName(name)]
	return cq.String(), aq.String()
}

func devPod(uid string, init, app int64) *v1.Pod {
	lim := func(n int64) v1.ResourceRequirements {
		return v1.ResourceRequirements{Limits: v1.ResourceList{"example.com/dev": *resource.NewQuantity(n, resource.DecimalSI)}}
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p" + uid, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: lim(app)}}}}
	if init > 0 {
		pod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: lim(init)}}
	}
	return pod
}

func TestRegisterValidates(t *testing.T) {
	dir := t.TempDir()
	m := runManager(t, dir, clocktesting.NewFakePassiveClock(time.Now()))
	for _, tc := range []struct{ name, resource, endpoint, want string }{
		{"native resource", "cpu", "p.sock", "not an extended resource name"},
		{"kubernetes.io resource", "kubernetes.io/dev", "p.sock", "not an extended resource name"},
		{"endpoint outside the directory", "example.com/dev", "../p.sock", "invalid endpoint"},
		{"nothing listening", "example.com/dev", "absent.sock", "get options of device plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := register(t, m, tc.resource, tc.endpoint); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("registration error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A plugin registers; its devices are the node's; pods are allocated them
// (GetPreferredAllocation asked, PreStartContainer called, the init
// container's devices reused), refused beyond them; the checkpoint brings
// the assignments back in a new manager; the plugin's departure keeps the
// capacity with nothing allocatable for the grace period, then zero.
func TestPluginLifecycle(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakePassiveClock(time.Now())
	m := runManager(t, dir, clk)
	p := newFakePlugin(t, dir, "p.sock", &pluginapi.DevicePluginOptions{PreStartRequired: true, GetPreferredAllocationAvailable: true},
		healthy("d1", "d2", "d3")...)
	p.preferred = []string{"d3"}
	if err := register(t, m, "example.com/dev", "p.sock"); err != nil {
		t.Fatal(err)
	}
	await.True(t, "three devices", func() bool { c, a := quantities(m, "example.com/dev"); return c == "3" && a == "3" })
	p.setDevices(append(healthy("d1", "d2"), &pluginapi.Device{ID: "d3", Health: pluginapi.Unhealthy})...)
	await.True(t, "d3 unhealthy", func() bool { c, a := quantities(m, "example.com/dev"); return c == "3" && a == "2" })
	p.setDevices(healthy("d1", "d2", "d3")...)
	await.True(t, "d3 healthy", func() bool { _, a := quantities(m, "example.com/dev"); return a == "3" })

	ctx := context.Background()
	first := devPod("u1", 1, 1)
	if err := m.Allocate(ctx, first); err != nil {
		t.Fatal(err)
	}
	if got := m.assigned["u1"]["init"]["example.com/dev"].IDs; !reflect.DeepEqual(got, []string{"d3"}) {
		t.Errorf("init container holds %v, want the preferred d3", got)
	}
	if got := m.assigned["u1"]["app"]["example.com/dev"].IDs; !reflect.DeepEqual(got, []string{"d3"}) {
		t.Errorf("app container holds %v, want the init container's d3 again", got)
	}
	if err := m.Allocate(ctx, first); err != nil || len(p.allocated) != 2 {
		t.Errorf("second admission: %v, %d Allocate calls, want none more than 2", err, len(p.allocated))
	}
	opts, err := m.ContainerOptions(ctx, first, &first.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	want := &ContainerOptions{Env: []string{"DEVS=d3"}, Mounts: []kubecontainer.Mount{{Source: "/tmp/d3", Target: "/dev-d3", ReadOnly: true}},
		Devices: []kubecontainer.Device{{PathOnHost: "/dev/null", PathInContainer: "/dev/d3", Permissions: "rw"}}, Annotations: map[string]string{"example.com/devs": "d3"}}
	if !reflect.DeepEqual(opts, want) {
		t.Errorf("container options %+v, want %+v", opts, want)
	}
	if !reflect.DeepEqual(p.preStarts, [][]string{{"d3"}}) {
		t.Errorf("PreStartContainer calls %v", p.preStarts)
	}
	if err := m.Allocate(ctx, devPod("u2", 0, 3)); err == nil || err.Error() != "requested number of devices unavailable for example.com/dev. Requested: 3, Available: 2" {
		t.Errorf("three more: %v", err)
	}
	m.Release("u2") // the refused pod terminates
	if err := m.Allocate(ctx, devPod("u3", 0, 2)); err != nil {
		t.Fatalf("the two left: %v", err)
	}

	// A new manager (the agent restarted) reads the assignments back;
	// the resource is known with nothing to allocate until the plugin
	// registers again, but pods holding devices are admitted.
	again := New(dir, clk)
	if got := again.assigned["u3"]["app"]["example.com/dev"].IDs; !reflect.DeepEqual(got, []string{"d1", "d2"}) {
		t.Errorf("after a restart u3 holds %v, want d1 d2", got)
	}
	if c, a := quantities(again, "example.com/dev"); c != "0" || a != "0" {
		t.Errorf("after a restart capacity %s allocatable %s, want 0 until the plugin registers", c, a)
	}
	if err := again.Allocate(ctx, first); err != nil {
		t.Errorf("a pod holding its devices refused after a restart: %v", err)
	}
	if err := again.Allocate(ctx, devPod("u4", 0, 1)); err == nil || !strings.Contains(err.Error(), "cannot allocate unregistered device example.com/dev") {
		t.Errorf("a new pod before the plugin registers again: %v", err)
	}
	again.Prune(func(uid types.UID) bool { return uid == "u1" })
	if _, ok := again.assigned["u3"]; ok {
		t.Errorf("u3 not pruned")
	}

	// The plugin goes: its capacity stays, nothing is allocatable, until
	// the grace period ends.
	p.srv.Stop()
	await.True(t, "plugin gone", func() bool { c, a := quantities(m, "example.com/dev"); return c == "3" && a == "0" })
	clk.SetTime(clk.Now().Add(StopGracePeriod + time.Second))
	if c, a := quantities(m, "example.com/dev"); c != "0" || a != "0" {
		t.Errorf("after the grace period capacity %s allocatable %s, want 0", c, a)
	}
}

// A plugin that restarts registers again on a new socket: the new one
// serves the resource, the old stream's end does not take its devices.
func TestPluginReRegisters(t *testing.T) {
	dir := t.TempDir()
	m := runManager(t, dir, clocktesting.NewFakePassiveClock(time.Now()))
	old := newFakePlugin(t, dir, "old.sock", &pluginapi.DevicePluginOptions{}, healthy("d1")...)
	if err := register(t, m, "example.com/dev", "old.sock"); err != nil {
		t.Fatal(err)
	}
	await.True(t, "one device", func() bool { _, a := quantities(m, "example.com/dev"); return a == "1" })
	newFakePlugin(t, dir, "new.sock", &pluginapi.DevicePluginOptions{}, healthy("d1", "d2")...)
	if err := register(t, m, "example.com/dev", "new.sock"); err != nil {
		t.Fatal(err)
	}
	await.True(t, "two devices", func() bool { _, a := quantities(m, "example.com/dev"); return a == "2" })
	old.srv.Stop()
	if _, a := quantities(m, "example.com/dev"); a != "2" {
		t.Errorf("allocatable %s after the old plugin stopped, want 2", a)
	}
	if _, err := os.Stat(filepath.Join(dir, CheckpointName)); err != nil {
		t.Errorf("checkpoint: %v", err)
	}
}

// A pod asking for no device, or holding its devices, is admitted without
// waiting behind another pod's allocation (whose plugin calls may take
// their timeouts); one whose request changed still reaches the refusal.
func TestAllocateWaitsOnlyToAllocate(t *testing.T) {
	m := New(t.TempDir(), clocktesting.NewFakePassiveClock(time.Now()))
	m.resources["example.com/dev"] = &resourceState{devices: map[string]*pluginapi.Device{}}
	assign(m.assigned, "u1", "app", "example.com/dev", &assignment{IDs: []string{"d1"}})
	m.allocMu.Lock() // another pod's admission, in its plugin calls
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
	}{{"no devices", devPod("u0", 0, 0)}, {"holding its devices", devPod("u1", 0, 1)}} {
		done := make(chan error, 1)
		go func() { done <- m.Allocate(context.Background(), tc.pod) }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
		case <-time.After(5 * time.Second):
			m.allocMu.Unlock()
			<-done
			t.Fatalf("%s: waited behind another admission", tc.name)
		}
	}
	m.allocMu.Unlock()
	if err := m.Allocate(context.Background(), devPod("u1", 0, 2)); err == nil || !strings.Contains(err.Error(), "changed request") {
		t.Errorf("a changed request: %v, want the refusal", err)
	}
}

// A resource removed once its grace period ended leaves the checkpoint: a
// restarted agent does not report it again for another grace period.
func TestRemovedResourceLeavesTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	data, err := encodeCheckpoint(map[types.UID]podAssignments{}, map[string][]string{"example.com/dev": {"d1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeCheckpoint(filepath.Join(dir, CheckpointName), data); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	m := New(dir, clk)
	if c, _ := m.Capacity(); len(c) != 1 {
		t.Fatalf("capacity %v, want the checkpoint's resource at zero", c)
	}
	clk.SetTime(clk.Now().Add(StopGracePeriod + time.Second))
	if c, a := quantities(m, "example.com/dev"); c != "0" || a != "0" {
		t.Errorf("after the grace period capacity %s allocatable %s, want 0", c, a)
	}
	if c, _ := New(dir, clk).Capacity(); len(c) != 0 {
		t.Errorf("after a restart capacity %v, want the removed resource gone", c)
	}
}
