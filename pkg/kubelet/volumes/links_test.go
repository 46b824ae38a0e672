package volumes

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestVolumeWritersRefuseLinks plants, where each of the agent's writers
// works below a pod's directory, the symlink a hostile container (or
// anyone able to write there) would swap in, and checks that the writer
// fails or replaces the link, and that nothing outside is written or
// chmod-ed.
func TestVolumeWritersRefuseLinks(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1", Labels: map[string]string{"a": "b"}},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "img"}},
			Volumes: []v1.Volume{
				{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
					{Path: "dir/labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				}}}},
				{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			},
		}}
	for _, tc := range []struct {
		name  string
		plant string // path below the pod's directory swapped for a link to outside
		run   func(m *Manager) error
	}{
		{"downwardAPI directory", "volumes/kubernetes.io~downward-api/info/dir", func(m *Manager) error { _, err := m.Setup(context.Background(), pod); return err }},
		{"downwardAPI volume", "volumes/kubernetes.io~downward-api/info", func(m *Manager) error { _, err := m.Setup(context.Background(), pod); return err }},
		{"emptyDir volume", "volumes/kubernetes.io~empty-dir/scratch", func(m *Manager) error { _, err := m.Setup(context.Background(), pod); return err }},
		{"termination message directory", "containers/c", func(m *Manager) error {
			_, err := m.Binds(pod, &pod.Spec.Containers[0], nil, nil, 0)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManager(Config{RootDir: t.TempDir(), NodeMemory: 1 << 30}, Deps{Downward: fixedValues{}})
			outside := t.TempDir()
			if err := os.Chmod(outside, 0o700); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(m.PodDir(pod.UID), tc.plant)
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, link); err != nil {
				t.Fatal(err)
			}
			err := tc.run(m)
			if err == nil || !strings.Contains(err.Error(), "symlink") {
				t.Errorf("writer succeeded or failed for another reason (%v), want it to refuse the link", err)
			}
			entries, _ := os.ReadDir(outside)
			fi, _ := os.Stat(outside)
			if len(entries) != 0 || fi.Mode().Perm() != 0o700 {
				t.Errorf("outside now holds %d entries with mode %v: the writer followed the link", len(entries), fi.Mode().Perm())
			}
		})
	}
}

// fixedValues answers every downward API value with its field path.
type fixedValues struct{}

func (fixedValues) FieldValue(_ *v1.Pod, path string) (string, error) { return path, nil }
func (fixedValues) ResourceValue(_ *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	return ref.Resource, nil
}

// Setup makes each volume where Binds points, with the modes containers
// need; downwardAPI volumes are bound read-only; the termination message
// file exists, writable by any user.
func TestSetupAndBinds(t *testing.T) {
	m := NewManager(Config{RootDir: t.TempDir(), NodeMemory: 1 << 30}, Deps{Downward: fixedValues{}})
	mode := int32(0o600)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "c", Image: "img", VolumeMounts: []v1.VolumeMount{
				{Name: "info", MountPath: "/etc/podinfo"}, {Name: "scratch", MountPath: "/scratch"},
				{Name: "scratch", MountPath: "/sub", SubPathExpr: "$(NAME)/x"},
			}}},
			Volumes: []v1.Volume{
				{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
					{Path: "a/name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}, Mode: &mode},
				}}}},
				{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			},
		}}
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(paths["info"], "a", "name"))
	if err != nil || string(data) != "metadata.name" {
		t.Errorf("downwardAPI file: %q %v", data, err)
	}
	if fi, _ := os.Stat(filepath.Join(paths["info"], "a", "name")); fi == nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("downwardAPI file mode %v, want 0600", fi)
	}
	if fi, _ := os.Stat(paths["scratch"]); fi == nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("emptyDir mode %v, want 0777", fi)
	}
	binds, err := m.Binds(pod, &pod.Spec.Containers[0], paths, func(s string) string { return strings.ReplaceAll(s, "$(NAME)", "p") }, 0)
	defer func() { _ = CleanupPodDir(m.PodDir(pod.UID)) }()
	if err != nil {
		if strings.Contains(err.Error(), "operation not permitted") {
			t.Skip("bind mounts need root")
		}
		t.Fatal(err)
	}
	want := []string{paths["info"] + ":/etc/podinfo:ro", paths["scratch"] + ":/scratch"}
	if len(binds) != 4 || binds[0] != want[0] || binds[1] != want[1] || !strings.HasSuffix(binds[2], ":/sub") ||
		!strings.HasSuffix(binds[3], "containers/c/0-termination-log:/dev/termination-log") {
		t.Errorf("binds %q", binds)
	}
	if fi, _ := os.Stat(filepath.Join(paths["scratch"], "p", "x")); fi == nil || !fi.IsDir() || fi.Mode().Perm() != 0o777 {
		t.Errorf("the subPathExpr directory was not made in the volume with its root's mode: %v", fi)
	}
	if err := CleanupPodDir(m.PodDir(pod.UID)); err != nil {
		t.Errorf("cleanup: %v", err)
	}
	if _, err := os.Stat(m.PodDir(pod.UID)); !os.IsNotExist(err) {
		t.Errorf("pod directory left: %v", err)
	}
}

// labelValues answers metadata.labels['k'] from the pod.
type labelValues struct{ fixedValues }

func (labelValues) FieldValue(pod *v1.Pod, _ string) (string, error) { return pod.Labels["k"], nil }

// A running pod's downwardAPI volume follows its labels at each refresh,
// and a refresh with nothing changed writes nothing.
func TestDownwardAPIRefresh(t *testing.T) {
	m := NewManager(Config{RootDir: t.TempDir()}, Deps{Downward: labelValues{}})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1", Labels: map[string]string{"k": "v1"}},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{
			Items: []v1.DownwardAPIVolumeFile{{Path: "k", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['k']"}}}}}}}}}
	paths, err := m.Setup(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(paths["info"], "k")
	before, _ := os.Stat(file)
	if err := m.Refresh(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(file); !os.SameFile(before, after) {
		t.Error("a refresh with the same labels rewrote the file")
	}
	pod.Labels["k"] = "v2"
	if err := m.Refresh(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(file); err != nil || string(data) != "v2" {
		t.Errorf("after the label changed: %q %v, want v2", data, err)
	}
}
