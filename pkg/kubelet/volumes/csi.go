package volumes

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes/csi"
)

// The kubelet's CSI plugin directories: a pod's published volume is
// <pod dir>/volumes/kubernetes.io~csi/<volume>/mount, a staged one
// <root-dir>/plugins/kubernetes.io/csi/<driver>/<sha256 of its handle>/globalmount,
// each with a vol_data.json beside it that a restarted agent reads to
// unpublish (and unstage) what a pod it no longer knows left.
const (
	csiPodPlugin = "kubernetes.io~csi"
	csiDataFile  = "vol_data.json"
)

// CSIDrivers are the CSI node plugins registered on this node.
type CSIDrivers interface {
	Driver(name string) (*csi.Driver, error)
}

// CSIObjects reads what the kubelet's CSI plugin reads of the control
// plane: a driver's CSIDriver object (nil when there is none) and a
// volume's VolumeAttachment.
type CSIObjects interface {
	CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error)
	VolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error)
}

// csiVolume is one CSI volume of a pod: a PersistentVolume's csi source,
// or an inline (ephemeral) csi volume.
type csiVolume struct {
	driver, handle string
	specName       string // the PV's name, or the pod volume's (inline)
	attributes     map[string]string
	fsType         string
	mountFlags     []string
	accessMode     v1.PersistentVolumeAccessMode
	readOnly       bool
	ephemeral      bool
	stageSecret    *v1.SecretReference
	publishSecret  *v1.SecretReference
}

// volData is the kubelet's vol_data.json.
type volData struct {
	SpecVolID     string `json:"specVolID"`
	VolumeHandle  string `json:"volumeHandle"`
	DriverName    string `json:"driverName"`
	NodeName      string `json:"nodeName"`
	AttachmentID  string `json:"attachmentID,omitempty"`
	LifecycleMode string `json:"volumeLifecycleMode"`
}

func pvCSIVolume(pv *v1.PersistentVolume, readOnly bool) csiVolume {
	src := pv.Spec.CSI
	mode := v1.ReadWriteOnce
	if len(pv.Spec.AccessModes) > 0 {
		mode = pv.Spec.AccessModes[0]
	}
	return csiVolume{driver: src.Driver, handle: src.VolumeHandle, specName: pv.Name, attributes: src.VolumeAttributes,
		fsType: src.FSType, mountFlags: pv.Spec.MountOptions, accessMode: mode, readOnly: readOnly || src.ReadOnly,
		stageSecret: src.NodeStageSecretRef, publishSecret: src.NodePublishSecretRef}
}

func inlineCSIVolume(pod *v1.Pod, vol *v1.Volume) csiVolume {
	src := vol.CSI
	v := csiVolume{driver: src.Driver, handle: inlineHandle(pod.UID, vol.Name), specName: vol.Name, attributes: src.VolumeAttributes,
		accessMode: v1.ReadWriteOnce, readOnly: src.ReadOnly != nil && *src.ReadOnly, ephemeral: true}
	if src.FSType != nil {
		v.fsType = *src.FSType
	}
	if ref := src.NodePublishSecretRef; ref != nil {
		v.publishSecret = &v1.SecretReference{Namespace: pod.Namespace, Name: ref.Name}
	}
	return v
}

// inlineHandle is the handle the kubelet gives an inline volume: unique to
// the pod and volume.
func inlineHandle(uid types.UID, volume string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(string(uid)+volume)))
}

// attachmentName is the VolumeAttachment the attach/detach controller
// makes for a volume on a node, named as the kubelet looks it up.
func attachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

func (m *Manager) csiTarget(uid types.UID, specName string) string {
	return filepath.Join(m.PodDir(uid), "volumes", csiPodPlugin, specName, "mount")
}

func (m *Manager) csiStaging(driver, handle string) string {
	return filepath.Join(m.rootDir, "plugins", "kubernetes.io", "csi", driver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))), "globalmount")
}

