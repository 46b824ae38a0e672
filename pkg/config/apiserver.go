package config

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// APIServerSource is the pods a Kubernetes API server binds to this node
// (spec.nodeName), from a list and watch (client-go's informer: it lists
// again after a watch error or compaction, and what runs is left alone
// meanwhile). Every change sends the merger the complete set, spaced by
// at least batch so a burst of bindings is one merge.
type APIServerSource struct {
	node  string
	sink  *Merger
	batch time.Duration
	inf   cache.SharedIndexInformer

	changed chan struct{} // cap 1: poked on every change the watch brings, for Changed's reader

	mu      sync.Mutex
	invalid map[types.UID]string // pods the agent cannot run, and why

	// lastValid is each pod's last spec the agent could run, so that an
	// update it cannot run (an ephemeral container asking for what the
	// agent lacks) leaves the pod running as it was rather than stopping
	// it. Owned by Run's goroutine.
	lastValid map[types.UID]v1.PodSpec
}

// apiBatch spaces the snapshots of a burst of changes.
const apiBatch = 100 * time.Millisecond

// NewAPIServerSource watches the pods bound to node.
func NewAPIServerSource(client kubernetes.Interface, node string, m *Merger) *APIServerSource {
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "pods", v1.NamespaceAll,
		fields.OneTermEqualSelector("spec.nodeName", node))
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	return &APIServerSource{node: node, sink: m, batch: apiBatch, inf: inf, invalid: map[types.UID]string{}, changed: make(chan struct{}, 1)}
}

// Run lists and watches until ctx ends.
func (s *APIServerSource) Run(ctx context.Context) {
	changed := make(chan struct{}, 1)
	poke := func(any) {
		for _, ch := range []chan struct{}{changed, s.changed} {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if _, err := s.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) }, DeleteFunc: poke,
	}); err != nil {
		klog.Errorf("API server source: %v", err)
		return
	}
	_ = s.inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		s.sink.SetError(api.SourceAPIServer, fmt.Errorf("list/watch pods: %w", err))
	})
	done := make(chan struct{})
	go func() { defer close(done); s.inf.RunWithContext(ctx) }()
	defer func() { <-done }()
	if !cache.WaitForCacheSync(ctx.Done(), s.inf.HasSynced) {
		return
	}
	for {
		s.send(ctx)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		select { // let a burst settle
		case <-ctx.Done():
			return
		case <-time.After(s.batch):
		}
	}
}

// send gives the merger the pods the informer holds, as the agent runs
// them: mirror pods left out, status and write bookkeeping dropped (a
// status the agent wrote must not make the pod look changed), defaults set
// and validated; a pod that fails validation is reported by Invalid and
// left out, or, if an earlier spec of it was valid, runs on with that spec
// (and its new metadata: a deletion still stops it).
func (s *APIServerSource) send(ctx context.Context) {
	objs := s.inf.GetStore().List()
	pods := make([]*v1.Pod, 0, len(objs))
	invalid := map[types.UID]string{}
	valid := make(map[types.UID]v1.PodSpec, len(objs))
	for _, o := range objs {
		p := o.(*v1.Pod)
		if _, mirror := p.Annotations[api.MirrorAnnotation]; mirror {
			continue
		}
		cp := p.DeepCopy()
		cp.Status, cp.ResourceVersion, cp.ManagedFields = v1.PodStatus{Conditions: gateConditions(p)}, "", nil
		api.SetDefaults(cp, s.node, api.SourceAPIServer)
		if errs, _ := api.Validate(cp); len(errs) > 0 {
			invalid[p.UID] = errs.ToAggregate().Error()
			last, ok := s.lastValid[p.UID]
			if !ok {
				continue
			}
			cp.Spec = last
			if errs, _ := api.Validate(cp); len(errs) > 0 {
				continue
			}
		}
		valid[p.UID] = cp.Spec
		pods = append(pods, cp)
	}
	s.lastValid = valid
	sort.Slice(pods, func(i, j int) bool { return api.Key(pods[i]) < api.Key(pods[j]) })
	s.mu.Lock()
	for uid, msg := range invalid {
		if s.invalid[uid] != msg {
			klog.Errorf("API server pod (uid %s) cannot run here: %s", uid, msg)
		}
	}
	s.invalid = invalid
	s.mu.Unlock()
	s.sink.SetError(api.SourceAPIServer, nil)
	s.sink.Set(ctx, api.SourceAPIServer, pods)
}

// gateConditions are the pod's conditions its readiness gates name: the
// only part of the API server's status the agent runs the pod by (its
// Ready condition waits for them). They change rarely, so keeping them
// does not make every status write look like a change of the pod.
func gateConditions(p *v1.Pod) []v1.PodCondition {
	var out []v1.PodCondition
	for _, g := range p.Spec.ReadinessGates {
		for _, c := range p.Status.Conditions {
			if c.Type == g.ConditionType {
				c.LastProbeTime, c.LastTransitionTime = metav1.Time{}, metav1.Time{}
				out = append(out, c)
			}
		}
	}
	return out
}

// Pod returns the API server's pod of that UID, as last seen.
func (s *APIServerSource) Pod(namespace, name string, uid types.UID) (*v1.Pod, bool) {
	o, ok, err := s.inf.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	p := o.(*v1.Pod)
	if uid != "" && p.UID != uid {
		return nil, false
	}
	return p, true
}

// Pods returns every pod the API server binds to the node, mirror pods
// included, as last seen. Read only.
func (s *APIServerSource) Pods() []*v1.Pod {
	objs := s.inf.GetStore().List()
	out := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*v1.Pod))
	}
	return out
}

// Invalid says why the agent cannot run a pod it was given, if so.
func (s *APIServerSource) Invalid(uid types.UID) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msg, ok := s.invalid[uid]
	return msg, ok
}

// Changed is poked (one slot, never blocking) when the watch brings a
// change: for one reader that acts on the API server's pods (the status
// and mirror writer).
func (s *APIServerSource) Changed() <-chan struct{} { return s.changed }

// Synced reports whether the first list has arrived.
func (s *APIServerSource) Synced() bool { return s.inf.HasSynced() }
