package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/component-helpers/apimachinery/lease"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/backoff"
)

// NodeConfig says how the Node is registered and reported.
type NodeConfig struct {
	Name string
	// Register creates the Node if it is missing (--register-node).
	Register bool
	// Labels and Taints are set when the Node is created
	// (--node-labels, --register-with-taints).
	Labels map[string]string
	Taints []v1.Taint
	// UpdateFrequency is how often the status is computed and, if it
	// changed, patched; ReportFrequency how often it is patched anyway
	// (--node-status-update-frequency, --node-status-report-frequency).
	UpdateFrequency, ReportFrequency time.Duration
	// LeaseDuration is the Lease's duration in seconds; it is renewed
	// every quarter of it, as the kubelet renews it.
	LeaseDuration int32
	// Port is the agent's full-access port, in daemonEndpoints.
	Port int32
	// Server names the API server in errors.
	Server string
	// PodCIDRs, if set, is given the Node's spec.podCIDRs (allocated by
	// kube-controller-manager --allocate-node-cidrs) each time the Node is
	// read or seen to change: at registration, after each status update,
	// and from the watch. It may be called from two goroutines at once.
	PodCIDRs func([]string)
}

// registerRetry is the registration back-off, as the kubelet's: 100 ms
// doubling to 7 s, started over once a sync succeeds.
var registerRetry = backoff.Policy{Initial: 100 * time.Millisecond, Max: 7 * time.Second}

// NodeReporter registers the Node and keeps its status: computed every
// update period by build (one computation for every place the Node is
// written), patched when it changed or a report period passed. A Node an
// operator deletes is registered again at the next update.
type NodeReporter struct {
	client kubernetes.Interface
	cfg    NodeConfig
	build  func() *v1.Node
	clock  clock.Clock
	events record.EventRecorder // the Node's events; nil records none

	uid atomic.Value // types.UID: the registered Node's, for the Lease's owner

	// Owned by Run.
	last       *v1.Node // as the API server returned it after the last write
	lastReport time.Time
	lastErr    string
}

// NewNodeReporter reports the Node build computes.
func NewNodeReporter(client kubernetes.Interface, cfg NodeConfig, build func() *v1.Node) *NodeReporter {
	return &NodeReporter{client: client, cfg: cfg, build: build, clock: clock.RealClock{}}
}

// RecordEvents sends the Node's events to rec, as the kubelet's: Starting,
// then one per condition the agent owns as it is first set and each time
// its status changes (NodeReady, NodeHasSufficientMemory...). Call it
// before Run.
func (r *NodeReporter) RecordEvents(rec record.EventRecorder) { r.events = rec }

// nodeRef is the Node as the kubelet names it in events: its UID is its name,
// so events written before registration (Starting) still find it.
func (r *NodeReporter) nodeRef() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: r.cfg.Name, UID: types.UID(r.cfg.Name)}
}

// Run registers and reports until ctx ends, and renews the Lease.
func (r *NodeReporter) Run(ctx context.Context) {
	if r.events != nil {
		r.events.Event(r.nodeRef(), v1.EventTypeNormal, "Starting", "Starting kubelet.")
	}
	renew := time.Duration(r.cfg.LeaseDuration) * time.Second / 4
	leases := lease.NewController(r.clock, r.client, r.cfg.Name, r.cfg.LeaseDuration, nil, renew,
		r.cfg.Name, v1.NamespaceNodeLease, r.setOwner)
	done := make(chan struct{})
	go func() { defer close(done); leases.Run(ctx) }()
	defer func() { <-done }()
	// The Node is watched (the kubelet's node informer), so one an
	// operator deletes is registered again at once, without a GET per
	// update period.
	deleted := make(chan struct{}, 1)
	nodes := cache.NewSharedIndexInformer(cache.NewListWatchFromClient(r.client.CoreV1().RESTClient(), "nodes", "",
		fields.OneTermEqualSelector("metadata.name", r.cfg.Name)), &v1.Node{}, 0, cache.Indexers{})
	_, _ = nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(any) {
		select {
		case deleted <- struct{}{}:
		default:
		}
	}, AddFunc: func(obj any) {
		if n, ok := obj.(*v1.Node); ok {
			r.sawNode(n)
		}
	}, UpdateFunc: func(_, obj any) {
		if n, ok := obj.(*v1.Node); ok {
			r.sawNode(n)
		}
	}})
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); nodes.RunWithContext(ctx) }()
	defer func() { <-watchDone }()

	retry := backoff.New[backoff.One](registerRetry, r.clock)
	for {
		wait := r.cfg.UpdateFrequency
		if err := r.sync(ctx); err != nil {
			r.logError(err)
			if r.last == nil { // not registered: back off
				wait = retry.Next(backoff.One{}, r.clock.Now())
			}
		} else {
			retry.Reset(backoff.One{})
			if r.lastErr != "" {
				klog.Infof("Node %q: reported to %s again", r.cfg.Name, r.cfg.Server)
				r.lastErr = ""
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-r.clock.After(wait):
		case <-deleted:
			if r.last != nil {
				klog.Warningf("Node %q was deleted from %s; registering it again", r.cfg.Name, r.cfg.Server)
				r.last = nil
			}
		}
	}
}

