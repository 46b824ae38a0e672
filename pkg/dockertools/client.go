// Package dockertools is the agent's edge to Docker: the client wrapper (with
// timeouts and typed errors), image pulls, exec and streams, and the
// translation of a pod's containers into Docker create options. Nothing
// outside this package knows Docker's API types or error strings; how the
// agent names, labels and hashes its containers is pkg/kubelet/container's.
package dockertools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	docker "github.com/fsouza/go-dockerclient"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Docker's own error types and strings never leave this package: they
// become the runtime errors of pkg/kubelet/container (not found, name
// conflict, unavailable, exec timeout).

// Client implements the runtime interface the kubelet uses.
var _ kubecontainer.Runtime = (*Client)(nil)

// ShortTimeout bounds calls that should answer at once (list, inspect,
// create, start, remove). Pull, stop, logs, wait and exec are bounded by
// their own deadlines or their caller's context instead.
const ShortTimeout = 30 * time.Second

// stopDeadlineSlack is added to a stop's grace period for the HTTP deadline:
// Docker answers only after the container is gone, which may take the whole
// grace period plus the kill.
const stopDeadlineSlack = 10 * time.Second

// DefaultEndpoint is DOCKER_HOST, else the local socket.
func DefaultEndpoint() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return "unix:///var/run/docker.sock"
}

// Client is the agent's Docker client. It is safe for concurrent use.
type Client struct {
	c *docker.Client

	// go-dockerclient learns the daemon's API version lazily, unguarded,
	// on the first StartContainer or CreateExec: concurrent first calls
	// race on it. Until one has completed with the daemon answering, those
	// calls are serialized under versionMu.
	versionMu    sync.Mutex
	versionKnown atomic.Bool

	images presentImages
	refs   imageRefs
}

// learningVersion runs f, a call that may make go-dockerclient learn the
// API version, alone until that has happened once.
func (c *Client) learningVersion(f func() error) error {
	if c.versionKnown.Load() {
		return f()
	}
	c.versionMu.Lock()
	defer c.versionMu.Unlock()
	err := f()
	if !errors.Is(translate(err), kubecontainer.ErrRuntimeUnavailable) {
		c.versionKnown.Store(true) // the daemon answered: the version is known
	}
	return err
}

// NewClient connects to endpoint (unix:// or tcp://). It does not contact the
// daemon: the agent starts even when Docker is not up yet.
func NewClient(endpoint string) (*Client, error) {
	c, err := docker.NewClient(endpoint)
	if err != nil {
		return nil, fmt.Errorf("docker client for %q: %w", endpoint, err)
	}
	return &Client{c: c}, nil
}

func short(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, ShortTimeout)
}

