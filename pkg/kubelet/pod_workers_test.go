package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/await"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
)

// call is one step a fake syncer was asked to take.
type call struct {
	step  string // sync, terminating, terminated, forget
	name  string // the pod's name ("" for a pod without a spec)
	grace time.Duration
	cause lifecycle.Cause
	ctx   context.Context
}

func (c call) String() string {
	if c.step == "terminating" {
		return fmt.Sprintf("%s %s %v", c.step, c.name, c.grace)
	}
	return c.step + " " + c.name
}

// fakeSyncer reports each step on calls and answers as its fields say; a
// step in block ("sync a": step and pod name) waits until that channel is
// closed (or the step's context ends).
type fakeSyncer struct {
	calls chan call

	mu        sync.Mutex
	block     map[string]chan struct{}
	terminate map[string]*lifecycle.Termination // syncPod's answer, by pod name
	fail      map[string]error                  // by step
}

func newFakeSyncer() *fakeSyncer {
	return &fakeSyncer{calls: make(chan call, 100), block: map[string]chan struct{}{},
		terminate: map[string]*lifecycle.Termination{}, fail: map[string]error{}}
}

func (f *fakeSyncer) do(ctx context.Context, step string, w podWork) error {
	c := call{step: step, ctx: ctx}
	if w.Pod != nil {
		c.name = w.Pod.Name
	}
	if w.Termination != nil {
		c.grace, c.cause = w.Termination.Grace, w.Termination.Cause
	}
	f.calls <- c
	f.mu.Lock()
	block, err := f.block[step+" "+c.name], f.fail[step]
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

func (f *fakeSyncer) syncPod(ctx context.Context, w podWork) (*lifecycle.Termination, error) {
	err := f.do(ctx, "sync", w)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.terminate[w.Pod.Name], err
}

func (f *fakeSyncer) syncTerminatingPod(ctx context.Context, w podWork) error {
	return f.do(ctx, "terminating", w)
}

func (f *fakeSyncer) syncTerminatedPod(ctx context.Context, w podWork) error {
	return f.do(ctx, "terminated", w)
}

func (f *fakeSyncer) forgetPod(ctx context.Context, w podWork) error { return f.do(ctx, "forget", w) }

// next is the next step taken (fails the test after 5 s without one).
func (f *fakeSyncer) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-f.calls:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no step taken in 5 s")
		return call{}
	}
}

// expect takes the next steps and checks them against want.
func (f *fakeSyncer) expect(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if got := f.next(t).String(); got != w {
			t.Fatalf("step %q, want %q", got, w)
		}
	}
}

// startWorkers runs pod workers over f until the test ends.
func startWorkers(t *testing.T, f *fakeSyncer) *podWorkers {
	t.Helper()
	return startWorkersEvicted(t, f, nil)
}

// startWorkersEvicted is startWorkers with the evictions remembered from
// before a restart.
func startWorkersEvicted(t *testing.T, f *fakeSyncer, evicted func(*v1.Pod) *lifecycle.Termination) *podWorkers {
	t.Helper()
	w := newPodWorkers(f, func() *podRecord { return newPodRecord(time.Now(), nil) }, evicted)
	ctx, cancel := context.WithCancel(context.Background())
	w.Start(ctx)
	t.Cleanup(func() {
		cancel()
		done := make(chan struct{})
		go func() { defer close(done); w.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("workers did not stop on cancel")
		}
	})
	return w
}

// waitUntil waits for cond, which the code under test makes true without
// the test's help (no clock to step).
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	await.True(t, "the condition", cond)
}

func namedPod(uid types.UID, name string) *v1.Pod {
	grace := int64(30)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid, Name: name, Namespace: "default"},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace}}
}

// While a pod's worker is busy, updates coalesce into the latest one: none
// is lost (the last always runs), and no two steps run at once for a pod.
func TestPodWorkersKeepLatestPendingUpdate(t *testing.T) {
	f := newFakeSyncer()
	release := make(chan struct{})
	f.block["sync v1"] = release
	w := startWorkers(t, f)
	w.UpdatePod(namedPod("u1", "v1"))
	f.expect(t, "sync v1")
	for _, name := range []string{"v2", "v3", "v4"} {
		w.UpdatePod(namedPod("u1", name)) // never blocks, although the worker is busy
	}
	if !w.Busy("u1") {
		t.Error("worker not busy while syncing")
	}
	close(release)
	f.expect(t, "sync v4")
	waitUntil(t, func() bool { return !w.Busy("u1") })
	select {
	case c := <-f.calls:
		t.Errorf("a further step %v: the pending update ran twice", c)
	default:
	}
}

