package cadvisor

import (
	"sync"
	"time"

	"github.com/google/cadvisor/container"
	"github.com/google/cadvisor/container/docker"
	"github.com/google/cadvisor/fs"
	info "github.com/google/cadvisor/info/v1"
	"github.com/google/cadvisor/watcher"
)

// cAdvisor (v0.57, and its main branch) creates a container from two
// goroutines, the cgroup watcher's event loop and the minute's global
// housekeeping, and its createContainer checks its container map and
// stores into it with nothing held between. The Docker factory's inspect
// in between waits for the container's start (dockerd holds the
// container's lock through it), so a cgroup the minute's listing finds
// while its container starts is created twice: the second store orphans
// the first one's housekeeping goroutine, which then samples a cgroup
// long gone for as long as the agent runs. Under pod churn that was about
// one orphan a minute.
//
// createOnce closes the race from outside cAdvisor: it stands in for the
// Docker factory, and while one creation of a container is in progress or
// the container is housekept, a second creation is told "handled, but
// ignored", which cAdvisor takes as "nothing to do".
type createOnce struct {
	container.ContainerHandlerFactory
	now func() time.Time

	mu     sync.Mutex
	claims map[string]*claim // by cAdvisor container name
}

// claim is a creation of one container from its factory check until its
// housekeeping ends (the handler's Cleanup).
type claim struct {
	since   time.Time
	started bool // housekeeping began: the container is in cAdvisor's map
}

// staleClaim is how long a creation may take before another may start: a
// creation that failed after the handler was made (cAdvisor drops the
// handler without a Cleanup) would otherwise keep its container untracked
// for good. Longer than any container start seen (21 s under overload),
// so a slow start is still created once; the minute's global housekeeping
// retries after it.
const staleClaim = time.Minute

func newCreateOnce(f container.ContainerHandlerFactory) *createOnce {
	return &createOnce{ContainerHandlerFactory: f, now: time.Now, claims: map[string]*claim{}}
}

func (f *createOnce) CanHandleAndAccept(name string) (handle, accept bool, err error) {
	f.mu.Lock()
	if c, ok := f.claims[name]; ok && (c.started || f.now().Sub(c.since) < staleClaim) {
		f.mu.Unlock()
		return true, false, nil
	}
	c := &claim{since: f.now()}
	f.claims[name] = c
	f.mu.Unlock()

	handle, accept, err = f.ContainerHandlerFactory.CanHandleAndAccept(name)
	if !handle || !accept || err != nil {
		f.release(name, c) // another factory's, or nobody's
	}
	return handle, accept, err
}

func (f *createOnce) NewContainerHandler(name string, metadataEnvAllowList []string, inHostNamespace bool) (container.ContainerHandler, error) {
	f.mu.Lock()
	c := f.claims[name]
	f.mu.Unlock()
	h, err := f.ContainerHandlerFactory.NewContainerHandler(name, metadataEnvAllowList, inHostNamespace)
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

// claimed is how many containers are being created or housekept.
func (f *createOnce) claimed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.claims)
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
	if h.c != nil {
		h.c.started = true
	}
	h.f.mu.Unlock()
	h.ContainerHandler.Start()
}

func (h *onceHandler) Cleanup() {
	h.ContainerHandler.Cleanup()
	h.f.release(h.name, h.c)
}

// dockerPlugin is cAdvisor's Docker plugin with its factory behind
// createOnce. The plugin registers its factory itself (for raw cgroup
// watching, the only watch source), so the list is taken back and
// registered again with the Docker factory wrapped.
type dockerPlugin struct {
	container.Plugin
	factory *createOnce // set by Register
}

func (p *dockerPlugin) Register(factory info.MachineInfoFactory, fsInfo fs.FsInfo, includedMetrics container.MetricSet) (watcher.ContainerWatcher, error) {
	w, err := p.Plugin.Register(factory, fsInfo, includedMetrics)
	if err != nil {
		return w, err
	}
	registered := container.GetReorderedFactoryList(watcher.Raw)
	container.ClearContainerHandlerFactories()
	for _, f := range registered {
		if f.String() == docker.DockerNamespace {
			p.factory = newCreateOnce(f)
			f = p.factory
		}
		container.RegisterContainerHandlerFactory(f, []watcher.ContainerWatchSource{watcher.Raw})
	}
	return w, nil
}

var (
	registerDocker    sync.Once
	registeredDocker  *dockerPlugin
	registerDockerErr error
)

// registerDockerPlugin registers the Docker plugin with cAdvisor, once per
// process (cAdvisor's registry is global).
func registerDockerPlugin() (*dockerPlugin, error) {
	registerDocker.Do(func() {
		registeredDocker = &dockerPlugin{Plugin: docker.NewPlugin()}
		registerDockerErr = container.RegisterPlugin(docker.DockerNamespace, registeredDocker)
	})
	return registeredDocker, registerDockerErr
}
