// Command csiplugin is the CSI node plugin the e2e tests register with the
// agent: csi-test's driver harness (github.com/kubernetes-csi/csi-test/v5,
// its gRPC server of the CSI Identity and Node services) serving a small
// directory-backed driver, and, beside it, the kubelet's plugin-registration
// service on <registration-dir>/<driver>-reg.sock as the upstream
// node-driver-registrar serves it (GetInfo, NotifyRegistrationStatus; a
// failed registration ends the process, as the registrar exits).
//
// A volume's data is the directory <backing>/<volume id>: NodeStageVolume
// bind-mounts it on the staging path, NodePublishVolume bind-mounts the
// staged path (or the data, without staging) on the target path, read-only
// when asked. Every call is appended to --calls as a line of JSON, so a test
// sees what the agent asked and in which order.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/driver"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

var (
	name        = flag.String("driver-name", "csi.e2e.example.com", "the driver's name")
	endpoint    = flag.String("csi-address", "", "the CSI socket to serve")
	regDir      = flag.String("registration-dir", "", "the kubelet's plugins_registry directory")
	backing     = flag.String("backing", "", "directory holding each volume's data")
	callsFile   = flag.String("calls", "", "file each call is appended to, one JSON line each")
	nodeID      = flag.String("node-id", "", "NodeGetInfo's node ID")
	topology    = flag.String("topology", "", "NodeGetInfo's accessible topology, key=value")
	stage       = flag.Bool("stage", true, "report STAGE_UNSTAGE_VOLUME")
	maxVolumes  = flag.Int64("max-volumes", 0, "NodeGetInfo's max volumes per node")
	publishWait = flag.Duration("publish-delay", 0, "how long NodePublishVolume takes")
)

func main() {
	flag.Parse()
	if *endpoint == "" || *regDir == "" || *backing == "" || *nodeID == "" {
		log.Fatal("--csi-address, --registration-dir, --backing and --node-id are required")
	}
	calls := &recorder{path: *callsFile}
	_ = os.Remove(*endpoint)
	l, err := net.Listen("unix", *endpoint)
	if err != nil {
		log.Fatal(err)
	}
	d := driver.NewCSIDriver(&driver.CSIDriverServers{Identity: identity{}, Node: &node{calls: calls}})
	if err := d.Start(l); err != nil {
		log.Fatal(err)
	}
	reg := filepath.Join(*regDir, *name+"-reg.sock")
	_ = os.Remove(reg)
	rl, err := net.Listen("unix", reg)
	if err != nil {
		log.Fatal(err)
	}
	rs := grpc.NewServer()
	registerapi.RegisterRegistrationServer(rs, registration{})
	go func() { _ = rs.Serve(rl) }()
	log.Printf("driver %s serving %s, registration socket %s", *name, *endpoint, reg)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	rs.Stop()
	d.Stop()
	_ = os.Remove(reg)
	_ = os.Remove(*endpoint)
}

type registration struct {
	registerapi.UnimplementedRegistrationServer
}

func (registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: *name, Endpoint: *endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		log.Printf("registration failed: %s", s.Error)
		os.Exit(1)
	}
	log.Printf("registered with the kubelet")
	return &registerapi.RegistrationStatusResponse{}, nil
}

type identity struct {
	csi.UnimplementedIdentityServer
}

func (identity) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: *name, VendorVersion: "e2e"}, nil
}

func (identity) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (identity) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// recorder appends calls to a file.
type recorder struct {
	mu   sync.Mutex
	path string
}

// Call is one line of the calls file.
type Call struct {
	Method            string            `json:"method"`
	VolumeID          string            `json:"volumeId"`
	StagingTargetPath string            `json:"stagingTargetPath,omitempty"`
	TargetPath        string            `json:"targetPath,omitempty"`
	Readonly          bool              `json:"readonly,omitempty"`
	VolumeContext     map[string]string `json:"volumeContext,omitempty"`
	PublishContext    map[string]string `json:"publishContext,omitempty"`
	Mode              string            `json:"accessMode,omitempty"`
}

func (r *recorder) record(c Call) {
	if r.path == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(r.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		log.Printf("calls: %v", err)
		return
	}
	defer f.Close()
	b, _ := json.Marshal(c)
	_, _ = f.Write(append(b, '\n'))
}

type node struct {
	csi.UnimplementedNodeServer
	calls *recorder
}

func (n *node) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	resp := &csi.NodeGetInfoResponse{NodeId: *nodeID, MaxVolumesPerNode: *maxVolumes}
	if k, v, ok := strings.Cut(*topology, "="); ok {
		resp.AccessibleTopology = &csi.Topology{Segments: map[string]string{k: v}}
	}
	return resp, nil
}