// A pod walks its whole life: synced while desired; a termination moves it
// to terminating (the sync in hand cancelled), then terminated; removed from
// the config, it is forgotten and its worker goes. Every cause of a
// termination takes this one path.
func TestPodWorkersLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name      string
		terminate func(w *podWorkers)
		wantGrace time.Duration
		wantCause lifecycle.Cause
	}{
		{"removed from the config", func(w *podWorkers) { w.RemovePod("u") }, 30 * time.Second, lifecycle.Removed},
		{"evicted", func(w *podWorkers) {
			w.Terminate("u", lifecycle.Termination{Cause: lifecycle.Evicted, Grace: 0, Reason: "Evicted"})
		}, lifecycle.MinStopGrace, lifecycle.Evicted},
		{"deleted in the API server", func(w *podWorkers) {
			p := namedPod("u", "a")
			now, grace := metav1.Now(), int64(5)
			p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
			w.UpdatePod(p)
		}, 5 * time.Second, lifecycle.Deleted},
		{"node shutdown", func(w *podWorkers) {
			w.Terminate("u", lifecycle.Termination{Cause: lifecycle.Shutdown, Grace: 20 * time.Second})
		}, 20 * time.Second, lifecycle.Shutdown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSyncer()
			f.block["sync a"] = make(chan struct{}) // the first sync stays in hand
			w := startWorkers(t, f)
			w.UpdatePod(namedPod("u", "a"))
			first := f.next(t)
			tc.terminate(w)
			if first.ctx.Err() == nil {
				t.Error("the sync in hand was not cancelled by the termination")
			}
			c := f.next(t)
			if c.step != "terminating" || c.grace != tc.wantGrace || c.cause != tc.wantCause {
				t.Fatalf("step %v (cause %v), want terminating within %v (cause %v)", c, c.cause, tc.wantGrace, tc.wantCause)
			}
			if tc.wantCause == lifecycle.Removed {
				// Not desired: forgotten once terminated.
				f.expect(t, "terminated a", "forget a")
				waitUntil(t, func() bool { return !w.Known("u") })
				return
			}
			f.expect(t, "terminated a")
			waitUntil(t, func() bool { return !w.Busy("u") })
			if ph, _ := w.Phase("u"); ph != lifecycle.Terminated {
				t.Fatalf("phase %v, want terminated", ph)
			}
			// A terminated pod is never synced again: an update only has
			// its status refreshed.
			w.UpdatePod(namedPod("u", "a"))
			f.expect(t, "terminated a")
			w.RemovePod("u")
			f.expect(t, "terminated a", "forget a")
			waitUntil(t, func() bool { return !w.Known("u") })
		})
	}
}

// syncPod may ask for its pod to end (deadline, rejection, finished): the
// worker terminates it, and it stays desired, terminated.
func TestPodWorkersSyncAsksToTerminate(t *testing.T) {
	f := newFakeSyncer()
	f.terminate["a"] = &lifecycle.Termination{Cause: lifecycle.DeadlineExceeded, Grace: 10 * time.Second, Reason: "DeadlineExceeded"}
	w := startWorkers(t, f)
	w.UpdatePod(namedPod("u", "a"))
	f.expect(t, "sync a", "terminating a 10s", "terminated a")
	waitUntil(t, func() bool { return !w.Busy("u") })
	if tm := w.Termination("u"); tm == nil || tm.Reason != "DeadlineExceeded" {
		t.Errorf("termination %+v, want the one syncPod asked for", tm)
	}
	if !w.Known("u") {
		t.Error("a desired terminated pod was forgotten")
	}
}

// A termination is never lengthened and keeps its first cause; a shorter
// grace period cancels the termination in hand, which starts again with it
// (a forced deletion after a graceful one).
func TestPodWorkersTerminationOnlyShortens(t *testing.T) {
	f := newFakeSyncer()
	f.block["terminating a"] = make(chan struct{})
	w := startWorkers(t, f)
	w.UpdatePod(namedPod("u", "a"))
	f.expect(t, "sync a")
	w.Terminate("u", lifecycle.Termination{Cause: lifecycle.Evicted, Grace: 30 * time.Second})
	c := f.next(t)
	if c.step != "terminating" {
		t.Fatalf("step %v, want terminating", c)
	}
	w.Terminate("u", lifecycle.Termination{Cause: lifecycle.Deleted, Grace: time.Minute})
	if c.ctx.Err() != nil {
		t.Fatal("a longer grace period cancelled the termination in hand")
	}
	w.Terminate("u", lifecycle.Termination{Cause: lifecycle.Deleted, Grace: 3 * time.Second})
	if c.ctx.Err() == nil {
		t.Fatal("a shorter grace period did not cancel the termination in hand")
	}
	again := f.next(t)
	if again.step != "terminating" || again.grace != 3*time.Second || again.cause != lifecycle.Evicted {
		t.Errorf("step %v cause %v, want terminating within 3s, still evicted", again, again.cause)
	}
}

