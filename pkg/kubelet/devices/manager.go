// Package devices is the agent's device manager: it serves the
// device-plugin registration API (k8s.io/kubelet's deviceplugin v1beta1) on
// <root-dir>/device-plugins/kubelet.sock, follows each registered plugin's
// devices (ListAndWatch), reports them as the node's extended resources,
// assigns devices to containers at admission (GetPreferredAllocation,
// Allocate), hands the plugin's answer (devices, mounts, env, annotations)
// to the container's creation (PreStartContainer first, when asked), and
// checkpoints the assignments so that a restart neither reassigns a device
// nor restarts a container.
//
// Assumptions, as the kubelet's: a pod's device requests never change once
// admitted (requests equal limits, validated before); a container that ran
// keeps its devices, whatever their health, until its pod terminates.
package devices

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// SocketName is the registration socket in the device-plugin directory.
const SocketName = "kubelet.sock"

// StopGracePeriod is how long a resource whose plugin went keeps its
// capacity (its devices unhealthy, none allocatable) before it is reported
// as zero: a plugin restarting (an upgrade) does not make the node's
// capacity flap. The kubelet's 5 minutes.
const StopGracePeriod = 5 * time.Minute

// resourceState is one resource's devices as its plugin last listed them.
type resourceState struct {
	devices map[string]*pluginapi.Device
	// plugin serves the resource; nil once it went (or, after a restart,
	// until it registers again).
	plugin *plugin
	// stoppedAt is when its plugin went (zero while one is connected).
	stoppedAt time.Time
	// removed: the grace period passed; reported as zero.
	removed bool
}

func (r *resourceState) healthy() set {
	out := set{}
	if r.plugin == nil {
		return out // the kubelet marks a gone plugin's devices unhealthy
	}
	for id, d := range r.devices {
		if d.Health == pluginapi.Healthy {
			out[id] = true
		}
	}
	return out
}

// Manager assigns the devices of the registered plugins to containers. Its
// methods are safe for concurrent use; Run serves the registration socket.
type Manager struct {
	dir   string
	clock clock.PassiveClock

	// allocMu serializes admissions (the plugin calls included): the
	// free devices one sees are still free when it commits.
	allocMu sync.Mutex
	// ckptMu orders checkpoint writes: a snapshot and its write are one
	// step, so an older snapshot never lands after a newer one.
	ckptMu sync.Mutex
	// mu guards resources and assigned.
	mu        sync.Mutex
	resources map[string]*resourceState
	assigned  map[types.UID]podAssignments

	regs    chan registration
	stopped chan struct{}
}

// New is the manager of the device-plugin directory dir
// (<root-dir>/device-plugins). It reads the checkpoint there: the
// assignments it holds stay, and each resource it names is reported with
// zero devices until its plugin registers again (or the grace period
// ends). A checkpoint that cannot be read is logged and ignored.
func New(dir string, clk clock.PassiveClock) *Manager {
	if clk == nil {
		clk = clock.RealClock{}
	}
	m := &Manager{dir: dir, clock: clk, resources: map[string]*resourceState{}, assigned: map[types.UID]podAssignments{},
		regs: make(chan registration), stopped: make(chan struct{})}
	assigned, registered, err := readCheckpoint(m.checkpointPath())
	if err != nil {
		klog.Errorf("Device manager: ignoring checkpoint %s: %v; device assignments of running pods are lost", m.checkpointPath(), err)
		return m
	}
	m.assigned = assigned
	now := clk.Now()
	for res := range registered {
		m.resources[res] = &resourceState{devices: map[string]*pluginapi.Device{}, stoppedAt: now}
	}
	return m
}

func (m *Manager) checkpointPath() string { return filepath.Join(m.dir, CheckpointName) }

// SocketPath is the registration socket.
func (m *Manager) SocketPath() string { return filepath.Join(m.dir, SocketName) }

