// Package images makes a container's image present as its pull policy
// says (throttled, with the pod's and the node's registry credentials,
// concurrent pulls of one image under the same credentials collapsed into
// one, failures backed off per pod and image) and collects the unused
// images this agent pulled.
package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/distribution/reference"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/backoff"
	"github.com/classic-kubelet/kubelet/pkg/credentialprovider"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// pullInactivity cancels a pull that makes no progress for this long.
const pullInactivity = time.Minute

// Runtime is what the image manager needs from the container runtime.
type Runtime interface {
	ImagePresent(ctx context.Context, image string) (bool, error)
	PullAuth(ctx context.Context, image string, auth *kubecontainer.Auth, inactivity time.Duration) error
	ImageID(ctx context.Context, image string) (string, error)
	RemoveImage(ctx context.Context, id string) error
	ImagesInUse(ctx context.Context) (map[string]bool, error)
	ImageFsUsage(ctx context.Context) (int, error)
}

// Policy configures pulls and image garbage collection.
type Policy struct {
	// Keyring is the node's registry credentials (its Docker config),
	// tried after a pod's own.
	Keyring       *credentialprovider.Keyring
	QPS           float64 // pulls per second; 0: unlimited
	Burst         int
	HighThreshold int           // percent of the image file system: collect above it
	LowThreshold  int           // percent: collect down to it
	MinAge        time.Duration // an image pulled more recently is never collected
	// BackoffInitial and BackoffMax bound the pull back-off of a pod's
	// container: the first failure waits BackoffInitial, each one after it
	// twice as long as the one before, up to BackoffMax, until a pull of
	// it works (or its image appears, or the pod goes).
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// Clock times the pull back-off and dates the pulls (MinAge); nil: the
	// real clock.
	Clock clock.PassiveClock
}

// pulledImage records an image this agent pulled: only those may be
// collected (an image built or loaded by someone else may not be pullable
// again).
type pulledImage struct {
	ID       string    `json:"id"`
	PulledAt time.Time `json:"pulledAt"`
}

// failureKey names the pulls of one container's image in one pod, which
// back off together.
type failureKey struct {
	uid       types.UID
	container string
	image     string
}

func keyOf(pod *v1.Pod, c *v1.Container) failureKey {
	return failureKey{uid: pod.UID, container: c.Name, image: c.Image}
}

// pullFailure is what is shown of a container's pull in back-off; the
// back-off itself is in Manager.backoff, under the same key.
type pullFailure struct {
	msg string
	// always: its policy is Always, so it waits for its back-off even once
	// its image is present.
	always bool
}

// Manager pulls images as pull policies say (throttled, with the pod's
// and the node's registry credentials, concurrent pulls of one image under
// the same credentials collapsed into one, failures backed off) and
// collects unused pulled images.
type Manager struct {
	docker     Runtime
	policy     Policy
	infraImage string
	limiter    *rate.Limiter
	group      singleflight.Group
	recordPath string
	retries    Retries
	events     Events
	hub        *runtimeevents.Hub // nil: no image events followed
	clock      clock.PassiveClock

	mu       sync.Mutex // guards pulled, failures, and backoff's keys being those of failures
	pulled   map[string]pulledImage
	failures map[failureKey]*pullFailure
	backoff  *backoff.Backoff[failureKey]
}

// Config configures the image manager.
type Config struct {
	Policy Policy
	// InfraImage is never collected.
	InfraImage string
	// RecordPath records the images the agent pulled (loaded at start if
	// there): only those are collected.
	RecordPath string
}

// Deps are what the image manager pulls through, reads and tells.
type Deps struct {
	Runtime Runtime
	// Hub is the agent's runtime event hub: an image that appears wakes
	// the pods waiting for it (Run); nil: no image events followed.
	Hub *runtimeevents.Hub
	// Retries is told when a pod's pull back-off ends, or its image is
	// present (podqueue.Retries); nil: nobody is.
	Retries Retries
	// Events records what happens to a pod's images (events.Recorder);
	// nil: nothing is recorded.
	Events Events
}

// Retries wakes a pod at a time (podqueue.Retries); it must not block.
type Retries interface {
	Add(uid types.UID, at time.Time)
}

// Events records what happens to a pod (events.Recorder).
type Events interface {
	Event(ref events.Ref, warning bool, reason, format string, args ...any)
}

