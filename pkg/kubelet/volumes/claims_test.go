package volumes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// fakeClaims serves claims, volumes and the node, counting reads.
type fakeClaims struct {
	pvcs  map[string]*v1.PersistentVolumeClaim
	pvs   map[string]*v1.PersistentVolume
	node  *v1.Node
	reads int
}

func (f *fakeClaims) PersistentVolumeClaim(_ context.Context, ns, name string) (*v1.PersistentVolumeClaim, error) {
	f.reads++
	if c, ok := f.pvcs[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

func (f *fakeClaims) PersistentVolume(_ context.Context, name string) (*v1.PersistentVolume, error) {
	f.reads++
	if v, ok := f.pvs[name]; ok {
		return v, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
}

func (f *fakeClaims) Node(context.Context, string) (*v1.Node, error) {
	f.reads++
	if f.node == nil {
		return nil, errors.New("no node")
	}
	return f.node, nil
}

func TestClaimVolume(t *testing.T) {
	dir := t.TempDir()
	pod := func(uid string, vol v1.VolumeSource) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: types.UID(uid)},
			Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "data", VolumeSource: vol}}}}
	}
	claimVol := func(name string, ro bool) v1.VolumeSource {
		return v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: name, ReadOnly: ro}}
	}
	ephemeral := v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}
	claim := func(name, volume string, phase v1.PersistentVolumeClaimPhase, modes ...v1.PersistentVolumeAccessMode) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
			Spec: v1.PersistentVolumeClaimSpec{VolumeName: volume, AccessModes: modes}, Status: v1.PersistentVolumeClaimStatus{Phase: phase}}
	}
	volume := func(name, claimUID string, src v1.PersistentVolumeSource) *v1.PersistentVolume {
		pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: src}}
		if claimUID != "" {
			pv.Spec.ClaimRef = &v1.ObjectReference{UID: types.UID(claimUID)}
		}
		return pv
	}
	hostPath := v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: dir}}
	local := v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dir}}
	affinity := func(pv *v1.PersistentVolume, host string) *v1.PersistentVolume {
		pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
			MatchExpressions: []v1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: v1.NodeSelectorOpIn, Values: []string{host}}}}}}}
		return pv
	}
	block := v1.PersistentVolumeBlock
	blockPV := volume("blk", "uid-blk", hostPath)
	blockPV.Spec.VolumeMode = &block
	owned := claim("web-data", "pv-eph", v1.ClaimBound)
	owned.OwnerReferences = []metav1.OwnerReference{{UID: "pod-1", Controller: new(true), Name: "web", Kind: "Pod", APIVersion: "v1"}}
	deleting := claim("deleting", "pv-del", v1.ClaimBound)
	deleting.DeletionTimestamp = &metav1.Time{}
	objects := &fakeClaims{
		pvcs: map[string]*v1.PersistentVolumeClaim{
			"ns/bound": claim("bound", "pv-1", v1.ClaimBound), "ns/pending": claim("pending", "", v1.ClaimPending),
			"ns/stolen": claim("stolen", "pv-other", v1.ClaimBound), "ns/local": claim("local", "pv-local", v1.ClaimBound),
			"ns/faraway": claim("faraway", "pv-far", v1.ClaimBound), "ns/nfs": claim("nfs", "pv-nfs", v1.ClaimBound),
			"ns/blk": claim("blk", "blk", v1.ClaimBound), "ns/web-data": owned, "ns/deleting": deleting,
			"ns/once": claim("once", "pv-once", v1.ClaimBound, v1.ReadWriteOncePod),
		},
		pvs: map[string]*v1.PersistentVolume{
			"pv-1": volume("pv-1", "uid-bound", hostPath), "pv-other": volume("pv-other", "uid-someone", hostPath),
			"pv-local": affinity(volume("pv-local", "uid-local", local), "node-a"), "pv-far": affinity(volume("pv-far", "uid-faraway", local), "node-b"),
			"pv-nfs": volume("pv-nfs", "uid-nfs", v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}),
			"blk":    blockPV, "pv-eph": volume("pv-eph", "uid-web-data", hostPath), "pv-once": volume("pv-once", "uid-once", hostPath),
		},
		node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"kubernetes.io/hostname": "node-a"}}},
	}
	m := NewManager(Config{RootDir: t.TempDir(), NodeName: "node-a"}, Deps{Claims: objects})
	cases := []struct {
		name string
		pod  *v1.Pod
		want string // the host path, or "error: " and words of the error
	}{
		{"bound hostPath", pod("pod-1", claimVol("bound", false)), dir},
		{"pending", pod("pod-1", claimVol("pending", false)), "error: error processing PVC ns/pending: PVC is not bound"},
		{"missing", pod("pod-1", claimVol("gone", false)), `error: error processing PVC ns/gone: failed to fetch PVC from API server: persistentvolumeclaims "gone" not found`},
		{"being deleted", pod("pod-1", claimVol("deleting", false)), "error: PVC is being deleted"},
		{"volume bound elsewhere", pod("pod-1", claimVol("stolen", false)), `error: found PV object "pv-other" but its pv.Spec.ClaimRef.UID ("uid-someone") does not point to claim.UID ("uid-stolen")`},
		{"local, this node", pod("pod-1", claimVol("local", false)), dir},
		{"local, another node", pod("pod-1", claimVol("faraway", false)), `error: MountVolume.NodeAffinity check failed for volume "pv-far" : no matching NodeSelectorTerms`},
		{"nfs", pod("pod-1", claimVol("nfs", false)), "error: persistent volume pv-nfs: only hostPath, local and csi volumes are supported by this agent"},
		{"block", pod("pod-1", claimVol("blk", false)), "error: volume blk has volumeMode Block"},
		{"ephemeral, the pod's", pod("pod-1", ephemeral), dir},
		{"ephemeral, another pod's", pod("pod-2", ephemeral), "error: PVC ns/web-data was not created for pod ns/web (pod is not owner)"},
		{"ReadWriteOncePod, first pod", pod("pod-1", claimVol("once", false)), dir},
		{"ReadWriteOncePod, second pod", pod("pod-2", claimVol("once", false)), "error: volume uses the ReadWriteOncePod access mode and is already in use by another pod (pod-1)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.claimVolume(context.Background(), tc.pod, &tc.pod.Spec.Volumes[0])
			if wantErr, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Errorf("got %+v %v, want an error with %q", got, err, wantErr)
				}
			} else if err != nil || got.path != tc.want {
				t.Errorf("got %+v %v, want %s", got, err, tc.want)
			}
		})
	}

	// Resolved once: a container restarted later asks the API server nothing.
	p := pod("pod-3", claimVol("bound", true))
	if _, err := m.Setup(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	reads := objects.reads
	paths, err := m.Setup(context.Background(), p)
	if err != nil || paths["data"] != dir || objects.reads != reads {
		t.Errorf("second setup: %v %v, %d more reads", paths, err, objects.reads-reads)
	}
	if !m.claimReadOnly(p.UID, "data") {
		t.Error("a readOnly claim is not mounted read-only")
	}
	// Once the first pod is gone, the ReadWriteOncePod claim is another's.
	m.Forget("pod-1")
	if _, err := m.claimVolume(context.Background(), pod("pod-2", claimVol("once", false)), &v1.Volume{Name: "data", VolumeSource: claimVol("once", false)}); err != nil {
		t.Errorf("ReadWriteOncePod claim after its pod was forgotten: %v", err)
	}
	// Standalone: no API server.
	standalone := NewManager(Config{RootDir: t.TempDir()}, Deps{})
	if _, err := standalone.claimVolume(context.Background(), pod("pod-1", claimVol("bound", false)), &v1.Volume{Name: "data", VolumeSource: claimVol("bound", false)}); !errors.Is(err, ErrNoAPIServer) {
		t.Errorf("standalone: %v, want %v", err, ErrNoAPIServer)
	}
}

