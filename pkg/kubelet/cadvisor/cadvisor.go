// Package cadvisor embeds cAdvisor (as a library) behind the small interface
// the API needs. cAdvisor's defaults are not the agent's: they are set here,
// in code, and none of its global flags reach the agent's command line.
package cadvisor

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
	"github.com/google/cadvisor/cache/memory"
	"github.com/google/cadvisor/container"
	"github.com/google/cadvisor/container/docker"
	"github.com/google/cadvisor/container/raw"
	cadvisorapi "github.com/google/cadvisor/info/v1"
	cadvisorapiv2 "github.com/google/cadvisor/info/v2"
	"github.com/google/cadvisor/manager"
	cmetrics "github.com/google/cadvisor/metrics"
	"github.com/google/cadvisor/utils/sysfs"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

const (
	// statsCacheDuration is how long samples are kept in memory: enough for
	// the summary's rates and a short num_stats history (4 to 6 samples at
	// the 10 to 15 s housekeeping). The samples are most of the agent's
	// heap: at 250 pods (some 770 cgroups) two minutes of them held 30 MB,
	// and the heap goal twice that.
	statsCacheDuration = time.Minute
	// maxHousekeepingInterval caps cAdvisor's dynamic back-off for idle
	// containers.
	maxHousekeepingInterval = 15 * time.Second
)

// ErrUnavailable is returned by every call when cAdvisor could not start.
var ErrUnavailable = errors.New("cadvisor: unavailable")

// ErrStarting is returned by every call until cAdvisor has started: its
// start reads every cgroup of the host's containers, tens of seconds on a
// busy node, and nothing else of the agent waits for it.
var ErrStarting = errors.New("cadvisor: starting (reading the host's containers)")

// includedMetrics are only the sets the endpoints use: no disk usage walks,
// no referenced bytes.
var includedMetrics = container.MetricSet{
	container.CpuUsageMetrics:     struct{}{},
	container.MemoryUsageMetrics:  struct{}{},
	container.NetworkUsageMetrics: struct{}{},
	container.ProcessMetrics:      struct{}{}, // processes, threads, sockets, file descriptors
	container.OOMMetrics:          struct{}{},
}

// Interface is what the API needs from cAdvisor.
type Interface interface {
	// Err says why the calls below fail: cAdvisor is still starting, or
	// could not start (nil: it runs).
	Err() error
	MachineInfo() (*cadvisorapi.MachineInfo, error)
	ContainerInfo(name string, req *cadvisorapi.ContainerInfoRequest) (*cadvisorapi.ContainerInfo, error)
	DockerContainer(id string, req *cadvisorapi.ContainerInfoRequest) (cadvisorapi.ContainerInfo, error)
	// Recent is the last n samples of a cgroup (docker: of a Docker
	// container by ID), without the rest of its info: the summary asks for
	// every container of every pod. The samples are cAdvisor's own: read,
	// never modified.
	Recent(name string, docker bool, n int) ([]*cadvisorapi.ContainerStats, error)
}

// Client is the embedded cAdvisor. Its fields below ready are written
// once, by start, before ready is closed.
type Client struct {
	ready chan struct{} // closed when start has returned

	m       manager.Manager
	samples *memory.InMemoryCache // cAdvisor's store of samples, which Recent reads
	cache   *inspectCache         // between cAdvisor and Docker, if the endpoint is a unix socket
	err     error                 // why cAdvisor is unavailable, if it is

	mu sync.Mutex
	// names maps Docker container IDs to cAdvisor's names for them (their
	// cgroups), the samples' key. Swept of the containers cAdvisor no
	// longer has whenever it has doubled since the last sweep.
	names   map[string]string
	sweepAt int
}

var _ Interface = (*Client)(nil)

// New starts cAdvisor in the background watching Docker containers at
// dockerEndpoint, the root cgroup and the pods' cgroups (not every raw
// cgroup), housekeeping every interval. Its Docker inspects are cached
// while the hub events (the agent's runtime events; nil: none, nothing
// cached) follows the containers' changes. Until it runs every call answers
// ErrStarting; if it cannot start (no cgroups, say), ErrUnavailable and the
// reason, and the agent runs on.
func New(dockerEndpoint string, interval time.Duration, events *runtimeevents.Hub) *Client {
	c := &Client{ready: make(chan struct{})}
	go func() {
		defer close(c.ready)
		if c.err = c.start(dockerEndpoint, interval, events); c.err != nil {
			klog.Errorf("Container stats are unavailable; pods run regardless: %v", c.err)
			return
		}
		klog.Infof("cAdvisor started: container stats are available")
	}()
	return c
}

