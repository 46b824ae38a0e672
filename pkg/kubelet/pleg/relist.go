package pleg

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/backoff"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/runtimeevents"
)

// Lister is what the relist needs from the runtime.
type Lister interface {
	List(ctx context.Context, label, value string) ([]kubecontainer.Container, error)
	Inspect(ctx context.Context, id string) (*kubecontainer.ContainerDetail, error)
}

const (
	// relistRetryMax caps the back-off between relists while Docker fails.
	relistRetryMax = 5 * time.Second
	// eventedPeriodFactor stretches the relist period while Docker's event
	// stream is connected: every change to a container then arrives as an
	// event (and is inspected at once), so the periodic list is only the
	// backstop. A list of 500 containers costs dockerd and the agent some
	// 50 ms each.
	eventedPeriodFactor = 5
)

// Relister turns Docker's state into the pod cache and hands the UIDs of
// pods whose containers changed to its Dirty marker. It never blocks on its
// consumer: the marker only records the UIDs.
//
// Two paths feed the cache. A relist lists this node's containers (label
// filtered) and inspects those that are new or changed state; it runs every
// period (stretched while Docker's event stream is connected) and when asked
// (RelistNow), and only a relist advances the cache's timestamp. A
// container named by an event is inspected at once by itself and its pod's
// entry replaced (Cache.Update): a killed container's pod is dirty some
// inspect's time after the die, not a list of the whole node later. Such an
// update only adds what Docker said after the last relist, so a worker
// waiting for a relist newer than its own actions still waits.
//
// Containers named by an event are inspected whatever a list says: Docker
// reports "die" before its list stops showing the container running.
type Relister struct {
	docker  Lister
	events  *runtimeevents.Hub // nil: no events followed
	node    string
	period  time.Duration
	cache   *Cache
	onDirty func([]types.UID)
	logs    LogLinker        // nil: none
	metrics *metrics.Metrics // nil: none
	clock   clock.WithTicker

	known    map[string]*kubecontainer.ContainerState // by container ID; owned by Run
	failures int                                      // consecutive failed relists; owned by Run
	// failing spaces the relists while Docker fails: the period doubling
	// per failure in a row up to relistRetryMax (or the period, if longer);
	// reset by a relist that works. Used by Run.
	failing *backoff.Backoff[backoff.One]
	last    time.Time // start of the previous relist; owned by Run
	// oomed holds the running containers an oom event named: Docker tells
	// OOMKilled only in the inspect after their exit. Owned by Run.
	oomed map[string]bool

	trigger chan struct{} // cap 1: "relist now"
	named   chan struct{} // cap 1: "containers were named by events"
	podsDue chan struct{} // cap 1: "pods were asked for" (RelistPod)
	live    atomic.Bool   // the event stream is connected, as the relist last heard

	mu       sync.Mutex         // guards evented, starting and asked
	evented  map[string]pending // containers named by events (or Refresh), not yet inspected
	starting map[string]bool    // containers the agent is starting (Starting)
	asked    map[types.UID]bool // pods to relist by themselves (RelistPod)
}

// pending is what the events said of a container since it was last
// inspected. A container whose only news is its death need not be inspected:
// the die event carries the exit code and the time, and Docker holds the
// container's lock for its cleanup (unmounts, network) after sending it,
// so an inspect then waits some 20 ms on a busy node.
type pending struct {
	onlyDie  bool
	oom      bool // an oom event came: the exit that follows is inspected for OOMKilled
	exitCode int
	finished time.Time
}

// Config configures a Relister.
type Config struct {
	// Node is the owner label's value: only the node's containers are
	// listed.
	Node string
	// Period is how long a relist waits for the next while Docker answers
	// (stretched while its event stream is connected).
	Period time.Duration
	// Clock times the relists, the re-subscriptions and the cache's
	// timestamps; nil: the real clock.
	Clock clock.WithTicker
}

// Deps are what a Relister reads and tells.
type Deps struct {
	Runtime Lister
	// Hub is the agent's runtime event hub; nil: no events followed (the
	// periodic relist alone).
	Hub   *runtimeevents.Hub
	Cache *Cache
	// Dirty is told the pods whose containers changed.
	Dirty Marker
	// Logs, if set, gets each container the first time it is seen with a
	// log file (the log links).
	Logs LogLinker
	// Metrics, if set, gets the relist's metrics (kubelet_pleg_*) and the
	// counts of running pods and containers.
	Metrics *metrics.Metrics
}

