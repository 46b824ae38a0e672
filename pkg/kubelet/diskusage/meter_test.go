package diskusage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

type fakeRuntime struct {
	usage *kubecontainer.DiskUsage
	err   error
	asked []string // label=value of each call
}

func (f *fakeRuntime) DiskUsage(_ context.Context, label, value string) (*kubecontainer.DiskUsage, error) {
	f.asked = append(f.asked, label+"="+value)
	return f.usage, f.err
}

type fakePods map[types.UID]*kubecontainer.PodState

func (f fakePods) All() map[types.UID]*kubecontainer.PodState { return f }

// A measurement asks the runtime for the owner's containers only, and adds
// each container's log files and each pod's volumes; a runtime that cannot
// answer makes no measurement.
func TestMeasure(t *testing.T) {
	root := t.TempDir()
	logPath := filepath.Join(root, "c1-json.log")
	for _, f := range []struct {
		path string
		size int
	}{{logPath, 100}, {logPath + ".1", 50}, {filepath.Join(root, "u1", "volumes", "data", "f"), 8192}} {
		if err := os.MkdirAll(filepath.Dir(f.path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f.path, make([]byte, f.size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pods := fakePods{"u1": {UID: "u1", Containers: []*kubecontainer.ContainerState{
		{ID: "c1", LogPath: logPath}, {ID: "c2"}}}}
	usage := &kubecontainer.DiskUsage{Images: 4096}
	for _, tc := range []struct {
		name    string
		runtime *fakeRuntime
		wantErr bool
	}{
		{"measured", &fakeRuntime{usage: usage}, false},
		{"runtime unavailable", &fakeRuntime{err: kubecontainer.ErrRuntimeUnavailable}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Meter{Runtime: tc.runtime, Pods: pods, Node: "n", PodDir: func(uid types.UID) string { return filepath.Join(root, string(uid)) }}
			st, err := m.measure(context.Background())
			if want := []string{"io.classic-kubelet.node=n"}; len(tc.runtime.asked) != 1 || tc.runtime.asked[0] != want[0] {
				t.Errorf("runtime asked for %v, want %v", tc.runtime.asked, want)
			}
			if tc.wantErr {
				if !errors.Is(err, kubecontainer.ErrRuntimeUnavailable) || st != nil {
					t.Errorf("measure = %+v, %v; want no stats and the runtime's error", st, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.Runtime != usage || st.Logs["c1"] != 150 || len(st.Logs) != 1 || st.Volumes["u1"] < 8192 || st.Taken.IsZero() {
				t.Errorf("measure = %+v, want the runtime's usage, 150 log bytes of c1 only, at least 8192 volume bytes of u1", st)
			}
			if m.Last() != nil {
				t.Error("measure stored its result; only Run does")
			}
		})
	}
}
