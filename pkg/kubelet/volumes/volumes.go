// Package volumes sets up a pod's volumes on the host (emptyDir, Memory
// emptyDir as a bounded tmpfs, downwardAPI files, hostPath checks), the
// binds of its containers (subPaths resolved fd by fd, the termination
// message file), and tears the pod directory down. Every write below a pod
// directory goes through safefile: a container may have planted links in
// whatever it can write.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// Directory names Kubernetes uses under a pod's volumes directory; keeping
// them helps operators find things.
const (
	emptyDirPlugin    = "kubernetes.io~empty-dir"
	downwardAPIPlugin = "kubernetes.io~downward-api"
	// MaxTerminationMessage is what is read of a termination message.
	MaxTerminationMessage = 4096
	// defaultTerminationMessagePath is Kubernetes' default.
	defaultTerminationMessagePath = "/dev/termination-log"
)

// DownwardValues resolves the downward API values of volume files.
type DownwardValues interface {
	FieldValue(pod *v1.Pod, path string) (string, error)
	ResourceValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error)
}

// Config configures the volume manager.
type Config struct {
	// RootDir holds the pods' directories (RootDir/pods/<uid>).
	RootDir string
	// NodeMemory (bytes) bounds a Memory emptyDir.
	NodeMemory int64
	// Clock times token renewals; nil: the real one.
	Clock clock.PassiveClock
	// CSITimeout bounds a CSI driver's stage and publish calls; zero:
	// the kubelet's two minutes.
	CSITimeout time.Duration
	// NodeName is this node's: a local volume's node affinity is checked
	// against its Node's labels.
	NodeName string
}

// Deps are what the volume manager reads volumes' contents from.
type Deps struct {
	// Downward resolves the downward API's values of volume files.
	Downward DownwardValues
	// Objects reads config maps and secrets and requests tokens (node
	// mode); nil: volumes that need them fail to set up, naming what.
	Objects Objects
	// Claims reads persistent volume claims and their volumes (node
	// mode); nil: such volumes fail to set up.
	Claims Claims
	// TrustBundles lists ClusterTrustBundles (node mode); nil: projected
	// clusterTrustBundle sources fail to set up.
	TrustBundles TrustBundles
	// CSIDrivers are the registered CSI node plugins, CSIObjects the
	// control plane's CSIDriver and VolumeAttachment objects (node mode);
	// nil: csi volumes fail to set up.
	CSIDrivers CSIDrivers
	CSIObjects CSIObjects
	// PodCertificates makes and reads PodCertificateRequests (node mode);
	// nil: projected podCertificate sources fail to set up.
	PodCertificates PodCertificates
}

// Manager sets up the volumes of pods under RootDir/pods/<uid>.
type Manager struct {
	rootDir      string
	nodeMemory   int64
	downward     DownwardValues
	objects      Objects
	claimsAPI    Claims
	trustBundles TrustBundles
	csiDrivers   CSIDrivers
	csiObjects   CSIObjects
	csiTimeout   time.Duration
	podCerts     PodCertificates
	nodeName     string
	clock        clock.PassiveClock

	mu      sync.Mutex
	tokens  map[types.UID]map[tokenKey]*authenticationv1.TokenRequest // by pod, then projection
	written map[types.UID]map[string][32]byte                         // by pod, then volume dir: the digest of what it holds
	claims  map[types.UID]map[string]claimed                          // by pod, then volume: its claim, once bound
	certs   map[types.UID]map[certKey]*podCert                        // by pod, then podCertificate source
}

// NewManager returns a volume manager of cfg that reads what volumes hold
// through d.
func NewManager(cfg Config, d Deps) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.CSITimeout == 0 {
		cfg.CSITimeout = 2 * time.Minute
	}
	return &Manager{rootDir: cfg.RootDir, nodeMemory: cfg.NodeMemory, downward: d.Downward, objects: d.Objects, claimsAPI: d.Claims, trustBundles: d.TrustBundles,
		csiDrivers: d.CSIDrivers, csiObjects: d.CSIObjects, csiTimeout: cfg.CSITimeout, podCerts: d.PodCertificates, nodeName: cfg.NodeName, clock: cfg.Clock, tokens: map[types.UID]map[tokenKey]*authenticationv1.TokenRequest{},
		written: map[types.UID]map[string][32]byte{}, claims: map[types.UID]map[string]claimed{}, certs: map[types.UID]map[certKey]*podCert{}}
}