func (r *NodeReporter) logError(err error) {
	if msg := err.Error(); msg != r.lastErr {
		klog.Errorf("Node %q: %v", r.cfg.Name, err)
		r.lastErr = msg
	}
}

// sync registers the Node if it is not, then reports its status.
func (r *NodeReporter) sync(ctx context.Context) error {
	if r.last == nil {
		if !r.cfg.Register {
			n, err := r.client.CoreV1().Nodes().Get(ctx, r.cfg.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("read the Node from %s (--register-node=false): %w", r.cfg.Server, err)
			}
			r.registered(n)
		} else if err := r.register(ctx); err != nil {
			return fmt.Errorf("register with %s: %w", r.cfg.Server, err)
		}
	}
	return r.update(ctx)
}

func (r *NodeReporter) registered(n *v1.Node) {
	r.last = n
	r.uid.Store(n.UID)
	r.sawNode(n)
}

// sawNode hands the Node's pod CIDRs to cfg.PodCIDRs (spec.podCIDR alone on
// a Node written before podCIDRs existed).
func (r *NodeReporter) sawNode(n *v1.Node) {
	if r.cfg.PodCIDRs == nil {
		return
	}
	cidrs := n.Spec.PodCIDRs
	if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
		cidrs = []string{n.Spec.PodCIDR}
	}
	if len(cidrs) > 0 {
		r.cfg.PodCIDRs(cidrs)
	}
}

// controllerManagedAttachDetach tells the attach/detach controller that it
// attaches this node's volumes.
const controllerManagedAttachDetach = "volumes.kubernetes.io/controller-managed-attach-detach"

