package volumes

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes/csi"
)

// csiNode is a CSI node service that records its calls.
type csiNode struct {
	csipb.UnimplementedNodeServer
	hang  chan struct{} // non-nil: NodePublishVolume answers when it is closed
	mu    sync.Mutex
	calls []string
	last  map[string]any // the last request of each method
}

func (n *csiNode) record(method string, req any, format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, method+" "+fmt.Sprintf(format, args...))
	n.last[method] = req
}

func (n *csiNode) NodeStageVolume(_ context.Context, r *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	n.record("NodeStageVolume", r, "%s %s", r.VolumeId, r.StagingTargetPath)
	return &csipb.NodeStageVolumeResponse{}, nil
}

func (n *csiNode) NodeUnstageVolume(_ context.Context, r *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	n.record("NodeUnstageVolume", r, "%s %s", r.VolumeId, r.StagingTargetPath)
	return &csipb.NodeUnstageVolumeResponse{}, nil
}

func (n *csiNode) NodePublishVolume(_ context.Context, r *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	n.record("NodePublishVolume", r, "%s %s", r.VolumeId, r.TargetPath)
	n.mu.Lock()
	hang := n.hang
	n.mu.Unlock()
	if hang != nil {
		<-hang
		return &csipb.NodePublishVolumeResponse{}, nil // its caller is gone
	}
	return &csipb.NodePublishVolumeResponse{}, os.MkdirAll(r.TargetPath, 0o750)
}

func (n *csiNode) NodeUnpublishVolume(_ context.Context, r *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	n.record("NodeUnpublishVolume", r, "%s %s", r.VolumeId, r.TargetPath)
	return &csipb.NodeUnpublishVolumeResponse{}, os.RemoveAll(r.TargetPath)
}

func (n *csiNode) NodeGetVolumeStats(_ context.Context, r *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	n.record("NodeGetVolumeStats", r, "%s %s", r.VolumeId, r.VolumePath)
	return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
		{Unit: csipb.VolumeUsage_BYTES, Total: 100, Available: 60, Used: 40},
		{Unit: csipb.VolumeUsage_INODES, Total: 10, Available: 7, Used: 3}}}, nil
}

func (n *csiNode) setHang(c chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hang = c
}

// request is the last request of a method.
func (n *csiNode) request(method string) any {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.last[method]
}

func (n *csiNode) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.calls
	n.calls = nil
	return c
}

type csiDrivers map[string]*csi.Driver

func (d csiDrivers) Driver(name string) (*csi.Driver, error) {
	if drv, ok := d[name]; ok {
		return drv, nil
	}
	return nil, fmt.Errorf("driver name %s %w", name, csi.ErrNotRegistered)
}

type csiAPI struct {
	drivers     map[string]*storagev1.CSIDriver
	attachments map[string]*storagev1.VolumeAttachment
}

func (a csiAPI) CSIDriver(_ context.Context, name string) (*storagev1.CSIDriver, error) {
	return a.drivers[name], nil
}

func (a csiAPI) VolumeAttachment(_ context.Context, name string) (*storagev1.VolumeAttachment, error) {
	if va, ok := a.attachments[name]; ok {
		return va, nil
	}
	return nil, apierrors.NewNotFound(storagev1.Resource("volumeattachments"), name)
}

// serveCSINode serves a recording node service on a unix socket and
// returns a driver of that name whose client reaches it.
func serveCSINode(t *testing.T, name string, stage bool) (*csi.Driver, *csiNode) {
	dir, err := os.MkdirTemp("", "csinode")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	l, err := net.Listen("unix", filepath.Join(dir, "csi.sock"))
	if err != nil {
		t.Fatal(err)
	}
	n := &csiNode{last: map[string]any{}}
	srv := grpc.NewServer()
	csipb.RegisterNodeServer(srv, n)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix:"+l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &csi.Driver{DriverInfo: csi.DriverInfo{Name: name, NodeID: "n1"}, Stage: stage, Node: csipb.NewNodeClient(conn)}, n
}

func csiPV(name, driver, handle string) *v1.PersistentVolume {
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{
		AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: handle, FSType: "ext4"}}}}
}

