package kubelet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/pkg/dockertools/dockertest"
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
		run   func(k *Kubelet) error
	}{
		{"downwardAPI directory", "volumes/kubernetes.io~downward-api/info/dir", func(k *Kubelet) error { _, err := k.volumes.Setup(pod); return err }},
		{"downwardAPI volume", "volumes/kubernetes.io~downward-api/info", func(k *Kubelet) error { _, err := k.volumes.Setup(pod); return err }},
		{"emptyDir volume", "volumes/kubernetes.io~empty-dir/scratch", func(k *Kubelet) error { _, err := k.volumes.Setup(pod); return err }},
		{"termination message directory", "containers/c", func(k *Kubelet) error {
			_, err := k.volumes.Binds(pod, &pod.Spec.Containers[0], nil, nil, 0)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := New(Config{NodeName: "n", RootDir: t.TempDir()}, dockertest.NewFakeClient(), seenAll{})
			outside := t.TempDir()
			if err := os.Chmod(outside, 0o700); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(k.podDir(pod.UID), tc.plant)
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, link); err != nil {
				t.Fatal(err)
			}
			err := tc.run(k)
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
