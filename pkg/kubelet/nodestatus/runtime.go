package nodestatus

import (
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// runtimeRefresh is how long the runtime's handlers and images are taken
// to hold: the kubelet's image manager lists images every 30 s, and a
// node status computed every 10 s should not cost a Docker list each time.
const runtimeRefresh = 30 * time.Second

// maxNamesPerImage bounds the names reported of one image, as the kubelet's
// MaxNamesPerImageInNodeStatus: a heavily tagged image would bloat the Node.
const maxNamesPerImage = 5

// declaredFeatures are the node-declared features (the scheduler matches
// pods that need one against them) the agent has: it serves exec, attach
// and port-forward over WebSockets. The others of the kubelet's registry
// (in-place resize's, RestartAllContainers, user namespaces) it lacks.
var declaredFeatures = []string{"ExtendWebSocketsToKubelet"}

// listed is a list asked of the runtime at most once per runtimeRefresh;
// a failure keeps the last good list (the Node keeps what it reported).
type listed[T any] struct {
	mu   sync.Mutex // guards the fields below
	list []T
	at   time.Time
	ok   bool
}

func (l *listed[T]) get(clk clock.PassiveClock, what string, fetch func() ([]T, error)) []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ok && clk.Since(l.at) < runtimeRefresh {
		return l.list
	}
	list, err := fetch()
	if err != nil {
		klog.V(2).Infof("Node status: %s: %v", what, err)
		return l.list
	}
	l.list, l.at, l.ok = list, clk.Now(), true
	return list
}

// setRuntime sets what the node's runtime offers: its handlers, its
// images, its features and the features the agent declares.
func (b *Builder) setRuntime(s *v1.NodeStatus) {
	clk := b.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if b.Runtimes != nil {
		s.RuntimeHandlers = RuntimeHandlers(b.handlers.get(clk, "runtime handlers", b.Runtimes))
	}
	if b.Images != nil {
		s.Images = Images(b.images.get(clk, "images", b.Images), b.MaxImages)
	}
	// The agent refuses supplementalGroupsPolicy Strict (Docker always
	// adds the image's groups): the scheduler keeps such pods away.
	no := false
	s.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: &no}
	s.DeclaredFeatures = append([]string(nil), declaredFeatures...)
}

// RuntimeHandlers are the node's runtime handlers: the default one ("",
// Docker's default runtime) and each of Docker's runtimes, as a
// RuntimeClass's handler names them. Neither recursive read-only mounts
// nor user namespaces are supported by the agent, whatever the runtime.
func RuntimeHandlers(runtimes []string) []v1.NodeRuntimeHandler {
	out := make([]v1.NodeRuntimeHandler, 0, len(runtimes)+1)
	for _, name := range append([]string{""}, runtimes...) {
		rro, userns := false, false
		out = append(out, v1.NodeRuntimeHandler{Name: name, Features: &v1.NodeRuntimeHandlerFeatures{
			RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns,
		}})
	}
	return out
}

// Images are the node's images as the kubelet reports them: the largest
// first, at most limit of them (-1: all), each with at most five names,
// digests before tags.
func Images(images []kubecontainer.Image, limit int) []v1.ContainerImage {
	sorted := append([]kubecontainer.Image(nil), images...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Size > sorted[j].Size })
	if limit > -1 && limit < len(sorted) {
		sorted = sorted[:limit]
	}
	var out []v1.ContainerImage
	for _, img := range sorted {
		names := img.Names
		if len(names) > maxNamesPerImage {
			names = names[:maxNamesPerImage]
		}
		out = append(out, v1.ContainerImage{Names: append([]string(nil), names...), SizeBytes: img.Size})
	}
	return out
}