// List lists every container (running or not) carrying label=value.
func (c *Client) List(ctx context.Context, label, value string) ([]kubecontainer.Container, error) {
	ctx, cancel := short(ctx)
	defer cancel()
	list, err := c.c.ListContainers(docker.ListContainersOptions{
		All:     true,
		Filters: map[string][]string{"label": {label + "=" + value}},
		Context: ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", translate(err))
	}
	out := make([]kubecontainer.Container, 0, len(list))
	for _, l := range list {
		name := ""
		if len(l.Names) > 0 {
			name = strings.TrimPrefix(l.Names[0], "/")
		}
		out = append(out, kubecontainer.Container{
			ID:      l.ID,
			Name:    name,
			Labels:  l.Labels,
			Running: l.State == "running",
			Created: time.Unix(l.Created, 0),
		})
	}
	return out, nil
}

// Inspect returns the details of one container.
func (c *Client) Inspect(ctx context.Context, id string) (*kubecontainer.ContainerDetail, error) {
	ctx, cancel := short(ctx)
	defer cancel()
	ct, err := c.c.InspectContainerWithOptions(docker.InspectContainerOptions{ID: id, Context: ctx})
	if err != nil {
		return nil, fmt.Errorf("inspect container %s: %w", kubecontainer.ShortID(id), translate(err))
	}
	d := &kubecontainer.ContainerDetail{
		ID:         ct.ID,
		Name:       strings.TrimPrefix(ct.Name, "/"),
		Image:      ct.Config.Image,
		ImageID:    ct.Image,
		Labels:     ct.Config.Labels,
		Status:     ct.State.Status,
		Running:    ct.State.Running,
		ExitCode:   ct.State.ExitCode,
		Error:      ct.State.Error,
		OOMKilled:  ct.State.OOMKilled,
		CreatedAt:  ct.Created,
		StartedAt:  ct.State.StartedAt,
		FinishedAt: ct.State.FinishedAt,
		Pid:        ct.State.Pid,
		LogPath:    ct.LogPath,
		ImageRef:   c.imageRef(ct.Image),
	}
	if ct.State.Running {
		d.User = processUser(ct.ID, ct.State.Pid)
	}
	if ct.GraphDriver != nil {
		d.LayerPath = ct.GraphDriver.Data["UpperDir"]
	}
	if ct.NetworkSettings != nil {
		d.IP = ct.NetworkSettings.IPAddress
		if d.IP == "" {
			for _, n := range ct.NetworkSettings.Networks {
				if n.IPAddress != "" {
					d.IP = n.IPAddress
					break
				}
			}
		}
	}
	if hc := ct.HostConfig; hc != nil {
		d.CPUShares, d.CPUQuota, d.CPUPeriod, d.Memory = hc.CPUShares, hc.CPUQuota, hc.CPUPeriod, hc.Memory
		// A CPU limit lifted in place (Update's -1) stays Docker's -1;
		// unlimited is 0 to the agent, as a container created without
		// one reads: else the lifted limit would differ from the spec at
		// every sync, and be updated again.
		if d.CPUQuota < 0 {
			d.CPUQuota = 0
		}
	}
	return d, nil
}

// Create creates a container from spec and returns its ID.
func (c *Client) Create(ctx context.Context, spec *kubecontainer.CreateSpec) (string, error) {
	ctx, cancel := short(ctx)
	defer cancel()
	opts := dockerOptions(spec)
	opts.Context = ctx
	ct, err := c.c.CreateContainer(opts)
	if err != nil {
		if errors.Is(translate(err), kubecontainer.ErrImageNotFound) {
			c.images.forget() // removed since it was found
		}
		return "", fmt.Errorf("create container %s: %w", spec.Name, translate(err))
	}
	return ct.ID, nil
}

// Start starts a created container. Starting a running one is success.
func (c *Client) Start(ctx context.Context, id string) error {
	ctx, cancel := short(ctx)
	defer cancel()
	err := c.learningVersion(func() error { return c.c.StartContainerWithContext(id, nil, ctx) })
	var already *docker.ContainerAlreadyRunning
	if errors.As(err, &already) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("start container %s: %w", kubecontainer.ShortID(id), translate(err))
	}
	return nil
}

// Stop sends the container's stop signal, waits up to grace, then kills.
// Stopping a stopped or missing container is success.
func (c *Client) Stop(ctx context.Context, id string, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, grace+stopDeadlineSlack)
	defer cancel()
	secs := uint(grace.Round(time.Second) / time.Second)
	err := c.c.StopContainerWithContext(id, secs, ctx)
	var notRunning *docker.ContainerNotRunning
	if errors.As(err, &notRunning) {
		return nil
	}
	err = translate(err)
	if err == nil || errors.Is(err, kubecontainer.ErrNotFound) {
		return nil
	}
	return fmt.Errorf("stop container %s: %w", kubecontainer.ShortID(id), err)
}

// Update applies r to a running container in place (docker update): its
// CPU shares, CFS quota and period, and memory limit, swap held to the
// memory limit as at create. A quota of 0 lifts the CPU limit (Docker's
// -1); a memory limit of 0 leaves the container's as it is (Docker cannot
// lift one: the runtime manager restarts the container instead).
func (c *Client) Update(ctx context.Context, id string, r kubecontainer.Resources) error {
	ctx, cancel := short(ctx)
	defer cancel()
	opts := docker.UpdateContainerOptions{Context: ctx, CPUShares: int(r.CPUShares), CPUQuota: int(r.CPUQuota), CPUPeriod: int(r.CPUPeriod),
		Memory: int(r.Memory), MemorySwap: int(r.Memory)}
	if r.CPUQuota == 0 {
		opts.CPUQuota = -1
	}
	if err := translate(c.c.UpdateContainer(id, opts)); err != nil {
		return fmt.Errorf("update container %s: %w", kubecontainer.ShortID(id), err)
	}
	return nil
}

