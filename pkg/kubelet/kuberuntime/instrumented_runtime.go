package kuberuntime

import (
	"context"
	"io"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
)

// instrumentedRuntime records the latency and errors of every Docker
// operation the agent makes, in the kubelet's runtime_operations metrics.
// The operation_type is the name of the CRI method the kubelet would call
// for the same thing (list_containers, container_status, create_container,
// start_container, stop_container, remove_container, image_status,
// pull_image, remove_image, image_fs_info, exec_sync); the few operations
// CRI has no method for keep a name of the same form (container_logs,
// build_image, get_container_events, get_image_events).
//
// The agent wraps its runtime once (NewInstrumentedRuntime), and every part
// of it (relist, images, probes, disk usage, this package) uses the wrapped
// one: wrapped twice, each call would count twice.
type instrumentedRuntime struct {
	r kubecontainer.Runtime
	m *metrics.Metrics
}

var _ kubecontainer.Runtime = instrumentedRuntime{}

// NewInstrumentedRuntime is r with every call measured in m.
func NewInstrumentedRuntime(r kubecontainer.Runtime, m *metrics.Metrics) kubecontainer.Runtime {
	return instrumentedRuntime{r: r, m: m}
}

func (i instrumentedRuntime) observe(op string, start time.Time, err error) {
	i.m.RuntimeOperations.WithLabelValues(op).Inc()
	i.m.RuntimeOperationsDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		i.m.RuntimeOperationsErrors.WithLabelValues(op).Inc()
	}
}

func (i instrumentedRuntime) List(ctx context.Context, label, value string) ([]kubecontainer.Container, error) {
	start := time.Now()
	out, err := i.r.List(ctx, label, value)
	i.observe("list_containers", start, err)
	return out, err
}

func (i instrumentedRuntime) Inspect(ctx context.Context, id string) (*kubecontainer.ContainerDetail, error) {
	start := time.Now()
	out, err := i.r.Inspect(ctx, id)
	i.observe("container_status", start, err)
	return out, err
}

func (i instrumentedRuntime) Events(ctx context.Context) (<-chan kubecontainer.Event, error) {
	start := time.Now()
	out, err := i.r.Events(ctx)
	i.observe("get_container_events", start, err)
	return out, err
}

func (i instrumentedRuntime) Create(ctx context.Context, spec *kubecontainer.CreateSpec) (string, error) {
	start := time.Now()
	out, err := i.r.Create(ctx, spec)
	i.observe("create_container", start, err)
	return out, err
}

func (i instrumentedRuntime) Start(ctx context.Context, id string) error {
	start := time.Now()
	err := i.r.Start(ctx, id)
	i.observe("start_container", start, err)
	return err
}

func (i instrumentedRuntime) Stop(ctx context.Context, id string, grace time.Duration) error {
	start := time.Now()
	err := i.r.Stop(ctx, id, grace)
	i.observe("stop_container", start, err)
	return err
}

func (i instrumentedRuntime) Update(ctx context.Context, id string, r kubecontainer.Resources) error {
	start := time.Now()
	err := i.r.Update(ctx, id, r)
	i.observe("update_container", start, err)
	return err
}

func (i instrumentedRuntime) Remove(ctx context.Context, id string) error {
	start := time.Now()
	err := i.r.Remove(ctx, id)
	i.observe("remove_container", start, err)
	return err
}

func (i instrumentedRuntime) ImagePresent(ctx context.Context, image string) (bool, error) {
	start := time.Now()
	out, err := i.r.ImagePresent(ctx, image)
	i.observe("image_status", start, err)
	return out, err
}

func (i instrumentedRuntime) PullAuth(ctx context.Context, image string, auth *kubecontainer.Auth, inactivity time.Duration) error {
	start := time.Now()
	err := i.r.PullAuth(ctx, image, auth, inactivity)
	i.observe("pull_image", start, err)
	return err
}

func (i instrumentedRuntime) ImageID(ctx context.Context, image string) (string, error) {
	start := time.Now()
	out, err := i.r.ImageID(ctx, image)
	i.observe("image_status", start, err)
	return out, err
}

func (i instrumentedRuntime) RemoveImage(ctx context.Context, id string) error {
	start := time.Now()
	err := i.r.RemoveImage(ctx, id)
	i.observe("remove_image", start, err)
	return err
}

func (i instrumentedRuntime) ImagesInUse(ctx context.Context) (map[string]bool, error) {
	start := time.Now()
	out, err := i.r.ImagesInUse(ctx)
	i.observe("list_containers", start, err)
	return out, err
}

func (i instrumentedRuntime) ImageFsUsage(ctx context.Context) (int, error) {
	start := time.Now()
	out, err := i.r.ImageFsUsage(ctx)
	i.observe("image_fs_info", start, err)
	return out, err
}

func (i instrumentedRuntime) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error) {
	start := time.Now()
	code, out, err := i.r.Exec(ctx, id, cmd, timeout)
	i.observe("exec_sync", start, err)
	return code, out, err
}

func (i instrumentedRuntime) ImageUser(ctx context.Context, image string) (string, error) {
	start := time.Now()
	out, err := i.r.ImageUser(ctx, image)
	i.observe("image_status", start, err)
	return out, err
}

func (i instrumentedRuntime) Logs(ctx context.Context, id string, o kubecontainer.LogOptions, w io.Writer) error {
	start := time.Now()
	err := i.r.Logs(ctx, id, o, w)
	i.observe("container_logs", start, err)
	return err
}

func (i instrumentedRuntime) BuildPauseImage(ctx context.Context, tag, binary string) error {
	start := time.Now()
	err := i.r.BuildPauseImage(ctx, tag, binary)
	i.observe("build_image", start, err)
	return err
}

func (i instrumentedRuntime) ExecStream(ctx context.Context, id string, cmd []string, s kubecontainer.Streams) (int, error) {
	start := time.Now()
	code, err := i.r.ExecStream(ctx, id, cmd, s)
	i.observe("exec", start, err)
	return code, err
}

func (i instrumentedRuntime) Attach(ctx context.Context, id string, s kubecontainer.Streams) error {
	start := time.Now()
	err := i.r.Attach(ctx, id, s)
	i.observe("attach", start, err)
	return err
}

func (i instrumentedRuntime) DiskUsage(ctx context.Context, label, value string) (*kubecontainer.DiskUsage, error) {
	start := time.Now()
	out, err := i.r.DiskUsage(ctx, label, value)
	i.observe("image_fs_info", start, err)
	return out, err
}