// PodDir is the pod's directory under the root dir.
func (m *Manager) PodDir(uid types.UID) string {
	return filepath.Join(m.rootDir, "pods", string(uid))
}

// EmptyDirPath is where a pod's emptyDir volume lives on the host.
func (m *Manager) EmptyDirPath(uid types.UID, name string) string {
	return filepath.Join(m.PodDir(uid), "volumes", emptyDirPlugin, name)
}

// Setup prepares the pod's volumes on the host and returns the host
// path of each, by volume name. It is idempotent.
func (m *Manager) Setup(ctx context.Context, pod *v1.Pod) (map[string]string, error) {
	if err := os.MkdirAll(m.PodDir(pod.UID), 0o750); err != nil {
		return nil, fmt.Errorf("pod directory: %w", err)
	}
	paths := make(map[string]string, len(pod.Spec.Volumes))
	for _, vol := range pod.Spec.Volumes {
		var err error
		switch {
		case vol.EmptyDir != nil:
			rel := filepath.Join("volumes", emptyDirPlugin, vol.Name)
			err = m.setupEmptyDir(pod, rel, vol.EmptyDir)
			paths[vol.Name] = m.EmptyDirPath(pod.UID, vol.Name)
		case vol.HostPath != nil:
			err = checkHostPath(vol.HostPath)
			paths[vol.Name] = vol.HostPath.Path
		case vol.DownwardAPI != nil:
			rel := filepath.Join("volumes", downwardAPIPlugin, vol.Name)
			err = m.writeDownwardAPI(pod, m.PodDir(pod.UID), rel, vol.DownwardAPI)
			paths[vol.Name] = filepath.Join(m.PodDir(pod.UID), rel)
		case vol.PersistentVolumeClaim != nil, vol.Ephemeral != nil:
			var c claimed
			if c, err = m.claimVolume(ctx, pod, &vol); err == nil && c.csi != nil {
				c.path, err = m.setupCSI(ctx, pod, *c.csi)
			}
			paths[vol.Name] = c.path
		case vol.CSI != nil:
			v := inlineCSIVolume(pod, &vol)
			m.setClaim(pod.UID, vol.Name, claimed{readOnly: v.readOnly})
			paths[vol.Name], err = m.setupCSI(ctx, pod, v)
		default:
			if plugin, ok := apiVolume(&vol); ok {
				rel := filepath.Join("volumes", plugin, vol.Name)
				err = m.writeAPIVolume(ctx, pod, &vol, rel)
				paths[vol.Name] = filepath.Join(m.PodDir(pod.UID), rel)
			}
		}
		if err != nil {
			return nil, &SetupError{Volume: vol.Name, Err: err}
		}
	}
	return paths, nil
}

// SetupError is a volume that could not be set up: the pod waits, and the
// setup is retried.
type SetupError struct {
	Volume string
	Err    error
}

func (e *SetupError) Error() string { return fmt.Sprintf("volume %s: %v", e.Volume, e.Err) }
func (e *SetupError) Unwrap() error { return e.Err }

// Event is the pod's FailedMount event message, as the kubelet's volume
// manager words a failed setup (pkg/volume/util/operationexecutor,
// GenerateErrorDetailed of "MountVolume.SetUp failed").
func (e *SetupError) Event() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

