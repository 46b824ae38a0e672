package images

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/await"
	"github.com/classic-kubelet/kubelet/pkg/credentialprovider"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
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
	fake := containertest.NewFakeClient("present:1")
	fake.SetPullable("pullable:1")
	var retries []types.UID
	m := NewManager(Config{Policy: Policy{Keyring: &credentialprovider.Keyring{}, BackoffInitial: time.Hour, BackoffMax: time.Hour}, InfraImage: "pause:1",
		RecordPath: filepath.Join(t.TempDir(), "images.json")}, Deps{Runtime: fake, Retries: retryFunc(func(uid types.UID) { retries = append(retries, uid) })})
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
		pulled, err := m.Ensure(ctx, pod, c, nil)
		if got := reason(err); got != tc.reason || (tc.reason == "" && err != nil) {
			t.Errorf("%s %s: %v, want reason %q", tc.image, tc.policy, err, tc.reason)
		}
		if pulled != 0 && (tc.pulls == 0 || err != nil) {
			t.Errorf("%s %s: pulled for %v, without a pull that worked", tc.image, tc.policy, pulled)
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
	if _, err := m.Ensure(ctx, pod, c, nil); reason(err) != kubecontainer.ReasonErrImagePull {
		t.Errorf("after the pod was forgotten: %v, want a fresh pull attempt", err)
	}
}

// A container's failed pulls back off per pod, container and image: the
// first failure waits BackoffInitial, each one after it twice as long up
// to BackoffMax, whatever the time between them; a pull that works starts
// it over, as does the pod's going away.
func TestPullBackOffDoubles(t *testing.T) {
	fake := containertest.NewFakeClient()
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	m := NewManager(Config{Policy: Policy{Keyring: &credentialprovider.Keyring{}, BackoffInitial: 10 * time.Second, BackoffMax: 25 * time.Second, Clock: clk}, InfraImage: "pause:1", RecordPath: filepath.Join(t.TempDir(), "images.json")}, Deps{Runtime: fake})
	ctx := context.Background()
	pod, c := podWith("later:1", v1.PullIfNotPresent)
	other, oc := podWith("later:1", v1.PullIfNotPresent)
	other.UID = "u2"
	attempt := func(step string, wantReason string, wantWait time.Duration) {
		t.Helper()
		_, err := m.Ensure(ctx, pod, c, nil)
		if got := reason(err); got != wantReason || (wantReason == "" && err != nil) {
			t.Fatalf("%s: %v, want reason %q", step, err, wantReason)
		}
		until, why := m.BackOff(pod, c)
		if wantWait == 0 {
			if why != nil {
				t.Fatalf("%s: still in back-off: %v", step, why)
			}
			return
		}
		if why == nil || why.Reason != kubecontainer.ReasonImagePullBackOff || until.Sub(clk.Now()) != wantWait {
			t.Fatalf("%s: back-off until %v (%v), want %v from now", step, until.Sub(clk.Now()), why, wantWait)
		}
	}
	attempt("first failure", kubecontainer.ReasonErrImagePull, 10*time.Second)
	clk.Step(10*time.Second - time.Nanosecond)
	attempt("within the back-off", kubecontainer.ReasonImagePullBackOff, 1)
	clk.Step(time.Nanosecond)
	attempt("second failure", kubecontainer.ReasonErrImagePull, 20*time.Second)
	clk.Step(time.Hour) // however long after
	attempt("third failure", kubecontainer.ReasonErrImagePull, 25*time.Second)
	if _, err := m.Ensure(ctx, other, oc, nil); reason(err) != kubecontainer.ReasonErrImagePull {
		t.Fatalf("another pod's pull of the image: %v, want its own first failure", err)
	}
	m.ForgetPod(pod.UID)
	if _, why := m.BackOff(other, oc); why == nil {
		t.Error("forgetting a pod ended another pod's back-off")
	}
	attempt("after the pod was forgotten", kubecontainer.ReasonErrImagePull, 10*time.Second)
	clk.Step(10 * time.Second)
	fake.SetPullable("later:1")
	attempt("a pull that works", "", 0)
	_ = fake.RemoveImage(ctx, "later:1")
	fake.InjectError("pull", errors.New("registry down"))
	attempt("a failure after it", kubecontainer.ReasonErrImagePull, 10*time.Second)
}