// A UID given up by one pod and taken by another (REMOVE a, then ADD b, as
// the merger sends it) while the first still terminates: the new pod waits
// until the first is forgotten (its containers removed), and then starts
// afresh, never adopting the old pod's containers.
func TestPodWorkersRecreatedPodWaitsForTheOld(t *testing.T) {
	f := newFakeSyncer()
	release := make(chan struct{})
	f.block["terminating a"] = release
	w := startWorkers(t, f)
	w.UpdatePod(namedPod("u", "a"))
	f.expect(t, "sync a")
	w.RemovePod("u")
	if w.UpdatePod(namedPod("u", "b")) != true {
		t.Error("the pod given again was not reported recreated")
	}
	c := f.next(t)
	if c.step != "terminating" || c.name != "a" {
		t.Fatalf("step %v, want the old pod terminating", c)
	}
	close(release)
	f.expect(t, "terminated a", "forget a", "sync b")
	waitUntil(t, func() bool { return !w.Busy("u") })
	if ph, ok := w.Phase("u"); !ok || ph != lifecycle.Syncing {
		t.Errorf("phase %v (%v), want the new pod syncing", ph, ok)
	}
}

// A pod found on the node without a spec gets a worker that terminates it
// (within the grace it is given) and forgets it.
func TestPodWorkersOrphan(t *testing.T) {
	f := newFakeSyncer()
	w := startWorkers(t, f)
	w.Terminate("o", lifecycle.Termination{Cause: lifecycle.Orphaned, Grace: 7 * time.Second})
	f.expect(t, "terminating  7s", "terminated ", "forget ")
	waitUntil(t, func() bool { return !w.Known("o") })
	if !w.Forgotten("o", time.Time{}) {
		t.Error("the forgotten pod's last action was not kept for the relist to catch up")
	}
	w.PruneForgotten(time.Now().Add(time.Hour))
	if w.Forgotten("o", time.Time{}) {
		t.Error("kept after a newer relist")
	}
}

// A step that fails is taken again when the worker is poked (a retry, a
// resync), never in a loop of its own.
func TestPodWorkersRetryFailedStep(t *testing.T) {
	f := newFakeSyncer()
	f.fail["forget"] = errors.New("remove: daemon says no")
	w := startWorkers(t, f)
	w.Terminate("o", lifecycle.Termination{Cause: lifecycle.Orphaned})
	f.expect(t, "terminating  2s", "terminated ", "forget ")
	waitUntil(t, func() bool { return !w.Busy("o") })
	select {
	case c := <-f.calls:
		t.Fatalf("step %v taken again without a poke", c)
	default:
	}
	f.mu.Lock()
	delete(f.fail, "forget")
	f.mu.Unlock()
	w.SyncUndesired()
	f.expect(t, "terminated ", "forget ")
	waitUntil(t, func() bool { return !w.Known("o") })
}

