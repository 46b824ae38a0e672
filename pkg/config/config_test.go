package config

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/api"
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
			name: "add, update and remove in one snapshot are emitted in that order",
			steps: []step{
				{"file", []*v1.Pod{pod("a", 0, "i:1"), pod("b", 0, "i:1")}, []string{"ADD default/a i:1", "ADD default/b i:1"}},
				{"file", []*v1.Pod{pod("b", 0, "i:2"), pod("c", 0, "i:1")}, []string{"ADD default/c i:1", "UPDATE default/b i:2", "REMOVE default/a i:1"}},
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
			m, err := NewMerger(t.TempDir())
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
	m, _ := NewMerger(dir)
	set(t, m, "zeta", pod("winner", 80, "i:1"))
	set(t, m, "alpha", pod("loser", 80, "i:1"))

	// After a restart the sources may speak in any order, and "alpha" sorts
	// first: the checkpointed admission order still decides.
	m2, err := NewMerger(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := set(t, m2, "alpha", pod("loser", 80, "i:1"))
	got = append(got, set(t, m2, "zeta", pod("winner", 80, "i:1"))...)
	// Delivered alone, alpha's pod is admitted; once zeta speaks, its earlier
	// admission wins back the port.
	want := []string{"ADD default/loser i:1", "ADD default/winner i:1", "REMOVE default/loser i:1"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("updates %q, want %q", got, want)
	}
}

func TestMergerSeenAndErrors(t *testing.T) {
	m, _ := NewMerger(t.TempDir(), "file")
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
	m, _ := NewMerger(dir, "api", "etcd")
	set(t, m, "api", pod("posted", 0, "i:1"))
	set(t, m, "etcd", pod("remote", 0, "i:1"))
	set(t, m, "etcd", pod("remote", 0, "i:2"))

	m2, _ := NewMerger(dir, "api", "etcd")
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
	// Evidence that the load got as far as sending: the snapshot is in
	// force (and no one receives yet).
	deadline := time.Now().Add(5 * time.Second)
	for len(m2.Snapshot("etcd")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the checkpoint was not loaded")
		}
		time.Sleep(time.Millisecond)
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
	m, err := NewMerger(t.TempDir())
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
	m, _ := NewMerger(t.TempDir(), "file")
	m.MaxPods = 2
	var told []string // each rejection is told once, for its event
	m.OnReject = func(r Rejection) { told = append(told, r.Pod.Name+":"+r.Reason) }
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
	if got := set(t, m, "file", pod("b", 0, "i:1"), pod("c", 0, "i:1")); strings.Join(got, "; ") != "ADD default/c i:1; REMOVE default/a i:1" {
		t.Errorf("after a went: %q, want c admitted", got)
	}

	var many []*v1.Pod
	for i := range 150 {
		many = append(many, pod(fmt.Sprintf("p%03d", i), 0, "i:1"))
	}
	m.MaxPods = 1
	set(t, m, "file", many...)
	st := m.Status()[0]
	if len(st.Rejected) != 100 || st.RejectedMore != 49 {
		t.Errorf("/sources lists %d rejections and %d more, want 100 and 49", len(st.Rejected), st.RejectedMore)
	}
}
