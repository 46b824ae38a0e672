package devices

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// registration is a plugin's Register request, handed to Run's loop, which
// connects to the plugin and answers on done.
type registration struct {
	resource, socket string
	done             chan error
}

// registrationServer is the Registration service on the agent's socket.
type registrationServer struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
}

// Register validates a plugin's request as the kubelet does (the API
// version, an extended resource name, an endpoint in the plugin directory)
// and has Run connect to it; the plugin's devices follow on its
// ListAndWatch stream.
func (s registrationServer) Register(ctx context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	klog.Infof("Device manager: registration request from the device plugin of %s (endpoint %q, version %s)", r.ResourceName, r.Endpoint, r.Version)
	if !slices.Contains(pluginapi.SupportedVersions[:], r.Version) {
		return nil, fmt.Errorf("requested API version %q is not supported by kubelet. Supported versions are %v", r.Version, pluginapi.SupportedVersions)
	}
	if !api.IsExtendedResourceName(v1.ResourceName(r.ResourceName)) {
		return nil, fmt.Errorf("invalid name of device plugin socket: resource name %q is not an extended resource name", r.ResourceName)
	}
	if r.Endpoint == "" || filepath.Base(r.Endpoint) != r.Endpoint || r.Endpoint == SocketName {
		return nil, fmt.Errorf("invalid endpoint %q: want the name of the plugin's socket in %s", r.Endpoint, s.m.dir)
	}
	reg := registration{resource: r.ResourceName, socket: filepath.Join(s.m.dir, r.Endpoint), done: make(chan error, 1)}
	select {
	case s.m.regs <- reg:
	case <-s.m.stopped:
		return nil, fmt.Errorf("the device manager is stopping")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case err := <-reg.done:
		if err != nil {
			klog.Errorf("Device manager: %v", err)
			return nil, err
		}
		return &pluginapi.Empty{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Listen prepares the device-plugin directory and its registration
// socket: the sockets left there (plugins of the agent before, which
// re-register when they see the new socket) are removed, the checkpoint
// kept.
func (m *Manager) Listen() (net.Listener, error) {
	if err := os.MkdirAll(m.dir, 0o750); err != nil {
		return nil, fmt.Errorf("device-plugin directory: %w", err)
	}
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		return nil, fmt.Errorf("device-plugin directory: %w", err)
	}
	for _, e := range entries {
		if e.Type()&os.ModeSocket != 0 {
			if err := os.Remove(filepath.Join(m.dir, e.Name())); err != nil {
				klog.Errorf("Device manager: remove stale socket: %v", err)
			}
		}
	}
	l, err := net.Listen("unix", m.SocketPath())
	if err != nil {
		return nil, fmt.Errorf("device-plugin registration socket: %w", err)
	}
	return l, nil
}

// Run serves the Registration service on l until ctx ends, connects to
// each plugin that registers and follows its devices; then it closes
// every plugin connection and returns once every goroutine it started
// has.
func (m *Manager) Run(ctx context.Context, l net.Listener) {
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registrationServer{m: m})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(m.stopped)
	wg.Go(func() {
		if err := srv.Serve(l); err != nil {
			klog.Errorf("Device manager: registration server: %v", err)
		}
	})
	klog.Infof("Device manager: serving the device-plugin registration on %s", m.SocketPath())
	for {
		select {
		case <-ctx.Done():
			srv.Stop()
			m.disconnectAll()
			return
		case reg := <-m.regs:
			p, err := dialPlugin(ctx, reg.resource, reg.socket)
			if err != nil {
				reg.done <- err
				continue
			}
			m.connect(p)
			reg.done <- nil
			wg.Go(func() {
				err := p.watch(ctx, func(devs []*pluginapi.Device) { m.update(p, devs) })
				if ctx.Err() == nil {
					klog.Errorf("Device manager: ListAndWatch of the device plugin of %s ended: %v", p.resource, err)
				}
				m.disconnect(p)
			})
		}
	}
}

// connect makes p its resource's plugin; one it replaces (the same plugin
// restarted) is closed, its stream's end ignored.
func (m *Manager) connect(p *plugin) {
	m.mu.Lock()
	r := m.resources[p.resource]
	if r == nil {
		r = &resourceState{devices: map[string]*pluginapi.Device{}}
		m.resources[p.resource] = r
	}
	old := r.plugin
	r.plugin, r.stoppedAt, r.removed = p, time.Time{}, false
	m.mu.Unlock()
	if old != nil {
		old.close()
	}
	klog.Infof("Device manager: the device plugin of %s registered (socket %s, preStartRequired %v, getPreferredAllocationAvailable %v)",
		p.resource, p.socket, p.opts.GetPreStartRequired(), p.opts.GetGetPreferredAllocationAvailable())
}

// update records the devices p listed, if it still serves its resource.
func (m *Manager) update(p *plugin, devs []*pluginapi.Device) {
	m.mu.Lock()
	r := m.resources[p.resource]
	if r == nil || r.plugin != p {
		m.mu.Unlock()
		return
	}
	before := r.healthy()
	r.devices = make(map[string]*pluginapi.Device, len(devs))
	for _, d := range devs {
		r.devices[d.ID] = d
	}
	after := r.healthy()
	m.mu.Unlock()
	klog.V(2).Infof("Device manager: %s has %d devices, %d healthy", p.resource, len(devs), len(after))
	if !maps.Equal(before, after) {
		m.checkpoint()
	}
}

// disconnect marks p's devices unhealthy if it still serves its resource:
// the capacity stays for StopGracePeriod, nothing is allocatable.
func (m *Manager) disconnect(p *plugin) {
	p.close()
	m.mu.Lock()
	r := m.resources[p.resource]
	gone := r != nil && r.plugin == p
	if gone {
		r.plugin, r.stoppedAt = nil, m.clock.Now()
	}
	m.mu.Unlock()
	if gone {
		klog.Infof("Device manager: the device plugin of %s went; its devices are unhealthy", p.resource)
	}
}

// disconnectAll closes every plugin connection (the agent stops).
func (m *Manager) disconnectAll() {
	m.mu.Lock()
	var ps []*plugin
	for _, r := range m.resources {
		if r.plugin != nil {
			ps = append(ps, r.plugin)
		}
	}
	m.mu.Unlock()
	for _, p := range ps {
		p.close()
	}
}