// kubelet_working_pods counts the workers by phase and config.
func TestPodWorkersWorkingPods(t *testing.T) {
	f := newFakeSyncer()
	w := startWorkers(t, f)
	w.UpdatePod(namedPod("d", "desired"))
	f.terminate["finished"] = &lifecycle.Termination{Cause: lifecycle.Finished}
	w.UpdatePod(namedPod("f", "finished"))
	f.block["terminating "] = make(chan struct{}) // the orphan stays terminating
	w.Terminate("o", lifecycle.Termination{Cause: lifecycle.Orphaned})
	want := map[string]int{"sync/desired": 1, "terminated/desired": 1, "terminating/runtime_only": 1}
	waitUntil(t, func() bool {
		got := map[string]int{}
		for _, wp := range w.WorkingPods() {
			got[wp.Lifecycle+"/"+wp.Config] += wp.Count
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	var _ []metrics.WorkingPods = w.WorkingPods()
}

// Nothing starts before Start or after its context ends.
func TestPodWorkersStopped(t *testing.T) {
	f := newFakeSyncer()
	w := newPodWorkers(f, func() *podRecord { return newPodRecord(time.Now(), nil) }, nil)
	w.UpdatePod(namedPod("u", "early"))
	if w.Known("u") {
		t.Error("a worker started before Start")
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.Start(ctx)
	cancel()
	w.Wait()
	w.UpdatePod(namedPod("u", "late"))
	if w.Known("u") {
		t.Error("a worker started after its context ended")
	}
}

// A pod evicted before the agent restarted is never synced (started)
// again: its worker starts it terminating by its eviction, then it is
// terminated; a pod not evicted is synced.
func TestPodWorkersRememberedEviction(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  string
		want []string
	}{
		{"evicted before the restart", "evicted", []string{"terminating evicted " + lifecycle.MinStopGrace.String(), "terminated evicted"}},
		{"not evicted", "other", []string{"sync other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSyncer()
			w := startWorkersEvicted(t, f, func(p *v1.Pod) *lifecycle.Termination {
				if p.Name != "evicted" {
					return nil
				}
				return &lifecycle.Termination{Cause: lifecycle.Evicted, Reason: "Evicted", Message: "low on disk"}
			})
			w.UpdatePod(namedPod("u", tc.pod))
			f.expect(t, tc.want...)
			if tm := w.Termination("u"); (tc.pod == "evicted") != (tm != nil && tm.Cause == lifecycle.Evicted && tm.Message == "low on disk") {
				t.Errorf("termination %+v", tm)
			}
		})
	}
}

// An evicted pod stays evicted through resyncs and updates of the same
// manifest; given with another manifest (its UID unchanged: a file pod's
// comes from its name) it is a new pod: the evicted one is forgotten, then
// the new one starts afresh.
func TestPodWorkersEvictedPodWithANewManifest(t *testing.T) {
	f := newFakeSyncer()
	w := startWorkers(t, f)
	pod := namedPod("u", "a")
	w.UpdatePod(pod)
	f.expect(t, "sync a")
	w.Terminate("u", lifecycle.Termination{Cause: lifecycle.Evicted, Reason: "Evicted"})
	f.expect(t, "terminating a "+lifecycle.MinStopGrace.String(), "terminated a")
	if w.UpdatePod(pod) || w.UpdatePod(namedPod("u", "a")) {
		t.Error("the same manifest given again was reported recreated")
	}
	// The pokes may coalesce: one step or two, each only refreshing the
	// terminated pod.
	waitUntil(t, func() bool { return !w.Busy("u") })
	for len(f.calls) > 0 {
		if c := <-f.calls; c.String() != "terminated a" {
			t.Fatalf("step %v for the same manifest, want the pod left terminated", c)
		}
	}
	edited := namedPod("u", "a")
	edited.Spec.Containers = []v1.Container{{Name: "c", Image: "img:2"}}
	if !w.UpdatePod(edited) {
		t.Error("the evicted pod with another manifest was not reported recreated")
	}
	f.expect(t, "terminated a", "forget a", "sync a")
	waitUntil(t, func() bool { return !w.Busy("u") })
	if tm := w.Termination("u"); tm != nil {
		t.Errorf("the new pod has the termination %+v", tm)
	}
}

// Stopped closes once the pod's worker has stopped it (what the graceful
// node shutdown waits for), at once for a pod without a worker or already
// terminated; a second caller gets the same signal.
func TestStoppedClosesWhenTerminated(t *testing.T) {
	f := newFakeSyncer()
	f.block["terminating a"] = make(chan struct{})
	w := startWorkers(t, f)
	select {
	case <-w.Stopped("nobody"):
	default:
		t.Fatal("Stopped of a pod without a worker is open")
	}
	w.UpdatePod(namedPod("u", "a"))
	f.expect(t, "sync a")
	w.Terminate("u", lifecycle.Termination{Cause: lifecycle.Shutdown, Grace: 6 * time.Second})
	first, second := w.Stopped("u"), w.Stopped("u")
	f.expect(t, "terminating a 6s")
	select {
	case <-first:
		t.Fatal("Stopped closed while the pod terminates")
	default:
	}
	close(f.block["terminating a"])
	for _, ch := range []<-chan struct{}{first, second} {
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatal("Stopped did not close once the pod was terminated")
		}
	}
	select {
	case <-w.Stopped("u"):
	default:
		t.Fatal("Stopped of a terminated pod is open")
	}
}
