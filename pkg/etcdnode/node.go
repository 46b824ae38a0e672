package etcdnode

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// nodeRefresh is the longest a Node goes unwritten: its heartbeat times say
// the agent is alive even when nothing changed.
const nodeRefresh = 5 * time.Minute

// NodeWriter keeps <node>/node equal to the Node build returns: written at
// start, whenever its content changes (heartbeat times aside), and at least
// every nodeRefresh.
type NodeWriter struct {
	c      *clientv3.Client
	lease  *Lease
	key    string
	build  func() *v1.Node
	period time.Duration // how often build is asked
	clock  clock.Clock

	last      *v1.Node  // as last written; owned by Run
	lastAt    time.Time // when
	lastGen   int
	condSince map[v1.NodeConditionType]condState // transitions; owned by Run
}

type condState struct {
	status v1.ConditionStatus
	since  metav1.Time
}

// NewNodeWriter writes node's Node, built by build, checking every period.
func NewNodeWriter(c *clientv3.Client, lease *Lease, prefix, node string, build func() *v1.Node, period time.Duration) *NodeWriter {
	return &NodeWriter{c: c, lease: lease, key: NodeKey(prefix, node) + "/node", build: build, period: period,
		clock: clock.RealClock{}, condSince: map[v1.NodeConditionType]condState{}}
}

// Run writes until ctx ends.
func (w *NodeWriter) Run(ctx context.Context) {
	t := time.NewTicker(w.period)
	defer t.Stop()
	for {
		if err := w.sync(ctx); err != nil && ctx.Err() == nil {
			klog.V(2).Infof("Node to etcd: %v (retrying)", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *NodeWriter) sync(ctx context.Context) error {
	guard, gen, ok := w.lease.guard()
	if !ok {
		return nil
	}
	n := w.build()
	now := metav1.NewTime(w.clock.Now().UTC().Truncate(time.Second))
	for i := range n.Status.Conditions {
		c := &n.Status.Conditions[i]
		st, seen := w.condSince[c.Type]
		if !seen || st.status != c.Status {
			st = condState{status: c.Status, since: now}
			w.condSince[c.Type] = st
		}
		c.LastTransitionTime, c.LastHeartbeatTime = st.since, now
	}
	if gen == w.lastGen && w.last != nil && w.clock.Since(w.lastAt) < nodeRefresh && sameButHeartbeat(w.last, n) {
		return nil
	}
	data, err := json.Marshal(n)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	resp, err := w.c.Txn(tctx).If(guard).Then(clientv3.OpPut(w.key, string(data))).Commit()
	cancel()
	if err != nil {
		return fmt.Errorf("write %s: %w", w.key, err)
	}
	if !resp.Succeeded {
		w.lease.lost(gen)
		return fmt.Errorf("write %s: the node lease is no longer this agent's", w.key)
	}
	w.last, w.lastAt, w.lastGen = n, w.clock.Now(), gen
	return nil
}

// sameButHeartbeat compares two Nodes ignoring the conditions' heartbeat
// times.
func sameButHeartbeat(a, b *v1.Node) bool {
	strip := func(n *v1.Node) *v1.Node {
		c := n.DeepCopy()
		for i := range c.Status.Conditions {
			c.Status.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
		return c
	}
	return reflect.DeepEqual(strip(a), strip(b))
}