// setupCSI publishes a CSI volume for the pod, staging it first if the
// driver stages, as the kubelet's CSI plugin: the driver must be
// registered; a persistent volume of a driver that needs attaching waits
// for its VolumeAttachment; an inline volume needs a CSIDriver that allows
// the Ephemeral mode. A volume published already (its target a mount
// point: the agent restarted under a running pod) is left as it is.
func (m *Manager) setupCSI(ctx context.Context, pod *v1.Pod, v csiVolume) (string, error) {
	target := m.csiTarget(pod.UID, v.specName)
	if mounted, _ := isMountPoint(target); mounted {
		return target, nil
	}
	if m.csiDrivers == nil || m.csiObjects == nil {
		return "", ErrNoAPIServer
	}
	d, err := m.csiDrivers.Driver(v.driver)
	if err != nil {
		return "", fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: %w", err)
	}
	obj, err := m.csiObjects.CSIDriver(ctx, v.driver)
	if err != nil {
		return "", fmt.Errorf("read CSIDriver %s: %w", v.driver, err)
	}
	policy := driverPolicy(obj)
	mode := storagev1.VolumeLifecyclePersistent
	if v.ephemeral {
		mode = storagev1.VolumeLifecycleEphemeral
	}
	if !slices.Contains(policy.modes, mode) {
		return "", fmt.Errorf("volume mode %q not supported by driver %s (only supports %q)", mode, v.driver, policy.modes)
	}
	ctx, cancel := context.WithTimeout(ctx, m.csiTimeout)
	defer cancel()
	var publishContext map[string]string
	attachment := ""
	if !v.ephemeral && policy.attach {
		attachment = attachmentName(v.handle, v.driver, m.nodeName)
		if publishContext, err = m.attached(ctx, attachment, v.specName); err != nil {
			return "", err
		}
	}
	data := volData{SpecVolID: v.specName, VolumeHandle: v.handle, DriverName: v.driver, NodeName: m.nodeName, AttachmentID: attachment, LifecycleMode: string(mode)}
	capability := &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: v.fsType, MountFlags: v.mountFlags}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessMode(v.accessMode)}}
	staging := ""
	if d.Stage && !v.ephemeral {
		staging = m.csiStaging(v.driver, v.handle)
		secrets, err := m.csiSecrets(ctx, v.stageSecret)
		if err != nil {
			return "", err
		}
		if err := writeVolData(staging, data); err != nil {
			return "", err
		}
		// CSI: the CO makes the staging directory (the publish target's
		// parent only: the driver makes the target).
		if err := os.MkdirAll(staging, 0o750); err != nil {
			return "", fmt.Errorf("staging directory: %w", err)
		}
		if _, err := d.Node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: v.handle, PublishContext: publishContext,
			StagingTargetPath: staging, VolumeCapability: capability, Secrets: secrets, VolumeContext: v.attributes}); err != nil {
			return "", fmt.Errorf("MountVolume.MountDevice failed for volume %q : rpc error: NodeStageVolume: %w", v.specName, err)
		}
	}
	secrets, err := m.csiSecrets(ctx, v.publishSecret)
	if err != nil {
		return "", err
	}
	attributes := v.attributes
	if policy.podInfo {
		attributes = make(map[string]string, len(v.attributes)+5)
		for k, val := range v.attributes {
			attributes[k] = val
		}
		attributes["csi.storage.k8s.io/pod.name"] = pod.Name
		attributes["csi.storage.k8s.io/pod.namespace"] = pod.Namespace
		attributes["csi.storage.k8s.io/pod.uid"] = string(pod.UID)
		attributes["csi.storage.k8s.io/serviceAccount.name"] = pod.Spec.ServiceAccountName
		attributes["csi.storage.k8s.io/ephemeral"] = strconv.FormatBool(v.ephemeral)
	}
	// The target's parent and vol_data.json first: a publish that fails
	// half-way is unpublished with the pod.
	if err := writeVolData(target, data); err != nil {
		return "", err
	}
	if _, err := d.Node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: v.handle, PublishContext: publishContext,
		StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, Readonly: v.readOnly,
		Secrets: secrets, VolumeContext: attributes}); err != nil {
		return "", fmt.Errorf("rpc error: NodePublishVolume: %w", err)
	}
	if gid := fsGroup(pod); gid >= 0 && !v.readOnly && policy.ownsFS(v) {
		if err := setVolumeOwnership(target, gid, pod.Spec.SecurityContext.FSGroupChangePolicy); err != nil {
			return "", fmt.Errorf("applyFSGroup failed for vol %s: %w", v.handle, err)
		}
	}
	return target, nil
}