func (c *Client) start(dockerEndpoint string, interval time.Duration, events *runtimeevents.Hub) error {
	if err := registerDockerPlugin(); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	*docker.ArgDockerEndpoint = dockerEndpoint
	if strings.HasPrefix(dockerEndpoint, "unix://") {
		cache, err := newInspectCache(dockerEndpoint, events)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		c.cache = cache
		*docker.ArgDockerEndpoint = cache.Endpoint()
	}
	*raw.DockerOnly = true
	*manager.HousekeepingInterval = interval
	// cAdvisor keeps every container creation and deletion event for a day
	// (up to 100,000 of each) for an events API nothing here serves: under
	// pod churn, state kept for containers long gone. None, as the kubelet.
	for name, value := range map[string]string{"event_storage_age_limit": "default=0", "event_storage_event_limit": "default=0"} {
		if err := flag.Set(name, value); err != nil {
			return c.fail(fmt.Errorf("%w: cAdvisor flag %s: %v", ErrUnavailable, name, err))
		}
	}
	maxInterval := max(maxHousekeepingInterval, interval)
	allowDynamic := true
	// Of the raw cgroups only the root and the pods' (kubepods, or
	// kubepods.slice with systemd: the QoS and pod cgroups the summary reads
	// a pod's usage from), as the kubelet does: every other cgroup of the
	// node (each systemd service) would be housekept for nothing.
	rawPrefixes := []string{"/" + cgroups.Top[0]}
	samples := memory.New(statsCacheDuration, nil)
	m, err := manager.New(samples, sysfs.NewRealSysFs(),
		manager.HousekeepingConfig{Interval: &maxInterval, AllowDynamic: &allowDynamic},
		includedMetrics, http.DefaultClient, rawPrefixes, nil, "", 0)
	if err == nil {
		err = m.Start()
	}
	if err != nil {
		return c.fail(fmt.Errorf("%w: %v", ErrUnavailable, err))
	}
	c.m, c.samples, c.names = m, samples, map[string]string{}
	return nil
}

// fail closes what start opened before err.
func (c *Client) fail(err error) error {
	if c.cache != nil {
		c.cache.Close()
		c.cache = nil
	}
	return err
}

// Collectors returns the Prometheus collectors of /metrics/cadvisor: the
// machine's (machine_cpu_cores, machine_memory_bytes, ...) and the
// containers', each container of node's pods labelled with its pod,
// namespace and container name (the infra container's is "POD"), besides
// the image, the container ID and cAdvisor's name. Containers of other
// owners keep empty pod labels, for the server to leave out.
func (c *Client) Collectors(node string) []prometheus.Collector {
	labels := func(ci *cadvisorapi.ContainerInfo) map[string]string {
		set := map[string]string{cmetrics.LabelID: ci.Name, cmetrics.LabelImage: ci.Spec.Image}
		if len(ci.Aliases) > 0 {
			set[cmetrics.LabelName] = ci.Aliases[0]
		}
		if ci.Spec.Labels[kubecontainer.LabelOwner] == node {
			set["pod"] = ci.Spec.Labels[kubecontainer.LabelPodName]
			set["namespace"] = ci.Spec.Labels[kubecontainer.LabelPodNamespace]
			set["container"] = ci.Spec.Labels[kubecontainer.LabelContainerName]
		}
		return set
	}
	p := provider{c}
	return []prometheus.Collector{
		cmetrics.NewPrometheusCollector(p, labels, includedMetrics, clock.RealClock{},
			cadvisorapiv2.RequestOptions{IdType: cadvisorapiv2.TypeName, Count: 1, Recursive: true}),
		cmetrics.NewPrometheusMachineCollector(p, includedMetrics),
	}
}

