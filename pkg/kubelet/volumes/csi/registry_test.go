package csi

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// plugin is a CSI node plugin with its registration service, served on
// real unix sockets as node-driver-registrar and a driver serve them.
type plugin struct {
	registerapi.UnimplementedRegistrationServer
	csipb.UnimplementedNodeServer
	info     *registerapi.PluginInfo
	nodeID   string
	statuses chan *registerapi.RegistrationStatus
}

func (p *plugin) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return p.info, nil
}

func (p *plugin) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	p.statuses <- s
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (p *plugin) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: p.nodeID, MaxVolumesPerNode: 7, AccessibleTopology: &csipb.Topology{Segments: map[string]string{"topology.example.com/zone": "z1"}}}, nil
}

func (p *plugin) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{Capabilities: []*csipb.NodeServiceCapability{{Type: &csipb.NodeServiceCapability_Rpc{
		Rpc: &csipb.NodeServiceCapability_RPC{Type: csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}}}}, nil
}

// serve serves p's registration service on regSocket and its CSI node
// service on csiSocket until the test ends.
func (p *plugin) serve(t *testing.T, regSocket, csiSocket string) {
	for _, s := range []struct {
		path     string
		register func(*grpc.Server)
	}{
		{csiSocket, func(s *grpc.Server) { csipb.RegisterNodeServer(s, p) }},
		{regSocket, func(s *grpc.Server) { registerapi.RegisterRegistrationServer(s, p) }},
	} {
		l, err := net.Listen("unix", s.path)
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		s.register(srv)
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(srv.Stop)
	}
}

type nodeInfo struct {
	fail        error
	installed   chan DriverInfo
	uninstalled chan string
}

func (n *nodeInfo) InstallDriver(_ context.Context, d DriverInfo) error {
	if n.fail != nil {
		return n.fail
	}
	n.installed <- d
	return nil
}

func (n *nodeInfo) UninstallDriver(_ context.Context, name string) error {
	n.uninstalled <- name
	return nil
}

func TestRegistry(t *testing.T) {
	valid := func(dir string) *registerapi.PluginInfo {
		return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "csi.example.com", Endpoint: filepath.Join(dir, "csi.sock"), SupportedVersions: []string{"1.0.0"}}
	}
	for _, tc := range []struct {
		name    string
		info    func(dir string) *registerapi.PluginInfo
		nodeID  string
		install error
		wantErr string // the status's error; "" registers
	}{
		{"a CSI plugin registers", valid, "n1", nil, ""},
		{"the endpoint defaults to the registration socket", func(dir string) *registerapi.PluginInfo {
			i := valid(dir)
			i.Endpoint = ""
			return i
		}, "n1", nil, "unknown service csi.v1.Node"}, // the registration socket serves no CSI here
		{"a DRA plugin is refused", func(dir string) *registerapi.PluginInfo {
			i := valid(dir)
			i.Type = registerapi.DRAPlugin
			return i
		}, "n1", nil, `plugin type "DRAPlugin" is not supported`},
		{"CSI 0.x is refused", func(dir string) *registerapi.PluginInfo {
			i := valid(dir)
			i.SupportedVersions = []string{"0.3.0"}
			return i
		}, "n1", nil, `none of the versions ["0.3.0"] is supported`},
		{"an empty node ID is refused", valid, "", nil, "empty node ID"},
		{"a CSINode that cannot be written fails the registration", valid, "n1", errors.New("forbidden"), "CSINode: forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "csireg") // short: a socket path has 108 bytes
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			regDir := filepath.Join(dir, "plugins_registry")
			info := &nodeInfo{fail: tc.install, installed: make(chan DriverInfo, 1), uninstalled: make(chan string, 1)}
			r := NewRegistry(regDir, info)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- r.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			p := &plugin{info: tc.info(dir), nodeID: tc.nodeID, statuses: make(chan *registerapi.RegistrationStatus, 1)}
			waitFor(t, func() bool { _, err := os.Stat(regDir); return err == nil })
			regSocket := filepath.Join(regDir, "csi.example.com-reg.sock")
			p.serve(t, regSocket, filepath.Join(dir, "csi.sock"))
			var st *registerapi.RegistrationStatus
			select {
			case st = <-p.statuses:
			case <-time.After(20 * time.Second):
				t.Fatal("no NotifyRegistrationStatus")
			}
			if tc.wantErr != "" {
				if st.PluginRegistered || !strings.Contains(st.Error, tc.wantErr) {
					t.Fatalf("status %+v, want an error with %q", st, tc.wantErr)
				}
				if _, err := r.Driver("csi.example.com"); !errors.Is(err, ErrNotRegistered) {
					t.Errorf("a refused plugin's driver: %v", err)
				}
				return
			}
			if !st.PluginRegistered {
				t.Fatalf("status %+v", st)
			}
			d, err := r.Driver("csi.example.com")
			if err != nil {
				t.Fatal(err)
			}
			if !d.Stage || d.NodeID != "n1" || d.MaxVolumes != 7 || d.Topology["topology.example.com/zone"] != "z1" {
				t.Errorf("driver %+v", d)
			}
			if got := <-info.installed; got.NodeID != "n1" || got.Name != "csi.example.com" {
				t.Errorf("CSINode got %+v", got)
			}
			// The registration socket goes: the driver goes.
			if err := os.Remove(regSocket); err != nil {
				t.Fatal(err)
			}
			select {
			case name := <-info.uninstalled:
				if name != "csi.example.com" {
					t.Errorf("uninstalled %q", name)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the driver was not removed from the CSINode")
			}
			if _, err := r.Driver("csi.example.com"); err == nil || err.Error() != "driver name csi.example.com not found in the list of registered CSI drivers" {
				t.Errorf("after its socket went: %v", err)
			}
		})
	}
}

// waitFor polls a condition the registry makes true on its own goroutine.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
	}
}