// attached waits for nothing: it reads the volume's VolumeAttachment once
// and fails (the pod retries on back-off) until the attacher marked it
// attached, then returns its publish context.
func (m *Manager) attached(ctx context.Context, name, volume string) (map[string]string, error) {
	va, err := m.csiObjects.VolumeAttachment(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, fmt.Errorf("MountVolume.WaitForAttach failed for volume %q : volume attachment %s does not exist yet (the driver needs attaching)", volume, name)
	case err != nil:
		return nil, fmt.Errorf("MountVolume.WaitForAttach failed for volume %q : %w", volume, err)
	case va.DeletionTimestamp != nil:
		return nil, fmt.Errorf("MountVolume.WaitForAttach failed for volume %q : volume attachment %s is being deleted", volume, name)
	case !va.Status.Attached:
		msg := "not attached yet"
		if e := va.Status.AttachError; e != nil {
			msg = "attach error: " + e.Message
		}
		return nil, fmt.Errorf("MountVolume.WaitForAttach failed for volume %q : volume attachment %s is %s", volume, name, msg)
	}
	return va.Status.AttachmentMetadata, nil
}

// csiPolicy is what a CSIDriver object says, with the defaults of a driver
// that has none (attach required, persistent volumes only).
type csiPolicy struct {
	attach, podInfo bool
	modes           []storagev1.VolumeLifecycleMode
	fsGroup         storagev1.FSGroupPolicy
}

func driverPolicy(d *storagev1.CSIDriver) csiPolicy {
	p := csiPolicy{attach: true, modes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}, fsGroup: storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy}
	if d == nil {
		return p
	}
	if d.Spec.AttachRequired != nil {
		p.attach = *d.Spec.AttachRequired
	}
	p.podInfo = d.Spec.PodInfoOnMount != nil && *d.Spec.PodInfoOnMount
	if len(d.Spec.VolumeLifecycleModes) > 0 {
		p.modes = d.Spec.VolumeLifecycleModes
	}
	if d.Spec.FSGroupPolicy != nil {
		p.fsGroup = *d.Spec.FSGroupPolicy
	}
	return p
}

// ownsFS: the kubelet applies a pod's fsGroup to a CSI volume when the
// driver's policy is File, or (the default) the volume has an fsType and
// is ReadWriteOnce.
func (p csiPolicy) ownsFS(v csiVolume) bool {
	switch p.fsGroup {
	case storagev1.FileFSGroupPolicy:
		return true
	case storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy:
		return v.fsType != "" && v.accessMode == v1.ReadWriteOnce
	}
	return false
}

func accessMode(m v1.PersistentVolumeAccessMode) csipb.VolumeCapability_AccessMode_Mode {
	switch m {
	case v1.ReadOnlyMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteMany:
		return csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	}
	return csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
}

func (m *Manager) csiSecrets(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	data, err := m.secretData(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("fetching secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(data))
	for k, v := range data {
		out[k] = string(v)
	}
	return out, nil
}

// writeVolData makes the parent of a target path and writes the volume's
// data beside the target.
func writeVolData(target string, d volData) error {
	dir := filepath.Dir(target)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("volume directory: %w", err)
	}
	b, _ := json.Marshal(d)
	if err := os.WriteFile(filepath.Join(dir, csiDataFile), b, 0o600); err != nil {
		return fmt.Errorf("volume data: %w", err)
	}
	return nil
}

func readVolData(dir string) (volData, error) {
	var d volData
	b, err := os.ReadFile(filepath.Join(dir, csiDataFile))
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w", filepath.Join(dir, csiDataFile), err)
	}
	return d, nil
}

