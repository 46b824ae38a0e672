package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func podLogContainer(name string, restarts int, logPath string, running bool) *kubecontainer.ContainerState {
	return &kubecontainer.ContainerState{ID: strings.Repeat("a", 64), Name: name, RestartCount: restarts, LogPath: logPath, Running: running,
		Labels: map[string]string{kubecontainer.LabelPodNamespace: "ns", kubecontainer.LabelPodName: "web", kubecontainer.LabelPodUID: "u-1"}}
}

func TestPodLogPath(t *testing.T) {
	cases := []struct {
		name   string
		change func(c *kubecontainer.ContainerState)
		want   string // "" for none
	}{
		{"first instance", func(*kubecontainer.ContainerState) {}, "ns_web_u-1/app/0.log"},
		{"restart count", func(c *kubecontainer.ContainerState) { c.RestartCount = 12 }, "ns_web_u-1/app/12.log"},
		{"dotted pod name", func(c *kubecontainer.ContainerState) { c.Labels[kubecontainer.LabelPodName] = "a.b" }, "ns_a.b_u-1/app/0.log"},
		{"no uid label", func(c *kubecontainer.ContainerState) { delete(c.Labels, kubecontainer.LabelPodUID) }, ""},
		{"no namespace label", func(c *kubecontainer.ContainerState) { delete(c.Labels, kubecontainer.LabelPodNamespace) }, ""},
		{"underscore in a label", func(c *kubecontainer.ContainerState) { c.Labels[kubecontainer.LabelPodUID] = "a_b" }, ""},
		{"slash in a label", func(c *kubecontainer.ContainerState) { c.Labels[kubecontainer.LabelPodName] = "../x" }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := podLogContainer("app", 0, "/x", true)
			tc.change(c)
			pod, container, name, ok := podLogPath(c)
			got := ""
			if ok {
				got = filepath.Join(pod, container, name)
			}
			if got != tc.want {
				t.Errorf("path %q, want %q", got, tc.want)
			}
		})
	}
}

// Each instance gets <n>.log, linked to its json-file log; removing the
// instances removes their links and, with the last, the pod's directory.
func TestPodLogsCreateAndRemove(t *testing.T) {
	root := filepath.Join(t.TempDir(), "pods") // made on first use
	l := podLogs{dir: root}
	logs := t.TempDir()
	logOf := func(name string) string {
		p := filepath.Join(logs, name)
		if err := os.WriteFile(p, []byte("line\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	first, second := podLogContainer("app", 0, logOf("a-json.log"), false), podLogContainer("app", 1, logOf("b-json.log"), true)
	for _, c := range []*kubecontainer.ContainerState{first, second} {
		if err := l.create(c); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(root, "ns_web_u-1", "app")
	for name, want := range map[string]string{"0.log": first.LogPath, "1.log": second.LogPath} {
		if target, err := os.Readlink(filepath.Join(dir, name)); err != nil || target != want {
			t.Errorf("%s -> %q, %v; want %q", name, target, err, want)
		}
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("container log dir: %v, %v", fi, err)
	}
	// A dead instance does not take over a running one's link.
	stale := podLogContainer("app", 1, logOf("c-json.log"), false)
	if err := l.create(stale); err != nil {
		t.Fatal(err)
	}
	l.remove(stale)
	if target, _ := os.Readlink(filepath.Join(dir, "1.log")); target != second.LogPath {
		t.Errorf("1.log -> %q after a stale instance came and went, want %q", target, second.LogPath)
	}
	l.remove(first)
	if _, err := os.Lstat(filepath.Join(dir, "0.log")); !os.IsNotExist(err) {
		t.Errorf("0.log kept after its instance went: %v", err)
	}
	l.remove(second)
	if _, err := os.Lstat(filepath.Join(root, "ns_web_u-1")); !os.IsNotExist(err) {
		t.Errorf("the pod's log dir kept after its last container went: %v", err)
	}
}

// The sweep drops dangling links and the directories it empties; live
// links, other files and directories not named as a pod's stay.
func TestPodLogsRemoveDangling(t *testing.T) {
	root := t.TempDir()
	l := podLogs{dir: root}
	live := filepath.Join(t.TempDir(), "live-json.log")
	if err := os.WriteFile(live, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mustLink := func(target, path string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	}
	mustLink(live, filepath.Join(root, "ns_a_1", "c", "0.log"))
	mustLink("/gone", filepath.Join(root, "ns_a_1", "c", "1.log"))
	mustLink("/gone", filepath.Join(root, "ns_b_2", "c", "0.log"))
	mustLink("/gone", filepath.Join(root, "ns_c_3", "c", "notes.txt"))
	mustLink("/gone", filepath.Join(root, "other", "c", "0.log"))
	l.removeDangling()
	for path, want := range map[string]bool{
		"ns_a_1/c/0.log": true, "ns_a_1/c/1.log": false, "ns_b_2": false, "ns_c_3/c/notes.txt": true, "other/c/0.log": true,
	} {
		_, err := os.Lstat(filepath.Join(root, path))
		if got := err == nil; got != want {
			t.Errorf("%s there: %v, want %v", path, got, want)
		}
	}
}

// A pod's log directory replaced by a symlink is not written through.
func TestPodLogsDoNotFollowLinks(t *testing.T) {
	root, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(root, "ns_web_u-1")); err != nil {
		t.Fatal(err)
	}
	if err := (podLogs{dir: root}).create(podLogContainer("app", 0, "/x-json.log", true)); err == nil {
		t.Error("link made through a symlinked pod dir")
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Errorf("written through the link: %v", entries)
	}
}
