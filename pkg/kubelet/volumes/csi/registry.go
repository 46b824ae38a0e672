// Package csi is the node side of the Container Storage Interface: CSI node
// plugins register through the kubelet's plugin-registration protocol (a
// socket in <root-dir>/plugins_registry answering GetInfo, as the upstream
// node-driver-registrar serves it), the driver's node ID and topology go to
// the node's CSINode object, and the volume manager calls the registered
// drivers' Node service to stage and publish volumes.
package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// callTimeout bounds one registration call, as the kubelet's plugin
// watcher does (a plugin that does not answer is tried again when its
// socket is made again).
const callTimeout = 10 * time.Second

// NodeInfo records a registered driver where the control plane reads it:
// the node's CSINode object (driver, node ID, topology keys, volume limit),
// the Node's csi.volume.kubernetes.io/nodeid annotation and topology
// labels. Nil (no API server): drivers register on the node only.
type NodeInfo interface {
	InstallDriver(ctx context.Context, d DriverInfo) error
	UninstallDriver(ctx context.Context, name string) error
}

// DriverInfo is what a driver's NodeGetInfo said of this node.
type DriverInfo struct {
	Name       string
	NodeID     string
	MaxVolumes int64
	Topology   map[string]string
}

// Driver is a registered CSI node plugin.
type Driver struct {
	DriverInfo
	Endpoint string
	// Stage: the driver stages volumes (STAGE_UNSTAGE_VOLUME) before
	// they are published to pods.
	Stage bool
	// VolumeStats: the driver answers NodeGetVolumeStats.
	VolumeStats bool
	Node        csipb.NodeClient

	conn *grpc.ClientConn
}

// Registry holds the CSI drivers registered through a plugin directory.
type Registry struct {
	dir  string
	info NodeInfo

	mu      sync.Mutex
	drivers map[string]*Driver // by name
	sockets map[string]string  // registration socket → driver name
}

// NewRegistry watches dir (<root-dir>/plugins_registry) for plugins;
// info may be nil.
func NewRegistry(dir string, info NodeInfo) *Registry {
	return &Registry{dir: dir, info: info, drivers: map[string]*Driver{}, sockets: map[string]string{}}
}

// ErrNotRegistered is a driver no plugin registered (yet): the pod waits.
var ErrNotRegistered = errors.New("not found in the list of registered CSI drivers")