// setupEmptyDir makes the directory; a Memory emptyDir is a tmpfs mounted
// on it (once), never unbounded: the smallest of its sizeLimit, the pod's
// memory limit and the node's memory, as Kubernetes sizes it.
func (m *Manager) setupEmptyDir(pod *v1.Pod, rel string, ed *v1.EmptyDirVolumeSource) error {
	podDir := m.PodDir(pod.UID)
	// World-writable as in Kubernetes: containers may run as any user.
	// With an fsGroup the volume's root is the group's, setgid, so what
	// containers make in it is the group's too. Only the root, by its
	// descriptor: the contents are the containers'.
	fd, err := safefile.MkdirBeneath(podDir, rel, 0o777, -1)
	if err != nil {
		return err
	}
	err = ownDir(fd, 0o777, fsGroup(pod))
	unix.Close(fd)
	if err != nil {
		return err
	}
	dir := filepath.Join(podDir, rel)
	if ed.Medium != v1.StorageMediumMemory {
		return nil
	}
	mounted, err := isMountPoint(dir)
	if err != nil || mounted {
		return err
	}
	size := memoryVolumeSize(m.nodeMemory, podMemoryLimit(pod), ed.SizeLimit)
	if size <= 0 {
		return errors.New("cannot size a Memory emptyDir: the node's memory is unknown") // size=0 would be unlimited
	}
	// tmpfs's own root mode, sticky (as the kubelet leaves it); with an
	// fsGroup the group's and setgid too.
	opts := fmt.Sprintf("size=%d,mode=1777", size)
	if gid := fsGroup(pod); gid >= 0 {
		opts = fmt.Sprintf("size=%d,mode=3777,gid=%d", size, gid)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// memoryVolumeSize is the size of a Memory emptyDir in bytes: the smallest
// of the node's memory, the pod's memory limit and the volume's sizeLimit
// (each 0 or nil when unset). The sizeLimit is compared as a quantity: one
// past int64 (1e30) has no Value, and is simply larger than the rest.
func memoryVolumeSize(node, podLimit int64, sizeLimit *resource.Quantity) int64 {
	size := node
	if podLimit > 0 && (size <= 0 || podLimit < size) {
		size = podLimit
	}
	if sizeLimit != nil && sizeLimit.Sign() > 0 && (size <= 0 || sizeLimit.Cmp(*resource.NewQuantity(size, resource.BinarySI)) < 0) {
		size = sizeLimit.Value()
	}
	return size
}

// podMemoryLimit is the pod's memory limit as Kubernetes computes it (0 if
// it has none): the sum of its containers' limits, or an init container's
// if that is larger; none if any container has no limit.
func podMemoryLimit(pod *v1.Pod) int64 {
	var sum int64
	for _, c := range pod.Spec.Containers {
		l, ok := c.Resources.Limits[v1.ResourceMemory]
		if !ok || l.IsZero() {
			return 0
		}
		sum += l.Value()
	}
	for _, c := range pod.Spec.InitContainers {
		l, ok := c.Resources.Limits[v1.ResourceMemory]
		if !ok || l.IsZero() {
			return 0
		}
		sum = max(sum, l.Value())
	}
	return sum
}

// writeDownwardAPI writes the volume's files, each atomically, if they
// changed since the last write (a running pod's labels and annotations
// reach its volume at the next sync, as the kubelet's remount). The volume
// is mounted read-only, and its files are written beneath it without
// following links all the same.
func (m *Manager) writeDownwardAPI(pod *v1.Pod, podDir, rel string, src *v1.DownwardAPIVolumeSource) error {
	mode := os.FileMode(0o644)
	if src.DefaultMode != nil {
		mode = os.FileMode(*src.DefaultMode)
	}
	gid := fsGroup(pod)
	p := make(map[string]file, len(src.Items))
	for _, item := range src.Items {
		var v string
		var err error
		if item.FieldRef != nil {
			v, err = m.downward.FieldValue(pod, item.FieldRef.FieldPath)
		} else {
			v, err = m.downward.ResourceValue(pod, item.ResourceFieldRef)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", item.Path, err)
		}
		f := file{data: []byte(v), mode: mode}
		if item.Mode != nil {
			f.mode = os.FileMode(*item.Mode)
		}
		if gid >= 0 {
			f.mode |= 0o040 // readable by the fsGroup: the volume is read-only, as the kubelet's (0440 mask)
		}
		p[item.Path] = f
	}
	dir := filepath.Join(podDir, rel)
	d := digest(p, gid)
	if m.sameAsWritten(pod.UID, dir, d) {
		return nil
	}
	fd, err := safefile.MkdirBeneath(podDir, rel, 0o755, -1)
	if err != nil {
		return err
	}
	err = ownDir(fd, 0o755, gid)
	unix.Close(fd)
	if err != nil {
		return err
	}
	dirPerm := os.FileMode(0o755)
	if gid >= 0 {
		dirPerm = 0o775 | os.ModeSetgid // the kubelet's fsGroup rule: directories g+rwx, setgid
	}
	for _, name := range sortedPaths(p) {
		if err := safefile.WriteBeneath(dir, filepath.FromSlash(name), p[name].data, p[name].mode, dirPerm, gid); err != nil {
			return err
		}
	}
	m.setWritten(pod.UID, dir, d)
	return nil
}

// tokenKey is a serviceAccountToken projection of a pod: its volume,
// audience and path.
type tokenKey struct{ volume, audience, path string }

// fsGroup is the pod's fsGroup, or -1.
func fsGroup(pod *v1.Pod) int {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		return int(*sc.FSGroup)
	}
	return -1
}

// ownDir gives a volume's root directory (by its descriptor) mode perm,
// and with an fsGroup the group, g+rwx and setgid.
func ownDir(fd int, perm uint32, gid int) error {
	if gid < 0 {
		return unix.Fchmod(fd, perm)
	}
	if err := unix.Fchown(fd, -1, gid); err != nil {
		return err
	}
	return unix.Fchmod(fd, perm|0o070|unix.S_ISGID)
}

// setVolumeOwnership gives a volume's files the pod's fsGroup, as the
// kubelet does for a local or CSI volume: group-owned, group read-write
// (directories group-executable and setgid, so new files inherit the
// group). OnRootMismatch skips the walk when the root has them already.
// Links are neither followed nor changed.
func setVolumeOwnership(dir string, gid int, policy *v1.PodFSGroupChangePolicy) error {
	if policy != nil && *policy == v1.FSGroupChangeOnRootMismatch {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err == nil && int(st.Gid) == gid && st.Mode&0o060 == 0o060 && st.Mode&unix.S_ISGID != 0 {
			return nil
		}
	}
	return filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if err := os.Lchown(path, -1, gid); err != nil {
			return err
		}
		mode := info.Mode() | 0o060
		if e.IsDir() {
			mode |= 0o010 | os.ModeSetgid
		}
		return os.Chmod(path, mode)
	})
}

