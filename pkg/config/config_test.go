package config

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/await"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

func pod(name string, hostPort int32, image string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
	}
	if hostPort != 0 {
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: hostPort}}
	}
	api.SetDefaults(p, "node", "file")
	return p
}

func withUID(p *v1.Pod, uid string) *v1.Pod {
	p.UID = types.UID(uid)
	return p
}

// set delivers a snapshot and returns the updates it caused, rendered as
// "ADD default/a" lines.
func set(t *testing.T, m *Merger, source string, pods ...*v1.Pod) []string {
	t.Helper()
	var (
		mu   sync.Mutex
		got  []string
		wg   sync.WaitGroup
		done = make(chan struct{})
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case u := <-m.Updates():
				mu.Lock()
				for _, p := range u.Pods {
					got = append(got, u.Op.String()+" "+api.Key(p)+" "+p.Spec.Containers[0].Image)
				}
				mu.Unlock()
			case <-done:
				return
			}
		}
	}()
	m.Set(context.Background(), source, pods)
	close(done)
	wg.Wait()
	return got
}

type step struct {
	source string
	pods   []*v1.Pod
	want   []string
}

func TestMergerRules(t *testing.T) {
	cases := []struct {
		name           string
		steps          []step
		wantRejections []string // substrings, in order of Rejections()
	}{
		{
			name: "adds, identical snapshot does nothing, update, remove",
			steps: []step{
				{"file", []*v1.Pod{pod("a", 0, "i:1"), pod("b", 0, "i:1")}, []string{"ADD default/a i:1", "ADD default/b i:1"}},
				{"file", []*v1.Pod{pod("a", 0, "i:1"), pod("b", 0, "i:1")}, nil},
				{"file", []*v1.Pod{pod("a", 0, "i:2"), pod("b", 0, "i:1")}, []string{"UPDATE default/a i:2"}},
				{"file", []*v1.Pod{pod("b", 0, "i:1")}, []string{"REMOVE default/a i:2"}},
			},
		},
		{
			name: "remove, add and update in one snapshot are emitted in that order",
			steps: []step{
				{"file", []*v1.Pod{pod("a", 0, "i:1"), pod("b", 0, "i:1")}, []string{"ADD default/a i:1", "ADD default/b i:1"}},
				{"file", []*v1.Pod{pod("b", 0, "i:2"), pod("c", 0, "i:1")}, []string{"REMOVE default/a i:1", "ADD default/c i:1", "UPDATE default/b i:2"}},
			},
		},
		{
			name: "same pod from two sources: first admitted wins until it goes",
			steps: []step{
				{"http", []*v1.Pod{pod("a", 0, "from-http")}, []string{"ADD default/a from-http"}},
				{"file", []*v1.Pod{pod("a", 0, "from-file")}, nil},
				{"http", nil, []string{"UPDATE default/a from-file"}},
			},
			wantRejections: nil,
		},
		{
			name: "second claimant of a host port is rejected naming both",
			steps: []step{
				{"file", []*v1.Pod{pod("first", 80, "i:1")}, []string{"ADD default/first i:1"}},
				{"http", []*v1.Pod{pod("second", 80, "i:1")}, nil},
			},
			wantRejections: []string{`pod default/second from source "http" rejected: host port 0.0.0.0:80/TCP is claimed by pod default/first from source "file"`},
		},
		{
			name: "a source's snapshot never removes another source's pods",
			steps: []step{
				{"file", []*v1.Pod{pod("a", 0, "i:1")}, []string{"ADD default/a i:1"}},
				{"http", []*v1.Pod{pod("b", 0, "i:1")}, []string{"ADD default/b i:1"}},
				{"http", nil, []string{"REMOVE default/b i:1"}},
			},
		},
		{
			name: "second pod with a taken uid is rejected naming both, and admitted once the first goes",
			steps: []step{
				{"file", []*v1.Pod{withUID(pod("first", 0, "i:1"), "same")}, []string{"ADD default/first i:1"}},
				{"http", []*v1.Pod{withUID(pod("second", 0, "i:1"), "same")}, nil},
				{"file", []*v1.Pod{withUID(pod("first", 0, "i:2"), "same")}, []string{"UPDATE default/first i:2"}},
			},
			wantRejections: []string{`pod default/second from source "http" rejected: its uid same is that of pod default/first from source "file", admitted first`},
		},
		{
			name: "the loser is admitted once the winner's port is free",
			steps: []step{
				{"file", []*v1.Pod{pod("first", 80, "i:1")}, []string{"ADD default/first i:1"}},
				{"http", []*v1.Pod{pod("second", 80, "i:1")}, nil},
				{"file", []*v1.Pod{pod("first", 81, "i:1")}, []string{"ADD default/second i:1", "UPDATE default/first i:1"}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := NewMerger(t.TempDir(), MergerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range c.steps {
				got := set(t, m, s.source, s.pods...)
				if strings.Join(got, "; ") != strings.Join(s.want, "; ") {
					t.Errorf("step %d (%s): updates %q, want %q", i, s.source, got, s.want)
				}
			}
			rej := m.Rejections()
			if len(rej) != len(c.wantRejections) {
				t.Fatalf("rejections %q, want %d", rej, len(c.wantRejections))
			}
			for i, w := range c.wantRejections {
				if !strings.Contains(rej[i], w) {
					t.Errorf("rejection %q lacks %q", rej[i], w)
				}
			}
		})
	}
}

func TestMergerAdmissionOrderSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	m, _ := NewMerger(dir, MergerOptions{})
	set(t, m, "zeta", pod("winner", 80, "i:1"))
	set(t, m, "alpha", pod("loser", 80, "i:1"))

	// After a restart the sources may speak in any order, and "alpha" sorts
	// first: the checkpointed admission order still decides.
	m2, err := NewMerger(dir, MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := set(t, m2, "alpha", pod("loser", 80, "i:1"))
	got = append(got, set(t, m2, "zeta", pod("winner", 80, "i:1"))...)
	// Delivered alone, alpha's pod is admitted; once zeta speaks, its earlier
	// admission wins back the port.
	want := []string{"ADD default/loser i:1", "REMOVE default/loser i:1", "ADD default/winner i:1"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("updates %q, want %q", got, want)
	}
}

func TestMergerSeenAndErrors(t *testing.T) {
	m, _ := NewMerger(t.TempDir(), MergerOptions{}, "file")
	if !m.Seen("http") {
		t.Error("a source no longer configured blocks removal of its pods")
	}
	if m.Seen("file") {
		t.Error("source seen before any snapshot")
	}
	set(t, m, "file", pod("a", 0, "i:1"))
	m.SetError("file", errTest("boom"))
	if !m.Seen("file") {
		t.Error("source not seen after a snapshot")
	}
	// An error does not touch the desired set: the next identical snapshot
	// emits nothing.
	if got := set(t, m, "file", pod("a", 0, "i:1")); len(got) != 0 {
		t.Errorf("updates after error and identical snapshot: %q", got)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

// Each source's last good snapshot is checkpointed; after a restart it is in
// force (and the source counts as seen) before the source says anything.
func TestMergerCheckpointsSnapshots(t *testing.T) {
	dir := t.TempDir()
	m, _ := NewMerger(dir, MergerOptions{}, "api", "etcd")
	set(t, m, "api", pod("posted", 0, "i:1"))
	set(t, m, "etcd", pod("remote", 0, "i:1"))
	set(t, m, "etcd", pod("remote", 0, "i:2"))

	m2, _ := NewMerger(dir, MergerOptions{}, "api", "etcd")
	if m2.Seen("etcd") {
		t.Fatal("seen before checkpoints are loaded")
	}
	var got []string
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		m2.LoadCheckpoints(context.Background())
	}()
	// Until the consumer has the restored pods, the sources do not count
	// as seen: their silence must not remove what is about to be kept.
	// Evidence that the load got as far as sending: it is parked, and no
	// one receives yet.
	await.Parked(t, 1, "config.(*Merger).LoadCheckpoints(")
	if len(m2.Snapshot("etcd")) == 0 {
		t.Fatal("the checkpoint was not loaded before its pods were sent")
	}
	if m2.Seen("etcd") {
		t.Error("source seen before its restored pods were consumed")
	}
	u := <-m2.Updates()
	for _, p := range u.Pods {
		got = append(got, u.Op.String()+" "+api.Key(p)+" "+p.Spec.Containers[0].Image)
	}
	<-loaded
	want := "ADD default/posted i:1; ADD default/remote i:2"
	if strings.Join(got, "; ") != want {
		t.Errorf("restored updates %q, want %q", got, want)
	}
	if !m2.Seen("etcd") || !m2.Seen("api") {
		t.Error("restored sources not seen")
	}
	st := m2.Status()
	if len(st) != 2 || !st[1].Restored || st[1].Pods != 1 {
		t.Errorf("status %+v", st)
	}
	// The source answering with the same pods changes nothing.
	if got := set(t, m2, "etcd", pod("remote", 0, "i:2")); len(got) != 0 {
		t.Errorf("same snapshot after restore caused %q", got)
	}
}

// A Set whose caller gives up before the consumer takes the change (an HTTP
// request cancelled, a reload timing out) loses nothing: the same snapshot
// sent again is emitted.
func TestMergerSetCancelledIsResent(t *testing.T) {
	m, err := NewMerger(t.TempDir(), MergerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m.Set(ctx, "api", []*v1.Pod{pod("a", 0, "i:1")}) // nobody receives
	if got := set(t, m, "api", pod("a", 0, "i:1")); strings.Join(got, "; ") != "ADD default/a i:1" {
		t.Errorf("re-sent snapshot emitted %q, want the api.ADD that was never delivered", got)
	}
}

// --max-pods: pods past the cap, in admission order, are rejected as
// OutOfpods and admitted once room is made; /sources lists the first 100
// rejections of a source and counts the rest.
func TestMergerMaxPods(t *testing.T) {
	var told []string // each rejection is told once, for its event
	m, _ := NewMerger(t.TempDir(), MergerOptions{MaxPods: 2, OnReject: func(r Rejection) { told = append(told, r.Pod.Name+":"+r.Reason) }}, "file")
	got := set(t, m, "file", pod("a", 0, "i:1"), pod("b", 0, "i:1"), pod("c", 0, "i:1"))
	set(t, m, "file", pod("a", 0, "i:1"), pod("b", 0, "i:1"), pod("c", 0, "i:1"))
	if strings.Join(told, ",") != "c:OutOfpods" {
		t.Errorf("rejections told %v, want c:OutOfpods once", told)
	}
	if strings.Join(got, "; ") != "ADD default/a i:1; ADD default/b i:1" {
		t.Errorf("updates %q, want a and b only", got)
	}
	if rej := m.Rejections(); len(rej) != 1 || !strings.Contains(rej[0], "default/c") || !strings.Contains(rej[0], "OutOfpods") {
		t.Errorf("rejections %q, want c as OutOfpods", rej)
	}
	if got := set(t, m, "file", pod("b", 0, "i:1"), pod("c", 0, "i:1")); strings.Join(got, "; ") != "REMOVE default/a i:1; ADD default/c i:1" {
		t.Errorf("after a went: %q, want c admitted", got)
	}

	var many []*v1.Pod
	for i := range 150 {
		many = append(many, pod(fmt.Sprintf("p%03d", i), 0, "i:1"))
	}
	m.opts.MaxPods = 1 // fewer than before: all but one rejected
	set(t, m, "file", many...)
	st := m.Status()[0]
	if len(st.Rejected) != 100 || st.RejectedMore != 49 {
		t.Errorf("/sources lists %d rejections and %d more, want 100 and 49", len(st.Rejected), st.RejectedMore)
	}
}

// A pod whose requests alone pass the node's allocatable is rejected as the
// kubelet's admission rejects it (OutOfcpu, OutOfmemory), naming the field
// that asks the most; a limit stands for the request it lacks, as the API
// server defaults it. Pods that each fit are admitted whatever their sum.
func TestMergerRefusesPodsLargerThanTheNode(t *testing.T) {
	q := resource.MustParse
	with := func(name string, mutate func(p *v1.Pod)) *v1.Pod {
		p := pod(name, 0, "i:1")
		mutate(p)
		return p
	}
	limits := func(l v1.ResourceList) func(p *v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = l }
	}
	cases := []struct {
		name   string
		pod    *v1.Pod
		reason string // "" admitted
		msg    string
	}{
		{"fits", with("fits", limits(v1.ResourceList{v1.ResourceCPU: q("2"), v1.ResourceMemory: q("4Gi")})), "", ""},
		{"memory limit 8Ei", with("huge", limits(v1.ResourceList{v1.ResourceMemory: q("8Ei")})), "OutOfmemory",
			`pod default/huge from source "file" rejected (OutOfmemory): it requests 9223372036854775807 of memory, more than the node's allocatable 4Gi` +
				` (spec.containers[0].resources.limits[memory]: 9223372036854775807, the request it lacks)`},
		{"a small request under a large limit", with("overcommit", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: q("64Mi")},
				Limits: v1.ResourceList{v1.ResourceMemory: q("8Ei")}}
		}), "", ""},
		{"cpu request", with("cpu", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: q("3")}
		}), "OutOfcpu", "it requests 3 of cpu, more than the node's allocatable 2 (spec.containers[0].resources.requests[cpu]: 3)"},
		{"two containers summed", with("sum", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: q("3Gi")}
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Image: "i:1",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: q("2Gi")}}})
		}), "OutOfmemory", "it requests 5Gi of memory, more than the node's allocatable 4Gi (spec.containers[0].resources.requests[memory]: 3Gi)"},
		{"an init container alone", with("init", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Image: "i:1", Resources: v1.ResourceRequirements{
				Limits: v1.ResourceList{v1.ResourceCPU: q("4")}}}}
		}), "OutOfcpu", "(spec.initContainers[0].resources.limits[cpu]: 4, the request it lacks)"},
		{"pod-level resources", with("podlevel", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: q("5Gi")}}
		}), "OutOfmemory", "(spec.resources.limits[memory]: 5Gi, the request it lacks)"},
	}
	m, _ := NewMerger(t.TempDir(), MergerOptions{Allocatable: v1.ResourceList{v1.ResourceCPU: q("2"), v1.ResourceMemory: q("4Gi")}}, "file")
	var pods []*v1.Pod
	for _, c := range cases {
		pods = append(pods, c.pod)
	}
	set(t, m, "file", pods...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := m.RejectedOf("file", []string{api.Key(c.pod)})
			switch {
			case c.reason == "" && len(got) > 0:
				t.Errorf("rejected: %+v", got[0])
			case c.reason != "" && len(got) == 0:
				t.Errorf("admitted, want %s", c.reason)
			case c.reason != "" && (got[0].Reason != c.reason || !strings.Contains(got[0].Message, c.msg)):
				t.Errorf("rejected %s %q, want %s with %q", got[0].Reason, got[0].Message, c.reason, c.msg)
			}
		})
	}
}