// NewManager returns a manager that pulls and collects images as cfg says,
// through d.
func NewManager(cfg Config, d Deps) *Manager {
	p, infraImage, recordPath := cfg.Policy, cfg.InfraImage, cfg.RecordPath
	limit := rate.Inf
	if p.QPS > 0 {
		limit = rate.Limit(p.QPS)
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	m := &Manager{docker: d.Runtime, hub: d.Hub, retries: d.Retries, events: d.Events, clock: clk, policy: p, infraImage: infraImage, limiter: rate.NewLimiter(limit, max(p.Burst, 1)),
		recordPath: recordPath, pulled: map[string]pulledImage{}, failures: map[failureKey]*pullFailure{},
		backoff: backoff.New[failureKey](backoff.Policy{Initial: p.BackoffInitial, Max: p.BackoffMax}, clk)}
	if data, err := os.ReadFile(recordPath); err == nil {
		if err := json.Unmarshal(data, &m.pulled); err != nil {
			klog.Errorf("Ignoring corrupt record of pulled images %s: %v", recordPath, err)
		}
	}
	return m
}

// ForgetPod drops the pull failures of a pod that is gone.
func (m *Manager) ForgetPod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ofPod := func(k failureKey) bool { return k.uid == uid }
	maps.DeleteFunc(m.failures, func(k failureKey, _ *pullFailure) bool { return ofPod(k) })
	m.backoff.ResetFunc(ofPod)
}

// Ensure makes a container's image present as its pull policy says:
// Always pulls, IfNotPresent pulls when absent, Never never pulls. Without a
// policy, ":latest" or no tag means Always, as in Kubernetes. A pull tries
// the credentials of podCreds (the pod's image pull secrets, asked for only
// when a pull is due; nil, or a nil keyring: none) that match the image's
// registry, then the node's, as the kubelet's keyring orders them; with
// none, it is anonymous. pulled is how long a pull took (0: none was
// made, or it failed), which the pod start metrics leave out.
func (m *Manager) Ensure(ctx context.Context, pod *v1.Pod, c *v1.Container, podCreds func() *credentialprovider.Keyring) (pulled time.Duration, err error) {
	if msg := invalidImageName(c.Image); msg != "" {
		// Before any runtime call: a reference that cannot parse is never
		// looked up or pulled, and each retry (on the container's
		// back-off) costs nothing but this parse.
		m.event(pod, c.Name, "InspectFailed", msg, true)
		return 0, &kubecontainer.StartError{Reason: kubecontainer.ReasonInvalidImageName, Message: msg}
	}
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = v1.PullIfNotPresent
		if _, tag := kubecontainer.SplitImage(c.Image); tag == "latest" {
			policy = v1.PullAlways
		}
	}
	if policy != v1.PullAlways {
		present, err := m.docker.ImagePresent(ctx, c.Image)
		if err != nil || present {
			return 0, err
		}
		if policy == v1.PullNever {
			return 0, &kubecontainer.StartError{Reason: kubecontainer.ReasonErrImageNeverPull, Message: NeverPullMessage(c.Image)}
		}
	}
	if until, why := m.BackOff(pod, c); why != nil && m.clock.Now().Before(until) {
		m.event(pod, c.Name, "BackOff", fmt.Sprintf("Back-off pulling image %q", c.Image), false)
		return 0, why
	}
	key := keyOf(pod, c)
	m.event(pod, c.Name, "Pulling", fmt.Sprintf("Pulling image %q", c.Image), false)
	start := time.Now()
	var fromPod []kubecontainer.Auth
	if podCreds != nil {
		fromPod = podCreds().Lookup(c.Image)
	}
	auths := distinct(append(fromPod, m.policy.Keyring.Lookup(c.Image)...))
	if err := m.pull(ctx, c.Image, auths); err != nil {
		msg := summarizePullError(c.Image, err, len(auths) > 0)
		m.mu.Lock()
		f := m.failures[key]
		if f == nil {
			f = &pullFailure{always: policy == v1.PullAlways}
			m.failures[key] = f
		}
		f.msg = msg
		now := m.clock.Now()
		until := now.Add(m.backoff.Next(key, now))
		m.mu.Unlock()
		m.retry(pod.UID, until)
		m.event(pod, c.Name, "Failed", msg, true)
		return 0, &kubecontainer.StartError{Reason: kubecontainer.ReasonErrImagePull, Message: msg}
	}
	m.mu.Lock()
	delete(m.failures, key)
	m.backoff.Reset(key)
	m.mu.Unlock()
	took := time.Since(start)
	m.event(pod, c.Name, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v", c.Image, took.Round(time.Millisecond)), false)
	return took, nil
}

// NeverPullMessage is the kubelet's message (its ErrImageNeverPull event
// and waiting message, pkg/kubelet/images/image_manager.go) for an image
// not present whose pull policy is Never.
func NeverPullMessage(image string) string {
	return fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
}

// invalidImageName is the kubelet's message for an image reference it
// cannot parse ("" for one it can): pkg/kubelet/images/image_manager.go
// (applyDefaultImageTag) wraps pkg/util/parsers ParseImageName's error,
// both over the same reference library.
func invalidImageName(image string) string {
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		return fmt.Sprintf("Failed to apply default image tag %q: couldn't parse image name %q: %v", image, image, err)
	}
	return ""
}