// agentWritten reports whether the agent writes the volume (downwardAPI,
// configMap, secret, projected): containers only read it, as in
// Kubernetes, so none can plant a link the agent's next write would follow.
func agentWritten(pod *v1.Pod, volume string) bool {
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Name == volume {
			_, api := apiVolume(v)
			return v.DownwardAPI != nil || api
		}
	}
	return false
}

// checkHostPath checks a hostPath volume's type as the kubelet does at
// setup, with the kubelet's messages: the *OrCreate types make what is
// missing (and check nothing more then), every other type but "" must find
// its kind of file at the path, links followed.
func checkHostPath(hp *v1.HostPathVolumeSource) error {
	if hp.Type == nil || *hp.Type == v1.HostPathUnset {
		return nil
	}
	want := *hp.Type
	got, err := hostFileType(hp.Path)
	missing := errors.Is(err, fs.ErrNotExist)
	switch want {
	case v1.HostPathDirectoryOrCreate:
		if missing {
			return os.MkdirAll(hp.Path, 0o755)
		}
		want = v1.HostPathDirectory
	case v1.HostPathFileOrCreate:
		if missing {
			f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		want = v1.HostPathFile
	}
	desc, ok := hostPathKinds[want]
	switch {
	case !ok:
		return fmt.Errorf("%s is an invalid volume type", want) // validation refuses it first
	case missing:
		return fmt.Errorf("hostPath %s doesn't exist", hp.Path)
	case err != nil:
		return fmt.Errorf("hostPath type check failed, %s is not a %s, unable to determine its type: %w", hp.Path, desc, err)
	case got != want:
		return fmt.Errorf("hostPath type check failed: %s is not a %s, it's a %s", hp.Path, desc, got)
	}
	return nil
}

// hostPathKinds describes each kind of file a hostPath type asks for, in
// the kubelet's words.
var hostPathKinds = map[v1.HostPathType]string{
	v1.HostPathDirectory: "directory",
	v1.HostPathFile:      "file",
	v1.HostPathSocket:    "socket file",
	v1.HostPathCharDev:   "character device",
	v1.HostPathBlockDev:  "block device",
}

// hostFileType is the kind of file at path (links followed), named as the
// hostPath type asking for it.
func hostFileType(path string) (v1.HostPathType, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		return v1.HostPathDirectory, nil
	case m.IsRegular():
		return v1.HostPathFile, nil
	case m&os.ModeSocket != 0:
		return v1.HostPathSocket, nil
	case m&os.ModeCharDevice != 0:
		return v1.HostPathCharDev, nil
	case m&os.ModeDevice != 0:
		return v1.HostPathBlockDev, nil
	}
	return "", errors.New("only recognise file, directory, socket, block device and character device")
}