// csiVolumeStats asks the driver what a published volume holds, as the
// kubelet's CSI metrics provider does.
func (m *Manager) csiVolumeStats(ctx context.Context, d *csi.Driver, v csiVolume, uid types.UID) (*statsapi.FsStats, error) {
	req := &csipb.NodeGetVolumeStatsRequest{VolumeId: v.handle, VolumePath: m.csiTarget(uid, v.specName)}
	if d.Stage {
		req.StagingTargetPath = m.csiStaging(v.driver, v.handle)
	}
	resp, err := d.Node.NodeGetVolumeStats(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("NodeGetVolumeStats of volume %s (driver %s): %w", v.specName, v.driver, err)
	}
	fs := &statsapi.FsStats{Time: metav1.NewTime(m.clock.Now())}
	for _, u := range resp.Usage {
		available, total, used := uint64(u.Available), uint64(u.Total), uint64(u.Used)
		switch u.Unit {
		case csipb.VolumeUsage_BYTES:
			fs.AvailableBytes, fs.CapacityBytes, fs.UsedBytes = &available, &total, &used
		case csipb.VolumeUsage_INODES:
			fs.InodesFree, fs.Inodes, fs.InodesUsed = &available, &total, &used
		}
	}
	return fs, nil
}

// tearDownCSI unpublishes the pod's CSI volumes (found by their
// vol_data.json, so a restarted agent finds those of pods it never knew),
// then unstages each staged volume no other pod on the node publishes, once:
// each step removes its vol_data.json. A driver not registered (yet) keeps
// the pod's directory for a later try; nothing is unmounted under the
// driver.
func (m *Manager) tearDownCSI(ctx context.Context, uid types.UID) error {
	root := filepath.Join(m.PodDir(uid), "volumes", csiPodPlugin)
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(root, e.Name())
		d, err := readVolData(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := m.unpublish(ctx, d, filepath.Join(dir, "mount")); err != nil {
			errs = append(errs, fmt.Errorf("UnmountVolume.TearDown failed for volume %q (UniqueName: \"kubernetes.io/csi/%s^%s\") pod %q: %w", e.Name(), d.DriverName, d.VolumeHandle, uid, err))
		}
	}
	return errors.Join(errs...)
}

func (m *Manager) unpublish(ctx context.Context, d volData, target string) error {
	if m.csiDrivers == nil {
		return fmt.Errorf("driver name %s %w", d.DriverName, csi.ErrNotRegistered)
	}
	drv, err := m.csiDrivers.Driver(d.DriverName)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.csiTimeout)
	defer cancel()
	if _, err := drv.Node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: d.VolumeHandle, TargetPath: target}); err != nil {
		return fmt.Errorf("rpc error: NodeUnpublishVolume: %w", err)
	}
	if mounted, _ := isMountPoint(target); mounted {
		return fmt.Errorf("%s is still mounted after NodeUnpublishVolume", target)
	}
	// Removed one by one, as the kubelet does: a target the driver left
	// files in is an error, never data removed.
	if err := removeVolumeDir(target); err != nil {
		return err
	}
	staging := m.csiStaging(d.DriverName, d.VolumeHandle)
	if _, err := readVolData(filepath.Dir(staging)); err != nil || m.published(d) {
		return nil // not staged, or staged for another pod too
	}
	if _, err := drv.Node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: d.VolumeHandle, StagingTargetPath: staging}); err != nil {
		return fmt.Errorf("UnmountDevice: rpc error: NodeUnstageVolume: %w", err)
	}
	if mounted, _ := isMountPoint(staging); mounted {
		return fmt.Errorf("%s is still mounted after NodeUnstageVolume", staging)
	}
	klog.V(2).Infof("CSI volume %s of driver %s unstaged", d.VolumeHandle, d.DriverName)
	return removeVolumeDir(staging)
}

// removeVolumeDir removes a (staging or publish) target, the vol_data.json
// beside it and their directory, each only if it is what it should be.
func removeVolumeDir(target string) error {
	for _, p := range []string{target, filepath.Join(filepath.Dir(target), csiDataFile), filepath.Dir(target)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// published reports whether some pod directory on the node still holds a
// publication of the volume.
func (m *Manager) published(d volData) bool {
	matches, _ := filepath.Glob(filepath.Join(m.rootDir, "pods", "*", "volumes", csiPodPlugin, "*", csiDataFile))
	for _, f := range matches {
		if other, err := readVolData(filepath.Dir(f)); err == nil && other.DriverName == d.DriverName && other.VolumeHandle == d.VolumeHandle {
			return true
		}
	}
	return false
}