// event records what happened to a container's image.
func (m *Manager) event(pod *v1.Pod, container, reason, msg string, warning bool) {
	if m.events != nil {
		m.events.Event(events.PodRef(pod, container), warning, reason, "%s", msg)
	}
}

// retry wakes the pod at t.
func (m *Manager) retry(uid types.UID, t time.Time) {
	if m.retries != nil {
		m.retries.Add(uid, t)
	}
}

// BackOff reports whether the pod may not pull the container's image again
// before until, because its last pull failed; why is the waiting reason to
// show meanwhile (nil: no pull of it is in back-off). The sync loop asks
// first, so a pod in pull back-off is left alone until the back-off ends,
// or (but under Always) its image appears (Run).
func (m *Manager) BackOff(pod *v1.Pod, c *v1.Container) (until time.Time, why *kubecontainer.StartError) {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := keyOf(pod, c)
	f := m.failures[key]
	if f == nil {
		return time.Time{}, nil
	}
	until, _ = m.backoff.Until(key)
	return until, backOffError(c, f)
}

// Run follows the runtime's image events until ctx ends: after a pull, a
// load, a tag or an import, a pod waiting in pull back-off for an image
// that is now present (under IfNotPresent) is woken at once, as the
// kubelet, which checks presence before the back-off, would start it. A
// waiting pod costs no Docker call meanwhile; only such an event does.
func (m *Manager) Run(ctx context.Context) {
	if m.hub == nil {
		return
	}
	sub := m.hub.Subscribe("images", func(ev kubecontainer.Event) bool { return ev.Type == kubecontainer.ImageEvent })
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Resync():
			if sub.Live() {
				m.wakePresent(ctx) // an image may have come while no event could tell
			}
		case <-sub.Events():
			drain(sub.Events()) // a load of many images is one check
			m.wakePresent(ctx)
		}
	}
}

// drain takes what is already waiting on ch.
func drain(ch <-chan kubecontainer.Event) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// wakePresent ends the pull back-off of every container whose policy
// pulls only an absent image and whose image is present now.
func (m *Manager) wakePresent(ctx context.Context) {
	m.mu.Lock()
	waiting := map[string][]failureKey{} // image → failure keys
	for key, f := range m.failures {
		if !f.always {
			waiting[key.image] = append(waiting[key.image], key)
		}
	}
	m.mu.Unlock()
	for image, keys := range waiting {
		if present, err := m.docker.ImagePresent(ctx, image); err != nil || !present {
			continue
		}
		m.mu.Lock()
		var woken []types.UID
		for _, key := range keys {
			if m.failures[key] != nil {
				woken = append(woken, key.uid)
				delete(m.failures, key)
				m.backoff.Reset(key)
			}
		}
		m.mu.Unlock()
		for _, uid := range woken {
			klog.Infof("Image %s is present now: pod %s no longer waits for its pull back-off", image, uid)
			m.retry(uid, m.clock.Now())
		}
	}
}

// backOffError is the waiting reason of a container whose image pull is in
// back-off; m.mu is held.
func backOffError(c *v1.Container, f *pullFailure) *kubecontainer.StartError {
	return &kubecontainer.StartError{Reason: kubecontainer.ReasonImagePullBackOff, Message: fmt.Sprintf("Back-off pulling image %q: %s", c.Image, f.msg)}
}

// pull pulls one image, trying each of auths in turn (none: anonymously):
// concurrent pulls of the same image with the same credentials wait for
// one registry fetch; each pull waits for the rate limiter.
func (m *Manager) pull(ctx context.Context, image string, auths []kubecontainer.Auth) error {
	for {
		err := m.pullShared(ctx, image, auths)
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			continue // the shared pull was another pod's, removed meanwhile: pull under ours
		}
		return err
	}
}

// pullShared pulls image under the context of the first of the concurrent
// callers with the same credentials.
func (m *Manager) pullShared(ctx context.Context, image string, auths []kubecontainer.Auth) error {
	_, err, _ := m.group.Do(pullKey(image, auths), func() (any, error) {
		if err := m.limiter.Wait(ctx); err != nil {
			return nil, err
		}
		var err error
		if len(auths) == 0 {
			err = m.docker.PullAuth(ctx, image, nil, pullInactivity)
		}
		for i := range auths {
			if err = m.docker.PullAuth(ctx, image, &auths[i], pullInactivity); err == nil {
				break
			}
		}
		if err != nil {
			return nil, err
		}
		m.record(ctx, image)
		return nil, nil
	})
	return err
}

