package images

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	"github.com/classic-kubelet/kubelet/pkg/dockertools/dockertest"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func podWith(image string, policy v1.PullPolicy) (*v1.Pod, *v1.Container) {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image, ImagePullPolicy: policy}}}}
	return p, &p.Spec.Containers[0]
}

func reason(err error) string {
	var se *kubecontainer.StartError
	if errors.As(err, &se) {
		return se.Reason
	}
	return ""
}

// Pull policies, the pull back-off per pod and image, and the message that
// names the registry whose credentials are missing.
func TestEnsure(t *testing.T) {
	fake := dockertest.NewFakeClient("present:1")
	fake.SetPullable("pullable:1")
	m := NewManager(fake, Policy{Keyring: &dockertools.Keyring{}, BackoffInitial: time.Hour, BackoffMax: time.Hour}, "pause:1",
		filepath.Join(t.TempDir(), "images.json"))
	var retries []types.UID
	m.Retry = func(uid types.UID, _ time.Time) { retries = append(retries, uid) }
	ctx := context.Background()
	for _, tc := range []struct {
		image  string
		policy v1.PullPolicy
		reason string
		pulls  int
	}{
		{"present:1", v1.PullIfNotPresent, "", 0},
		{"present:1", v1.PullNever, "", 0},
		{"absent:1", v1.PullNever, kubecontainer.ReasonErrImageNeverPull, 0},
		{"pullable:1", v1.PullIfNotPresent, "", 1},
		{"pullable:1", v1.PullIfNotPresent, "", 0}, // present now
		{"pullable:1", v1.PullAlways, "", 1},
		{"reg.test/private:1", v1.PullIfNotPresent, kubecontainer.ReasonErrImagePull, 1},
		{"reg.test/private:1", v1.PullIfNotPresent, kubecontainer.ReasonImagePullBackOff, 0}, // backed off: no pull
	} {
		before := fake.CountCalls("pull")
		pod, c := podWith(tc.image, tc.policy)
		err := m.Ensure(ctx, pod, c)
		if got := reason(err); got != tc.reason || (tc.reason == "" && err != nil) {
			t.Errorf("%s %s: %v, want reason %q", tc.image, tc.policy, err, tc.reason)
		}
		if n := fake.CountCalls("pull") - before; n != tc.pulls {
			t.Errorf("%s %s: %d pulls, want %d", tc.image, tc.policy, n, tc.pulls)
		}
		if tc.reason == kubecontainer.ReasonErrImagePull && !strings.Contains(err.Error(), "no credentials for registry reg.test") {
			t.Errorf("pull failure message %q does not name the registry lacking credentials", err)
		}
	}
	if len(retries) != 1 {
		t.Errorf("%d retries scheduled, want one for the failed pull", len(retries))
	}
	m.ForgetPod("u1")
	pod, c := podWith("reg.test/private:1", v1.PullIfNotPresent)
	if err := m.Ensure(ctx, pod, c); reason(err) != kubecontainer.ReasonErrImagePull {
		t.Errorf("after the pod was forgotten: %v, want a fresh pull attempt", err)
	}
}

// Image GC removes only unused images this agent pulled, oldest first,
// from above the high threshold down to the low one; never the infra image.
func TestCollect(t *testing.T) {
	fake := dockertest.NewFakeClient("built-by-hand:1")
	fake.SetPullable("old:1", "new:1", "used:1", "pause:1")
	m := NewManager(fake, Policy{Keyring: &dockertools.Keyring{}, HighThreshold: 85, LowThreshold: 80}, "pause:1",
		filepath.Join(t.TempDir(), "images.json"))
	ctx := context.Background()
	for _, img := range []string{"pause:1", "old:1", "used:1", "new:1"} {
		pod, c := podWith(img, v1.PullAlways)
		if err := m.Ensure(ctx, pod, c); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct pull times
	}
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c1", Name: "k8s_c.1_p_ns_u_0001", Image: "used:1"})

	fake.SetImageFsUsage(80, 5)
	m.Collect(ctx)
	if n := fake.CountCalls("remove_image"); n != 0 {
		t.Fatalf("below the high threshold %d images were removed", n)
	}
	fake.SetImageFsUsage(90, 5)
	m.Collect(ctx)
	var removed []string
	for _, call := range fake.Calls() {
		if rest, ok := strings.CutPrefix(call, "remove_image "); ok {
			removed = append(removed, rest)
		}
	}
	if strings.Join(removed, ",") != "old:1,new:1" {
		t.Errorf("removed %v, want old:1 then new:1 (oldest first; not the infra image, the one in use or one not pulled)", removed)
	}
}

// slowPulls holds the first pull until its context ends.
type slowPulls struct {
	*dockertest.FakeClient
	first   chan struct{} // closed when the first pull has begun
	started bool
}

func (s *slowPulls) PullAuth(ctx context.Context, image string, auth *kubecontainer.Auth, inactivity time.Duration) error {
	if !s.started {
		s.started = true
		close(s.first)
		<-ctx.Done()
		return ctx.Err()
	}
	return s.FakeClient.PullAuth(ctx, image, auth, inactivity)
}

// A pull shared by two pods goes on for the second when the first one's
// context ends (its pod was removed): it is pulled again under the second's.
func TestSharedPullOutlivesTheFirstCaller(t *testing.T) {
	fake := dockertest.NewFakeClient("pause:1")
	fake.SetPullable("img:1")
	d := &slowPulls{FakeClient: fake, first: make(chan struct{})}
	m := NewManager(d, Policy{Keyring: &dockertools.Keyring{}}, "pause:1", filepath.Join(t.TempDir(), "pulled.json"))
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() { errA <- m.pull(ctxA, "img:1") }()
	<-d.first
	errB := make(chan error, 1)
	go func() { errB <- m.pull(context.Background(), "img:1") }()
	time.Sleep(50 * time.Millisecond) // B waits on A's pull
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("first caller: %v, want context.Canceled", err)
	}
	select {
	case err := <-errB:
		if err != nil {
			t.Errorf("second caller: %v, want the image pulled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second caller still waiting")
	}
}
