// Package images makes a container's image present as its pull policy
// says (throttled, with the node's registry credentials, concurrent pulls
// of one image collapsed into one, failures backed off per pod and image)
// and collects the unused images this agent pulled.
package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/golang/glog"
	"golang.org/x/sync/singleflight"
	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
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
	Keyring        *dockertools.Keyring
	QPS            float64 // pulls per second; 0: unlimited
	Burst          int
	HighThreshold  int           // percent of the image file system: collect above it
	LowThreshold   int           // percent: collect down to it
	MinAge         time.Duration // an image pulled more recently is never collected
	BackoffInitial time.Duration
	BackoffMax     time.Duration
}

// pulledImage records an image this agent pulled: only those may be
// collected (an image built or loaded by someone else may not be pullable
// again).
type pulledImage struct {
	ID       string    `json:"id"`
	PulledAt time.Time `json:"pulledAt"`
}

type pullFailure struct {
	until time.Time
	delay time.Duration
	msg   string
}

// Manager pulls images as pull policies say (throttled, with the
// node's registry credentials, concurrent pulls of one image collapsed into
// one, failures backed off) and collects unused pulled images.
type Manager struct {
	docker     Runtime
	policy     Policy
	infraImage string
	limiter    *rate.Limiter
	group      singleflight.Group
	recordPath string
	// Retry (set before use) is told when a pod's pull back-off ends.
	Retry func(types.UID, time.Time)
	// Events (set before use) records what happens to a pod's images.
	Events func(pod *v1.Pod, container, reason, msg string, warning bool)
	// Pulled (optional) is told how long a pull for a pod took, so pod
	// start latency can be reported without it.
	Pulled func(uid types.UID, d time.Duration)

	mu       sync.Mutex // guards pulled and failures
	pulled   map[string]pulledImage
	failures map[string]*pullFailure
}

// NewManager returns a manager that records the images it pulls in
// recordPath (loaded now if there) and never collects infraImage.
func NewManager(d Runtime, p Policy, infraImage, recordPath string) *Manager {
	limit := rate.Inf
	if p.QPS > 0 {
		limit = rate.Limit(p.QPS)
	}
	m := &Manager{docker: d, policy: p, infraImage: infraImage, limiter: rate.NewLimiter(limit, max(p.Burst, 1)),
		recordPath: recordPath, pulled: map[string]pulledImage{}, failures: map[string]*pullFailure{},
		Retry: func(types.UID, time.Time) {}, Events: func(*v1.Pod, string, string, string, bool) {}}
	if data, err := os.ReadFile(recordPath); err == nil {
		if err := json.Unmarshal(data, &m.pulled); err != nil {
			glog.Errorf("Ignoring corrupt record of pulled images %s: %v", recordPath, err)
		}
	}
	return m
}

// ForgetPod drops the pull failures of a pod that is gone.
func (m *Manager) ForgetPod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := string(uid) + "/"
	for key := range m.failures {
		if strings.HasPrefix(key, prefix) {
			delete(m.failures, key)
		}
	}
}

// Ensure makes a container's image present as its pull policy says:
// Always pulls, IfNotPresent pulls when absent, Never never pulls. Without a
// policy, ":latest" or no tag means Always, as in Kubernetes.
func (m *Manager) Ensure(ctx context.Context, pod *v1.Pod, c *v1.Container) error {
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = v1.PullIfNotPresent
		if _, tag := dockertools.SplitImage(c.Image); tag == "latest" {
			policy = v1.PullAlways
		}
	}
	if policy != v1.PullAlways {
		present, err := m.docker.ImagePresent(ctx, c.Image)
		if err != nil || present {
			return err
		}
		if policy == v1.PullNever {
			return &kubecontainer.StartError{Reason: kubecontainer.ReasonErrImageNeverPull, Message: fmt.Sprintf("image %s is not present and imagePullPolicy is Never", c.Image)}
		}
	}
	key := string(pod.UID) + "/" + c.Name + "/" + c.Image
	m.mu.Lock()
	f := m.failures[key]
	m.mu.Unlock()
	if f != nil && time.Now().Before(f.until) {
		m.Events(pod, c.Name, "BackOff", fmt.Sprintf("Back-off pulling image %q", c.Image), false)
		return &kubecontainer.StartError{Reason: kubecontainer.ReasonImagePullBackOff, Message: fmt.Sprintf("Back-off pulling image %q: %s", c.Image, f.msg)}
	}
	m.Events(pod, c.Name, "Pulling", fmt.Sprintf("Pulling image %q", c.Image), false)
	start := time.Now()
	if err := m.pull(ctx, c.Image); err != nil {
		msg := summarizePullError(c.Image, err, len(m.policy.Keyring.Lookup(c.Image)) > 0)
		m.mu.Lock()
		if f == nil {
			f = &pullFailure{delay: m.policy.BackoffInitial}
			m.failures[key] = f
		} else {
			f.delay = min(2*f.delay, m.policy.BackoffMax)
		}
		f.until, f.msg = time.Now().Add(f.delay), msg
		until := f.until
		m.mu.Unlock()
		m.Retry(pod.UID, until)
		m.Events(pod, c.Name, "Failed", msg, true)
		return &kubecontainer.StartError{Reason: kubecontainer.ReasonErrImagePull, Message: msg}
	}
	m.mu.Lock()
	delete(m.failures, key)
	m.mu.Unlock()
	took := time.Since(start)
	if m.Pulled != nil {
		m.Pulled(pod.UID, took)
	}
	m.Events(pod, c.Name, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v", c.Image, took.Round(time.Millisecond)), false)
	return nil
}