// Marker records the pods to sync (podqueue.Dirty); it must not block.
type Marker interface {
	Mark(uids []types.UID)
}

// LogLinker links a container's log file (kuberuntime.LogLinks). Docker
// names the file at the start, so a container first inspected between its
// create and its start comes back later.
type LogLinker interface {
	Link(c *kubecontainer.ContainerState)
}

// NewRelister returns a relister of cfg.Node's containers.
func NewRelister(cfg Config, d Deps) *Relister {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Relister{docker: d.Runtime, events: d.Hub, node: cfg.Node, period: cfg.Period, cache: d.Cache, onDirty: d.Dirty.Mark,
		logs: d.Logs, metrics: d.Metrics, clock: cfg.Clock,
		known: map[string]*kubecontainer.ContainerState{}, oomed: map[string]bool{}, trigger: make(chan struct{}, 1), named: make(chan struct{}, 1), podsDue: make(chan struct{}, 1)}
}

// Period is how long the relist waits between two lists while Docker
// answers: the period, stretched while the event stream is connected.
func (r *Relister) Period() time.Duration {
	if r.live.Load() {
		return r.period * eventedPeriodFactor
	}
	return r.period
}

// poke asks for a relist at once; it never blocks.
func (r *Relister) poke() { signal(r.trigger) }

// RelistNow asks for a relist at once (one already asked for counts).
func (r *Relister) RelistNow() { r.poke() }

// RelistPod asks for the pod's containers to be listed by themselves at
// once: to the pod's worker that is as good as a relist of the node
// (Cache.GetNewerThan), and far cheaper for Docker. A worker asks for it
// after each sync that acted; in a burst of 100 pods, a list of the node for
// each made 66 to 98 lists of up to 200 containers, some 16 ms of dockerd's
// CPU each against 2.5 ms for one pod's two, on two cores Docker saturates.
func (r *Relister) RelistPod(uid types.UID) {
	r.mu.Lock()
	if r.asked == nil {
		r.asked = map[types.UID]bool{}
	}
	r.asked[uid] = true
	r.mu.Unlock()
	signal(r.podsDue)
}

// Refresh has a container inspected at once, as if an event named it: its
// state changed in a way no event reports (a failed start leaves it
// "created", as before).
func (r *Relister) Refresh(id string) {
	r.markEvented(kubecontainer.Event{ContainerID: id})
	signal(r.named)
}

// Starting tells the relister that the agent has created the container and
// is starting it; call done when the start returns. Until then a relist
// leaves the container out rather than inspect it: Docker holds a
// container's lock for the whole of its start (seconds on a busy node), so
// the inspect would wait for the start, and the whole relist with it, and
// every pod worker waiting for a newer relist. The start event, or Refresh
// after a failed start, has it inspected.
func (r *Relister) Starting(id string) (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.starting == nil {
		r.starting = map[string]bool{}
	}
	r.starting[id] = true
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.starting, id)
	}
}

// signal sends on a channel of capacity 1 unless a send is already pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run relists until ctx is cancelled.
func (r *Relister) Run(ctx context.Context) {
	trigger := r.trigger
	r.failing = r.newFailing()
	if r.events != nil {
		sub := r.events.Subscribe("relist", r.follows)
		defer sub.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.followEvents(ctx, sub)
		}()
		defer func() { <-done }()
	}

	timer := r.clock.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.named:
			r.inspectNamed(ctx)
			continue // the next relist stays due when it was
		case <-r.podsDue:
			r.relistPods(ctx)
			continue
		case <-timer.C():
		case <-trigger:
			timer.Stop()
		}
		r.relistOnce(ctx)
		timer.Reset(r.nextDelay())
	}
}

// newFailing is the back-off of relists while Docker fails.
func (r *Relister) newFailing() *backoff.Backoff[backoff.One] {
	return backoff.New[backoff.One](backoff.Policy{Initial: r.period, Max: max(r.period, relistRetryMax)}, r.clock)
}

// nextDelay is the relist period, stretched while the event stream is
// connected and backed off while Docker keeps failing (a recovered daemon's
// event stream still triggers a relist at once). The back-off starts at the
// period; while the stream is connected each of its delays is stretched as
// the period is, up to the same cap.
func (r *Relister) nextDelay() time.Duration {
	d := r.failing.Get(backoff.One{})
	if d == 0 {
		return r.Period()
	}
	if r.live.Load() {
		d *= eventedPeriodFactor
	}
	return min(d, r.failing.Policy().Max)
}

