package kuberuntime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// podLogs keeps the tree <dir>/<namespace>_<pod>_<uid>/<container>/<n>.log
// that Vector, Promtail and fluent-bit read by default: the kubelet's CRI
// layout, n the instance's restart count. Each file is a symlink to
// Docker's live json-file log (<id>-json.log), as cri-dockerd makes it for
// the kubelet. Docker rotates by renaming that file to <id>-json.log.1 and
// starting a new one under the old name, so the link follows the rotation
// by itself: a shipper that tracks files by inode finishes the renamed one
// and starts on the new. The rotated files get no links (the kubelet's own
// rotated files, <n>.log.<time>, are not read by the shippers' defaults
// either). An empty dir disables the tree.
//
// Every change below dir goes through descriptors opened without following
// links: a directory someone replaced by a symlink is never written
// through.
type podLogs struct {
	dir string
}

var (
	// podLogDirName matches <namespace>_<pod>_<uid>: names and UIDs hold
	// no "_" or "/".
	podLogDirName = regexp.MustCompile(`^[^_/]+_[^_/]+_[^_/]+$`)
	// podLogName matches <n>.log.
	podLogName = regexp.MustCompile(`^[0-9]+\.log$`)
)

const dirFlags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC

// podLogPath is the path of a container instance's log below the tree's
// root: "<namespace>_<pod>_<uid>", "<container>" and "<n>.log"; ok is false
// for a container without the pod's labels (none of this agent's).
func podLogPath(c *kubecontainer.ContainerState) (podDir, containerDir, name string, ok bool) {
	ns, pod, uid := c.Labels[kubecontainer.LabelPodNamespace], c.Labels[kubecontainer.LabelPodName], c.Labels[kubecontainer.LabelPodUID]
	podDir = fmt.Sprintf("%s_%s_%s", ns, pod, uid)
	if ns == "" || pod == "" || uid == "" || c.Name == "" || !podLogDirName.MatchString(podDir) {
		return "", "", "", false
	}
	return podDir, c.Name, strconv.Itoa(c.RestartCount) + logSuffix, true
}

// create links a container instance's log file. As with the
// /var/log/containers links, a dead instance does not take over a link
// that is another's (a pod given up and given again with its UID reuses
// the names), so a restarted agent keeps the running instance's.
func (l podLogs) create(c *kubecontainer.ContainerState) error {
	podDir, cDir, name, ok := podLogPath(c)
	if l.dir == "" || c.LogPath == "" || !ok {
		return nil
	}
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("pod log dir: %w", err)
	}
	fd, err := safefile.MkdirBeneath(l.dir, filepath.Join(podDir, cDir), 0o755, -1)
	if err != nil {
		return fmt.Errorf("pod log dir of container %s: %w", kubecontainer.ShortID(c.ID), err)
	}
	defer unix.Close(fd)
	if target, err := readlinkat(fd, name); err == nil && (target == c.LogPath || !c.Running) {
		return nil // made before this agent restarted, or another's
	}
	_ = unix.Unlinkat(fd, name, 0)
	if err := unix.Symlinkat(c.LogPath, fd, name); err != nil {
		return fmt.Errorf("pod log link %s: %w", filepath.Join(l.dir, podDir, cDir, name), err)
	}
	return nil
}

// remove drops a removed container instance's link, unless it is another
// instance's, and then its container's and its pod's directories if that
// left them empty: the pod's directory goes with its last container.
func (l podLogs) remove(c *kubecontainer.ContainerState) {
	podDir, cDir, name, ok := podLogPath(c)
	if l.dir == "" || !ok {
		return
	}
	root, err := unix.Open(l.dir, dirFlags, 0)
	if err != nil {
		return
	}
	defer unix.Close(root)
	pfd, err := unix.Openat(root, podDir, dirFlags, 0)
	if err != nil {
		return
	}
	defer unix.Close(pfd)
	if cfd, err := unix.Openat(pfd, cDir, dirFlags, 0); err == nil {
		if target, err := readlinkat(cfd, name); err == nil && (c.LogPath == "" || target == c.LogPath) {
			_ = unix.Unlinkat(cfd, name, 0)
		}
		unix.Close(cfd)
	}
	// ENOTEMPTY keeps a directory that still holds another's link.
	_ = unix.Unlinkat(pfd, cDir, unix.AT_REMOVEDIR)
	_ = unix.Unlinkat(root, podDir, unix.AT_REMOVEDIR)
}

// removeDangling drops the tree's links whose log file is gone (a
// container removed while the agent was down, or by hand) and the
// directories that leaves empty.
func (l podLogs) removeDangling() {
	if l.dir == "" {
		return
	}
	root, err := unix.Open(l.dir, dirFlags, 0)
	if err != nil {
		return
	}
	defer unix.Close(root)
	for _, pod := range dirNames(root, l.dir) {
		if !podLogDirName.MatchString(pod) {
			continue
		}
		pfd, err := unix.Openat(root, pod, dirFlags, 0)
		if err != nil {
			continue
		}
		for _, c := range dirNames(pfd, pod) {
			sweepContainerLogDir(pfd, c)
			_ = unix.Unlinkat(pfd, c, unix.AT_REMOVEDIR)
		}
		unix.Close(pfd)
		_ = unix.Unlinkat(root, pod, unix.AT_REMOVEDIR)
	}
}

// sweepContainerLogDir removes the dangling <n>.log links of the container
// directory name below pfd.
func sweepContainerLogDir(pfd int, name string) {
	cfd, err := unix.Openat(pfd, name, dirFlags, 0)
	if err != nil {
		return
	}
	defer unix.Close(cfd)
	for _, link := range dirNames(cfd, name) {
		var st unix.Stat_t
		if !podLogName.MatchString(link) {
			continue
		}
		// Fstatat follows the link itself (the last component only).
		if err := unix.Fstatat(cfd, link, &st, 0); errors.Is(err, unix.ENOENT) {
			_ = unix.Unlinkat(cfd, link, 0)
		}
	}
}

// dirNames lists the directory fd (name for errors); nil if it cannot.
func dirNames(fd int, name string) []string {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(dup), name)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		klog.V(2).Infof("Pod log dir %s: %v", name, err)
	}
	return names
}

// readlinkat returns the target of the link name in the directory fd.
func readlinkat(fd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