// Image GC removes only unused images this agent pulled, oldest first,
// from above the high threshold down to the low one; never the infra image.
func TestCollect(t *testing.T) {
	fake := containertest.NewFakeClient("built-by-hand:1")
	fake.SetPullable("old:1", "new:1", "used:1", "pause:1")
	clk := testingclock.NewFakeClock(time.Now())
	m := NewManager(Config{Policy: Policy{Keyring: &credentialprovider.Keyring{}, HighThreshold: 85, LowThreshold: 80, Clock: clk}, InfraImage: "pause:1", RecordPath: filepath.Join(t.TempDir(), "images.json")}, Deps{Runtime: fake})
	ctx := context.Background()
	for _, img := range []string{"pause:1", "old:1", "used:1", "new:1"} {
		pod, c := podWith(img, v1.PullAlways)
		if _, err := m.Ensure(ctx, pod, c, nil); err != nil {
			t.Fatal(err)
		}
		clk.Step(time.Second) // distinct pull times
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

// Node-level reclaim under disk pressure removes every unused image the
// GC could, below the thresholds too.
func TestDeleteUnused(t *testing.T) {
	fake := containertest.NewFakeClient()
	fake.SetPullable("old:1", "new:1", "used:1", "pause:1")
	m := NewManager(Config{Policy: Policy{Keyring: &credentialprovider.Keyring{}, HighThreshold: 85, LowThreshold: 80}, InfraImage: "pause:1", RecordPath: filepath.Join(t.TempDir(), "images.json")}, Deps{Runtime: fake})
	ctx := context.Background()
	for _, img := range []string{"pause:1", "old:1", "used:1", "new:1"} {
		pod, c := podWith(img, v1.PullAlways)
		if _, err := m.Ensure(ctx, pod, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c1", Name: "k8s_c.1_p_ns_u_0001", Image: "used:1"})
	fake.SetImageFsUsage(10, 5)
	m.Collect(ctx)
	if n := fake.CountCalls("remove_image"); n != 0 {
		t.Fatalf("Collect removed %d images below the high threshold", n)
	}
	m.DeleteUnused(ctx)
	var removed []string
	for _, call := range fake.Calls() {
		if rest, ok := strings.CutPrefix(call, "remove_image "); ok {
			removed = append(removed, rest)
		}
	}
	if len(removed) != 2 || strings.Contains(strings.Join(removed, ","), "used") || strings.Contains(strings.Join(removed, ","), "pause") {
		t.Errorf("removed %v, want old:1 and new:1", removed)
	}
}

// slowPulls holds the first pull until its context ends.
type slowPulls struct {
	*containertest.FakeClient
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
	fake := containertest.NewFakeClient("pause:1")
	fake.SetPullable("img:1")
	d := &slowPulls{FakeClient: fake, first: make(chan struct{})}
	m := NewManager(Config{Policy: Policy{Keyring: &credentialprovider.Keyring{}}, InfraImage: "pause:1", RecordPath: filepath.Join(t.TempDir(), "pulled.json")}, Deps{Runtime: d})
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() { errA <- m.pull(ctxA, "img:1", nil) }()
	<-d.first
	errB := make(chan error, 1)
	go func() { errB <- m.pull(context.Background(), "img:1", nil) }()
	// B has joined A's pull: it waits in the group for A's to end.
	await.Parked(t, 1, "singleflight.(*Group).Do(", "sync.(*WaitGroup).Wait(")
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

// A pod waiting in pull back-off is woken as soon as an image event tells
// that its image may be present and it is, unless its policy is Always;
// between events nothing is asked of the runtime.
func TestImageEventsWakePodsInPullBackOff(t *testing.T) {
	fake := containertest.NewFakeClient()
	hub := runtimeevents.NewHub(fake, testingclock.NewFakeClock(time.Now()))
	woken := make(chan types.UID, 10)
	m := NewManager(Config{Policy: Policy{Keyring: &credentialprovider.Keyring{}, BackoffInitial: time.Hour, BackoffMax: time.Hour}, InfraImage: "pause:1",
		RecordPath: filepath.Join(t.TempDir(), "images.json")}, Deps{Runtime: fake, Hub: hub, Retries: retryFunc(func(uid types.UID) { woken <- uid })})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ifNotPresent, c1 := podWith("loaded:1", v1.PullIfNotPresent)
	always, c2 := podWith("loaded:1", v1.PullAlways)
	always.UID = "u2"
	for _, pc := range []struct {
		pod *v1.Pod
		c   *v1.Container
	}{{ifNotPresent, c1}, {always, c2}} {
		if _, err := m.Ensure(ctx, pc.pod, pc.c, nil); reason(err) != kubecontainer.ReasonErrImagePull {
			t.Fatalf("%s: %v, want ErrImagePull", pc.c.ImagePullPolicy, err)
		}
	}
	for range 2 {
		<-woken // the retries the failed pulls asked for
	}
	// Subscribed, Run checks once for what may have come meanwhile (the
	// image is still absent).
	checks := fake.CountCalls("image")
	var wg sync.WaitGroup
	wg.Go(func() { hub.Run(ctx) })
	wg.Go(func() { m.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	await.True(t, "the check after subscribing", func() bool { return fake.CountCalls("image") == checks+1 })
	select {
	case uid := <-woken:
		t.Fatalf("woke %s while its image is absent", uid)
	default:
	}
	before := fake.CountCalls("image")

	fake.AddImages("loaded:1")
	fake.ImageEvent("load")
	select {
	case uid := <-woken:
		if uid != ifNotPresent.UID {
			t.Errorf("woke %s, want the IfNotPresent pod %s", uid, ifNotPresent.UID)
		}
	case <-time.After(await.Timeout):
		t.Fatal("the IfNotPresent pod was not woken when its image came")
	}
	if _, why := m.BackOff(ifNotPresent, c1); why != nil {
		t.Errorf("IfNotPresent pod still in back-off: %v", why)
	}
	if _, why := m.BackOff(always, c2); why == nil {
		t.Error("the Always pod left its back-off: it must pull again, present or not")
	}
	if n := fake.CountCalls("image") - before; n != 1 {
		t.Errorf("%d image checks for one event, want one", n)
	}
}

// registrySecret is a kubernetes.io/dockerconfigjson secret with one
// credential for registry.
func registrySecret(t *testing.T, registry, user string) *credentialprovider.Keyring {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":pw-" + user))
	k := &credentialprovider.Keyring{}
	err := k.AddSecret(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "regcred"},
		Type: v1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{v1.DockerConfigJsonKey: []byte(`{"auths": {"` + registry + `": {"auth": "` + auth + `"}}}`)}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A pull tries the credentials of the pod's secrets that match the image's
// registry, then the node's, each once, until one is let in.
func TestEnsureUsesPodCredentials(t *testing.T) {
	nodeCfg := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(nodeCfg, []byte(`{"auths": {"reg.test": {"username": "node", "password": "pw-node"}}}`), 0o600)
	node, err := credentialprovider.LoadKeyring(nodeCfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		image    string
		registry string // the user the registry lets in ("": anyone)
		pod      *credentialprovider.Keyring
		tried    string // users tried, in order ("" anonymous)
		message  string // in the pull's failure ("": it succeeds)
	}{
		{name: "pod secret", image: "reg.test/app:1", registry: "alice", pod: registrySecret(t, "reg.test", "alice"), tried: "alice"},
		{name: "pod secret before the node's", image: "reg.test/app:1", registry: "node", pod: registrySecret(t, "reg.test", "bob"), tried: "bob,node"},
		{name: "secret for another registry", image: "reg.test/app:1", registry: "node", pod: registrySecret(t, "other.test", "alice"), tried: "node"},
		{name: "secret equal to the node's", image: "reg.test/app:1", registry: "carol", pod: registrySecret(t, "https://reg.test/v2/", "node"), tried: "node",
			message: "unauthorized"},
		{name: "Docker Hub alias", image: "team/app:1", registry: "hub", pod: registrySecret(t, "docker.io", "hub"), tried: "hub"},
		{name: "port is part of the registry", image: "reg.test:5000/app:1", pod: registrySecret(t, "reg.test", "alice"), tried: ""},
		{name: "none match: anonymous", image: "public.test/app:1", pod: registrySecret(t, "reg.test", "alice"), tried: ""},
		{name: "none match, registry private", image: "private.test/app:1", registry: "dave", pod: registrySecret(t, "reg.test", "alice"), tried: "",
			message: "no credentials for registry private.test"},
		{name: "no pod credentials", image: "reg.test/app:1", registry: "node", tried: "node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := containertest.NewFakeClient()
			if tc.registry == "" {
				fake.SetPullable(tc.image)
			} else {
				fake.RequireAuth(tc.image, tc.registry)
			}
			m := NewManager(Config{Policy: Policy{Keyring: node, BackoffInitial: time.Hour, BackoffMax: time.Hour}, InfraImage: "pause:1", RecordPath: filepath.Join(t.TempDir(), "images.json")}, Deps{Runtime: fake})
			pod, c := podWith(tc.image, v1.PullAlways)
			_, err := m.Ensure(context.Background(), pod, c, func() *credentialprovider.Keyring { return tc.pod })
			if tried := strings.Join(fake.PullUsers(tc.image), ","); tried != tc.tried {
				t.Errorf("pulled as %q, want %q", tried, tc.tried)
			}
			switch {
			case tc.message == "" && err != nil:
				t.Errorf("Ensure: %v", err)
			case tc.message != "" && (err == nil || !strings.Contains(err.Error(), tc.message)):
				t.Errorf("Ensure: %v, want a failure with %q", err, tc.message)
			}
		})
	}
}

// gatedPulls holds anonymous pulls until release is closed.
type gatedPulls struct {
	*containertest.FakeClient
	anonymous chan struct{} // receives as an anonymous pull begins
	release   chan struct{}
}

func (g *gatedPulls) PullAuth(ctx context.Context, image string, auth *kubecontainer.Auth, inactivity time.Duration) error {
	if auth == nil {
		g.anonymous <- struct{}{}
		<-g.release
	}
	return g.FakeClient.PullAuth(ctx, image, auth, inactivity)
}

// A pull with a pod's secret does not wait for (or fail with) an anonymous
// pull of the same image in flight. (That pulls under equal credentials
// share one is TestPullKey's: they have one key.)
func TestPullsSharedOnlyWithSameCredentials(t *testing.T) {
	fake := containertest.NewFakeClient()
	fake.SetPullable("reg.test/app:1")
	g := &gatedPulls{FakeClient: fake, anonymous: make(chan struct{}, 1), release: make(chan struct{})}
	m := NewManager(Config{Policy: Policy{Keyring: &credentialprovider.Keyring{}}, InfraImage: "pause:1", RecordPath: filepath.Join(t.TempDir(), "images.json")}, Deps{Runtime: g})
	ctx := context.Background()
	anon := make(chan error, 1)
	go func() { anon <- m.pull(ctx, "reg.test/app:1", nil) }()
	<-g.anonymous

	secret := registrySecret(t, "reg.test", "alice").Lookup("reg.test/app:1")
	done := make(chan error, 1)
	go func() { done <- m.pull(ctx, "reg.test/app:1", secret) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pull with the secret: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pull with the secret waits for the anonymous one")
	}
	close(g.release)
	if err := <-anon; err != nil {
		t.Errorf("anonymous pull: %v", err)
	}
	if got := strings.Join(fake.PullUsers("reg.test/app:1"), ","); got != "alice," {
		t.Errorf("pulled as %q, want alice, then the anonymous pull", got)
	}
}

func TestPullKey(t *testing.T) {
	alice := []kubecontainer.Auth{{Username: "alice", Password: "s3cret", ServerAddress: "reg.test"}}
	other := []kubecontainer.Auth{{Username: "alice", Password: "other", ServerAddress: "reg.test"}}
	for _, tc := range []struct {
		name string
		a, b []kubecontainer.Auth
		same bool
	}{
		{"anonymous", nil, nil, true},
		{"same credential", alice, slices.Clone(alice), true},
		{"anonymous and a credential", nil, alice, false},
		{"another password", alice, other, false},
		{"order", append(slices.Clone(alice), other...), append(slices.Clone(other), alice...), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ka, kb := pullKey("img:1", tc.a), pullKey("img:1", tc.b)
			if (ka == kb) != tc.same {
				t.Errorf("keys equal: %v, want %v", ka == kb, tc.same)
			}
			if strings.Contains(ka, "s3cret") || strings.Contains(kb, "s3cret") {
				t.Error("a key holds a password")
			}
		})
	}
}

// retryFunc is a function as the image manager's Retries, given the pod
// woken.
type retryFunc func(types.UID)

func (f retryFunc) Add(uid types.UID, _ time.Time) { f(uid) }

// eventLog records the image manager's events.
type eventLog struct {
	mu     sync.Mutex
	events []string // "reason: message"
}

func (l *eventLog) Event(_ events.Ref, _ bool, reason, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, reason+": "+fmt.Sprintf(format, args...))
}

// An image reference that does not parse is InvalidImageName at once, with
// the kubelet's message and InspectFailed event, and costs no runtime call
// (no lookup, no pull), whatever the pull policy. The expected messages are
// the kubelet's: pkg/kubelet/images/image_manager.go (applyDefaultImageTag)
// around pkg/util/parsers/parsers.go (ParseImageName), over
// github.com/distribution/reference v0.6.0 as the kubelet v1.37.2 is built.
func TestEnsureInvalidImageName(t *testing.T) {
	fake := containertest.NewFakeClient()
	log := &eventLog{}
	m := NewManager(Config{Policy: Policy{Keyring: &credentialprovider.Keyring{}, BackoffInitial: time.Hour, BackoffMax: time.Hour}, InfraImage: "pause:1",
		RecordPath: filepath.Join(t.TempDir(), "images.json")}, Deps{Runtime: fake, Events: log})
	for _, tc := range []struct {
		image  string
		policy v1.PullPolicy
		want   string // "": valid
	}{
		{"<your-private-image>", v1.PullIfNotPresent,
			`Failed to apply default image tag "<your-private-image>": couldn't parse image name "<your-private-image>": invalid reference format`},
		{"RW4B/Invalid:Image", v1.PullAlways,
			`Failed to apply default image tag "RW4B/Invalid:Image": couldn't parse image name "RW4B/Invalid:Image": invalid reference format: repository name (Invalid) must be lowercase`},
		{"busybox:", v1.PullNever,
			`Failed to apply default image tag "busybox:": couldn't parse image name "busybox:": invalid reference format`},
		{"busybox", v1.PullNever, ""},
		{"registry.test:5000/team/app@sha256:" + strings.Repeat("a", 64), v1.PullNever, ""},
	} {
		t.Run(tc.image, func(t *testing.T) {
			fake.Calls()
			log.events = nil
			pod, c := podWith(tc.image, tc.policy)
			_, err := m.Ensure(context.Background(), pod, c, nil)
			var se *kubecontainer.StartError
			if tc.want == "" {
				if errors.As(err, &se) && se.Reason == kubecontainer.ReasonInvalidImageName {
					t.Fatalf("valid reference refused: %v", err)
				}
				return
			}
			if !errors.As(err, &se) || se.Reason != kubecontainer.ReasonInvalidImageName || se.Message != tc.want {
				t.Fatalf("err = %v\nwant InvalidImageName: %s", err, tc.want)
			}
			if calls := fake.Calls(); len(calls) != 0 {
				t.Errorf("runtime calls %v, want none", calls)
			}
			if want := []string{"InspectFailed: " + tc.want}; !slices.Equal(log.events, want) {
				t.Errorf("events %q, want %q", log.events, want)
			}
		})
	}
}
