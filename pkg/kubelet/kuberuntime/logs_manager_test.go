package kuberuntime

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// The log links are of app containers (not the infra container), in the
// log dir of the moment; only the agent's own links whose container is gone
// are dropped: other files, live links and foreign links stay.
func TestLogLinks(t *testing.T) {
	dir := t.TempDir()
	settings := NewLogSettings(ContainerLogs{Dir: dir})
	links := NewLogLinks(settings)
	logs := t.TempDir()
	mk := func(name, id string) *kubecontainer.ContainerState {
		p := filepath.Join(logs, id+"-json.log")
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return &kubecontainer.ContainerState{ID: id, Name: name, LogPath: p, Running: true,
			Labels: map[string]string{kubecontainer.LabelPodName: "p", kubecontainer.LabelPodNamespace: "ns"}}
	}
	live, gone := mk("a", strings.Repeat("1", 64)), mk("b", strings.Repeat("2", 64))
	links.Link(live)
	links.Link(gone)
	links.Link(mk(infraName, strings.Repeat("3", 64)))
	if err := os.Symlink("/nowhere", filepath.Join(dir, "foreign.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "plain.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone.LogPath); err != nil {
		t.Fatal(err)
	}
	links.RemoveDangling()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{"foreign.log", "p_ns_a-" + live.ID + ".log", "plain.log"}
	if !slices.Equal(names, want) {
		t.Errorf("log dir %v, want %v", names, want)
	}
	// Links disabled: nothing made, nothing swept.
	settings.Set(ContainerLogs{})
	links.Link(mk("c", strings.Repeat("4", 64)))
	links.RemoveDangling()
	if after, _ := os.ReadDir(dir); len(after) != len(want) {
		t.Errorf("with links disabled the dir changed: %d entries", len(after))
	}
}