// pullKey is what concurrent pulls share: the image and the credentials
// tried. A pull with a pod's secret neither waits for another pod's
// anonymous pull (which may fail where the secret would not) nor lends the
// secret to a pod that named none; pods without secrets (the node's
// credentials only) share one pull. The credentials are hashed, so no key
// holds them.
func pullKey(image string, auths []kubecontainer.Auth) string {
	if len(auths) == 0 {
		return image
	}
	h := sha256.New()
	for _, a := range auths {
		for _, f := range []string{a.ServerAddress, a.Username, a.Password} {
			h.Write([]byte(f))
			h.Write([]byte{0})
		}
	}
	return image + "\x00" + hex.EncodeToString(h.Sum(nil))
}

// distinct drops repeated credentials (a pod's secret holding the node's,
// under another spelling of the registry), keeping the first: a failing one
// is tried once.
func distinct(auths []kubecontainer.Auth) []kubecontainer.Auth {
	var out []kubecontainer.Auth
	for _, a := range auths {
		if !slices.ContainsFunc(out, func(o kubecontainer.Auth) bool { return o.Username == a.Username && o.Password == a.Password }) {
			out = append(out, a)
		}
	}
	return out
}

// record notes that the agent pulled image, so image GC may collect it.
func (m *Manager) record(ctx context.Context, image string) {
	id, err := m.docker.ImageID(ctx, image)
	if err != nil {
		klog.Errorf("Record pulled image %s: %v", image, err)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pulled[image] = pulledImage{ID: id, PulledAt: m.clock.Now()}
	m.saveLocked()
}

func (m *Manager) saveLocked() {
	data, err := json.Marshal(m.pulled)
	if err == nil {
		err = safefile.WriteAtomic(m.recordPath, data)
	}
	if err != nil {
		klog.Errorf("Record pulled images: %v", err)
	}
}

// Collect removes unused images this agent pulled, oldest first, while the
// image file system is above the high threshold, until it is below the low
// one. Never the infra image, an image in use, or one younger than MinAge.
func (m *Manager) Collect(ctx context.Context) { m.collect(ctx, false) }

// DeleteUnused removes every unused image Collect could remove, whatever
// the thresholds: the kubelet's node-level reclaim under disk pressure.
func (m *Manager) DeleteUnused(ctx context.Context) { m.collect(ctx, true) }

func (m *Manager) collect(ctx context.Context, all bool) {
	usage, err := m.docker.ImageFsUsage(ctx)
	if err != nil {
		klog.Errorf("Image GC: %v", err)
		return
	}
	if usage < m.policy.HighThreshold && !all {
		return
	}
	inUse, err := m.docker.ImagesInUse(ctx)
	if err != nil {
		klog.Errorf("Image GC: %v", err)
		return
	}
	m.mu.Lock()
	type cand struct {
		ref string
		img pulledImage
	}
	var cands []cand
	for ref, img := range m.pulled {
		if ref == m.infraImage || inUse[ref] || inUse[img.ID] || m.clock.Since(img.PulledAt) < m.policy.MinAge {
			continue
		}
		cands = append(cands, cand{ref, img})
	}
	m.mu.Unlock()
	sort.Slice(cands, func(i, j int) bool { return cands[i].img.PulledAt.Before(cands[j].img.PulledAt) })
	klog.Infof("Image GC: image file system at %d%% (high threshold %d%%): %d candidates", usage, m.policy.HighThreshold, len(cands))
	for _, c := range cands {
		if err := m.docker.RemoveImage(ctx, c.ref); err != nil && !errors.Is(err, kubecontainer.ErrImageNotFound) {
			klog.Errorf("Image GC: %v", err)
			continue
		}
		klog.Infof("Image GC: removed %s", c.ref)
		m.mu.Lock()
		delete(m.pulled, c.ref)
		m.saveLocked()
		m.mu.Unlock()
		if all {
			continue
		}
		if usage, err = m.docker.ImageFsUsage(ctx); err != nil || usage <= m.policy.LowThreshold {
			return
		}
	}
}

var htmlTag = regexp.MustCompile(`<[^>]*>`)

// summarizePullError makes a registry error one line without HTML, and says
// when a private registry wants credentials neither the pod nor the node
// has.
func summarizePullError(image string, err error, haveCreds bool) string {
	msg := htmlTag.ReplaceAllString(err.Error(), " ")
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	lower := strings.ToLower(msg)
	if !haveCreds && (strings.Contains(lower, "unauthorized") || strings.Contains(lower, "authentication required") ||
		strings.Contains(lower, "no basic auth credentials") || strings.Contains(lower, "denied")) {
		return fmt.Sprintf("no credentials for registry %s (none in the node's Docker config or the pod's image pull secrets): %s", credentialprovider.RegistryHost(image), msg)
	}
	return msg
}
