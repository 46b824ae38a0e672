package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Claims reads what a persistentVolumeClaim or ephemeral volume resolves
// to, as the Node authorizer lets a node read them: the claims its pods
// name, their volumes, and its own Node (a local volume's node affinity).
type Claims interface {
	PersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error)
	PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error)
	Node(ctx context.Context, name string) (*v1.Node, error)
}

// claimed is a pod's claim, resolved once it was bound: a bound claim's
// volume does not change, so a container restarted later asks the API
// server nothing.
type claimed struct {
	name     string // the claim's
	claim    types.UID
	path     string
	readOnly bool
	oncePod  bool // ReadWriteOncePod: no other pod of this node may use it
	local    bool // a local volume: measured with statfs
	csi      *csiVolume
}

// claimVolume resolves a pod's persistentVolumeClaim or ephemeral volume to
// the host path of its PersistentVolume, as the kubelet's volume manager
// does (its messages): the claim must be bound, the volume bound to it; a
// hostPath volume is checked as the hostPath volume, a local one against
// its node affinity. Other volume types need their plugins, which this
// agent does not have (CSI among them): the pod waits, naming the volume.
func (m *Manager) claimVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (claimed, error) {
	name := claimName(pod, vol)
	m.mu.Lock()
	c, ok := m.claims[pod.UID][vol.Name]
	m.mu.Unlock()
	if !ok || c.name != name { // a static pod's volume may name another claim after an edit
		var err error
		if c, err = m.resolveClaim(ctx, pod, vol, name); err != nil {
			return claimed{}, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.oncePod {
		for uid, vols := range m.claims {
			for _, other := range vols {
				if uid != pod.UID && other.claim == c.claim {
					return claimed{}, fmt.Errorf("volume uses the ReadWriteOncePod access mode and is already in use by another pod (%s)", uid)
				}
			}
		}
	}
	m.setClaimLocked(pod.UID, vol.Name, c)
	return c, nil
}

func (m *Manager) setClaim(uid types.UID, volume string, c claimed) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setClaimLocked(uid, volume, c)
}

func (m *Manager) setClaimLocked(uid types.UID, volume string, c claimed) {
	if m.claims[uid] == nil {
		m.claims[uid] = map[string]claimed{}
	}
	m.claims[uid][volume] = c
}

// claimName is the claim a volume names: an ephemeral volume's is the one
// the ephemeral volume controller makes.
func claimName(pod *v1.Pod, vol *v1.Volume) string {
	if vol.PersistentVolumeClaim != nil {
		return vol.PersistentVolumeClaim.ClaimName
	}
	return pod.Name + "-" + vol.Name
}

func (m *Manager) resolveClaim(ctx context.Context, pod *v1.Pod, vol *v1.Volume, name string) (claimed, error) {
	readOnly := vol.PersistentVolumeClaim != nil && vol.PersistentVolumeClaim.ReadOnly
	if m.claimsAPI == nil {
		return claimed{}, ErrNoAPIServer
	}
	pvc, err := m.boundClaim(ctx, pod, vol, name)
	if err != nil {
		return claimed{}, fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, name, err)
	}
	pv, err := m.claimsAPI.PersistentVolume(ctx, pvc.Spec.VolumeName)
	if err != nil {
		return claimed{}, fmt.Errorf("failed to fetch PV %s from API server: %w", pvc.Spec.VolumeName, err)
	}
	switch {
	case pv.Spec.ClaimRef == nil:
		return claimed{}, fmt.Errorf("found PV object %q but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", pv.Name)
	case pv.Spec.ClaimRef.UID != pvc.UID:
		return claimed{}, fmt.Errorf("found PV object %q but its pv.Spec.ClaimRef.UID (%q) does not point to claim.UID (%q)", pv.Name, pv.Spec.ClaimRef.UID, pvc.UID)
	case pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock:
		return claimed{}, fmt.Errorf("volume %s has volumeMode Block, but is specified in volumeMounts: block volumes are not supported by this agent", pv.Name)
	}
	c := claimed{name: name, claim: pvc.UID, readOnly: readOnly,
		oncePod: slices.Contains(pvc.Spec.AccessModes, v1.ReadWriteOncePod) || slices.Contains(pv.Spec.AccessModes, v1.ReadWriteOncePod)}
	switch src := pv.Spec.PersistentVolumeSource; {
	case src.HostPath != nil:
		if err := checkHostPath(src.HostPath); err != nil {
			return claimed{}, err
		}
		c.path = src.HostPath.Path
	case src.Local != nil:
		if err := m.checkNodeAffinity(ctx, pv); err != nil {
			return claimed{}, fmt.Errorf("MountVolume.NodeAffinity check failed for volume %q : %w", pv.Name, err)
		}
		if _, err := os.Stat(src.Local.Path); err != nil {
			return claimed{}, fmt.Errorf("local volume %s: %w", pv.Name, err)
		}
		c.path, c.local = src.Local.Path, true
		// The pod's fsGroup, as the kubelet's local plugin applies it
		// (once: the claim is resolved once per pod).
		if gid := fsGroup(pod); gid >= 0 && !readOnly {
			if err := setVolumeOwnership(c.path, gid, pod.Spec.SecurityContext.FSGroupChangePolicy); err != nil {
				return claimed{}, fmt.Errorf("applyFSGroup failed for vol %s: %w", pv.Name, err)
			}
		}
	case src.CSI != nil:
		v := pvCSIVolume(pv, readOnly)
		c.csi, c.readOnly = &v, v.readOnly
	default:
		return claimed{}, fmt.Errorf("persistent volume %s: only hostPath, local and csi volumes are supported by this agent", pv.Name)
	}
	return c, nil
}