// Remove removes a container (forcefully: it may still be running) and its
// anonymous volumes. Removing a missing container is success.
func (c *Client) Remove(ctx context.Context, id string) error {
	ctx, cancel := short(ctx)
	defer cancel()
	err := translate(c.c.RemoveContainer(docker.RemoveContainerOptions{ID: id, Force: true, RemoveVolumes: true, Context: ctx}))
	if err == nil || errors.Is(err, kubecontainer.ErrNotFound) {
		return nil
	}
	// Docker answers 409 while a removal is already in progress.
	var de *docker.Error
	if errors.As(err, &de) && de.Status == http.StatusConflict && strings.Contains(de.Message, "in progress") {
		return nil
	}
	return fmt.Errorf("remove container %s: %w", kubecontainer.ShortID(id), err)
}

// ImagePresent reports whether the image is in Docker's store (an image
// found there in the last presentFor is taken to be there still).
func (c *Client) ImagePresent(ctx context.Context, image string) (bool, error) {
	if c.images.recent(image) {
		return true, nil
	}
	v, err, _ := c.images.group.Do(image, func() (any, error) {
		_, err := c.c.InspectImage(image)
		err = translate(err)
		switch {
		case err == nil:
			c.images.found(image)
			return true, nil
		case errors.Is(err, kubecontainer.ErrImageNotFound):
			return false, nil
		default:
			return false, fmt.Errorf("inspect image %s: %w", image, err)
		}
	})
	return v.(bool), err
}

// ImageUser is the user an image runs as ("" means root).
func (c *Client) ImageUser(ctx context.Context, image string) (string, error) {
	img, err := c.c.InspectImage(image)
	if err != nil {
		return "", fmt.Errorf("inspect image %s: %w", image, translate(err))
	}
	if img.Config == nil {
		return "", nil
	}
	return img.Config.User, nil
}

// eventActions are the actions the agent subscribes to: the container
// actions that change what a list or an inspect shows
// (kubecontainer.StateActions), health_status (cAdvisor's inspects show a
// container's health), and the image actions after which an image may be
// present that was not: a pull, a load, a tag or an import (a load names no
// reference, only the image's ID). exec_* (every exec probe makes three),
// kill, attach and the like are left to Docker. Docker matches an action
// by prefix once health_status is asked for ("health_status: healthy");
// no action of one type is the prefix of another's.
var eventActions = append(append([]string{"health_status"}, kubecontainer.StateActions...), "pull", "load", "tag", "import")

