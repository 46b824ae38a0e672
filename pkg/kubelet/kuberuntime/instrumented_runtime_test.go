package kuberuntime

import (
	"context"
	"errors"
	"io"
	"testing"

	dto "github.com/prometheus/client_model/go"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
)

// opCounts reads the runtime_operations counters (total, errors) of op and
// how many latencies its histogram observed.
func opCounts(t *testing.T, m *metrics.Metrics, op string) (total, errs float64, observed uint64) {
	t.Helper()
	var pb dto.Metric
	if err := m.RuntimeOperations.WithLabelValues(op).Write(&pb); err != nil {
		t.Fatal(err)
	}
	total = pb.GetCounter().GetValue()
	pb.Reset()
	if err := m.RuntimeOperationsErrors.WithLabelValues(op).Write(&pb); err != nil {
		t.Fatal(err)
	}
	errs = pb.GetCounter().GetValue()
	pb.Reset()
	h, ok := m.RuntimeOperationsDuration.WithLabelValues(op).(interface{ Write(*dto.Metric) error })
	if !ok {
		t.Fatal("histogram cannot be read")
	}
	if err := h.Write(&pb); err != nil {
		t.Fatal(err)
	}
	return total, errs, pb.GetHistogram().GetSampleCount()
}

// Each runtime call is counted once, under the CRI method's name, with its
// latency observed once, and its failure counted as an error; the call
// reaches the wrapped runtime with its result passed back unchanged.
func TestInstrumentedRuntimeCountsEachCallOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cases := []struct {
		method string // the fake's method name, for InjectError ("" cannot fail)
		op     string
		call   func(r kubecontainer.Runtime) error
	}{
		{"list", "list_containers", func(r kubecontainer.Runtime) error { _, err := r.List(ctx, "l", "v"); return err }},
		{"inspect", "container_status", func(r kubecontainer.Runtime) error { _, err := r.Inspect(ctx, "c1"); return err }},
		{"events", "get_container_events", func(r kubecontainer.Runtime) error { _, err := r.Events(ctx); return err }},
		{"create", "create_container", func(r kubecontainer.Runtime) error {
			_, err := r.Create(ctx, &kubecontainer.CreateSpec{Name: "new", Image: "img:1"})
			return err
		}},
		{"start", "start_container", func(r kubecontainer.Runtime) error { return r.Start(ctx, "c1") }},
		{"stop", "stop_container", func(r kubecontainer.Runtime) error { return r.Stop(ctx, "c1", 0) }},
		{"remove", "remove_container", func(r kubecontainer.Runtime) error { return r.Remove(ctx, "c2") }},
		{"image", "image_status", func(r kubecontainer.Runtime) error { _, err := r.ImagePresent(ctx, "img:1"); return err }},
		{"pull", "pull_image", func(r kubecontainer.Runtime) error { return r.PullAuth(ctx, "img:1", nil, 0) }},
		{"remove_image", "remove_image", func(r kubecontainer.Runtime) error { return r.RemoveImage(ctx, "sha256:old:1") }},
		{"", "image_fs_info", func(r kubecontainer.Runtime) error { _, err := r.ImageFsUsage(ctx); return err }},
		{"exec", "exec_sync", func(r kubecontainer.Runtime) error { _, _, err := r.Exec(ctx, "c1", []string{"true"}, 0); return err }},
		{"image_user", "image_status", func(r kubecontainer.Runtime) error { _, err := r.ImageUser(ctx, "img:1"); return err }},
		{"logs", "container_logs", func(r kubecontainer.Runtime) error { return r.Logs(ctx, "c1", kubecontainer.LogOptions{}, io.Discard) }},
		{"build", "build_image", func(r kubecontainer.Runtime) error { return r.BuildPauseImage(ctx, "pause:1", "/pause") }},
		{"exec", "exec", func(r kubecontainer.Runtime) error {
			_, err := r.ExecStream(ctx, "c1", []string{"sh"}, kubecontainer.Streams{})
			return err
		}},
		{"attach", "attach", func(r kubecontainer.Runtime) error { return r.Attach(ctx, "c1", kubecontainer.Streams{}) }},
	}
	for _, c := range cases {
		t.Run(c.op+"/"+c.method, func(t *testing.T) {
			fake := containertest.NewFakeClient("img:1", "old:1")
			fake.SetPullable("img:1")
			fake.AddContainer(kubecontainer.ContainerDetail{ID: "c1", Name: "one", Image: "img:1", Running: true})
			fake.AddContainer(kubecontainer.ContainerDetail{ID: "c2", Name: "two", Image: "img:1"})
			m := metrics.New("n")
			r := NewInstrumentedRuntime(fake, m)
			t0, e0, h0 := opCounts(t, m, c.op)
			if err := c.call(r); err != nil {
				t.Fatalf("call failed: %v", err)
			}
			if got := len(fake.Calls()); c.method != "" && got != 1 {
				t.Errorf("the runtime was called %d times, want once", got)
			}
			t1, e1, h1 := opCounts(t, m, c.op)
			if t1-t0 != 1 || e1 != e0 || h1-h0 != 1 {
				t.Errorf("after a success: +%v calls, +%v errors, +%d latencies; want +1, +0, +1", t1-t0, e1-e0, h1-h0)
			}
			if c.method == "" {
				return
			}
			boom := errors.New("boom")
			fake.InjectError(c.method, boom)
			if err := c.call(r); !errors.Is(err, boom) {
				t.Fatalf("error %v, want the runtime's", err)
			}
			t2, e2, h2 := opCounts(t, m, c.op)
			if t2-t1 != 1 || e2-e1 != 1 || h2-h1 != 1 {
				t.Errorf("after a failure: +%v calls, +%v errors, +%d latencies; want +1 each", t2-t1, e2-e1, h2-h1)
			}
		})
	}
}

// Calls the fake cannot fail still count once each, under the names the
// kubelet's metrics use.
func TestInstrumentedRuntimeUnfailingCalls(t *testing.T) {
	ctx := context.Background()
	fake := containertest.NewFakeClient("img:1")
	m := metrics.New("n")
	r := NewInstrumentedRuntime(fake, m)
	if id, err := r.ImageID(ctx, "img:1"); err != nil || id != "sha256:img:1" {
		t.Errorf("ImageID %q %v", id, err)
	}
	if _, err := r.ImageID(ctx, "absent:1"); !errors.Is(err, kubecontainer.ErrImageNotFound) {
		t.Errorf("ImageID of an absent image: %v", err)
	}
	if _, err := r.ImagesInUse(ctx); err != nil {
		t.Error(err)
	}
	if _, err := r.DiskUsage(ctx, "c", "p"); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		op          string
		total, errs float64
	}{
		{"image_status", 2, 1},
		{"list_containers", 1, 0},
		{"image_fs_info", 1, 0},
	} {
		total, errs, observed := opCounts(t, m, c.op)
		if total != c.total || errs != c.errs || observed != uint64(c.total) {
			t.Errorf("%s: %v calls, %v errors, %d latencies; want %v, %v, %v", c.op, total, errs, observed, c.total, c.errs, c.total)
		}
	}
}