// A CSI persistent volume is staged once on the node and published into
// each pod with the kubelet's paths; the pods' teardown unpublishes each
// (once) and unstages after the last.
func TestCSIPersistentVolume(t *testing.T) {
	root := t.TempDir()
	drv, node := serveCSINode(t, "csi.example.com", true)
	m := NewManager(Config{RootDir: root, NodeName: "node-1"}, Deps{CSIDrivers: csiDrivers{"csi.example.com": drv},
		CSIObjects: csiAPI{drivers: map[string]*storagev1.CSIDriver{"csi.example.com": {Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}}}})
	ctx := context.Background()
	pv := csiPV("pv-1", "csi.example.com", "vol-1")
	staging := filepath.Join(root, "plugins/kubernetes.io/csi/csi.example.com/d2e8363faaac7ae76def3b14091d8eb5755f6b92e9531627aeec833a8731cc49/globalmount")
	target := func(uid string) string {
		return filepath.Join(root, "pods", uid, "volumes/kubernetes.io~csi/pv-1/mount")
	}
	for _, uid := range []string{"a", "b"} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: "p" + uid, Namespace: "ns"}}
		got, err := m.setupCSI(ctx, pod, pvCSIVolume(pv, false))
		if err != nil || got != target(uid) {
			t.Fatalf("setup of pod %s: %q %v", uid, got, err)
		}
	}
	want := []string{"NodeStageVolume vol-1 " + staging, "NodePublishVolume vol-1 " + target("a"),
		"NodeStageVolume vol-1 " + staging, "NodePublishVolume vol-1 " + target("b")} // staging again is a no-op for the driver, as CSI asks
	if got := node.take(); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	pub := node.request("NodePublishVolume").(*csipb.NodePublishVolumeRequest)
	if pub.StagingTargetPath != staging || pub.VolumeCapability.GetAccessMode().GetMode() != csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER ||
		pub.VolumeCapability.GetMount().GetFsType() != "ext4" || pub.Readonly {
		t.Errorf("publish request %v", pub)
	}
	for _, step := range []struct {
		uid  string
		want []string
	}{
		{"a", []string{"NodeUnpublishVolume vol-1 " + target("a")}}, // b still publishes it
		{"a", nil}, // once
		{"b", []string{"NodeUnpublishVolume vol-1 " + target("b"), "NodeUnstageVolume vol-1 " + staging}}, // the last one
	} {
		if err := m.TearDown(ctx, types.UID(step.uid)); err != nil {
			t.Fatal(err)
		}
		if got := node.take(); !slices.Equal(got, step.want) {
			t.Errorf("teardown of %s: calls %q, want %q", step.uid, got, step.want)
		}
	}
	if _, err := os.Stat(filepath.Dir(staging)); !os.IsNotExist(err) {
		t.Errorf("the staging directory is left: %v", err)
	}
}

