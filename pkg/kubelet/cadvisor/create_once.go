package cadvisor

import (
	"fmt"
	"sync"
	"time"

	"github.com/google/cadvisor/container"
	"github.com/google/cadvisor/container/docker"
	"github.com/google/cadvisor/fs"
	info "github.com/google/cadvisor/info/v1"
	"github.com/google/cadvisor/watcher"
	"k8s.io/klog/v2"
)

// cAdvisor (v0.57, and its main branch) creates a container from two
// goroutines, the cgroup watcher's event loop and the minute's global
// housekeeping, and its createContainer checks its container map and
// stores into it with nothing held between. A cgroup the minute's listing
// finds while the event loop is creating it is created twice: the second
// store orphans the first one's housekeeping goroutine, which then samples
// a cgroup long gone for as long as the agent runs. The Docker factory
// widens the window to a container's whole start (its inspect waits on
// dockerd's lock of the container), and a pod's cgroup is raced too. Under
// pod churn that was about one orphan a minute.
//
// createOnce closes the race from outside cAdvisor. It is the first
// factory asked, and asks the others itself, in cAdvisor's order: while one
// creation of a container is in progress or the container is housekept, a
// second creation is told "handled, but ignored", which cAdvisor takes as
// "nothing to do".
type createOnce struct {
	now    func() time.Time
	others func() []container.ContainerHandlerFactory // the factories behind this one

	mu     sync.Mutex
	claims map[string]*claim // by cAdvisor container name
}

// claim is a creation of one container from its factory check until its
// housekeeping ends (the handler's Cleanup).
type claim struct {
	since   time.Time
	factory container.ContainerHandlerFactory // the one that accepted it
	started bool                              // housekeeping began: the container is in cAdvisor's map
}

// staleClaim is how long a creation may take before another may start: a
// creation that failed after the handler was made (cAdvisor drops the
// handler without a Cleanup) would otherwise keep its container untracked
// for good. Longer than any container start seen (21 s under overload),
// so a slow start is still created once; the minute's global housekeeping
// retries after it.
const staleClaim = time.Minute

// newCreateOnce returns the guard, asking the factories registered with
// cAdvisor for raw cgroup watching (the only watch source), but itself.
func newCreateOnce() *createOnce {
	f := &createOnce{now: time.Now, claims: map[string]*claim{}}
	f.others = func() []container.ContainerHandlerFactory {
		var out []container.ContainerHandlerFactory
		for _, o := range container.GetReorderedFactoryList(watcher.Raw) { // cAdvisor holds the registry's lock
			if o != container.ContainerHandlerFactory(f) {
				out = append(out, o)
			}
		}
		return out
	}
	return f
}

func (f *createOnce) String() string                 { return "created-once" }
func (f *createOnce) DebugInfo() map[string][]string { return nil }

func (f *createOnce) CanHandleAndAccept(name string) (bool, bool, error) {
	f.mu.Lock()
	if c, ok := f.claims[name]; ok && (c.started || f.now().Sub(c.since) < staleClaim) {
		f.mu.Unlock()
		return true, false, nil
	}
	c := &claim{since: f.now()}
	f.claims[name] = c
	f.mu.Unlock()

	for _, o := range f.others() {
		handle, accept, err := o.CanHandleAndAccept(name)
		if err != nil {
			klog.V(4).Infof("cAdvisor factory %q on %s: %v", o, name, err)
		}
		if !handle {
			continue
		}
		if accept {
			f.mu.Lock()
			c.factory = o
			f.mu.Unlock()
		} else {
			f.release(name, c)
		}
		return true, accept, nil
	}
	f.release(name, c)
	return false, false, nil // cAdvisor's own "no factory" error follows
}

func (f *createOnce) NewContainerHandler(name string, metadataEnvAllowList []string, inHostNamespace bool) (container.ContainerHandler, error) {
	f.mu.Lock()
	c := f.claims[name]
	f.mu.Unlock()
	if c == nil || c.factory == nil {
		return nil, fmt.Errorf("cadvisor: no factory accepted %s", name)
	}
	h, err := c.factory.NewContainerHandler(name, metadataEnvAllowList, inHostNamespace)
	if err != nil {
		f.release(name, c)
		return nil, err
	}
	return &onceHandler{ContainerHandler: h, f: f, name: name, c: c}, nil
}

// release ends c, if it is still name's claim.
func (f *createOnce) release(name string, c *claim) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.claims[name] == c {
		delete(f.claims, name)
	}
}

// onceHandler marks its claim when housekeeping starts and ends it when
// housekeeping ends.
type onceHandler struct {
	container.ContainerHandler
	f    *createOnce
	name string
	c    *claim
}

func (h *onceHandler) Start() {
	h.f.mu.Lock()
	h.c.started = true
	h.f.mu.Unlock()
	h.ContainerHandler.Start()
}

func (h *onceHandler) Cleanup() {
	h.ContainerHandler.Cleanup()
	h.f.release(h.name, h.c)
}

// dockerPlugin is cAdvisor's Docker plugin with createOnce registered
// before it: cAdvisor asks the factories in the order they were registered
// (the raw one, registered after the plugins, last).
type dockerPlugin struct {
	container.Plugin
}

func (p dockerPlugin) Register(factory info.MachineInfoFactory, fsInfo fs.FsInfo, includedMetrics container.MetricSet) (watcher.ContainerWatcher, error) {
	container.RegisterContainerHandlerFactory(newCreateOnce(), []watcher.ContainerWatchSource{watcher.Raw})
	return p.Plugin.Register(factory, fsInfo, includedMetrics)
}

var (
	registerDocker    sync.Once
	registerDockerErr error
)

// registerDockerPlugin registers the Docker plugin with cAdvisor, once per
// process (cAdvisor's registry is global).
func registerDockerPlugin() error {
	registerDocker.Do(func() {
		registerDockerErr = container.RegisterPlugin(docker.DockerNamespace, dockerPlugin{docker.NewPlugin()})
	})
	return registerDockerErr
}