// register creates the Node; one that exists already (the agent restarted)
// is adopted, its default labels reconciled as the kubelet does.
func (r *NodeReporter) register(ctx context.Context) error {
	node := r.build()
	defaults := node.Labels
	node.Labels = map[string]string{}
	for k, v := range r.cfg.Labels {
		node.Labels[k] = v
	}
	for k, v := range defaults {
		node.Labels[k] = v
	}
	node.Spec.Taints = r.cfg.Taints
	// Volumes that need attaching are attached by the control plane's
	// attach/detach controller (its VolumeAttachments), as for a kubelet
	// with --enable-controller-attach-detach (its default).
	node.Annotations = map[string]string{controllerManagedAttachDetach: "true"}
	node.Status = v1.NodeStatus{} // written by the first update, with its times
	created, err := r.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		klog.Infof("Node %q registered with %s", r.cfg.Name, r.cfg.Server)
		r.registered(created)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing, err := r.client.CoreV1().Nodes().Get(ctx, r.cfg.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	stale := map[string]string{}
	for k, v := range defaults {
		if existing.Labels[k] != v {
			stale[k] = v
		}
	}
	if len(stale) > 0 || existing.Annotations[controllerManagedAttachDetach] != "true" {
		meta := map[string]any{"annotations": map[string]string{controllerManagedAttachDetach: "true"}}
		if len(stale) > 0 {
			meta["labels"] = stale
		}
		patch, _ := json.Marshal(map[string]any{"metadata": meta})
		if existing, err = r.client.CoreV1().Nodes().Patch(ctx, r.cfg.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("reconcile the labels of the existing Node: %w", err)
		}
	}
	klog.Infof("Node %q exists in %s: adopted", r.cfg.Name, r.cfg.Server)
	r.registered(existing)
	return nil
}

// update patches the status when it changed, or a report period passed.
func (r *NodeReporter) update(ctx context.Context) error {
	now := r.clock.Now()
	want := r.build()
	next := r.last.DeepCopy()
	next.Status.Capacity = want.Status.Capacity
	next.Status.Allocatable = want.Status.Allocatable
	next.Status.Addresses = want.Status.Addresses
	next.Status.NodeInfo = want.Status.NodeInfo
	next.Status.RuntimeHandlers = want.Status.RuntimeHandlers
	next.Status.Images = want.Status.Images
	next.Status.Features = want.Status.Features
	next.Status.DeclaredFeatures = want.Status.DeclaredFeatures
	next.Status.DaemonEndpoints.KubeletEndpoint.Port = r.cfg.Port
	for _, c := range want.Status.Conditions {
		setCondition(&next.Status, c, metav1.NewTime(now))
	}
	if apiequality.Semantic.DeepEqual(withoutHeartbeats(r.last.Status), withoutHeartbeats(next.Status)) &&
		now.Sub(r.lastReport) < r.cfg.ReportFrequency {
		return nil
	}
	for i := range next.Status.Conditions {
		if ours(next.Status.Conditions[i].Type) {
			next.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(now)
		}
	}
	updated, _, err := nodeutil.PatchNodeStatus(r.client.CoreV1(), types.NodeName(r.cfg.Name), r.last, next)
	if err != nil {
		// The helper does not wrap the API error: ask whether the Node
		// is gone (only when a patch failed).
		if _, gerr := r.client.CoreV1().Nodes().Get(ctx, r.cfg.Name, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
			klog.Warningf("Node %q was deleted from %s; registering it again", r.cfg.Name, r.cfg.Server)
			r.last = nil
			return r.sync(ctx)
		}
		return fmt.Errorf("update the node status in %s: %w", r.cfg.Server, err)
	}
	r.recordTransitions(r.last, updated)
	r.last, r.lastReport = updated, now
	r.sawNode(updated)
	return nil
}

// conditionEvents are the kubelet's event reasons for the conditions the
// agent owns: [status True, any other status].
var conditionEvents = map[v1.NodeConditionType][2]string{
	v1.NodeReady:          {"NodeReady", "NodeNotReady"},
	v1.NodeMemoryPressure: {"NodeHasInsufficientMemory", "NodeHasSufficientMemory"},
	v1.NodeDiskPressure:   {"NodeHasDiskPressure", "NodeHasNoDiskPressure"},
	v1.NodePIDPressure:    {"NodeHasInsufficientPID", "NodeHasSufficientPID"},
}

// recordTransitions records an event for each owned condition new in next
// or whose status differs from prev's: written, so a failed patch records
// nothing and its retry records once.
func (r *NodeReporter) recordTransitions(prev, next *v1.Node) {
	if r.events == nil {
		return
	}
	before := map[v1.NodeConditionType]v1.ConditionStatus{}
	for _, c := range prev.Status.Conditions {
		before[c.Type] = c.Status
	}
	for _, c := range next.Status.Conditions {
		reasons, ok := conditionEvents[c.Type]
		if old, seen := before[c.Type]; !ok || (seen && old == c.Status) {
			continue
		}
		reason := reasons[1]
		if c.Status == v1.ConditionTrue {
			reason = reasons[0]
		}
		r.events.Eventf(r.nodeRef(), v1.EventTypeNormal, reason, "Node %s status is now: %s", r.cfg.Name, reason)
	}
}

// ours are the conditions the agent owns; others (NetworkUnavailable, a
// controller's) are left as they are.
func ours(t v1.NodeConditionType) bool {
	switch t {
	case v1.NodeReady, v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure:
		return true
	}
	return false
}

// setCondition sets c in st, keeping its transition time while its status
// is unchanged.
func setCondition(st *v1.NodeStatus, c v1.NodeCondition, now metav1.Time) {
	for i := range st.Conditions {
		old := &st.Conditions[i]
		if old.Type != c.Type {
			continue
		}
		c.LastHeartbeatTime = old.LastHeartbeatTime
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = now
		}
		*old = c
		return
	}
	c.LastHeartbeatTime, c.LastTransitionTime = now, now
	st.Conditions = append(st.Conditions, c)
}

func withoutHeartbeats(st v1.NodeStatus) v1.NodeStatus {
	st.Conditions = append([]v1.NodeCondition(nil), st.Conditions...)
	for i := range st.Conditions {
		st.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
	return st
}

// NodeUID is the registered Node's UID ("" before registration).
func (r *NodeReporter) NodeUID() types.UID {
	uid, _ := r.uid.Load().(types.UID)
	return uid
}

// setOwner makes the Node the Lease's owner, so the Lease goes with it.
// Before the Node is known the Lease is written without one; the lease
// controller calls this again at its next renewal.
func (r *NodeReporter) setOwner(l *coordinationv1.Lease) error {
	uid := r.NodeUID()
	if uid == "" {
		return nil
	}
	for _, ref := range l.OwnerReferences {
		if ref.UID == uid {
			return nil
		}
	}
	l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: r.cfg.Name, UID: uid}}
	return nil
}