func (r *Relister) relistOnce(ctx context.Context) {
	err := r.relist(ctx)
	if err == nil {
		if r.failures > 0 {
			klog.Infof("Docker answers again after %d failed relists", r.failures)
		}
		r.failures = 0
		r.failing.Reset(backoff.One{})
		return
	}
	if ctx.Err() != nil {
		return
	}
	r.failures++
	r.failing.Next(backoff.One{}, r.clock.Now())
	// Log the first failure and then sparsely: Docker may be down for long.
	if r.failures == 1 || r.failures%60 == 0 {
		klog.Errorf("Relist failed (%d in a row): %v", r.failures, err)
	}
}

// follows says which of the runtime's events the relist acts on: the state
// changes of this node's containers.
func (r *Relister) follows(ev kubecontainer.Event) bool {
	return ev.Type == kubecontainer.ContainerEvent && ev.Labels[kubecontainer.LabelOwner] == r.node &&
		slices.Contains(kubecontainer.StateActions, ev.Action)
}

// followEvents has the containers events name inspected, and relists when
// the event stream connects (events were missed meanwhile), breaks (it may
// have ended on a change it never sent) or lost events for this reader.
func (r *Relister) followEvents(ctx context.Context, sub *runtimeevents.Reader) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.Resync():
			r.live.Store(sub.Live())
			r.poke()
		case ev := <-sub.Events():
			klog.V(5).Infof("Docker event %s %s", ev.Action, kubecontainer.ShortID(ev.ContainerID))
			r.markEvented(ev)
			signal(r.named)
		}
	}
}

func (r *Relister) markEvented(ev kubecontainer.Event) {
	if ev.Action == "create" {
		// Nothing to see before its start but what the agent made, and the
		// inspect would wait for the start (Starting). Its start event
		// follows; one created by someone else is found by a relist.
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.evented == nil {
		r.evented = map[string]pending{}
	}
	p, seen := r.evented[ev.ContainerID]
	switch {
	case ev.Action == "die" && (!seen || p.onlyDie):
		p = pending{onlyDie: true, exitCode: ev.ExitCode, finished: ev.Time}
	case ev.Action == "oom":
		p.onlyDie, p.oom = false, true
	default:
		p.onlyDie = false
	}
	r.evented[ev.ContainerID] = p
}

// requeue puts back what a failed relist or inspect took.
func (r *Relister) requeue(evented map[string]pending) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.evented == nil {
		r.evented = map[string]pending{}
	}
	for id, p := range evented {
		if now, ok := r.evented[id]; ok {
			// Both say something: only two dies stay a die alone; an oom
			// either one saw counts.
			p.onlyDie = p.onlyDie && now.onlyDie
			p.oom = p.oom || now.oom
		}
		r.evented[id] = p
	}
}

// relist lists this node's containers once and updates the cache.
func (r *Relister) relist(ctx context.Context) error {
	start := r.clock.Now()
	// Taken before the list: an event arriving during this relist pokes
	// the next one, which inspects its container.
	r.mu.Lock()
	evented := r.evented
	r.evented = nil
	r.mu.Unlock()
	list, err := r.docker.List(ctx, kubecontainer.LabelOwner, r.node)
	if err != nil {
		r.requeue(evented)
		return err
	}
	pods := map[types.UID]*kubecontainer.PodState{}
	known := make(map[string]*kubecontainer.ContainerState, len(list))
	dirty := map[types.UID]bool{}
	r.noteOOM(evented)
	fresh, err := r.inspectChanged(ctx, list, evented)
	if err != nil {
		return err
	}
	for _, c := range list {
		st, changed := r.listedState(c, fresh)
		if st == nil {
			continue // gone since the list, or not ours to manage
		}
		if changed {
			dirty[podUID(st)] = true
		}
		known[c.ID] = st
		addTo(pods, st)
	}
	for id, st := range r.known {
		if _, ok := known[id]; !ok {
			dirty[podUID(st)] = true
		}
	}
	for _, p := range pods {
		kubecontainer.SortNewestFirst(p.Containers)
	}
	r.known = known
	r.pruneOOM(known, true)
	r.cache.Set(pods, start)
	if r.metrics != nil {
		r.observe(start, pods)
	}
	if len(dirty) > 0 {
		klog.V(4).Infof("Relist: %d containers, %d inspected, %d pods changed, in %v", len(list), len(fresh), len(dirty), r.clock.Since(start))
		r.onDirty(keys(dirty))
	}
	return nil
}

