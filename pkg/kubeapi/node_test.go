package kubeapi

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
)

func testNode(ready v1.ConditionStatus) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux"}},
		Status: v1.NodeStatus{
			Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "172.17.0.1"}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: ready, Reason: "KubeletReady"}},
		},
	}
}

func newReporter(t *testing.T, objs ...runtime.Object) (*NodeReporter, *fake.Clientset, *clocktesting.FakeClock, *v1.ConditionStatus) {
	t.Helper()
	c := fake.NewClientset(objs...)
	ready := v1.ConditionTrue
	r := NewNodeReporter(c, NodeConfig{Name: "n1", Register: true, Labels: map[string]string{"role": "x"},
		Taints:          []v1.Taint{{Key: "k", Value: "v", Effect: v1.TaintEffectNoSchedule}},
		UpdateFrequency: 10 * time.Second, ReportFrequency: 5 * time.Minute, Port: 10250, Server: "https://api"},
		func() *v1.Node { return testNode(ready) })
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	r.clock = clk
	return r, c, clk, &ready
}

func patches(c *fake.Clientset) int {
	n := 0
	for _, a := range c.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

// The status is patched when it changes or a report period passed, not
// at every update period; transition times move only with the status.
func TestNodeReporterPatchesOnChangeOrReportPeriod(t *testing.T) {
	r, c, clk, ready := newReporter(t)
	ctx := context.Background()
	if err := r.sync(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["role"] != "x" || n.Labels["kubernetes.io/hostname"] != "n1" || len(n.Spec.Taints) != 1 {
		t.Errorf("registered node labels %v taints %v", n.Labels, n.Spec.Taints)
	}
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 || len(n.Status.Conditions) != 1 {
		t.Errorf("status %+v", n.Status)
	}
	first := n.Status.Conditions[0].LastTransitionTime
	if patches(c) != 1 {
		t.Fatalf("%d status patches after registering, want 1", patches(c))
	}
	for _, step := range []struct {
		advance time.Duration
		ready   v1.ConditionStatus
		want    int
	}{
		{10 * time.Second, v1.ConditionTrue, 1}, // unchanged
		{10 * time.Second, v1.ConditionTrue, 1},
		{10 * time.Second, v1.ConditionFalse, 2}, // changed
		{10 * time.Second, v1.ConditionFalse, 2},
		{5 * time.Minute, v1.ConditionFalse, 3}, // report period
	} {
		clk.Step(step.advance)
		*ready = step.ready
		if err := r.sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := patches(c); got != step.want {
			t.Errorf("after %v (ready %s): %d patches, want %d", step.advance, step.ready, got, step.want)
		}
	}
	n, _ = c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	cond := n.Status.Conditions[0]
	if cond.LastTransitionTime.Equal(&first) || !cond.LastHeartbeatTime.After(cond.LastTransitionTime.Time) {
		t.Errorf("condition times %+v (first transition %v)", cond, first)
	}
}

// A Node that exists is adopted with its default labels reconciled; one
// deleted later is registered again.
func TestNodeReporterAdoptsAndReregisters(t *testing.T) {
	old := testNode(v1.ConditionFalse)
	old.Labels = map[string]string{"kubernetes.io/hostname": "old", "keep": "me"}
	r, c, clk, _ := newReporter(t, old)
	ctx := context.Background()
	if err := r.sync(ctx); err != nil {
		t.Fatal(err)
	}
	n, _ := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if n.Labels["kubernetes.io/hostname"] != "n1" || n.Labels["keep"] != "me" || n.Labels["role"] != "" {
		t.Errorf("adopted node labels %v: want the default labels reconciled, others kept, --node-labels not added", n.Labels)
	}
	if err := c.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	clk.Step(5 * time.Minute)
	if err := r.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{}); err != nil {
		t.Errorf("deleted node not registered again: %v", err)
	}
}

// A registration the API server refuses is an error naming the server.
func TestNodeReporterRegistrationError(t *testing.T) {
	r, c, _, _ := newReporter(t)
	c.PrependReactor("create", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewUnauthorized("bad credentials")
	})
	err := r.sync(context.Background())
	if err == nil || !apierrors.IsUnauthorized(err) || r.last != nil {
		t.Fatalf("sync: %v", err)
	}
	if want := "register with https://api: bad credentials"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// The Node's events are the kubelet's: one per owned condition as it is
// first written, then one per status change, none while nothing changes.
func TestNodeReporterRecordsConditionEvents(t *testing.T) {
	r, _, clk, ready := newReporter(t)
	rec := record.NewFakeRecorder(10)
	r.RecordEvents(rec)
	ctx := context.Background()
	drain := func() []string {
		var got []string
		for {
			select {
			case e := <-rec.Events:
				got = append(got, e)
			default:
				return got
			}
		}
	}
	for _, step := range []struct {
		ready v1.ConditionStatus
		want  []string
	}{
		{v1.ConditionTrue, []string{"Normal NodeReady Node n1 status is now: NodeReady"}},
		{v1.ConditionTrue, nil},
		{v1.ConditionFalse, []string{"Normal NodeNotReady Node n1 status is now: NodeNotReady"}},
		{v1.ConditionFalse, nil},
		{v1.ConditionTrue, []string{"Normal NodeReady Node n1 status is now: NodeReady"}},
	} {
		*ready = step.ready
		if err := r.sync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := drain(); !slices.Equal(got, step.want) {
			t.Errorf("ready %s: events %q, want %q", step.ready, got, step.want)
		}
		clk.Step(10 * time.Second)
	}
}

// The Node's pod CIDRs are handed on as the Node is read: at adoption, and
// after a status update that shows them (kube-controller-manager allocates
// them after registration); a Node without them hands nothing.
func TestNodeReporterPodCIDRs(t *testing.T) {
	existing := testNode(v1.ConditionTrue)
	r, c, _, _ := newReporter(t, existing)
	var got [][]string
	r.cfg.PodCIDRs = func(cidrs []string) { got = append(got, cidrs) }
	ctx := context.Background()
	if err := r.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("pod CIDRs %v handed on for a Node without them", got)
	}
	n, _ := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24", "fd00::/64"}
	if _, err := c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.lastReport = time.Time{} // a report is due: the patch returns the Node
	if err := r.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !slices.Equal(got[0], []string{"10.244.1.0/24", "fd00::/64"}) {
		t.Errorf("pod CIDRs handed on %v, want the Node's podCIDRs once", got)
	}
	old := &v1.Node{Spec: v1.NodeSpec{PodCIDR: "10.244.2.0/24"}}
	r.sawNode(old)
	if len(got) != 2 || !slices.Equal(got[1], []string{"10.244.2.0/24"}) {
		t.Errorf("a Node with podCIDR alone: handed on %v", got)
	}
}

