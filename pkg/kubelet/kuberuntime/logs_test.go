package kuberuntime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func TestLogLinkPath(t *testing.T) {
	id := strings.Repeat("ab", 32)
	long := strings.Repeat("p", 253)
	cases := []struct {
		name, pod, namespace, container string
		want                            string
	}{
		{"whole", "web", "default", "server", "web_default_server-" + id + ".log"},
		{"cut to 255 before .log", long, "default", "server", (long + "_default_server-" + id)[:251] + ".log"},
		{"exactly 255 is whole", strings.Repeat("p", 255-len("_ns_c-"+id+".log")), "ns", "c", strings.Repeat("p", 255-len("_ns_c-"+id+".log")) + "_ns_c-" + id + ".log"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := filepath.Base(logLinks{dir: "/d"}.path(c.pod, c.namespace, c.container, id))
			if got != c.want {
				t.Errorf("link %q (%d), want %q", got, len(got), c.want)
			}
			if len(got) > 255 {
				t.Errorf("link name of %d characters", len(got))
			}
			if !isLinkName(got) {
				t.Errorf("isLinkName(%q) = false", got)
			}
		})
	}
	for _, name := range []string{"syslog.log", "a_b_c-123.log", strings.Repeat("x", 254) + ".log"} {
		if isLinkName(name) {
			t.Errorf("isLinkName(%q) = true", name)
		}
	}
}

// The containers of a pod whose name fills the link share one: removing
// one container leaves the link of another alone, and a dangling cut link
// is collected.
func TestLogLinksOfALongPodName(t *testing.T) {
	dir := t.TempDir()
	l := logLinks{dir: dir}
	pod := strings.Repeat("p", 253)
	logOf := func(id string) string {
		p := filepath.Join(t.TempDir(), id+"-json.log")
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	idA, idB := strings.Repeat("a", 64), strings.Repeat("b", 64)
	logA, logB := logOf(idA), logOf(idB)
	labels := map[string]string{kubecontainer.LabelPodName: pod, kubecontainer.LabelPodNamespace: "default"}
	l.create(pod, "default", "old", idA, logA, true)
	l.create(pod, "default", "new", idB, logB, true)
	link := l.path(pod, "default", "new", idB)
	if target, err := os.Readlink(link); err != nil || target != logB {
		t.Fatalf("link: %q, %v; want %q", target, err, logB)
	}
	l.remove(&kubecontainer.ContainerState{ID: idA, Name: "old", LogPath: logA, Labels: labels})
	if target, err := os.Readlink(link); err != nil || target != logB {
		t.Errorf("after removing the other container the link is %q, %v", target, err)
	}
	_ = os.Remove(logB)
	l.removeDangling()
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("dangling cut link kept: %v", err)
	}
	l.create(pod, "default", "new", idB, logA, true)
	l.remove(&kubecontainer.ContainerState{ID: idB, Name: "new", LogPath: logA, Labels: labels})
	if _, err := os.Lstat(link); !os.IsNotExist(err) {
		t.Errorf("the container's own link kept: %v", err)
	}
}

// After a restart the relist sees a pod's instances in any order: a dead
// instance seen after the running one leaves the shared, cut link alone.
func TestCutLogLinkStaysTheRunningContainers(t *testing.T) {
	l := logLinks{dir: t.TempDir()}
	pod := strings.Repeat("p", 253)
	running, dead := filepath.Join(t.TempDir(), "running-json.log"), filepath.Join(t.TempDir(), "dead-json.log")
	for _, p := range []string{running, dead} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idRun, idDead := strings.Repeat("a", 64), strings.Repeat("b", 64)
	l.create(pod, "default", "c", idRun, running, true)
	l.create(pod, "default", "c", idDead, dead, false)
	link := l.path(pod, "default", "c", idRun)
	if target, err := os.Readlink(link); err != nil || target != running {
		t.Errorf("link %q, %v; want the running instance's %q", target, err, running)
	}
	labels := map[string]string{kubecontainer.LabelPodName: pod, kubecontainer.LabelPodNamespace: "default"}
	l.remove(&kubecontainer.ContainerState{ID: idDead, Name: "c", LogPath: dead, Labels: labels}) // GC of the dead one
	if target, err := os.Readlink(link); err != nil || target != running {
		t.Errorf("after the dead instance went: link %q, %v; want %q", target, err, running)
	}
}
