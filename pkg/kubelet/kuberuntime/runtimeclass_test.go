package kuberuntime

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/images"
)

// handlerFunc resolves every pod's handler with a function.
type handlerFunc func(ctx context.Context, pod *v1.Pod) (string, error)

func (f handlerFunc) Handler(ctx context.Context, pod *v1.Pod) (string, error) { return f(ctx, pod) }

// A pod's runtime handler is given to each of its containers, the infra
// one too; a handler that cannot be resolved fails the sandbox before any
// runtime call, with the resolver's words, and backs off.
func TestSyncPodRuntimeHandler(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		handler string
		err     error
	}{
		{"the default handler", "", nil},
		{"a RuntimeClass's handler", "runsc", nil},
		{"an unknown handler", "", errors.New(`RuntimeHandler "kata" not supported`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake := containertest.NewFakeClient("pause:1", "img:1")
			m := newTestManager(t, Config{NodeName: "n", InfraImage: "pause:1"}, fake)
			m.images = images.NewManager(images.Config{Policy: images.Policy{}, InfraImage: "pause:1", RecordPath: filepath.Join(t.TempDir(), "images.json")}, images.Deps{Runtime: fake})
			m.probes, m.relist = noProbes{}, noRelist{}
			m.classes = handlerFunc(func(context.Context, *v1.Pod) (string, error) { return tc.handler, tc.err })
			pod := containertest.Pod(v1.RestartPolicyAlways, "a")
			pod.Spec.Containers[0].Image, pod.Spec.Containers[0].ImagePullPolicy = "img:1", v1.PullNever
			r, err := m.SyncPod(context.Background(), pod, nil, recordOf(m, pod.UID))
			if tc.err != nil {
				var ce *kubecontainer.StartError
				if !errors.As(err, &ce) || ce.Reason != reasonCreateSandbox || ce.Message != tc.err.Error() {
					t.Fatalf("error %v, want %s: %v", err, reasonCreateSandbox, tc.err)
				}
				if n := fake.CountCalls("create"); n != 0 || r.RetryAt.IsZero() {
					t.Errorf("%d creates, retry at %v; want none, and a back-off", n, r.RetryAt)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cs, _ := fake.List(context.Background(), kubecontainer.LabelPodUID, string(pod.UID))
			if len(cs) != 2 {
				t.Fatalf("%d containers, want infra and a", len(cs))
			}
			for _, c := range cs {
				if got := fake.CreateSpec(c.ID).Runtime; got != tc.handler {
					t.Errorf("container %s created with runtime %q, want %q", c.Name, got, tc.handler)
				}
			}
		})
	}
}