// byUID is a consumer that keeps pods by UID, as the kubelet does: each
// update applied in order, REMOVE by the UID of the pod it carries.
type byUID map[types.UID]string

func (c byUID) apply(t *testing.T, m *Merger, source string, pods ...*v1.Pod) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Set(context.Background(), source, pods)
	}()
	for {
		select {
		case u := <-m.Updates():
			for _, p := range u.Pods {
				if u.Op == api.REMOVE {
					delete(c, p.UID)
				} else {
					c[p.UID] = api.Key(p) + " " + p.Spec.Containers[0].Image
				}
			}
		case <-done:
			return
		}
	}
}

// Every pair of (source, name, uid) for a pod that goes and one that comes,
// in either order across sources: the consumer, keeping pods by UID, ends
// with the new pod alone, and at every step holds exactly what the merger
// desires, no UID left behind.
func TestMergerIdentityTransitions(t *testing.T) {
	for _, otherSource := range []bool{false, true} {
		for _, otherName := range []bool{false, true} {
			for _, otherUID := range []bool{false, true} {
				orders := []string{"one snapshot"}
				if otherSource {
					orders = []string{"new first", "old gone first"}
				}
				for _, order := range orders {
					name := fmt.Sprintf("source changed %v, name changed %v, uid changed %v, %s", otherSource, otherName, otherUID, order)
					t.Run(name, func(t *testing.T) {
						src, newName, newUID := "file", "a", "u1"
						if otherSource {
							src = "http"
						}
						if otherName {
							newName = "b"
						}
						if otherUID {
							newUID = "u2"
						}
						m, err := NewMerger(t.TempDir(), MergerOptions{}, "file", "http")
						if err != nil {
							t.Fatal(err)
						}
						c := byUID{}
						old, next := withUID(pod("a", 0, "i:old"), "u1"), withUID(pod(newName, 0, "i:new"), newUID)
						c.apply(t, m, "file", old)
						check := func(step string, want byUID) {
							t.Helper()
							if fmt.Sprint(c) != fmt.Sprint(want) {
								t.Errorf("%s: consumer holds %v, want %v", step, c, want)
							}
						}
						check("start", byUID{"u1": "default/a i:old"})
						switch order {
						case "one snapshot":
							c.apply(t, m, "file", next)
						case "new first":
							c.apply(t, m, src, next)
							// The old pod holds its name and UID: the new
							// one, when it shares either, waits.
							if otherName && otherUID {
								check("both declared", byUID{"u1": "default/a i:old", types.UID(newUID): "default/" + newName + " i:new"})
							} else {
								check("both declared", byUID{"u1": "default/a i:old"})
							}
							c.apply(t, m, "file")
						case "old gone first":
							c.apply(t, m, "file")
							check("old gone", byUID{})
							c.apply(t, m, src, next)
						}
						check("end", byUID{types.UID(newUID): "default/" + newName + " i:new"})
						if rej := m.Rejections(); len(rej) != 0 {
							t.Errorf("rejections left: %q", rej)
						}
					})
				}
			}
		}
	}
}

