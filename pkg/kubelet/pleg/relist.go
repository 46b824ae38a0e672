package pleg

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/golang/glog"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
)

// Lister is what the relist needs from the runtime.
type Lister interface {
	List(ctx context.Context, label, value string) ([]kubecontainer.Container, error)
	Inspect(ctx context.Context, id string) (*kubecontainer.ContainerDetail, error)
	Events(ctx context.Context, label, value string) (<-chan kubecontainer.Event, error)
}

const (
	// eventsRetryMin and eventsRetryMax bound the back-off between attempts
	// to re-subscribe to Docker's event stream; the periodic relist covers
	// the gap.
	eventsRetryMin = 500 * time.Millisecond
	eventsRetryMax = 30 * time.Second
	// relistRetryMax caps the back-off between relists while Docker fails.
	relistRetryMax = 5 * time.Second
)

// Relister turns Docker's state into the pod cache: one label-filtered list
// per period (or at once when Docker reports an event), an inspect only for
// containers that are new, changed state or named by an event, and the UIDs
// of pods whose containers changed handed to onDirty. It never blocks on its
// consumer: onDirty only records the UIDs.
//
// Containers named by an event are inspected whatever the list says: Docker
// reports "die" before its list stops showing the container running, and a
// relist trusting the list would miss the exit until the next period.
type Relister struct {
	docker  Lister
	node    string
	period  time.Duration
	cache   *Cache
	onDirty func([]types.UID)
	// OnLogPath (optional) gets each container the first time it is seen
	// with a log file: Docker names it at the start, so a container first
	// inspected between its create and its start comes back later.
	OnLogPath func(*kubecontainer.ContainerState)
	Metrics   *metrics.Metrics // optional

	known    map[string]*kubecontainer.ContainerState // by container ID; owned by Run
	failures int                                      // consecutive failed relists; owned by Run
	last     time.Time                                // start of the previous relist; owned by Run

	trigger chan struct{} // cap 1: "relist now"

	mu      sync.Mutex          // guards evented
	evented map[string]struct{} // IDs named by events since the last relist
}

func NewRelister(docker Lister, node string, period time.Duration, cache *Cache, onDirty func([]types.UID)) *Relister {
	return &Relister{docker: docker, node: node, period: period, cache: cache, onDirty: onDirty,
		known: map[string]*kubecontainer.ContainerState{}, trigger: make(chan struct{}, 1)}
}

// poke asks for a relist at once; it never blocks.
func (r *Relister) poke() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// RelistNow asks for a relist at once (one already asked for counts).
func (r *Relister) RelistNow() { r.poke() }

// Refresh has the next relist, due at once, inspect a container whatever
// the list says of it: its state changed in a way the list does not show
// (a failed start leaves it "created", as before).
func (r *Relister) Refresh(id string) {
	r.markEvented(id)
	r.poke()
}

// Run relists until ctx is cancelled.
func (r *Relister) Run(ctx context.Context) {
	trigger, poke := r.trigger, r.poke
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.watchEvents(ctx, poke)
	}()
	defer func() { <-done }()

	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-trigger:
			timer.Stop()
		}
		r.relistOnce(ctx)
		timer.Reset(r.nextDelay())
	}
}

// nextDelay is the relist period, backed off while Docker keeps failing (an
// event from a recovered daemon still triggers a relist at once).
func (r *Relister) nextDelay() time.Duration {
	d := r.period
	for i := 1; i < r.failures && d < relistRetryMax; i++ {
		d *= 2
	}
	return min(d, max(r.period, relistRetryMax))
}

func (r *Relister) relistOnce(ctx context.Context) {
	err := r.relist(ctx)
	if err == nil {
		if r.failures > 0 {
			glog.Infof("Docker answers again after %d failed relists", r.failures)
		}
		r.failures = 0
		return
	}
	if ctx.Err() != nil {
		return
	}
	r.failures++
	// Log the first failure and then sparsely: Docker may be down for long.
	if r.failures == 1 || r.failures%60 == 0 {
		glog.Errorf("Relist failed (%d in a row): %v", r.failures, err)
	}
}

// watchEvents keeps a subscription to Docker's events for this node's
// containers, poking a relist for each one and after every reconnection.
func (r *Relister) watchEvents(ctx context.Context, poke func()) {
	backoff := eventsRetryMin
	for ctx.Err() == nil {
		events, err := r.docker.Events(ctx, dockertools.LabelOwner, r.node)
		if err == nil {
			backoff = eventsRetryMin
			poke() // events may have been missed while unsubscribed
			for ev := range events {
				glog.V(5).Infof("Docker event %s %s", ev.Action, dockertools.ShortID(ev.ContainerID))
				r.markEvented(ev.ContainerID)
				poke()
			}
			glog.V(2).Infof("Docker event stream ended; re-subscribing")
		} else {
			glog.V(2).Infof("Subscribe to Docker events: %v (retry in %v)", err, backoff)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, eventsRetryMax)
	}
}

func (r *Relister) markEvented(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.evented == nil {
		r.evented = map[string]struct{}{}
	}
	r.evented[id] = struct{}{}
}