// Capacity is the node's extended resources of the plugins: capacity counts
// every device, allocatable the healthy ones. A resource whose plugin went
// keeps its capacity with nothing allocatable for StopGracePeriod, then
// reports zero, and leaves the checkpoint (a restart does not bring it
// back for another grace period, as the kubelet's).
func (m *Manager) Capacity() (capacity, allocatable v1.ResourceList) {
	m.mu.Lock()
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	now := m.clock.Now()
	removed := false
	for name, r := range m.resources {
		if r.plugin == nil && !r.stoppedAt.IsZero() && now.Sub(r.stoppedAt) > StopGracePeriod && !r.removed {
			r.removed, r.devices = true, map[string]*pluginapi.Device{}
			removed = true
			klog.Infof("Device manager: resource %s removed: its plugin went %v ago", name, now.Sub(r.stoppedAt).Round(time.Second))
		}
		capacity[v1.ResourceName(name)] = *resource.NewQuantity(int64(len(r.devices)), resource.DecimalSI)
		allocatable[v1.ResourceName(name)] = *resource.NewQuantity(int64(len(r.healthy())), resource.DecimalSI)
	}
	m.mu.Unlock()
	if removed {
		m.checkpoint()
	}
	return capacity, allocatable
}

// isDeviceResource reports whether name is a plugin's resource: one
// registered (now or before a restart), or one a container holds. Callers
// hold mu.
func (m *Manager) isDeviceResource(name string) bool {
	if _, ok := m.resources[name]; ok {
		return true
	}
	for _, pod := range m.assigned {
		for _, byRes := range pod {
			if _, ok := byRes[name]; ok {
				return true
			}
		}
	}
	return false
}

// inUse are the devices of res assigned to any container. Callers hold mu.
func (m *Manager) inUse(res string) set {
	out := set{}
	for _, pod := range m.assigned {
		for _, byRes := range pod {
			if a := byRes[res]; a != nil {
				for _, id := range a.IDs {
					out[id] = true
				}
			}
		}
	}
	return out
}

// deviceRequests are a container's requests of plugin resources, sorted by
// name. Callers hold mu.
func (m *Manager) deviceRequests(c *v1.Container) []string {
	var out []string
	for name, q := range c.Resources.Limits {
		if q.Value() > 0 && m.isDeviceResource(string(name)) {
			out = append(out, string(name))
		}
	}
	sort.Strings(out)
	return out
}

// Allocate assigns devices to every container of pod that asks for a
// plugin's resource and has none yet, init containers first (the devices
// of an init container that finished are given again to the containers
// after it, as the kubelet does). Containers that hold devices (from
// before a restart, say) keep them without asking their plugin. An error
// is the admission's refusal; what was assigned before it stays until the
// pod is released.
func (m *Manager) Allocate(ctx context.Context, pod *v1.Pod) error {
	// Most pods ask for no device, or hold theirs: they do not wait
	// behind another pod's plugin calls.
	if !m.toAllocate(pod) {
		return nil
	}
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	reusable := map[string]set{}
	changed := false
	defer func() {
		if changed {
			m.checkpoint()
		}
	}()
	for _, c := range pod.Spec.InitContainers {
		acted, err := m.allocateContainer(ctx, pod, &c, reusable)
		changed = changed || acted
		if err != nil {
			return err
		}
		m.mu.Lock()
		for res, a := range m.assigned[pod.UID][c.Name] {
			if reusable[res] == nil {
				reusable[res] = set{}
			}
			for _, id := range a.IDs {
				// A sidecar keeps its devices; a finished init
				// container's serve the containers after it.
				reusable[res][id] = !api.IsSidecar(&c)
			}
		}
		m.mu.Unlock()
	}
	for _, c := range pod.Spec.Containers {
		acted, err := m.allocateContainer(ctx, pod, &c, reusable)
		changed = changed || acted
		if err != nil {
			return err
		}
	}
	return nil
}

// toAllocate reports whether a container of pod asks for a plugin's
// resource and holds none of its devices, or holds another number of them
// (which allocateResource refuses).
func (m *Manager) toAllocate(pod *v1.Pod) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			c := &cs[i]
			for _, res := range m.deviceRequests(c) {
				held := m.assigned[pod.UID][c.Name][res]
				if q := c.Resources.Limits[v1.ResourceName(res)]; held == nil || int64(len(held.IDs)) != q.Value() {
					return true
				}
			}
		}
	}
	return false
}

// allocateContainer assigns c its devices, one resource after another,
// and takes them out of reusable. It reports whether it assigned any.
func (m *Manager) allocateContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, reusable map[string]set) (bool, error) {
	acted := false
	m.mu.Lock()
	names := m.deviceRequests(c)
	m.mu.Unlock()
	for _, res := range names {
		q := c.Resources.Limits[v1.ResourceName(res)]
		a, err := m.allocateResource(ctx, pod, c.Name, res, int(q.Value()), reusable[res])
		if err != nil {
			return acted, err
		}
		if a == nil {
			continue
		}
		acted = true
		for _, id := range a.IDs {
			delete(reusable[res], id)
		}
	}
	return acted, nil
}

