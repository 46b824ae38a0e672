// Package containertest provides an in-memory container runtime for unit
// tests of the agent's logic: a kubecontainer.Runtime that behaves as Docker
// does, with containers with state, a record of every call, and injectable
// errors. It is never the proof that a feature works against Docker; the
// end-to-end tests are.
package containertest

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// FakeClient is an in-memory Docker daemon.
type FakeClient struct {
	mu         sync.Mutex // guards everything below
	containers map[string]*kubecontainer.ContainerDetail
	images     map[string]bool
	calls      []string
	errors     map[string]error
	nextID     int
	nextPid    int
	specs      map[string]*kubecontainer.CreateSpec // by container ID: what it was created with
	now        func() time.Time
	events     []chan kubecontainer.Event
	oomed      map[string]bool // containers the kernel OOM-killed in, not exited yet
	execCode   int
	execOut    string
	// imageFsUsage is the image file system's use in percent; each
	// image removed frees imageFsPerImage of it.
	imageFsUsage, imageFsPerImage int
	pullable                      map[string]bool
	pullUser                      map[string]string   // image -> the only user it may be pulled as
	pullUsers                     map[string][]string // image -> the users of its pulls ("" anonymous)
	// held: stops of the pod containers of these names wait until the
	// channel closes (a container slow to stop)
	held map[string]chan struct{}
}

var _ kubecontainer.Runtime = (*FakeClient)(nil)

// NewFakeClient returns a fake with the given images present.
func NewFakeClient(images ...string) *FakeClient {
	f := &FakeClient{
		containers: map[string]*kubecontainer.ContainerDetail{},
		oomed:      map[string]bool{},
		images:     map[string]bool{},
		errors:     map[string]error{},
		now:        time.Now,
		pullable:   map[string]bool{},
		pullUser:   map[string]string{},
		pullUsers:  map[string][]string{},

		imageFsUsage: 50,
	}
	for _, img := range images {
		f.images[img] = true
	}
	return f
}

// InjectError makes every later call of method (e.g. "create") fail with err
// until cleared with a nil err.
func (f *FakeClient) InjectError(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.errors, method)
		return
	}
	f.errors[method] = err
}

// Calls returns the calls made so far ("list", "inspect <id>", ...) and
// forgets them.
func (f *FakeClient) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// CountCalls returns how many recorded calls start with method.
func (f *FakeClient) CountCalls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == method || strings.HasPrefix(c, method+" ") {
			n++
		}
	}
	return n
}

func (f *FakeClient) record(method, arg string) error {
	if arg == "" {
		f.calls = append(f.calls, method)
	} else {
		f.calls = append(f.calls, method+" "+arg)
	}
	return f.errors[method]
}

// Container returns a copy of a container's state.
func (f *FakeClient) Container(id string) (kubecontainer.ContainerDetail, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return kubecontainer.ContainerDetail{}, false
	}
	return *c, true
}

// Exit makes a running container exit with code, as if its process ended.
func (f *FakeClient) Exit(id string, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.containers[id]; ok {
		c.Running, c.Status, c.ExitCode, c.FinishedAt = false, "exited", code, f.now()
		c.User = nil // only a running process shows it
		c.OOMKilled = f.oomed[id]
		delete(f.oomed, id)
		f.emit(c, "die")
	}
}

// OOM reports an OOM kill in a running container (an "oom" event); as with
// Docker, its OOMKilled shows only once it exits.
func (f *FakeClient) OOM(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.containers[id]; ok && c.Running {
		f.oomed[id] = true
		f.emit(c, "oom")
	}
}

// AddContainer puts a container into the fake as if created by someone.
func (f *FakeClient) AddContainer(d kubecontainer.ContainerDetail) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d.ID == "" {
		f.nextID++
		d.ID = fmt.Sprintf("%064d", f.nextID)
	}
	f.containers[d.ID] = &d
	f.emit(&d, "create")
	if d.Running {
		f.emit(&d, "start")
	}
}