// pull pulls one image: concurrent pulls of the same image wait for one
// registry fetch; each pull waits for the rate limiter; each matching
// credential is tried in turn.
func (m *Manager) pull(ctx context.Context, image string) error {
	for {
		err := m.pullShared(ctx, image)
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			continue // the shared pull was another pod's, removed meanwhile: pull under ours
		}
		return err
	}
}

// pullShared pulls image under the context of the first of the concurrent
// callers.
func (m *Manager) pullShared(ctx context.Context, image string) error {
	_, err, _ := m.group.Do(image, func() (any, error) {
		if err := m.limiter.Wait(ctx); err != nil {
			return nil, err
		}
		auths := m.policy.Keyring.Lookup(image)
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

// record notes that the agent pulled image, so image GC may collect it.
func (m *Manager) record(ctx context.Context, image string) {
	id, err := m.docker.ImageID(ctx, image)
	if err != nil {
		glog.Errorf("Record pulled image %s: %v", image, err)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pulled[image] = pulledImage{ID: id, PulledAt: time.Now()}
	m.saveLocked()
}

func (m *Manager) saveLocked() {
	data, err := json.Marshal(m.pulled)
	if err == nil {
		err = safefile.WriteAtomic(m.recordPath, data)
	}
	if err != nil {
		glog.Errorf("Record pulled images: %v", err)
	}
}

// Collect removes unused images this agent pulled, oldest first, while the
// image file system is above the high threshold, until it is below the low
// one. Never the infra image, an image in use, or one younger than MinAge.
func (m *Manager) Collect(ctx context.Context) {
	usage, err := m.docker.ImageFsUsage(ctx)
	if err != nil {
		glog.Errorf("Image GC: %v", err)
		return
	}
	if usage < m.policy.HighThreshold {
		return
	}
	inUse, err := m.docker.ImagesInUse(ctx)
	if err != nil {
		glog.Errorf("Image GC: %v", err)
		return
	}
	m.mu.Lock()
	type cand struct {
		ref string
		img pulledImage
	}
	var cands []cand
	for ref, img := range m.pulled {
		if ref == m.infraImage || inUse[ref] || inUse[img.ID] || time.Since(img.PulledAt) < m.policy.MinAge {
			continue
		}
		cands = append(cands, cand{ref, img})
	}
	m.mu.Unlock()
	sort.Slice(cands, func(i, j int) bool { return cands[i].img.PulledAt.Before(cands[j].img.PulledAt) })
	glog.Infof("Image GC: image file system at %d%% (high threshold %d%%): %d candidates", usage, m.policy.HighThreshold, len(cands))
	for _, c := range cands {
		if err := m.docker.RemoveImage(ctx, c.ref); err != nil && !errors.Is(err, kubecontainer.ErrImageNotFound) {
			glog.Errorf("Image GC: %v", err)
			continue
		}
		glog.Infof("Image GC: removed %s", c.ref)
		m.mu.Lock()
		delete(m.pulled, c.ref)
		m.saveLocked()
		m.mu.Unlock()
		if usage, err = m.docker.ImageFsUsage(ctx); err != nil || usage <= m.policy.LowThreshold {
			return
		}
	}
}

var htmlTag = regexp.MustCompile(`<[^>]*>`)

// summarizePullError makes a registry error one line without HTML, and says
// when a private registry wants credentials the node lacks.
func summarizePullError(image string, err error, haveCreds bool) string {
	msg := htmlTag.ReplaceAllString(err.Error(), " ")
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	lower := strings.ToLower(msg)
	if !haveCreds && (strings.Contains(lower, "unauthorized") || strings.Contains(lower, "authentication required") ||
		strings.Contains(lower, "no basic auth credentials") || strings.Contains(lower, "denied")) {
		return fmt.Sprintf("no credentials for registry %s (add them to the Docker config): %s", dockertools.RegistryHost(image), msg)
	}
	return msg
}