// inspectNamed inspects the containers named by events (or Refresh) since
// they were last inspected and replaces their pods' entries in the cache,
// leaving its timestamp: the rest of the node is as the last relist saw it.
// If Docker does not answer, a relist (due at once) inspects them.
func (r *Relister) inspectNamed(ctx context.Context) {
	r.mu.Lock()
	evented := r.evented
	r.evented = nil
	r.mu.Unlock()
	if len(evented) == 0 {
		return
	}
	ids := make([]string, 0, len(evented))
	died := map[string]*kubecontainer.ContainerState{}
	r.noteOOM(evented)
	for id, p := range evented {
		if prev := r.known[id]; p.onlyDie && prev != nil && prev.Running && !r.oomed[id] {
			died[id] = exited(prev, p)
		} else {
			ids = append(ids, id)
		}
	}
	fresh, err := r.inspect(ctx, ids)
	if err != nil {
		r.requeue(evented)
		r.poke()
		return
	}
	maps.Copy(fresh, died)
	r.pruneOOM(fresh, false)
	dirty := map[types.UID]bool{}
	for id, st := range fresh {
		prev := r.known[id]
		if prev != nil {
			dirty[podUID(prev)] = true
		}
		if st == nil {
			delete(r.known, id) // removed, or not ours
			continue
		}
		dirty[podUID(st)] = true
		r.noteLogPath(prev, st)
		r.known[id] = st
	}
	pods := make(map[types.UID]*kubecontainer.PodState, len(dirty))
	for _, st := range r.known {
		if dirty[podUID(st)] {
			addTo(pods, st)
		}
	}
	for uid := range dirty {
		if p := pods[uid]; p != nil {
			kubecontainer.SortNewestFirst(p.Containers)
		} else {
			pods[uid] = nil // its last container is gone
		}
	}
	r.cache.Update(pods)
	if r.metrics != nil {
		r.count(r.cache.All())
	}
	klog.V(4).Infof("Events named %d containers (%d inspected) of %d pods", len(evented), len(ids), len(dirty))
	r.onDirty(keys(dirty))
}

// relistPods lists the containers of each pod asked for (RelistPod) by
// themselves, inspects what is new or changed as a relist does, and replaces
// those pods' entries in the cache, each as of the start of its own list.
// The containers events named in those pods are inspected here rather than
// a second time by inspectNamed. If Docker does not answer, a relist of the
// whole node is asked for: the workers waiting on these pods wait for it.
func (r *Relister) relistPods(ctx context.Context) {
	r.mu.Lock()
	asked := r.asked
	r.asked = nil
	r.mu.Unlock()
	lists, failed := r.listPods(ctx, asked)
	if failed {
		r.poke()
	}
	if len(lists) == 0 {
		return
	}
	var all []kubecontainer.Container
	for _, l := range lists {
		all = append(all, l.list...)
	}
	evented := r.takeEvented(all)
	r.noteOOM(evented)
	fresh, err := r.inspectChanged(ctx, all, evented)
	if err != nil {
		r.requeue(evented)
		r.poke()
		return
	}
	r.pruneOOM(fresh, false)
	dirty := r.setListedPods(lists, fresh)
	if r.metrics != nil {
		r.count(r.cache.All())
	}
	klog.V(4).Infof("Relisted %d pods by themselves: %d containers, %d inspected, %d changed", len(lists), len(all), len(fresh), len(dirty))
	if len(dirty) > 0 {
		r.onDirty(keys(dirty))
	}
}

// podList is one pod's containers as a list of its own found them.
type podList struct {
	start time.Time // when the list started
	list  []kubecontainer.Container
}