// flakyWriter fails every write while failing is set, and reports each
// attempt (the file's base name) on calls.
type flakyWriter struct {
	mu      sync.Mutex
	failing bool
	calls   chan string
}

func (w *flakyWriter) write(path string, data []byte) error {
	w.calls <- filepath.Base(path)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.failing {
		return errTest("read-only file system")
	}
	return safefile.WriteAtomic(path, data)
}

func (w *flakyWriter) setFailing(f bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failing = f
}

// drain returns the attempts made so far, without waiting for more.
func (w *flakyWriter) drain() []string {
	var out []string
	for {
		select {
		case c := <-w.calls:
			out = append(out, c)
		default:
			sort.Strings(out)
			return out
		}
	}
}

// A snapshot whose checkpoint cannot be written is applied, shown as behind
// in /sources, and written again with back-off (1 s, 2 s, 4 s, ...) by
// Run's timer, with no attempt in between, until it is; then no timer is
// left armed, and the checkpoint holds the snapshot.
func TestMergerRetriesFailedCheckpointWithBackoff(t *testing.T) {
	dir := t.TempDir()
	fc := testingclock.NewFakeClock(time.Unix(1_000_000, 0))
	w := &flakyWriter{failing: true, calls: make(chan string, 100)}
	m, err := newMerger(dir, MergerOptions{}, fc, w.write, "file")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		m.Run(ctx)
	}()

	if got := set(t, m, "file", pod("a", 0, "i:1")); len(got) != 1 {
		t.Fatalf("updates %q, want the pod added although its checkpoint failed", got)
	}
	both := "[admission.json source-file.json]"
	if got := fmt.Sprint(w.drain()); got != both {
		t.Fatalf("writes %s, want %s", got, both)
	}
	behind := func() string { return m.Status()[0].CheckpointBehind }
	if !strings.Contains(behind(), "read-only file system") {
		t.Fatalf("/sources checkpointBehind = %q, want the write's error", behind())
	}
	// fire steps the clock by d and waits for the retry that must (or must
	// not) come of it; Status takes mu, which a retry holds throughout.
	fire := func(d time.Duration, want string) {
		t.Helper()
		fc.Step(d)
		if want == "" {
			if !fc.HasWaiters() {
				t.Fatalf("retry fired %v early", d)
			}
			return
		}
		got := []string{<-w.calls}
		m.Status()
		got = append(got, w.drain()...)
		sort.Strings(got)
		if fmt.Sprint(got) != want {
			t.Fatalf("retry wrote %v, want %s", got, want)
		}
	}
	for _, delay := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		fire(delay-time.Millisecond, "")
		fire(time.Millisecond, both)
		if behind() == "" {
			t.Fatal("/sources stopped showing the checkpoint behind while it still fails")
		}
	}
	w.setFailing(false)
	fire(8*time.Second-time.Millisecond, "")
	fire(time.Millisecond, both)
	if behind() != "" {
		t.Errorf("/sources checkpointBehind = %q once written", behind())
	}
	if fc.HasWaiters() {
		t.Error("a retry is still armed after every checkpoint was written")
	}
	pods, state, err := readCheckpoint(filepath.Join(dir, "source-file.json"))
	if err != nil || state != "" || len(pods) != 1 || pods[0].Name != "a" {
		t.Errorf("checkpoint after the retry: %v %q %v, want pod a", pods, state, err)
	}

	// A new failure starts over at 1 s; ending ctx stops Run and its timer.
	w.setFailing(true)
	set(t, m, "file", pod("a", 0, "i:2"))
	w.drain()
	fire(time.Second-time.Millisecond, "")
	cancel()
	<-ran
	if fc.HasWaiters() {
		t.Error("the retry timer outlived Run")
	}
}

