package etcdnode

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// PodReport is what a pod's status key holds: the pod's identity, its
// status and the hash of the spec it runs. The spec itself is not copied:
// its environment values must not end up in etcd.
type PodReport struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	SpecHash string            `json:"specHash"`
	Status   v1.PodStatus      `json:"status"`
}

// Batch bounds, below etcd's defaults (128 operations and 1.5 MiB per
// request).
const (
	maxOpsPerTxn   = 64
	maxBytesPerTxn = 512 << 10
)

// firstReportPeriods is how many periods a new pod that is still Pending
// waits for its first report (a container start takes about one).
const firstReportPeriods = 2

// PodSource gives the node's pods with their current status, and says when
// one changed.
type PodSource interface {
	GetPods() []*v1.Pod
	StatusChanged() <-chan struct{}
}

// PodWriter keeps <node>/pods/<ns>/<name> equal to the pods' reports: when
// a status changes (and at least every period) it writes what changed since
// the last write and deletes the keys of pods that are gone, in rounds at
// least a period apart (so at most one write per pod per period, however
// often its status changes). It reads statuses as the API does, so it never
// blocks a pod worker or the sync loop.
type PodWriter struct {
	c      *clientv3.Client
	lease  *Lease
	prefix string // <prefix>/<node>/pods/
	pods   PodSource
	period time.Duration
	clock  clock.Clock // of the first reports' delay

	written   map[string][]byte    // key → value as last written; owned by Run
	gen       int                  // the lease generation written was known under
	firstSeen map[string]time.Time // when each pod not yet reported was first seen
}

// NewPodWriter writes the reports of pods under node's keys every period.
func NewPodWriter(c *clientv3.Client, lease *Lease, prefix, node string, pods PodSource, period time.Duration) *PodWriter {
	return &PodWriter{c: c, lease: lease, prefix: NodeKey(prefix, node) + "/pods/", pods: pods, period: period,
		clock: clock.RealClock{}, firstSeen: map[string]time.Time{}}
}

// Run writes until ctx ends.
func (w *PodWriter) Run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.pods.StatusChanged():
		}
		if wait := w.period - time.Since(last); wait > 0 {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		last = time.Now()
		if err := w.sync(ctx); err != nil && ctx.Err() == nil {
			klog.V(2).Infof("Pod status to etcd: %v (retrying)", err)
		}
		t.Reset(w.period)
	}
}

// sync writes one round. After a new claim or an outage (the lease's
// generation changed) it first reads what etcd holds, so stale keys are
// deleted and unchanged ones not rewritten.
func (w *PodWriter) sync(ctx context.Context) error {
	guard, gen, ok := w.lease.guard()
	if !ok {
		return nil
	}
	if w.written == nil || gen != w.gen {
		if err := w.reload(ctx, gen); err != nil {
			return err
		}
	}
	want := w.reports()
	var keys []string
	for k, v := range want {
		if !bytes.Equal(w.written[k], v) {
			keys = append(keys, k)
		}
	}
	for k := range w.written {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return w.write(ctx, guard, gen, want, keys)
}

// reload reads what etcd holds under the prefix as written, known under
// the lease's generation gen.
func (w *PodWriter) reload(ctx context.Context, gen int) error {
	rctx, cancel := context.WithTimeout(ctx, w.period*5)
	resp, err := w.c.Get(rctx, w.prefix, clientv3.WithPrefix())
	cancel()
	if err != nil {
		return fmt.Errorf("read %s: %w", w.prefix, err)
	}
	w.written, w.gen = map[string][]byte{}, gen
	for _, kv := range resp.Kvs {
		w.written[string(kv.Key)] = kv.Value
	}
	return nil
}

// reports are the keys and values the pods' reports should have now.
func (w *PodWriter) reports() map[string][]byte {
	want := map[string][]byte{}
	now := w.clock.Now()
	seen := map[string]bool{}
	for _, p := range w.pods.GetPods() {
		key := w.prefix + p.Namespace + "/" + p.Name
		seen[key] = true
		if _, reported := w.written[key]; !reported && p.Status.Phase == v1.PodPending {
			// A new pod's first report waits up to firstReportDelay
			// while it starts: its key then usually begins at Running,
			// and the one write a period allows is not spent on a
			// passing state.
			first, ok := w.firstSeen[key]
			if !ok {
				w.firstSeen[key] = now
				continue
			}
			if now.Sub(first) < firstReportPeriods*w.period {
				continue
			}
		}
		data, err := json.Marshal(Report(p))
		if err != nil {
			continue
		}
		want[key] = data
	}
	for key := range w.firstSeen {
		if _, reported := w.written[key]; reported || !seen[key] {
			delete(w.firstSeen, key)
		}
	}
	return want
}

// write puts the keys' wanted values (or deletes the keys not wanted) in
// transactions guarded by the node lease, within the batch bounds.
func (w *PodWriter) write(ctx context.Context, guard clientv3.Cmp, gen int, want map[string][]byte, keys []string) error {
	var ops []clientv3.Op
	size := 0
	for _, k := range keys {
		v, keep := want[k]
		op := clientv3.OpDelete(k)
		if keep {
			op = clientv3.OpPut(k, string(v))
		}
		if len(ops) == maxOpsPerTxn || (len(ops) > 0 && size+len(k)+len(v) > maxBytesPerTxn) {
			if err := w.commit(ctx, guard, gen, want, ops); err != nil {
				return err
			}
			ops, size = ops[:0], 0
		}
		ops = append(ops, op)
		size += len(k) + len(v)
	}
	return w.commit(ctx, guard, gen, want, ops)
}

// commit runs one transaction of ops and records what it wrote.
func (w *PodWriter) commit(ctx context.Context, guard clientv3.Cmp, gen int, want map[string][]byte, ops []clientv3.Op) error {
	if len(ops) == 0 {
		return nil
	}
	tctx, cancel := context.WithTimeout(ctx, w.period*5)
	resp, err := w.c.Txn(tctx).If(guard).Then(ops...).Commit()
	cancel()
	if err != nil {
		w.written = nil // what etcd holds is no longer known
		return fmt.Errorf("write pod status: %w", err)
	}
	if !resp.Succeeded {
		w.lease.lost(gen)
		w.written = nil
		return fmt.Errorf("write pod status: the node lease is no longer this agent's")
	}
	for _, op := range ops {
		k := string(op.KeyBytes())
		if op.IsDelete() {
			delete(w.written, k)
		} else {
			w.written[k] = want[k]
		}
	}
	return nil
}

// Report is the pod's status report.
func Report(p *v1.Pod) PodReport {
	meta := metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, Labels: p.Labels,
		Annotations: p.Annotations, CreationTimestamp: p.CreationTimestamp}
	return PodReport{Metadata: meta, SpecHash: specHash(&p.Spec), Status: p.Status}
}

func specHash(spec *v1.PodSpec) string {
	data, _ := json.Marshal(spec)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