// provider is what cAdvisor's collectors read, once cAdvisor runs: before,
// a scrape has only the collectors' error series.
type provider struct{ c *Client }

func (p provider) GetRequestedContainersInfo(name string, o cadvisorapiv2.RequestOptions) (map[string]*cadvisorapi.ContainerInfo, error) {
	if err := p.c.Err(); err != nil {
		return nil, err
	}
	return p.c.m.GetRequestedContainersInfo(name, o)
}

func (p provider) GetVersionInfo() (*cadvisorapi.VersionInfo, error) {
	if err := p.c.Err(); err != nil {
		return nil, err
	}
	return p.c.m.GetVersionInfo()
}

func (p provider) GetMachineInfo() (*cadvisorapi.MachineInfo, error) { return p.c.MachineInfo() }

// Err says why cAdvisor does not answer: ErrStarting until it has started,
// then nil, or why it could not start.
func (c *Client) Err() error {
	select {
	case <-c.ready:
		return c.err
	default:
		return ErrStarting
	}
}

// stopTimeout bounds Stop: cAdvisor's own Stop can wait on its housekeeping
// goroutines for minutes with many containers, and the agent must exit
// promptly on SIGTERM.
const stopTimeout = 2 * time.Second

// Stop stops cAdvisor's housekeeping, waiting at most stopTimeout.
func (c *Client) Stop() {
	select {
	case <-c.ready:
	case <-time.After(stopTimeout):
		klog.V(1).Infof("cAdvisor is still starting after %v; exiting regardless", stopTimeout)
		return
	}
	if c.m == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_ = c.m.Stop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		klog.V(1).Infof("cAdvisor did not stop within %v; exiting regardless", stopTimeout)
	}
	if c.cache != nil {
		c.cache.Close()
	}
}

// MachineInfo is the node's hardware description.
func (c *Client) MachineInfo() (*cadvisorapi.MachineInfo, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	return c.m.GetMachineInfo()
}

// ContainerInfo is a cgroup's info ("/" is the root container).
func (c *Client) ContainerInfo(name string, req *cadvisorapi.ContainerInfoRequest) (*cadvisorapi.ContainerInfo, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	return c.m.GetContainerInfo(name, req)
}

// DockerContainer is a Docker container's info by ID.
func (c *Client) DockerContainer(id string, req *cadvisorapi.ContainerInfoRequest) (cadvisorapi.ContainerInfo, error) {
	if err := c.Err(); err != nil {
		return cadvisorapi.ContainerInfo{}, err
	}
	return c.m.DockerContainer(id, req)
}

// Recent reads cAdvisor's store of samples directly. Its query calls, v1
// and v2 alike, re-read a container's spec from its cgroup files when it
// was read over 5 s before: at 250 pods (some 750 cgroups) one summary in
// every 5 s paid for them all, 0.3 to 0.5 s where the others took 40 ms.
// Only a Docker container's name is asked of cAdvisor, once.
func (c *Client) Recent(name string, docker bool, n int) ([]*cadvisorapi.ContainerStats, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	if docker {
		var err error
		if name, err = c.dockerName(name); err != nil {
			return nil, err
		}
	}
	samples, err := c.samples.RecentStats(name, time.Time{}, time.Time{}, n)
	if err != nil {
		return nil, fmt.Errorf("cadvisor: samples of %q: %w", name, err)
	}
	return samples, nil
}

// dockerName is cAdvisor's name for the Docker container id.
func (c *Client) dockerName(id string) (string, error) {
	c.mu.Lock()
	name, ok := c.names[id]
	c.mu.Unlock()
	if ok {
		return name, nil
	}
	specs, err := c.m.GetContainerSpec(id, cadvisorapiv2.RequestOptions{IdType: cadvisorapiv2.TypeDocker})
	if err != nil {
		return "", err
	}
	if len(specs) != 1 {
		return "", fmt.Errorf("cadvisor: %d containers with Docker ID %q", len(specs), id)
	}
	for name = range specs {
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.names) >= c.sweepAt {
		for known, n := range c.names {
			if !c.m.Exists(n) {
				delete(c.names, known)
			}
		}
		c.sweepAt = max(2*len(c.names), 64)
	}
	c.names[id] = name
	return name, nil
}