// Events streams the daemon's container and image events (eventActions)
// until ctx is cancelled or the stream breaks; the returned channel is
// closed then. The caller holds one subscription for the agent
// (pkg/kubelet/runtimeevents) and has its readers resync after it
// reconnects: events lost in between are covered.
//
// The stream is read here rather than through go-dockerclient's event
// listeners: those are shared by every caller of one client, never close a
// removed listener's channel, and removing the last one blocks until Docker
// sends another event. Here cancelling ctx ends the request, and with it
// the one goroutine reading it.
func (c *Client) Events(ctx context.Context) (<-chan kubecontainer.Event, error) {
	data, err := json.Marshal(map[string][]string{"type": {"container", "image"}, "event": eventActions})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.rawURL("/events?filters="+url.QueryEscape(string(data))), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.c.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("subscribe to docker events: %w", translate(err))
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("subscribe to docker events: %w", translate(&docker.Error{Status: resp.StatusCode, Message: resp.Status}))
	}
	out := make(chan kubecontainer.Event)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		dec := json.NewDecoder(resp.Body)
		for {
			var ev engineEvent
			if err := dec.Decode(&ev); err != nil {
				return // cancelled, or the stream broke: the caller resubscribes
			}
			select {
			case out <- ev.event():
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// engineEvent is an event as the Engine API streams it.
type engineEvent struct {
	Type     string
	Action   string
	TimeNano int64 `json:"timeNano"`
	Actor    struct {
		ID         string
		Attributes map[string]string
	}
}

// event is the runtime's event for e. An image event's actor is the
// image's reference, or its ID for a load.
func (e engineEvent) event() kubecontainer.Event {
	ev := kubecontainer.Event{Action: e.Action, Time: time.Unix(0, e.TimeNano)}
	if e.Type == "image" {
		ev.Type, ev.Image = kubecontainer.ImageEvent, e.Actor.ID
		return ev
	}
	ev.Type, ev.ContainerID, ev.Labels = kubecontainer.ContainerEvent, e.Actor.ID, e.Actor.Attributes
	if e.Action == "die" {
		ev.ExitCode, _ = strconv.Atoi(e.Actor.Attributes["exitCode"])
	}
	return ev
}

// rawURL is the URL of an Engine API path for requests made with the
// client's own HTTP client, for what go-dockerclient lacks. Over a unix
// socket the transport dials the socket and the host is unused.
func (c *Client) rawURL(path string) string {
	u, err := url.Parse(c.c.Endpoint())
	if err != nil || u.Scheme == "unix" {
		return "http://unix.sock" + path
	}
	scheme := "http"
	if u.Scheme == "https" || c.c.TLSConfig != nil {
		scheme = "https"
	}
	return scheme + "://" + u.Host + path
}

// translate maps go-dockerclient errors onto this package's sentinels.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var noSuch *docker.NoSuchContainer
	switch {
	case errors.As(err, &noSuch):
		return fmt.Errorf("%w: %s", kubecontainer.ErrNotFound, noSuch.ID)
	case errors.Is(err, docker.ErrNoSuchImage):
		return kubecontainer.ErrImageNotFound
	case errors.Is(err, docker.ErrContainerAlreadyExists):
		return kubecontainer.ErrNameConflict
	case errors.Is(err, docker.ErrConnectionRefused):
		return fmt.Errorf("%w: %v", kubecontainer.ErrRuntimeUnavailable, err)
	}
	var de *docker.Error
	if errors.As(err, &de) {
		switch {
		case de.Status == http.StatusNotFound && strings.Contains(strings.ToLower(de.Message), "no such image"):
			return fmt.Errorf("%w: %s", kubecontainer.ErrImageNotFound, oneLine(de.Message))
		case de.Status == http.StatusNotFound && strings.Contains(strings.ToLower(de.Message), "no such container"):
			return fmt.Errorf("%w: %s", kubecontainer.ErrNotFound, oneLine(de.Message))
		}
		return fmt.Errorf("docker: %s (HTTP %d)", oneLine(de.Message), de.Status)
	}
	var se interface{ Timeout() bool }
	if errors.As(err, &se) || errors.Is(err, context.DeadlineExceeded) || isConnError(err) {
		return fmt.Errorf("%w: %v", kubecontainer.ErrRuntimeUnavailable, err)
	}
	return err
}

func isConnError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "connection refused") || strings.Contains(s, "no such file or directory") ||
		strings.Contains(s, "connection reset") || strings.Contains(s, "broken pipe") || strings.Contains(s, "EOF")
}

// oneLine keeps a daemon message to its first line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// DaemonInfo is what the agent reports of Docker (its version, its
// runtimes) and needs to know of it: how it names the cgroups of its
// containers, "cgroupfs" or "systemd" (a CgroupParent must be spelled to
// match), and the runtimes a container may be created with.
type DaemonInfo struct {
	Version      string
	CgroupDriver string
	// Runtimes are the names of the daemon's runtimes, sorted ("runc" and
	// any configured in daemon.json).
	Runtimes []string
}

// DaemonInfo asks Docker for its DaemonInfo.
func (c *Client) DaemonInfo() (DaemonInfo, error) {
	info, err := c.c.Info()
	if err != nil {
		return DaemonInfo{}, fmt.Errorf("docker info: %w", translate(err))
	}
	d := DaemonInfo{Version: info.ServerVersion, CgroupDriver: info.CgroupDriver}
	for name := range info.Runtimes {
		d.Runtimes = append(d.Runtimes, name)
	}
	sort.Strings(d.Runtimes)
	return d, nil
}