// boundClaim reads the claim and checks it may be used by the pod.
func (m *Manager) boundClaim(ctx context.Context, pod *v1.Pod, vol *v1.Volume, name string) (*v1.PersistentVolumeClaim, error) {
	pvc, err := m.claimsAPI.PersistentVolumeClaim(ctx, pod.Namespace, name)
	if err != nil {
		return nil, fmt.Errorf("failed to fetch PVC from API server: %w", err)
	}
	if vol.Ephemeral != nil && !metav1.IsControlledBy(pvc, pod) {
		return nil, fmt.Errorf("PVC %s/%s was not created for pod %s/%s (pod is not owner)", pvc.Namespace, pvc.Name, pod.Namespace, pod.Name)
	}
	switch {
	case pvc.DeletionTimestamp != nil:
		return nil, errors.New("PVC is being deleted")
	case pvc.Status.Phase != v1.ClaimBound:
		return nil, errors.New("PVC is not bound")
	case pvc.Spec.VolumeName == "":
		return nil, errors.New("PVC has empty pvc.Spec.VolumeName")
	}
	return pvc, nil
}

// checkNodeAffinity checks a volume's required node affinity against this
// node's labels, as the kubelet does before it mounts a local volume.
func (m *Manager) checkNodeAffinity(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	node, err := m.claimsAPI.Node(ctx, m.nodeName)
	if err != nil {
		return fmt.Errorf("read node %s: %w", m.nodeName, err)
	}
	ok, err := corev1helpers.MatchNodeSelectorTerms(node, pv.Spec.NodeAffinity.Required)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no matching NodeSelectorTerms")
	}
	return nil
}

// claimReadOnly reports whether the pod's volume is a claim mounted
// read-only (the volume's readOnly).
func (m *Manager) claimReadOnly(uid types.UID, volume string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claims[uid][volume].readOnly
}

// MeasuredClaim is a pod's claim whose file system the kubelet measures.
type MeasuredClaim struct {
	Volume, Claim, Path string
	// Measure, when set, asks the volume's CSI driver (NodeGetVolumeStats);
	// otherwise Path is measured with statfs.
	Measure func(ctx context.Context) (*statsapi.FsStats, error)
}

// MeasuredClaims are the pod's claims the kubelet measures, by volume
// name: local volumes (statfs, as its local plugin) and CSI volumes whose
// driver reports volume stats; a hostPath volume is not measured (the
// kubelet's hostPath plugin measures nothing, and a host path's file
// system is the node's).
func (m *Manager) MeasuredClaims(pod *v1.Pod) []MeasuredClaim {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []MeasuredClaim
	for vol, c := range m.claims[pod.UID] {
		switch {
		case c.local:
			out = append(out, MeasuredClaim{Volume: vol, Claim: c.name, Path: c.path})
		case c.csi != nil && m.csiDrivers != nil:
			if d, err := m.csiDrivers.Driver(c.csi.driver); err == nil && d.VolumeStats {
				v := *c.csi
				out = append(out, MeasuredClaim{Volume: vol, Claim: c.name, Measure: func(ctx context.Context) (*statsapi.FsStats, error) {
					return m.csiVolumeStats(ctx, d, v, pod.UID)
				}})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Volume < out[j].Volume })
	return out
}