// A volume's files get the pod's fsGroup (group rw, directories setgid);
// OnRootMismatch leaves a volume whose root has them; links are left.
func TestSetVolumeOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	check := func(gid int) {
		t.Helper()
		for _, p := range []struct {
			rel  string
			mode os.FileMode
		}{{".", 0o770 | os.ModeSetgid | os.ModeDir}, {"sub", 0o770 | os.ModeSetgid | os.ModeDir}, {"sub/f", 0o660}} {
			st, err := os.Stat(filepath.Join(dir, p.rel))
			if err != nil {
				t.Fatal(err)
			}
			if g := int(st.Sys().(*syscall.Stat_t).Gid); g != gid || st.Mode()&(os.ModePerm|os.ModeSetgid|os.ModeDir) != p.mode {
				t.Errorf("%s: gid %d mode %v, want %d %v", p.rel, g, st.Mode(), gid, p.mode)
			}
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := setVolumeOwnership(dir, 4321, nil); err != nil {
		t.Fatal(err)
	}
	check(4321)
	if st, _ := os.Lstat("/etc/passwd"); st.Sys().(*syscall.Stat_t).Gid == 4321 {
		t.Error("the link was followed")
	}
	// The root matches: OnRootMismatch walks nothing.
	if err := os.Chown(filepath.Join(dir, "sub", "f"), -1, 0); err != nil {
		t.Fatal(err)
	}
	onRoot := v1.FSGroupChangeOnRootMismatch
	if err := setVolumeOwnership(dir, 4321, &onRoot); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Join(dir, "sub", "f")); st.Sys().(*syscall.Stat_t).Gid != 0 {
		t.Error("OnRootMismatch walked a volume whose root matched")
	}
}