// List implements the runtime's List.
func (f *FakeClient) List(_ context.Context, label, value string) ([]kubecontainer.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("list", ""); err != nil {
		return nil, err
	}
	var out []kubecontainer.Container
	for _, c := range f.containers {
		if c.Labels[label] != value {
			continue
		}
		out = append(out, kubecontainer.Container{ID: c.ID, Name: c.Name, Labels: c.Labels, Running: c.Running, Created: c.CreatedAt})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Inspect implements the runtime's Inspect.
func (f *FakeClient) Inspect(_ context.Context, id string) (*kubecontainer.ContainerDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("inspect", id); err != nil {
		return nil, err
	}
	c, ok := f.containers[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", kubecontainer.ErrNotFound, id)
	}
	cp := *c
	return &cp, nil
}

// Create implements the runtime's Create.
func (f *FakeClient) Create(_ context.Context, spec *kubecontainer.CreateSpec) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("create", spec.Name); err != nil {
		return "", err
	}
	if !f.images[spec.Image] {
		return "", kubecontainer.ErrImageNotFound
	}
	for _, c := range f.containers {
		if c.Name == spec.Name {
			return "", kubecontainer.ErrNameConflict
		}
	}
	f.nextID++
	id := fmt.Sprintf("%064d", f.nextID)
	labels := map[string]string{}
	for k, v := range spec.Labels {
		labels[k] = v
	}
	f.containers[id] = &kubecontainer.ContainerDetail{
		ID: id, Name: spec.Name, Image: spec.Image, Labels: labels, Status: "created",
		// Creation times must order containers even within one clock tick.
		CreatedAt: f.now().Add(time.Duration(f.nextID) * time.Microsecond),
		CPUShares: spec.Resources.CPUShares, CPUQuota: spec.Resources.CPUQuota,
		CPUPeriod: spec.Resources.CPUPeriod, Memory: spec.Resources.Memory,
	}
	if f.specs == nil {
		f.specs = map[string]*kubecontainer.CreateSpec{}
	}
	f.specs[id] = spec
	f.emit(f.containers[id], "create")
	return id, nil
}

// CreateSpec is what container id was created with (nil if unknown).
func (f *FakeClient) CreateSpec(id string) *kubecontainer.CreateSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.specs[id]
}

// Start implements the runtime's Start.
func (f *FakeClient) Start(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("start", id); err != nil {
		return err
	}
	c, ok := f.containers[id]
	if !ok {
		return kubecontainer.ErrNotFound
	}
	c.Running, c.Status, c.StartedAt = true, "running", f.now()
	// A running container has a process, as Docker reports it.
	f.nextPid++
	c.Pid = 1000 + f.nextPid
	f.emit(c, "start")
	return nil
}

// Stop implements the runtime's Stop.
func (f *FakeClient) Stop(ctx context.Context, id string, _ time.Duration) error {
	f.mu.Lock()
	if c, ok := f.containers[id]; ok && c.Running {
		if hold := f.held[c.Labels[kubecontainer.LabelContainerName]]; hold != nil {
			f.mu.Unlock()
			select {
			case <-hold:
			case <-ctx.Done():
			}
			f.mu.Lock()
		}
	}
	defer f.mu.Unlock()
	if err := f.record("stop", id); err != nil {
		return err
	}
	if c, ok := f.containers[id]; ok && c.Running {
		c.Running, c.Status, c.ExitCode, c.FinishedAt, c.Pid = false, "exited", 143, f.now(), 0
		f.emit(c, "die")
	}
	return nil
}

// HoldStops makes stops of the pod container named name wait (as one slow
// to stop within its grace period) until release is called.
func (f *FakeClient) HoldStops(name string) (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held == nil {
		f.held = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	f.held[name] = ch
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// Update implements the runtime's Update: the container's resources
// change, as Docker's update changes them, and an "update" event is sent.
func (f *FakeClient) Update(_ context.Context, id string, r kubecontainer.Resources) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("update", id); err != nil {
		return err
	}
	c, ok := f.containers[id]
	if !ok {
		return fmt.Errorf("%w: %s", kubecontainer.ErrNotFound, id)
	}
	c.CPUShares, c.CPUQuota, c.CPUPeriod = r.CPUShares, r.CPUQuota, r.CPUPeriod
	if r.Memory > 0 {
		c.Memory = r.Memory
	}
	f.emit(c, "update")
	return nil
}

// Remove implements the runtime's Remove.
func (f *FakeClient) Remove(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("remove", id); err != nil {
		return err
	}
	if c, ok := f.containers[id]; ok {
		f.emit(c, "destroy")
	}
	delete(f.containers, id)
	return nil
}

// ImagePresent implements the runtime's ImagePresent.
func (f *FakeClient) ImagePresent(_ context.Context, image string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("image", image); err != nil {
		return false, err
	}
	return f.images[image], nil
}

// AddImages makes images present, as a docker load or tag would.
func (f *FakeClient) AddImages(images ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, img := range images {
		f.images[img] = true
	}
}

// SetPullable makes images pullable (others fail to pull).
func (f *FakeClient) SetPullable(images ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, img := range images {
		f.pullable[img] = true
	}
}

// SetImageFsUsage sets the image file system's use, in percent, and how
// much each removed image frees.
func (f *FakeClient) SetImageFsUsage(percent, perImage int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imageFsUsage, f.imageFsPerImage = percent, perImage
}

// RequireAuth makes image pullable only as user (any other credential, or
// none, is unauthorized), as a private registry does.
func (f *FakeClient) RequireAuth(image, user string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pullable[image] = true
	f.pullUser[image] = user
}

// PullUsers returns the usernames image was pulled as, in order ("" for
// an anonymous pull).
func (f *FakeClient) PullUsers(image string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pullUsers[image])
}

// PullAuth implements the runtime's PullAuth: images made pullable arrive
// (with the credential RequireAuth names, if any), others fail.
func (f *FakeClient) PullAuth(_ context.Context, image string, auth *kubecontainer.Auth, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("pull", image); err != nil {
		return err
	}
	user := ""
	if auth != nil {
		user = auth.Username
	}
	f.pullUsers[image] = append(f.pullUsers[image], user)
	if want, private := f.pullUser[image]; !f.pullable[image] || (private && user != want) {
		return fmt.Errorf("pull image %s: unauthorized: authentication required", image)
	}
	f.images[image] = true
	return nil
}