func (n *node) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	resp := &csi.NodeGetCapabilitiesResponse{Capabilities: []*csi.NodeServiceCapability{{Type: &csi.NodeServiceCapability_Rpc{
		Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_GET_VOLUME_STATS}}}}}
	if *stage {
		resp.Capabilities = append(resp.Capabilities, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{
			Rpc: &csi.NodeServiceCapability_RPC{Type: csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME}}})
	}
	return resp, nil
}

func (n *node) NodeStageVolume(_ context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	n.calls.record(Call{Method: "NodeStageVolume", VolumeID: req.VolumeId, StagingTargetPath: req.StagingTargetPath,
		VolumeContext: req.VolumeContext, PublishContext: req.PublishContext, Mode: req.GetVolumeCapability().GetAccessMode().GetMode().String()})
	if req.VolumeId == "" || req.StagingTargetPath == "" || req.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "volume id, staging target path and capability are required")
	}
	data, err := volumeData(req.VolumeId)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(req.StagingTargetPath, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := bind(data, req.StagingTargetPath, false); err != nil {
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (n *node) NodeUnstageVolume(_ context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	n.calls.record(Call{Method: "NodeUnstageVolume", VolumeID: req.VolumeId, StagingTargetPath: req.StagingTargetPath})
	if err := unbind(req.StagingTargetPath); err != nil {
		return nil, err
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (n *node) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	n.calls.record(Call{Method: "NodePublishVolume", VolumeID: req.VolumeId, StagingTargetPath: req.StagingTargetPath, TargetPath: req.TargetPath,
		Readonly: req.Readonly, VolumeContext: req.VolumeContext, PublishContext: req.PublishContext, Mode: req.GetVolumeCapability().GetAccessMode().GetMode().String()})
	time.Sleep(*publishWait)
	if req.VolumeId == "" || req.TargetPath == "" || req.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "volume id, target path and capability are required")
	}
	// A volume not staged (the driver does not stage, or an inline
	// volume, which is never staged) is published from its data.
	src := req.StagingTargetPath
	if src == "" {
		var err error
		if src, err = volumeData(req.VolumeId); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(req.TargetPath, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := bind(src, req.TargetPath, req.Readonly); err != nil {
		return nil, err
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (n *node) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	n.calls.record(Call{Method: "NodeUnpublishVolume", VolumeID: req.VolumeId, TargetPath: req.TargetPath})
	if err := unbind(req.TargetPath); err != nil {
		return nil, err
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// NodeGetVolumeStats measures the published volume's file system.
func (n *node) NodeGetVolumeStats(_ context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	n.calls.record(Call{Method: "NodeGetVolumeStats", VolumeID: req.VolumeId, TargetPath: req.VolumePath, StagingTargetPath: req.StagingTargetPath})
	var st unix.Statfs_t
	if err := unix.Statfs(req.VolumePath, &st); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume path %s: %v", req.VolumePath, err)
	}
	bs := int64(st.Bsize)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs},
		{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}

// volumeData is the volume's directory, made at its first use.
func volumeData(id string) (string, error) {
	if strings.ContainsAny(id, "/\x00") || id == "." || id == ".." {
		return "", status.Errorf(codes.InvalidArgument, "volume id %q", id)
	}
	dir := filepath.Join(*backing, id)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", status.Error(codes.Internal, err.Error())
	}
	return dir, nil
}

// bind mounts src on dst (once: a second call finds it mounted, as CSI
// asks of a repeated call).
func bind(src, dst string, readOnly bool) error {
	if mounted(dst) {
		return nil
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return status.Errorf(codes.Internal, "bind %s on %s: %v", src, dst, err)
	}
	if readOnly {
		if err := unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
			return status.Errorf(codes.Internal, "read-only %s: %v", dst, err)
		}
	}
	return nil
}

// unbind unmounts and removes dst; a missing dst is done already.
func unbind(dst string) error {
	if mounted(dst) {
		if err := unix.Unmount(dst, 0); err != nil {
			return status.Errorf(codes.Internal, "unmount %s: %v", dst, err)
		}
	}
	if err := os.Remove(dst); err != nil && !errors.Is(err, os.ErrNotExist) {
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

// mounted reports whether path is a mount point (its device differs from
// its parent's, or it is bound on itself: /proc/self/mountinfo).
func mounted(path string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescape(f[4]) == path {
			return true
		}
	}
	return false
}

func unescape(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}
