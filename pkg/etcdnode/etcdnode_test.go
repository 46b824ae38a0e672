package etcdnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/await"
)

func freeURL(t *testing.T) url.URL {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}

// etcdClient starts a real etcd (embedded) and connects to it.
func etcdClient(t *testing.T) *clientv3.Client {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cu, pu := freeURL(t), freeURL(t)
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	cfg.LogLevel = "error"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	<-e.Server.ReadyNotify()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{cu.String()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func holder(id string) Holder { return Holder{InstanceID: id, Hostname: "host-" + id, BootID: "boot"} }

func get(t *testing.T, c *clientv3.Client, key string) (string, int64) {
	t.Helper()
	resp, err := c.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].Lease
}

func TestLeaseClaim(t *testing.T) {
	c := etcdClient(t)
	ctx := context.Background()
	a := NewLease(c, "/hosts", "n1", holder("a"), 10*time.Second, 2*time.Second)
	if err := a.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	val, leaseA := get(t, c, "/hosts/n1/lease")
	if !strings.Contains(val, `"instanceID":"a"`) || leaseA == 0 {
		t.Fatalf("lease key %q (lease %d)", val, leaseA)
	}

	// Another instance: refused, naming the holder.
	b := NewLease(c, "/hosts", "n1", holder("b"), 10*time.Second, 2*time.Second)
	err := b.Claim(ctx)
	if taken, ok := err.(*TakenError); !ok || taken.Holder.InstanceID != "a" || !strings.Contains(err.Error(), "host-a") {
		t.Fatalf("second instance: %v, want a TakenError naming host-a", err)
	}
	if held, _ := b.Held(); held {
		t.Error("the refused lease says it is held")
	}

	// The same instance after a restart takes its key over; its old lease
	// is revoked (the key stays, on the new lease).
	a2 := NewLease(c, "/hosts", "n1", holder("a"), 10*time.Second, 2*time.Second)
	if err := a2.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	_, leaseA2 := get(t, c, "/hosts/n1/lease")
	if leaseA2 == leaseA || leaseA2 == 0 {
		t.Errorf("restarted instance: lease %d, want a new one (was %d)", leaseA2, leaseA)
	}
	if ttl, _ := c.TimeToLive(ctx, clientv3.LeaseID(leaseA)); ttl.TTL > 0 {
		t.Errorf("the old lease lives on (TTL %d)", ttl.TTL)
	}
}

// A lease that expired (etcd out of reach, here: revoked behind the
// agent's back) is claimed again by Run; one taken by another agent
// meanwhile is not, and writes stop.
func TestLeaseRunReclaims(t *testing.T) {
	c := etcdClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	l := NewLease(c, "/hosts", "n1", holder("a"), 4*time.Second, 200*time.Millisecond)
	if err := l.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); l.Run(ctx) }()
	_, first := get(t, c, "/hosts/n1/lease")
	if _, err := c.Revoke(ctx, clientv3.LeaseID(first)); err != nil {
		t.Fatal(err)
	}
	// Run renews on the real clock, against a real etcd: only etcd can tell.
	await.True(t, "the lease claimed again", func() bool { _, id := get(t, c, "/hosts/n1/lease"); return id != 0 && id != first })

	// Now someone else takes it while this agent's lease is gone.
	_, cur := get(t, c, "/hosts/n1/lease")
	_, _ = c.Revoke(ctx, clientv3.LeaseID(cur))
	other, _ := json.Marshal(holder("b"))
	if _, err := c.Put(ctx, "/hosts/n1/lease", string(other)); err != nil {
		t.Fatal(err)
	}
	await.True(t, "the name seen taken", func() bool { held, taken := l.Held(); return !held && taken != nil && taken.Holder.InstanceID == "b" })
	if val, _ := get(t, c, "/hosts/n1/lease"); !strings.Contains(val, `"instanceID":"b"`) {
		t.Errorf("the agent overwrote the new holder's key: %s", val)
	}
}

type fakePods struct {
	mu   sync.Mutex
	pods []*v1.Pod
}

func (f *fakePods) StatusChanged() <-chan struct{} { return nil }

func (f *fakePods) GetPods() []*v1.Pod {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*v1.Pod(nil), f.pods...)
}

func (f *fakePods) set(pods ...*v1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods = pods
}

func pod(name string, phase v1.PodPhase) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("u-" + name)}}
	p.Spec.Containers = []v1.Container{{Name: "c", Image: "i", Env: []v1.EnvVar{{Name: "SECRET", Value: "hunter2"}}}}
	p.Status.Phase = phase
	return p
}