// ImageID implements the runtime's ImageID.
func (f *FakeClient) ImageID(_ context.Context, image string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.images[image] {
		return "", kubecontainer.ErrImageNotFound
	}
	return "sha256:" + image, nil
}

// RemoveImage implements the runtime's RemoveImage.
func (f *FakeClient) RemoveImage(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("remove_image", id); err != nil {
		return err
	}
	delete(f.images, strings.TrimPrefix(id, "sha256:"))
	f.imageFsUsage -= f.imageFsPerImage
	return nil
}

// ImagesInUse implements the runtime's ImagesInUse.
func (f *FakeClient) ImagesInUse(context.Context) (map[string]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	used := map[string]bool{}
	for _, c := range f.containers {
		used[c.Image] = true
	}
	return used, nil
}

// ImageFsUsage implements the runtime's ImageFsUsage (half full unless set).
func (f *FakeClient) ImageFsUsage(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.imageFsUsage, nil
}

// Events implements the runtime's Events: every container's events (as
// the fake's calls change them) and the image events sent by ImageEvent,
// until ctx ends.
func (f *FakeClient) Events(ctx context.Context) (<-chan kubecontainer.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("events", ""); err != nil {
		return nil, err
	}
	ch := make(chan kubecontainer.Event, 256)
	f.events = append(f.events, ch)
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.events = slices.DeleteFunc(f.events, func(c chan kubecontainer.Event) bool { return c == ch })
		close(ch)
	}()
	return ch, nil
}

// ImageEvent sends an image event (pull, load, tag, ...) to every Events
// stream.
func (f *FakeClient) ImageEvent(action string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.send(kubecontainer.Event{Type: kubecontainer.ImageEvent, Action: action, Time: f.now()})
}

// emit sends an event about the container to every stream, as Docker does
// on each change of a container; f.mu is held.
func (f *FakeClient) emit(c *kubecontainer.ContainerDetail, action string) {
	ev := kubecontainer.Event{Type: kubecontainer.ContainerEvent, ContainerID: c.ID, Labels: c.Labels, Action: action, Time: f.now()}
	if action == "die" {
		ev.Time, ev.ExitCode = c.FinishedAt, c.ExitCode
	}
	f.send(ev)
}

// send hands ev to every stream; f.mu is held. A stream whose reader lags
// loses the event (Docker would block it).
func (f *FakeClient) send(ev kubecontainer.Event) {
	for _, ch := range f.events {
		select {
		case ch <- ev:
		default:
		}
	}
}

// RunningNames returns the Docker names of the running containers, sorted.
func (f *FakeClient) RunningNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.containers {
		if c.Running {
			out = append(out, c.Name)
		}
	}
	sort.Strings(out)
	return out
}

// SetExecResult sets what Exec returns from now on.
func (f *FakeClient) SetExecResult(code int, output string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execCode, f.execOut = code, output
}

// Exec implements the runtime's Exec.
func (f *FakeClient) Exec(_ context.Context, id string, cmd []string, _ time.Duration) (int, []byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("exec", id+" "+strings.Join(cmd, " ")); err != nil {
		return 0, nil, err
	}
	return f.execCode, []byte(f.execOut), nil
}

// ExecStream implements the runtime's ExecStream: it writes the canned
// output to stdout and returns the canned exit code.
func (f *FakeClient) ExecStream(_ context.Context, id string, cmd []string, s kubecontainer.Streams) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("exec", id+" "+strings.Join(cmd, " ")); err != nil {
		return 0, err
	}
	if s.Stdout != nil {
		_, _ = io.WriteString(s.Stdout, f.execOut)
	}
	return f.execCode, nil
}

// Attach implements the runtime's Attach; it records the call.
func (f *FakeClient) Attach(_ context.Context, id string, _ kubecontainer.Streams) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.record("attach", id)
}

// DiskUsage implements the runtime's DiskUsage: nothing on disk.
func (f *FakeClient) DiskUsage(context.Context, string, string) (*kubecontainer.DiskUsage, error) {
	return &kubecontainer.DiskUsage{Writable: map[string]int64{}}, nil
}

// ImageUser implements the runtime's ImageUser: images run as root.
func (f *FakeClient) ImageUser(_ context.Context, image string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return "", f.record("image_user", image)
}

// Logs implements the runtime's Logs: every container logged one line.
func (f *FakeClient) Logs(ctx context.Context, id string, _ kubecontainer.LogOptions, w io.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	err := f.record("logs", id)
	f.mu.Unlock()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "log of %s\n", id)
	return err
}

// BuildPauseImage implements the runtime's BuildPauseImage.
func (f *FakeClient) BuildPauseImage(_ context.Context, tag, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.record("build", tag); err != nil {
		return err
	}
	f.images[tag] = true
	return nil
}