// allocateResource assigns need devices of res to the container, or nil
// if it holds them already.
func (m *Manager) allocateResource(ctx context.Context, pod *v1.Pod, container, res string, need int, reusable set) (*assignment, error) {
	m.mu.Lock()
	if held := m.assigned[pod.UID][container][res]; held != nil {
		m.mu.Unlock()
		if len(held.IDs) != need {
			return nil, fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", pod.UID, container, res, len(held.IDs), need)
		}
		return nil, nil
	}
	r := m.resources[res]
	if r == nil || r.plugin == nil {
		m.mu.Unlock()
		return nil, fmt.Errorf("cannot allocate unregistered device %s", res)
	}
	req := request{resource: res, need: need, healthy: r.healthy(), inUse: m.inUse(res), reusable: set{}}
	for id, ok := range reusable {
		if ok {
			req.reusable[id] = true
		}
	}
	p, devs := r.plugin, r.devices
	m.mu.Unlock()
	if len(req.healthy) == 0 {
		return nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", res)
	}
	// The plugin is asked for a preference when it has one and there is a
	// choice to make.
	if left, free := need-len(req.reusable), req.free(); left > 0 && len(free) > left {
		available := free
		for id := range req.reusable {
			available[id] = true
		}
		pref, err := p.preferred(ctx, available.sorted(), req.reusable.sorted(), need)
		if err != nil {
			return nil, err
		}
		req.preferred = pref
	}
	ids, err := choose(req)
	if err != nil {
		return nil, err
	}
	resp, err := p.allocate(ctx, ids)
	if err != nil {
		return nil, err
	}
	a := &assignment{IDs: ids, NUMA: numaNodes(devs, ids), Response: resp}
	m.mu.Lock()
	assign(m.assigned, pod.UID, container, res, a)
	m.mu.Unlock()
	klog.V(2).Infof("Device manager: pod %s container %s: %s %v", api.Key(pod), container, res, ids)
	return a, nil
}

// ContainerOptions is what the plugins' Allocate answered for a container,
// to be given to the runtime when it is created.
type ContainerOptions struct {
	Devices     []kubecontainer.Device
	Mounts      []kubecontainer.Mount
	Env         []string // NAME=value, in resource order
	Annotations map[string]string
	CDIDevices  []string
}

// ContainerOptions tells the plugins that ask for it (PreStartContainer)
// that c is about to start, and returns what their Allocate answered for
// it. A container of an admitted pod that holds no devices yet (its plugin
// had not registered again after a restart, say) is allocated them now.
func (m *Manager) ContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*ContainerOptions, error) {
	m.mu.Lock()
	names := m.deviceRequests(c)
	missing := false
	for _, res := range names {
		missing = missing || m.assigned[pod.UID][c.Name][res] == nil
	}
	m.mu.Unlock()
	if len(names) == 0 {
		return nil, nil
	}
	if missing {
		if err := m.Allocate(ctx, pod); err != nil {
			return nil, err
		}
	}
	opts := &ContainerOptions{}
	for _, res := range names {
		m.mu.Lock()
		a := m.assigned[pod.UID][c.Name][res]
		var p *plugin
		if r := m.resources[res]; r != nil {
			p = r.plugin
		}
		m.mu.Unlock()
		if a == nil {
			return nil, fmt.Errorf("no devices found allocated in local cache for pod %s, container %s, resource %s", pod.UID, c.Name, res)
		}
		// A resource whose plugin has not registered again since a
		// restart has no options: nothing to tell it, as the kubelet.
		if p != nil {
			if err := p.preStart(ctx, a.IDs); err != nil {
				return nil, err
			}
		}
		opts.add(a.Response)
	}
	return opts, nil
}