// Binds returns the Docker binds of a container's volume mounts and
// termination message file. A subPath is resolved safely (see bindSubPath);
// a subPathExpr is expanded by expand first.
func (m *Manager) Binds(pod *v1.Pod, c *v1.Container, hostPaths map[string]string, expand func(string) string, restartCount int) ([]string, error) {
	var binds []string
	for i, vm := range c.VolumeMounts {
		src := hostPaths[vm.Name]
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expand(vm.SubPathExpr)
		}
		if sub != "" {
			var err error
			if src, err = m.bindSubPath(pod, c.Name, i, src, sub); err != nil {
				return nil, &kubecontainer.StartError{Reason: kubecontainer.ReasonCreateContainerConfigError, Message: fmt.Sprintf("volumeMounts[%d] subPath %q: %v", i, sub, err)}
			}
		}
		if err := recursiveReadOnly(vm); err != nil {
			return nil, &kubecontainer.StartError{Reason: kubecontainer.ReasonCreateContainerConfigError, Message: "failed to resolve recursive read-only mode: " + err.Error()}
		}
		var opts []string
		// The agent writes downwardAPI volumes; containers only read
		// them (as in Kubernetes), so none can plant a link the agent's
		// next write would follow.
		if vm.ReadOnly || agentWritten(pod, vm.Name) || m.claimReadOnly(pod.UID, vm.Name) {
			opts = append(opts, "ro")
		}
		prop, err := propagationOption(src, vm.MountPropagation)
		if err != nil {
			return nil, &kubecontainer.StartError{Reason: kubecontainer.ReasonCreateContainerError, Message: fmt.Sprintf("volumeMounts[%d] (%s) mountPropagation %s: %v", i, vm.Name, *vm.MountPropagation, err)}
		}
		if prop != "" {
			opts = append(opts, prop)
		}
		b := src + ":" + vm.MountPath
		if len(opts) > 0 {
			b += ":" + strings.Join(opts, ",")
		}
		binds = append(binds, b)
	}
	// The termination message file: the agent provides it, the container
	// writes it, the status reads it.
	path := c.TerminationMessagePath
	if path == "" {
		path = defaultTerminationMessagePath
	}
	rel := TerminationMessageFile(c.Name, restartCount)
	fd, err := safefile.MkdirBeneath(m.PodDir(pod.UID), filepath.Dir(rel), 0o755, -1)
	if err != nil {
		return nil, err
	}
	unix.Close(fd)
	f, err := safefile.OpenBeneath(m.PodDir(pod.UID), rel, unix.O_CREAT|unix.O_TRUNC|unix.O_WRONLY, 0o666)
	if err != nil {
		return nil, err
	}
	err = f.Chmod(0o666) // writable by whichever user the container runs as
	f.Close()
	if err != nil {
		return nil, err
	}
	return append(binds, filepath.Join(m.PodDir(pod.UID), rel)+":"+path), nil
}

// TerminationMessageFile is where one instance of a container writes its
// termination message, relative to the pod's directory.
func TerminationMessageFile(container string, restartCount int) string {
	return filepath.Join("containers", container, strconv.Itoa(restartCount)+"-termination-log")
}

// bindSubPath resolves sub inside the volume at root and bind-mounts it on a
// path of the agent's, which Docker then mounts. The subPath CVE class is
// closed by opening the path one component at a time without following
// symlinks (a symlink anywhere is refused), and by binding the opened file
// descriptor itself, so nothing can be swapped between check and mount.
func (m *Manager) bindSubPath(pod *v1.Pod, container string, index int, root, sub string) (string, error) {
	fd, isDir, err := openBeneath(root, sub)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	target := filepath.Join(m.PodDir(pod.UID), "volume-subpaths", container, strconv.Itoa(index))
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return "", err
	}
	if mounted, _ := isMountPoint(target); mounted {
		_ = unix.Unmount(target, unix.MNT_DETACH)
	}
	_ = os.Remove(target)
	if isDir {
		err = os.Mkdir(target, 0o750)
	} else {
		var f *os.File
		if f, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o640); err == nil {
			f.Close()
		}
	}
	if err != nil {
		return "", err
	}
	if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", fd), target, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("bind %s: %w", sub, err)
	}
	return target, nil
}