// A pod already delivered whose requests grow past the node's allocatable
// (an in-place resize) is not refused: the kubelet keeps its resize
// pending, the pod running as it was. A new pod that large still is.
func TestMergerKeepsARunningPodWhoseResizeIsTooLarge(t *testing.T) {
	q := resource.MustParse
	m, _ := NewMerger(t.TempDir(), MergerOptions{Allocatable: v1.ResourceList{v1.ResourceCPU: q("2"), v1.ResourceMemory: q("4Gi")}}, "file")
	small := pod("a", 0, "i:1")
	small.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: q("1Gi")}
	if got := set(t, m, "file", small); strings.Join(got, "; ") != "ADD default/a i:1" {
		t.Fatalf("updates %q", got)
	}
	big := small.DeepCopy()
	big.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: q("8Gi")}
	other := pod("b", 0, "i:1")
	other.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: q("8Gi")}
	if got := set(t, m, "file", big, other); strings.Join(got, "; ") != "UPDATE default/a i:1" {
		t.Errorf("updates %q, want a updated (its resize is the kubelet's to judge), b refused", got)
	}
	if got := m.RejectedOf("file", []string{"default/b"}); len(got) != 1 || got[0].Reason != "OutOfmemory" {
		t.Errorf("b: %+v, want OutOfmemory", got)
	}
}
