package kubelet

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/golang/glog"

	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// logLinks keeps <dir>/<pod>_<namespace>_<container>-<id>.log symlinks to
// Docker's log files, as log shippers expect: made when the relist first
// sees a container, removed with it. An empty dir disables them.
type logLinks struct {
	dir string
}

// linkName matches the links this agent makes (64 hex digits of an ID).
var linkName = regexp.MustCompile(`^[^_/]+_[^_/]+_[^_/]+-[0-9a-f]{64}\.log$`)

func (l logLinks) path(pod, namespace, container, id string) string {
	return filepath.Join(l.dir, fmt.Sprintf("%s_%s_%s-%s.log", pod, namespace, container, id))
}

// create links a container's log file.
func (l logLinks) create(pod, namespace, container, id, logPath string) {
	if l.dir == "" || logPath == "" {
		return
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		glog.Errorf("Container log dir: %v", err)
		return
	}
	p := l.path(pod, namespace, container, id)
	if target, err := os.Readlink(p); err == nil && target == logPath {
		return // made before this agent restarted
	}
	_ = os.Remove(p)
	if err := os.Symlink(logPath, p); err != nil {
		glog.Errorf("Container log symlink: %v", err)
	}
}

// remove drops a removed container's link.
func (l logLinks) remove(c *kubecontainer.ContainerState) {
	if l.dir == "" {
		return
	}
	_ = os.Remove(l.path(c.Labels[dockertools.LabelPodName], c.Labels[dockertools.LabelPodNamespace], c.Name, c.ID))
}

// removeDangling drops links whose container is gone.
func (l logLinks) removeDangling() {
	if l.dir == "" {
		return
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Type()&os.ModeSymlink == 0 || !linkName.MatchString(e.Name()) {
			continue
		}
		p := filepath.Join(l.dir, e.Name())
		if _, err := os.Stat(p); os.IsNotExist(err) {
			_ = os.Remove(p)
		}
	}
}