// relist lists this node's containers once and updates the cache.
func (r *Relister) relist(ctx context.Context) error {
	start := time.Now()
	// Taken before the list: an event arriving during this relist pokes
	// the next one, which inspects its container.
	r.mu.Lock()
	evented := r.evented
	r.evented = nil
	r.mu.Unlock()
	list, err := r.docker.List(ctx, dockertools.LabelOwner, r.node)
	if err != nil {
		for id := range evented {
			r.markEvented(id) // for the retry
		}
		return err
	}
	pods := map[types.UID]*kubecontainer.PodState{}
	known := make(map[string]*kubecontainer.ContainerState, len(list))
	dirty := map[types.UID]bool{}
	fresh, err := r.inspectChanged(ctx, list, evented)
	if err != nil {
		return err
	}
	for _, c := range list {
		st, changed := fresh[c.ID]
		if !changed {
			st = r.known[c.ID]
		}
		if st == nil {
			continue // gone since the list, or not ours to manage
		}
		if changed {
			dirty[types.UID(st.Labels[dockertools.LabelPodUID])] = true
			if prev := r.known[c.ID]; r.OnLogPath != nil && st.LogPath != "" && (prev == nil || prev.LogPath == "") {
				r.OnLogPath(st)
			}
		}
		known[c.ID] = st
		uid := types.UID(st.Labels[dockertools.LabelPodUID])
		pod := pods[uid]
		if pod == nil {
			pod = &kubecontainer.PodState{UID: uid, Name: st.Labels[dockertools.LabelPodName], Namespace: st.Labels[dockertools.LabelPodNamespace]}
			pods[uid] = pod
		}
		pod.Containers = append(pod.Containers, st)
	}
	for id, st := range r.known {
		if _, ok := known[id]; !ok {
			dirty[types.UID(st.Labels[dockertools.LabelPodUID])] = true
		}
	}
	for _, p := range pods {
		kubecontainer.SortNewestFirst(p.Containers)
	}
	r.known = known
	r.cache.Set(pods, start)
	if r.Metrics != nil {
		r.observe(start, pods)
	}
	if len(dirty) > 0 {
		glog.V(4).Infof("Relist: %d containers, %d inspected, %d pods changed, in %v", len(list), len(fresh), len(dirty), time.Since(start))
		uids := make([]types.UID, 0, len(dirty))
		for uid := range dirty {
			uids = append(uids, uid)
		}
		r.onDirty(uids)
	}
	return nil
}

// maxParallelInspects bounds the inspects of one relist: after a burst of
// pods, hundreds of new containers are inspected at once, and one at a time
// would keep the cache (and every worker waiting on it) behind for seconds.
const maxParallelInspects = 8

// inspectChanged inspects the listed containers that are new, changed
// running state or were named by an event. A container gone since the list
// maps to nil.
func (r *Relister) inspectChanged(ctx context.Context, list []kubecontainer.Container, evented map[string]struct{}) (map[string]*kubecontainer.ContainerState, error) {
	var todo []string
	for _, c := range list {
		_, ev := evented[c.ID]
		if st := r.known[c.ID]; st == nil || st.Running != c.Running || ev {
			todo = append(todo, c.ID)
		}
	}
	out := make(map[string]*kubecontainer.ContainerState, len(todo))
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, maxParallelInspects)
	var wg sync.WaitGroup
	for _, id := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var st *kubecontainer.ContainerState
			d, err := r.docker.Inspect(ctx, id)
			switch {
			case errors.Is(err, kubecontainer.ErrNotFound):
				err = nil // removed since the list; the next relist agrees
			case err == nil:
				var perr error
				if st, perr = containerState(d); perr != nil {
					glog.V(4).Infof("Relist: skipping container %s: %v", d.Name, perr)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			out[id] = st
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	return out, firstErr
}

// containerState converts an inspected container; one without the agent's
// name or pod labels is not ours to manage.
func containerState(d *kubecontainer.ContainerDetail) (*kubecontainer.ContainerState, error) {
	n, err := dockertools.ParseName(d.Name)
	if err != nil {
		return nil, err
	}
	if d.Labels[dockertools.LabelPodUID] == "" {
		return nil, errors.New("no pod UID label")
	}
	return &kubecontainer.ContainerState{
		ID:           d.ID,
		RuntimeName:  d.Name,
		Name:         n.Container,
		Hash:         n.Hash,
		RestartCount: dockertools.ParseRestartCount(d.Labels),
		Running:      d.Running,
		Status:       d.Status,
		ExitCode:     d.ExitCode,
		Error:        d.Error,
		OOMKilled:    d.OOMKilled,
		CreatedAt:    d.CreatedAt,
		StartedAt:    d.StartedAt,
		FinishedAt:   d.FinishedAt,
		Image:        d.Image,
		ImageID:      d.ImageID,
		IP:           d.IP,
		LogPath:      d.LogPath,
		Labels:       d.Labels,
	}, nil
}

// observe records a completed relist in the kubelet's PLEG metrics and
// counts the pods and containers it found.
func (r *Relister) observe(start time.Time, pods map[types.UID]*kubecontainer.PodState) {
	m := r.Metrics
	m.PLEGRelistDuration.Observe(time.Since(start).Seconds())
	if !r.last.IsZero() {
		m.PLEGRelistInterval.Observe(start.Sub(r.last).Seconds())
	}
	r.last = start
	m.PLEGLastSeen.Set(float64(time.Now().Unix()))
	runningPods := 0
	states := map[string]int{"created": 0, "running": 0, "exited": 0}
	for _, p := range pods {
		if p.RunningInfra() != nil {
			runningPods++
		}
		for _, c := range p.Containers {
			if c.Name == kubecontainer.InfraContainerName {
				continue // counted as a pod sandbox, as the kubelet does
			}
			switch {
			case c.Running:
				states["running"]++
			case c.Status == "created":
				states["created"]++
			default:
				states["exited"]++
			}
		}
	}
	m.RunningPods.Set(float64(runningPods))
	for s, n := range states {
		m.RunningContainers.WithLabelValues(s).Set(float64(n))
	}
}