// Driver is the registered driver of that name.
func (r *Registry) Driver(name string) (*Driver, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.drivers[name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("driver name %s %w", name, ErrNotRegistered)
}

// Run registers the plugins whose sockets are in the directory, then those
// made later, and deregisters a plugin whose socket goes, until ctx ends.
func (r *Registry) Run(ctx context.Context) error {
	if err := os.MkdirAll(r.dir, 0o750); err != nil {
		return fmt.Errorf("plugin registration directory: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", r.dir, err)
	}
	defer w.Close()
	if err := w.Add(r.dir); err != nil {
		return fmt.Errorf("watch %s: %w", r.dir, err)
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return fmt.Errorf("read %s: %w", r.dir, err)
	}
	for _, e := range entries {
		r.found(ctx, filepath.Join(r.dir, e.Name()))
	}
	for {
		select {
		case <-ctx.Done():
			r.mu.Lock()
			for _, d := range r.drivers {
				d.conn.Close()
			}
			r.mu.Unlock()
			return nil
		case ev := <-w.Events:
			switch {
			case ev.Op&fsnotify.Create != 0:
				r.found(ctx, ev.Name)
			case ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0:
				r.gone(ctx, ev.Name)
			}
		case err := <-w.Errors:
			klog.Warningf("CSI plugin registration: watching %s: %v", r.dir, err)
		}
	}
}

// found registers the plugin behind a registration socket, as the
// kubelet's plugin watcher: GetInfo, then the driver's NodeGetInfo, then
// NotifyRegistrationStatus with the outcome. Hidden files and files that
// are not sockets are not plugins.
func (r *Registry) found(ctx context.Context, path string) {
	if strings.HasPrefix(filepath.Base(path), ".") {
		return
	}
	if st, err := os.Stat(path); err != nil || st.Mode()&os.ModeSocket == 0 {
		return
	}
	conn, err := dial(path)
	if err != nil {
		klog.Warningf("CSI plugin registration: %s: %v", path, err)
		return
	}
	defer conn.Close()
	plugin := registerapi.NewRegistrationClient(conn)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	info, err := plugin.GetInfo(cctx, &registerapi.InfoRequest{}, grpc.WaitForReady(true)) // bound but not yet listening
	if err != nil {
		klog.Warningf("CSI plugin registration: GetInfo of %s: %v", path, err)
		return
	}
	status := &registerapi.RegistrationStatus{PluginRegistered: true}
	if endpoint, err := r.register(cctx, path, info); err != nil {
		klog.Errorf("CSI plugin registration: %s (%s): %v", info.Name, path, err)
		status = &registerapi.RegistrationStatus{Error: err.Error()}
	} else {
		klog.Infof("CSI driver %s registered (endpoint %s)", info.Name, endpoint)
	}
	if _, err := plugin.NotifyRegistrationStatus(cctx, status); err != nil {
		klog.Warningf("CSI plugin registration: NotifyRegistrationStatus of %s: %v", path, err)
	}
}

// register validates the plugin's info as the kubelet's CSI plugin does
// and records the driver; it returns the driver's endpoint.
func (r *Registry) register(ctx context.Context, socket string, info *registerapi.PluginInfo) (string, error) {
	switch {
	case info.Type != registerapi.CSIPlugin:
		return "", fmt.Errorf("plugin type %q is not supported by this agent (only %s)", info.Type, registerapi.CSIPlugin)
	case info.Name == "":
		return "", errors.New("the plugin gave no driver name")
	case !supportsV1(info.SupportedVersions):
		return "", fmt.Errorf("none of the versions %q is supported: the agent speaks CSI 1.x", info.SupportedVersions)
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = socket
	}
	conn, err := dial(endpoint)
	if err != nil {
		return "", err
	}
	d := &Driver{Endpoint: endpoint, Node: csipb.NewNodeClient(conn), conn: conn}
	if err := d.describe(ctx, info.Name); err != nil {
		conn.Close()
		return "", err
	}
	if r.info != nil {
		if err := r.info.InstallDriver(ctx, d.DriverInfo); err != nil {
			conn.Close()
			return "", fmt.Errorf("record the driver in the node's CSINode: %w", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.drivers[info.Name]; ok { // registered again (the plugin restarted)
		old.conn.Close()
	}
	r.drivers[info.Name] = d
	r.sockets[socket] = info.Name
	return endpoint, nil
}

// describe asks the driver what it is on this node.
func (d *Driver) describe(ctx context.Context, name string) error {
	ni, err := d.Node.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
	if err != nil {
		return fmt.Errorf("NodeGetInfo: %w", err)
	}
	if ni.NodeId == "" {
		return errors.New("NodeGetInfo returned an empty node ID")
	}
	d.DriverInfo = DriverInfo{Name: name, NodeID: ni.NodeId, MaxVolumes: ni.MaxVolumesPerNode}
	if t := ni.AccessibleTopology; t != nil {
		d.Topology = t.Segments
	}
	caps, err := d.Node.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		return fmt.Errorf("NodeGetCapabilities: %w", err)
	}
	for _, c := range caps.Capabilities {
		switch c.GetRpc().GetType() {
		case csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			d.Stage = true
		case csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS:
			d.VolumeStats = true
		}
	}
	return nil
}

// gone deregisters the driver whose registration socket was removed.
func (r *Registry) gone(ctx context.Context, socket string) {
	r.mu.Lock()
	name, ok := r.sockets[socket]
	if ok {
		delete(r.sockets, socket)
		if d := r.drivers[name]; d != nil {
			d.conn.Close()
		}
		delete(r.drivers, name)
	}
	r.mu.Unlock()
	if !ok {
		return
	}
	klog.Infof("CSI driver %s deregistered: %s is gone", name, socket)
	if r.info != nil {
		if err := r.info.UninstallDriver(ctx, name); err != nil {
			klog.Warningf("CSI driver %s: remove it from the node's CSINode: %v", name, err)
		}
	}
}

func supportsV1(versions []string) bool {
	for _, v := range versions {
		if v == "1" || strings.HasPrefix(strings.TrimPrefix(v, "v"), "1.") {
			return true
		}
	}
	return false
}

func dial(socket string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix:"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", socket, err)
	}
	return conn, nil
}
