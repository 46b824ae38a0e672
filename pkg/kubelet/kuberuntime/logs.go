package kuberuntime

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

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

const (
	logSuffix = ".log"
	// maxFileName is the longest file name ext4 (and most file systems)
	// take.
	maxFileName = 255
)

// isLinkName reports whether name is one this agent makes: whole, or cut
// to the longest file name.
func isLinkName(name string) bool {
	return linkName.MatchString(name) || (len(name) == maxFileName && strings.HasSuffix(name, logSuffix))
}

// path is the link of a container. As the kubelet's, a name longer than a
// file name may be is cut to fit before its ".log" (a pod name may be 253
// characters). The cut takes the container ID first, so the containers of
// a pod with such a name share one link: the one seen last.
func (l logLinks) path(pod, namespace, container, id string) string {
	name := fmt.Sprintf("%s_%s_%s-%s", pod, namespace, container, id)
	if len(name) > maxFileName-len(logSuffix) {
		name = name[:maxFileName-len(logSuffix)]
	}
	return filepath.Join(l.dir, name+logSuffix)
}

// create links a container's log file. A dead container's does not take
// over a link that is another's (a cut name is shared): a restarted agent
// sees a pod's instances in no particular order, and the link must stay the
// running one's.
func (l logLinks) create(pod, namespace, container, id, logPath string, running bool) {
	if l.dir == "" || logPath == "" {
		return
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		klog.Errorf("Container log dir: %v", err)
		return
	}
	p := l.path(pod, namespace, container, id)
	if target, err := os.Readlink(p); err == nil && (target == logPath || !running) {
		return // made before this agent restarted, or another's
	}
	_ = os.Remove(p)
	if err := os.Symlink(logPath, p); err != nil {
		klog.Errorf("Container log symlink: %v", err)
	}
}

// remove drops a removed container's link, unless it is another
// container's (a cut name is shared).
func (l logLinks) remove(c *kubecontainer.ContainerState) {
	if l.dir == "" {
		return
	}
	p := l.path(c.Labels[kubecontainer.LabelPodName], c.Labels[kubecontainer.LabelPodNamespace], c.Name, c.ID)
	if target, err := os.Readlink(p); err == nil && c.LogPath != "" && target != c.LogPath {
		return
	}
	_ = os.Remove(p)
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
		if e.Type()&os.ModeSymlink == 0 || !isLinkName(e.Name()) {
			continue
		}
		p := filepath.Join(l.dir, e.Name())
		if _, err := os.Stat(p); os.IsNotExist(err) {
			_ = os.Remove(p)
		}
	}
}

// LogSettings are the containers' log settings of the moment: a SIGHUP
// changes them while the agent runs. The Manager reads the bounds of the
// json-file log of each container it creates, the LogLinks the directories.
type LogSettings struct{ v atomic.Pointer[ContainerLogs] }

// NewLogSettings returns settings holding l.
func NewLogSettings(l ContainerLogs) *LogSettings {
	s := &LogSettings{}
	s.Set(l)
	return s
}

// Get returns the settings in force.
func (s *LogSettings) Get() ContainerLogs { return *s.v.Load() }

// Set puts l in force from now on.
func (s *LogSettings) Set(l ContainerLogs) { s.v.Store(&l) }

// LogLinks are the containers' log links in the directories of the moment
// (LogSettings): the /var/log/containers links and the /var/log/pods tree.
// The relist has each container linked when it first sees its log file, the
// Manager removes a link with its container, the garbage collection drops
// the links whose container is gone.
type LogLinks struct {
	settings *LogSettings
	// mu serializes the changes to the pod log tree: a sweep's removal of
	// an empty directory must not come between a link's directory being
	// made and the link made in it.
	mu sync.Mutex
}

// NewLogLinks returns the links in the directories of settings.
func NewLogLinks(settings *LogSettings) *LogLinks { return &LogLinks{settings: settings} }

func (l *LogLinks) links() logLinks { return logLinks{dir: l.settings.Get().Dir} }

func (l *LogLinks) podLogs() podLogs { return podLogs{dir: l.settings.Get().PodDir} }

// Link links the log file of a container the relist inspected (an infra
// container's output is nobody's log). The links are made from the
// relist's inspect rather than one of their own on the start path, so a
// restarted agent remakes them all.
func (l *LogLinks) Link(c *kubecontainer.ContainerState) {
	if c.Name == infraName {
		return
	}
	l.links().create(c.Labels[kubecontainer.LabelPodName], c.Labels[kubecontainer.LabelPodNamespace], c.Name, c.ID, c.LogPath, c.Running)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.podLogs().create(c); err != nil {
		klog.Errorf("Container %s/%s %s: %v", c.Labels[kubecontainer.LabelPodNamespace], c.Labels[kubecontainer.LabelPodName], c.Name, err)
	}
}

// Remove drops a removed container's links.
func (l *LogLinks) Remove(c *kubecontainer.ContainerState) {
	l.links().remove(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.podLogs().remove(c)
}

// RemoveDangling drops the log links whose container is gone.
func (l *LogLinks) RemoveDangling() {
	l.links().removeDangling()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.podLogs().removeDangling()
}