// chmodMade sets the mode of the directory name just made in dir, through
// a descriptor of its own (never following a link swapped in meanwhile):
// mkdir's mode passes the umask and cannot set the sticky bit.
func chmodMade(dir int, name string, mode uint32) error {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, mode)
}

// openBeneath opens root/sub component by component, refusing "..",
// absolute paths and symlinks, creating missing directories as Kubernetes
// does. It returns an O_PATH descriptor and whether it is a directory.
func openBeneath(root, sub string) (int, bool, error) {
	if filepath.IsAbs(sub) {
		return -1, false, errors.New("must be a relative path")
	}
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, false, fmt.Errorf("open volume: %w", err)
	}
	// A directory made here takes the volume root's mode (setgid and sticky
	// bits included), as the kubelet makes a missing subPath.
	var rootSt unix.Stat_t
	if err := unix.Fstat(fd, &rootSt); err != nil {
		unix.Close(fd)
		return -1, false, err
	}
	parts := strings.Split(filepath.Clean(sub), "/")
	if slices.Contains(parts, "..") {
		unix.Close(fd)
		return -1, false, errors.New("must not contain '..'")
	}
	// A path that exists is resolved by the kernel beneath the volume's
	// root: links that stay inside are followed (an atomic writer's
	// names are links into ..data), one that leads out (an absolute link,
	// '..' past the root) is refused, as the kubelet refuses a subPath
	// that does not evaluate to a path within the volume; no step can be
	// swapped for a link between a check and the open.
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	switch resolved, err := unix.Openat2(fd, filepath.Clean(sub), &how); {
	case err == nil:
		unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(resolved, &st); err != nil {
			unix.Close(resolved)
			return -1, false, err
		}
		return resolved, st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
	case errors.Is(err, unix.EXDEV), errors.Is(err, unix.ELOOP):
		unix.Close(fd)
		return -1, false, fmt.Errorf("subpath %q not within volume path %q (a symlink leads out of it)", sub, root)
	}
	// Otherwise it is made, one component at a time, as Kubernetes
	// makes a missing subPath; a link met on the way is refused.
	for i, part := range parts {
		if part == "." || part == "" {
			continue
		}
		next, err := unix.Openat(fd, part, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(fd, part, 0o700); err == nil {
				err = chmodMade(fd, part, rootSt.Mode&0o7777)
			}
			if err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, part, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			return -1, false, fmt.Errorf("open %s: %w", strings.Join(parts[:i+1], "/"), err)
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, false, err
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			unix.Close(fd)
			return -1, false, fmt.Errorf("%s is a symlink: refused", strings.Join(parts[:i+1], "/"))
		case i < len(parts)-1 && st.Mode&unix.S_IFMT != unix.S_IFDIR:
			unix.Close(fd)
			return -1, false, fmt.Errorf("%s is not a directory", strings.Join(parts[:i+1], "/"))
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, false, err
	}
	return fd, st.Mode&unix.S_IFMT == unix.S_IFDIR, nil
}

// TearDown unpublishes the pod's CSI volumes, then unmounts and removes
// the rest of its volumes (a terminated pod's).
func (m *Manager) TearDown(ctx context.Context, uid types.UID) error {
	if err := m.tearDownCSI(ctx, uid); err != nil {
		return err
	}
	return CleanupPodDir(filepath.Join(m.PodDir(uid), "volumes"))
}

// RemovePodDir unpublishes the pod's CSI volumes, then unmounts what is
// mounted under its directory and removes it.
func (m *Manager) RemovePodDir(ctx context.Context, uid types.UID) error {
	if err := m.tearDownCSI(ctx, uid); err != nil {
		return err
	}
	return CleanupPodDir(m.PodDir(uid))
}

// CleanupPodDir unmounts everything mounted under a pod's directory (tmpfs
// volumes, subPath binds), deepest first, then removes it. If a mount cannot
// be undone the directory is left: removal never crosses a mount point.
func CleanupPodDir(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, 0); err != nil {
			if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
				return fmt.Errorf("unmount %s: %w", m, err)
			}
		}
	}
	if left, err := mountsUnder(dir); err != nil || len(left) > 0 {
		return fmt.Errorf("mounts remain under %s: %v %v", dir, left, err)
	}
	return os.RemoveAll(dir)
}