// listPods lists the containers of each pod asked for, by the pod UID
// label, a few at a time, keeping this node's. failed reports that Docker
// did not answer for some.
func (r *Relister) listPods(ctx context.Context, asked map[types.UID]bool) (lists map[types.UID]podList, failed bool) {
	lists = make(map[types.UID]podList, len(asked))
	var mu sync.Mutex
	var failures atomic.Bool
	sem := make(chan struct{}, maxParallelInspects)
	var wg sync.WaitGroup
	for uid := range asked {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			start := r.clock.Now()
			list, err := r.docker.List(ctx, kubecontainer.LabelPodUID, string(uid))
			if err != nil {
				failures.Store(true)
				return
			}
			own := list[:0]
			for _, c := range list {
				if c.Labels[kubecontainer.LabelOwner] == r.node {
					own = append(own, c)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			lists[uid] = podList{start, own}
		}()
	}
	wg.Wait()
	return lists, failures.Load()
}

// takeEvented takes the events pending on the listed containers: their
// inspect is this relist's.
func (r *Relister) takeEvented(all []kubecontainer.Container) map[string]pending {
	r.mu.Lock()
	defer r.mu.Unlock()
	evented := map[string]pending{}
	for _, c := range all {
		if p, ok := r.evented[c.ID]; ok {
			evented[c.ID] = p
			delete(r.evented, c.ID)
		}
	}
	return evented
}

// setListedPods replaces the listed pods' entries in the cache, each as of
// the start of its own list, and returns the pods whose containers changed
// (one listed anew or changed, or one known and no longer listed).
func (r *Relister) setListedPods(lists map[types.UID]podList, fresh map[string]*kubecontainer.ContainerState) map[types.UID]bool {
	dirty := map[types.UID]bool{}
	pods := make(map[types.UID]*kubecontainer.PodState, len(lists))
	started := make(map[types.UID]time.Time, len(lists))
	listedIDs := map[string]bool{}
	for uid, l := range lists {
		started[uid] = l.start
		pods[uid] = nil // no containers left, unless listed
		for _, c := range l.list {
			st, changed := r.listedState(c, fresh)
			if st == nil {
				continue // gone since the list, or not ours to manage
			}
			if changed {
				dirty[uid] = true
			}
			listedIDs[c.ID] = true
			r.known[c.ID] = st
			addTo(pods, st)
		}
	}
	for id, st := range r.known {
		if _, ok := lists[podUID(st)]; ok && !listedIDs[id] {
			dirty[podUID(st)] = true
			delete(r.known, id)
		}
	}
	for _, p := range pods {
		if p != nil {
			kubecontainer.SortNewestFirst(p.Containers)
		}
	}
	r.cache.SetPods(pods, started)
	return dirty
}

// listedState is a listed container's state: as fresh has it if it was
// just inspected (changed; its first log path is handed on), else as last
// known. nil: gone since the list, or not ours to manage.
func (r *Relister) listedState(c kubecontainer.Container, fresh map[string]*kubecontainer.ContainerState) (st *kubecontainer.ContainerState, changed bool) {
	st, changed = fresh[c.ID]
	if !changed {
		return r.known[c.ID], false
	}
	if st != nil {
		r.noteLogPath(r.known[c.ID], st)
	}
	return st, true
}

// noteOOM remembers the containers oom events named.
func (r *Relister) noteOOM(evented map[string]pending) {
	for id, p := range evented {
		if p.oom {
			r.oomed[id] = true
		}
	}
}

// pruneOOM forgets the containers that states show gone (nil) or exited:
// their exit was inspected. With every, states holds every container there
// is, and one missing is gone too.
func (r *Relister) pruneOOM(states map[string]*kubecontainer.ContainerState, every bool) {
	for id := range r.oomed {
		if st, ok := states[id]; (ok || every) && (st == nil || !st.Running) {
			delete(r.oomed, id)
		}
	}
}

// exited is a running container's state after the die event p: what an
// inspect would show (an OOM kill came as its own event, and was inspected).
func exited(running *kubecontainer.ContainerState, p pending) *kubecontainer.ContainerState {
	st := *running
	st.Running, st.Status, st.ExitCode, st.FinishedAt, st.IP = false, "exited", p.exitCode, p.finished, ""
	return &st
}

// noteLogPath has a container's log linked the first time it is seen with
// a log file.
func (r *Relister) noteLogPath(prev, st *kubecontainer.ContainerState) {
	if r.logs != nil && st.LogPath != "" && (prev == nil || prev.LogPath == "") {
		r.logs.Link(st)
	}
}

func podUID(st *kubecontainer.ContainerState) types.UID {
	return types.UID(st.Labels[kubecontainer.LabelPodUID])
}

// addTo appends a container to its pod's state in pods, making the state if
// it is the pod's first.
func addTo(pods map[types.UID]*kubecontainer.PodState, st *kubecontainer.ContainerState) {
	uid := podUID(st)
	pod := pods[uid]
	if pod == nil {
		pod = &kubecontainer.PodState{UID: uid, Name: st.Labels[kubecontainer.LabelPodName], Namespace: st.Labels[kubecontainer.LabelPodNamespace]}
		pods[uid] = pod
	}
	pod.Containers = append(pod.Containers, st)
}

func keys(set map[types.UID]bool) []types.UID {
	out := make([]types.UID, 0, len(set))
	for uid := range set {
		out = append(out, uid)
	}
	return out
}

// maxParallelInspects bounds the inspects of one relist: after a burst of
// pods, hundreds of new containers are inspected at once, and one at a time
// would keep the cache (and every worker waiting on it) behind for seconds.
const maxParallelInspects = 8

// inspectChanged inspects the listed containers that are new, changed
// running state or were named by an event, but for those the agent is
// starting and Docker does not list running yet. A container gone since the
// list maps to nil.
func (r *Relister) inspectChanged(ctx context.Context, list []kubecontainer.Container, evented map[string]pending) (map[string]*kubecontainer.ContainerState, error) {
	var todo []string
	r.mu.Lock()
	for _, c := range list {
		_, ev := evented[c.ID]
		if r.starting[c.ID] && !ev && !c.Running {
			// Listed running, its start is done in Docker (the start call
			// has yet to return to the agent): a client that saw it
			// running may ask for it (an exec) before its start event.
			continue
		}
		if st := r.known[c.ID]; st == nil || st.Running != c.Running || ev {
			todo = append(todo, c.ID)
		}
	}
	r.mu.Unlock()
	return r.inspect(ctx, todo)
}

// inspect inspects the containers, maxParallelInspects at a time. One gone
// or not the agent's maps to nil.
func (r *Relister) inspect(ctx context.Context, todo []string) (map[string]*kubecontainer.ContainerState, error) {
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
			case err == nil && d.Labels[kubecontainer.LabelOwner] != r.node:
				// Another node's (Refresh, or an event stream that did
				// not filter): not ours to manage.
			case err == nil:
				var perr error
				if st, perr = containerState(d); perr != nil {
					klog.V(4).Infof("Relist: skipping container %s: %v", d.Name, perr)
				}
				r.keepUser(st)
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

// keepUser keeps the identity a container's process ran with once it has
// stopped (only a running process shows it), as a CRI runtime's container
// status keeps it.
func (r *Relister) keepUser(st *kubecontainer.ContainerState) {
	if st == nil || st.User != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev := r.known[st.ID]; prev != nil {
		st.User = prev.User
	}
}

// containerState converts an inspected container; one without the agent's
// name or pod labels is not ours to manage.
func containerState(d *kubecontainer.ContainerDetail) (*kubecontainer.ContainerState, error) {
	n, err := kubecontainer.ParseName(d.Name)
	if err != nil {
		return nil, err
	}
	if d.Labels[kubecontainer.LabelPodUID] == "" {
		return nil, errors.New("no pod UID label")
	}
	return &kubecontainer.ContainerState{
		ID:           d.ID,
		RuntimeName:  d.Name,
		Name:         n.Container,
		Hash:         n.Hash,
		SpecHash:     d.Labels[kubecontainer.LabelSpecHash],
		RestartCount: kubecontainer.ParseRestartCount(d.Labels),
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
		ImageRef:     d.ImageRef,
		IP:           d.IP,
		LogPath:      d.LogPath,
		LayerPath:    d.LayerPath,
		Labels:       d.Labels,
		Resources:    &kubecontainer.Resources{CPUShares: d.CPUShares, CPUQuota: d.CPUQuota, CPUPeriod: d.CPUPeriod, Memory: d.Memory},
		User:         d.User,
	}, nil
}

// observe records a completed relist in the kubelet's PLEG metrics and
// counts the pods and containers it found.
func (r *Relister) observe(start time.Time, pods map[types.UID]*kubecontainer.PodState) {
	m := r.metrics
	m.PLEGRelistDuration.Observe(r.clock.Since(start).Seconds())
	if !r.last.IsZero() {
		m.PLEGRelistInterval.Observe(start.Sub(r.last).Seconds())
	}
	r.last = start
	m.PLEGLastSeen.Set(float64(r.clock.Now().Unix()))
	r.count(pods)
}

// count sets the gauges of running pods and containers by state.
func (r *Relister) count(pods map[types.UID]*kubecontainer.PodState) {
	m := r.metrics
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