// add merges one Allocate response into o, as the kubelet merges a
// container's: a device path, mount target or env name already set is
// kept (the first resource's wins).
func (o *ContainerOptions) add(r *pluginapi.ContainerAllocateResponse) {
	if r == nil {
		return
	}
	envs := map[string]bool{}
	for _, e := range o.Env {
		name, _, _ := strings.Cut(e, "=")
		envs[name] = true
	}
	keys := make([]string, 0, len(r.Envs))
	for k := range r.Envs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !envs[k] {
			o.Env = append(o.Env, k+"="+r.Envs[k])
		}
	}
	seenMount := map[string]bool{}
	for _, mt := range o.Mounts {
		seenMount[mt.Target] = true
	}
	for _, mt := range r.Mounts {
		if !seenMount[mt.ContainerPath] {
			seenMount[mt.ContainerPath] = true
			o.Mounts = append(o.Mounts, kubecontainer.Mount{Source: mt.HostPath, Target: mt.ContainerPath, ReadOnly: mt.ReadOnly})
		}
	}
	seenDev := map[string]bool{}
	for _, d := range o.Devices {
		seenDev[d.PathInContainer] = true
	}
	for _, d := range r.Devices {
		if !seenDev[d.ContainerPath] {
			seenDev[d.ContainerPath] = true
			o.Devices = append(o.Devices, kubecontainer.Device{PathOnHost: d.HostPath, PathInContainer: d.ContainerPath, Permissions: d.Permissions})
		}
	}
	for k, v := range r.Annotations {
		if o.Annotations == nil {
			o.Annotations = map[string]string{}
		}
		if _, ok := o.Annotations[k]; !ok {
			o.Annotations[k] = v
		}
	}
	for _, d := range r.CdiDevices {
		o.CDIDevices = append(o.CDIDevices, d.Name)
	}
}

// Release frees the devices of a pod that terminated.
func (m *Manager) Release(uid types.UID) {
	m.mu.Lock()
	_, held := m.assigned[uid]
	delete(m.assigned, uid)
	m.mu.Unlock()
	if held {
		klog.V(2).Infof("Device manager: released the devices of pod %s", uid)
		m.checkpoint()
	}
}

// Prune frees the devices of the pods keep rejects (pods gone while the
// agent was down).
func (m *Manager) Prune(keep func(uid types.UID) bool) {
	m.mu.Lock()
	var gone []types.UID
	for uid := range m.assigned {
		if !keep(uid) {
			gone = append(gone, uid)
		}
	}
	m.mu.Unlock()
	for _, uid := range gone {
		m.Release(uid)
	}
}

// checkpoint writes the assignments and the registered devices durably;
// a failure is logged (the next change writes again).
func (m *Manager) checkpoint() {
	m.ckptMu.Lock()
	defer m.ckptMu.Unlock()
	m.mu.Lock()
	registered := map[string][]string{}
	for name, r := range m.resources {
		if !r.removed {
			registered[name] = r.healthy().sorted()
		}
	}
	data, err := encodeCheckpoint(m.assigned, registered)
	m.mu.Unlock()
	if err == nil {
		err = writeCheckpoint(m.checkpointPath(), data)
	}
	if err != nil {
		klog.Errorf("Device manager: write checkpoint %s: %v", m.checkpointPath(), err)
	}
}

// Devices are the devices a container holds, by resource, as the
// podresources API lists them.
func (m *Manager) Devices(uid types.UID, container string) []*podresourcesapi.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	byRes := m.assigned[uid][container]
	names := make([]string, 0, len(byRes))
	for res := range byRes {
		names = append(names, res)
	}
	sort.Strings(names)
	var out []*podresourcesapi.ContainerDevices
	for _, res := range names {
		a := byRes[res]
		out = append(out, containerDevices(res, a.IDs, a.NUMA)...)
	}
	return out
}

// Allocatable are the healthy devices of every resource, as the
// podresources API lists them.
func (m *Manager) Allocatable() []*podresourcesapi.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.resources))
	for name := range m.resources {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []*podresourcesapi.ContainerDevices
	for _, name := range names {
		r := m.resources[name]
		out = append(out, containerDevices(name, r.healthy().sorted(), numaNodes(r.devices, nil))...)
	}
	return out
}

// containerDevices groups ids by NUMA node as the podresources API does:
// one entry per node, devices without topology in one entry of their own.
func containerDevices(res string, ids []string, numa map[string][]int64) []*podresourcesapi.ContainerDevices {
	byNode := groupByNUMA(ids, numa)
	nodes := make([]int64, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i] < nodes[j] }) // noTopology (-1) first
	var out []*podresourcesapi.ContainerDevices
	for _, n := range nodes {
		cd := &podresourcesapi.ContainerDevices{ResourceName: res, DeviceIds: byNode[n]}
		if n != noTopology {
			cd.Topology = &podresourcesapi.TopologyInfo{Nodes: []*podresourcesapi.NUMANode{{ID: n}}}
		}
		out = append(out, cd)
	}
	return out
}