// What the runtime offers (handlers, images, features, declared features)
// is written with the status, and a change of it is patched.
func TestNodeReporterWritesRuntimeStatus(t *testing.T) {
	t.Parallel()
	c := fake.NewClientset()
	no := false
	images := []v1.ContainerImage{{Names: []string{"a:1"}, SizeBytes: 10}}
	build := func() *v1.Node {
		n := testNode(v1.ConditionTrue)
		n.Status.RuntimeHandlers = []v1.NodeRuntimeHandler{{Name: ""}, {Name: "runc"}}
		n.Status.Images = images
		n.Status.Features = &v1.NodeFeatures{SupplementalGroupsPolicy: &no}
		n.Status.DeclaredFeatures = []string{"ExtendWebSocketsToKubelet"}
		return n
	}
	r := NewNodeReporter(c, NodeConfig{Name: "n1", Register: true, UpdateFrequency: 10 * time.Second,
		ReportFrequency: 5 * time.Minute, Port: 10250, Server: "https://api"}, build)
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	r.clock = clk
	ctx := context.Background()
	for _, want := range [][]v1.ContainerImage{images, {{Names: []string{"b:1"}, SizeBytes: 20}, images[0]}} {
		images = want
		if err := r.sync(ctx); err != nil {
			t.Fatal(err)
		}
		n, err := c.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		st := n.Status
		if len(st.RuntimeHandlers) != 2 || len(st.Images) != len(want) || st.Features == nil || len(st.DeclaredFeatures) != 1 {
			t.Errorf("status %+v, want the runtime's handlers, %d images, features and declared features", st, len(want))
		}
		clk.Step(10 * time.Second)
	}
}