func TestCSISetupErrors(t *testing.T) {
	drv, node := serveCSINode(t, "csi.example.com", false)
	attached := &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"lun": "3"}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{ServiceAccountName: "sa"}}
	inline := &v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "csi.example.com", VolumeAttributes: map[string]string{"size": "1"}}}}
	vaName := attachmentName("vol-1", "csi.example.com", "node-1")
	for _, tc := range []struct {
		name    string
		vol     csiVolume
		driver  *storagev1.CSIDriver
		va      *storagev1.VolumeAttachment
		wantErr string
		check   func(*csipb.NodePublishVolumeRequest) bool
		hang    bool
	}{
		{name: "a driver that does not answer in time", vol: pvCSIVolume(csiPV("pv", "csi.example.com", "vol-1"), false), va: attached, hang: true,
			wantErr: "rpc error: NodePublishVolume: rpc error: code = DeadlineExceeded"},
		{name: "unregistered driver", vol: pvCSIVolume(csiPV("pv", "other.example.com", "vol-1"), false),
			wantErr: "kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name other.example.com not found in the list of registered CSI drivers"},
		{name: "no CSIDriver: attaching is required, and nothing attached it", vol: pvCSIVolume(csiPV("pv", "csi.example.com", "vol-1"), false),
			wantErr: `MountVolume.WaitForAttach failed for volume "pv" : volume attachment ` + vaName + " does not exist yet"},
		{name: "attached: its metadata is the publish context", vol: pvCSIVolume(csiPV("pv", "csi.example.com", "vol-1"), true), va: attached,
			check: func(r *csipb.NodePublishVolumeRequest) bool { return r.PublishContext["lun"] == "3" && r.Readonly }},
		{name: "inline without a CSIDriver", vol: inlineCSIVolume(pod, inline),
			wantErr: `volume mode "Ephemeral" not supported by driver csi.example.com (only supports ["Persistent"])`},
		{name: "inline, the driver allows it, pod info on mount", vol: inlineCSIVolume(pod, inline),
			driver: &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{PodInfoOnMount: ptr.To(true),
				VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}}},
			check: func(r *csipb.NodePublishVolumeRequest) bool {
				return r.VolumeId == inlineHandle("u1", "scratch") && r.StagingTargetPath == "" && r.VolumeContext["size"] == "1" &&
					r.VolumeContext["csi.storage.k8s.io/pod.name"] == "p" && r.VolumeContext["csi.storage.k8s.io/ephemeral"] == "true" &&
					r.VolumeContext["csi.storage.k8s.io/serviceAccount.name"] == "sa"
			}},
		{name: "persistent volume of an ephemeral-only driver", vol: pvCSIVolume(csiPV("pv", "csi.example.com", "vol-1"), false),
			driver:  &storagev1.CSIDriver{Spec: storagev1.CSIDriverSpec{VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecycleEphemeral}}},
			wantErr: `volume mode "Persistent" not supported by driver csi.example.com (only supports ["Ephemeral"])`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := csiAPI{drivers: map[string]*storagev1.CSIDriver{}, attachments: map[string]*storagev1.VolumeAttachment{}}
			if tc.driver != nil {
				api.drivers["csi.example.com"] = tc.driver
			}
			if tc.va != nil {
				api.attachments[vaName] = tc.va
			}
			m := NewManager(Config{RootDir: t.TempDir(), NodeName: "node-1", CSITimeout: 200 * time.Millisecond},
				Deps{CSIDrivers: csiDrivers{"csi.example.com": drv}, CSIObjects: api})
			node.take()
			if tc.hang {
				hang := make(chan struct{})
				node.setHang(hang)
				defer func() { close(hang); node.setHang(nil) }()
			}
			_, err := m.setupCSI(context.Background(), pod, tc.vol)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if calls := node.take(); len(calls) != 0 && !tc.hang {
					t.Errorf("the driver was called: %q", calls)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := node.request("NodePublishVolume").(*csipb.NodePublishVolumeRequest); !tc.check(r) {
				t.Errorf("publish request %v", r)
			}
		})
	}
}

// A CSI claim is measured by its driver, when it reports volume stats.
func TestCSIClaimStats(t *testing.T) {
	root := t.TempDir()
	drv, node := serveCSINode(t, "csi.example.com", true)
	pv := csiPV("pv-1", "csi.example.com", "vol-1")
	claims := &fakeClaims{
		pvcs: map[string]*v1.PersistentVolumeClaim{"ns/data": {ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "uid-data"},
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}},
		pvs: map[string]*v1.PersistentVolume{"pv-1": pv},
	}
	pv.Spec.ClaimRef = &v1.ObjectReference{UID: "uid-data"}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "vol",
		VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	for _, reports := range []bool{false, true} {
		drv.VolumeStats = reports
		m := NewManager(Config{RootDir: root, NodeName: "node-1"}, Deps{Claims: claims, CSIDrivers: csiDrivers{"csi.example.com": drv},
			CSIObjects: csiAPI{drivers: map[string]*storagev1.CSIDriver{"csi.example.com": {Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}}}})
		if _, err := m.Setup(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		measured := m.MeasuredClaims(pod)
		if !reports {
			if len(measured) != 0 {
				t.Errorf("a driver without GET_VOLUME_STATS: measured %+v", measured)
			}
			continue
		}
		if len(measured) != 1 || measured[0].Claim != "data" || measured[0].Measure == nil {
			t.Fatalf("measured %+v", measured)
		}
		fs, err := measured[0].Measure(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if *fs.CapacityBytes != 100 || *fs.AvailableBytes != 60 || *fs.UsedBytes != 40 || *fs.Inodes != 10 || *fs.InodesFree != 7 || *fs.InodesUsed != 3 {
			t.Errorf("stats %+v", fs)
		}
		r := node.request("NodeGetVolumeStats").(*csipb.NodeGetVolumeStatsRequest)
		if r.VolumePath != filepath.Join(root, "pods/u1/volumes/kubernetes.io~csi/pv-1/mount") || r.StagingTargetPath == "" {
			t.Errorf("stats request %v", r)
		}
	}
}