func TestPodWriter(t *testing.T) {
	c := etcdClient(t)
	ctx := context.Background()
	l := NewLease(c, "/hosts", "n1", holder("a"), 10*time.Second, time.Second)
	if err := l.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	// A key left by a pod that went while the agent was away.
	if _, err := c.Put(ctx, "/hosts/n1/pods/default/gone", "{}"); err != nil {
		t.Fatal(err)
	}
	src := &fakePods{}
	src.set(pod("web", v1.PodPending))
	w := NewPodWriter(c, l, "/hosts", "n1", src, 100*time.Millisecond)
	clk := testingclock.NewFakeClock(time.Now())
	w.clock = clk
	if err := w.sync(ctx); err != nil {
		t.Fatal(err)
	}
	// A new pod still starting is reported a period after it was first
	// seen (its first report is then usually Running).
	if v, _ := get(t, c, "/hosts/n1/pods/default/web"); v != "" {
		t.Errorf("a pod seen Pending for the first time was reported at once: %s", v)
	}
	clk.Step(199 * time.Millisecond)
	if err := w.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(t, c, "/hosts/n1/pods/default/web"); v != "" {
		t.Errorf("a pod Pending for less than two periods was reported: %s", v)
	}
	clk.Step(time.Millisecond)
	if err := w.sync(ctx); err != nil {
		t.Fatal(err)
	}
	val, _ := get(t, c, "/hosts/n1/pods/default/web")
	var r PodReport
	if err := json.Unmarshal([]byte(val), &r); err != nil || r.Status.Phase != v1.PodPending || r.SpecHash == "" {
		t.Fatalf("report %q: %v", val, err)
	}
	if strings.Contains(val, "hunter2") {
		t.Error("the spec's env values were copied into etcd")
	}
	if v, _ := get(t, c, "/hosts/n1/pods/default/gone"); v != "" {
		t.Error("the stale key of a gone pod was kept")
	}

	// Unchanged: no write (the revision stays).
	rev := func() int64 { r, _ := c.Get(ctx, "/hosts/n1/pods/default/web"); return r.Kvs[0].ModRevision }
	before := rev()
	if err := w.sync(ctx); err != nil || rev() != before {
		t.Errorf("an unchanged status was rewritten (%v)", err)
	}
	src.set(pod("web", v1.PodRunning))
	if err := w.sync(ctx); err != nil || rev() == before {
		t.Errorf("a changed status was not written (%v)", err)
	}

	// Many pods: batched under etcd's limits.
	var many []*v1.Pod
	for i := range 150 {
		many = append(many, pod(fmt.Sprintf("p%03d", i), v1.PodRunning))
	}
	src.set(many...)
	if err := w.sync(ctx); err != nil {
		t.Fatal(err)
	}
	resp, _ := c.Get(ctx, "/hosts/n1/pods/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if resp.Count != 150 {
		t.Errorf("%d pod keys, want 150 (web deleted)", resp.Count)
	}

	// Another holder now: the guarded write fails and nothing is written.
	other, _ := json.Marshal(holder("b"))
	if _, err := c.Put(ctx, "/hosts/n1/lease", string(other)); err != nil {
		t.Fatal(err)
	}
	src.set(pod("late", v1.PodRunning))
	if err := w.sync(ctx); err == nil {
		t.Error("a write under a lost lease succeeded")
	}
	if v, _ := get(t, c, "/hosts/n1/pods/default/late"); v != "" {
		t.Error("a pod key was written under another holder's name")
	}
	if held, _ := l.Held(); held {
		t.Error("the lease still says held after a failed guard")
	}
}

func TestNodeWriter(t *testing.T) {
	c := etcdClient(t)
	ctx := context.Background()
	l := NewLease(c, "/hosts", "n1", holder("a"), 10*time.Second, time.Second)
	if err := l.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	ready := v1.ConditionTrue
	build := func() *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: ready}}
		return n
	}
	w := NewNodeWriter(c, l, "/hosts", "n1", build, time.Second)
	clk := testingclock.NewFakeClock(time.Now())
	w.clock = clk
	rev := func() int64 {
		r, _ := c.Get(ctx, "/hosts/n1/node")
		if len(r.Kvs) == 0 {
			return 0
		}
		return r.Kvs[0].ModRevision
	}
	if err := w.sync(ctx); err != nil || rev() == 0 {
		t.Fatalf("node not written: %v", err)
	}
	first := rev()
	clk.Step(2 * time.Second) // a new heartbeat time, same content
	if err := w.sync(ctx); err != nil || rev() != first {
		t.Errorf("a heartbeat alone rewrote the node (%v)", err)
	}
	clk.Step(nodeRefresh)
	if err := w.sync(ctx); err != nil || rev() == first {
		t.Errorf("the node was not rewritten after %v (%v)", nodeRefresh, err)
	}
	first = rev()
	ready = v1.ConditionFalse
	if err := w.sync(ctx); err != nil || rev() == first {
		t.Fatalf("a condition change was not written (%v)", err)
	}
	var n v1.Node
	val, _ := get(t, c, "/hosts/n1/node")
	_ = json.Unmarshal([]byte(val), &n)
	cond := n.Status.Conditions[0]
	if cond.Status != v1.ConditionFalse || cond.LastTransitionTime.IsZero() || cond.LastHeartbeatTime.Before(&cond.LastTransitionTime) {
		t.Errorf("condition %+v", cond)
	}
}
