package kubelet

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// While a pod's worker is busy, updates coalesce into the latest one: none
// is lost (the last always runs), and no two run at once for one pod.
func TestPodWorkersKeepLatestPendingUpdate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	running := 0
	w := newPodWorkers(ctx, func(_ context.Context, work podWork) {
		mu.Lock()
		running++
		if running > 1 {
			t.Errorf("two syncs of one pod at once")
		}
		seen = append(seen, work.Pod.Spec.Containers[0].Image)
		mu.Unlock()
		if work.Pod.Spec.Containers[0].Image == "v1" {
			<-release // hold the worker busy while more updates arrive
		}
		mu.Lock()
		running--
		mu.Unlock()
	})
	mk := func(img string) podWork {
		return podWork{UID: "u1", Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{{Image: img}}}}}
	}
	w.Update(mk("v1"))
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1 })
	for _, img := range []string{"v2", "v3", "v4"} {
		w.Update(mk(img)) // never blocks, although the worker is busy
	}
	if !w.Busy("u1") {
		t.Error("worker not busy while syncing")
	}
	close(release)
	// Idle means nothing is pending: every sync that will run has run.
	waitUntil(t, func() bool { return !w.Busy("u1") })
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[1] != "v4" {
		t.Errorf("synced %v, want [v1 v4]: the latest pending update, once", seen)
	}
}

// A worker that has killed its pod goes away; updates for other pods run in
// parallel; cancelling the context stops every worker.
func TestPodWorkersLifecycle(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	block := make(chan struct{})
	var mu sync.Mutex
	count := map[types.UID]int{}
	w := newPodWorkers(ctx, func(ctx context.Context, work podWork) {
		mu.Lock()
		count[work.UID]++
		mu.Unlock()
		if work.UID == "slow" {
			select {
			case <-block:
			case <-ctx.Done():
			}
		}
	})
	w.Update(podWork{UID: "slow", Pod: &v1.Pod{}})
	w.Update(podWork{UID: "fast", Kill: true}) // the worker exits after a kill
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return count["fast"] == 1 })
	waitUntil(t, func() bool { return !w.Busy("fast") })
	w.mu.Lock()
	_, exists := w.updates["fast"]
	w.mu.Unlock()
	if exists {
		t.Error("worker of a killed pod still exists")
	}
	cancel()
	done := make(chan struct{})
	go func() { w.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("workers did not stop on cancel")
	}
	w.Update(podWork{UID: "late", Pod: &v1.Pod{}}) // ignored after stop, no panic
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// A kill cancels the pod's sync in hand (what it would still start is
// wasted); an update of the spec does not, and a kill is never cancelled.
func TestPodWorkersKillCancelsSyncInHand(t *testing.T) {
	for _, tc := range []struct {
		name       string
		first      podWork
		next       podWork
		wantCancel bool
	}{
		{"kill during a sync", podWork{UID: "u", Pod: &v1.Pod{}}, podWork{UID: "u", Kill: true}, true},
		{"update during a sync", podWork{UID: "u", Pod: &v1.Pod{}}, podWork{UID: "u", Pod: &v1.Pod{}}, false},
		{"kill during a kill", podWork{UID: "u", Kill: true}, podWork{UID: "u", Kill: true}, false},
		{"sync during a kill", podWork{UID: "u", Kill: true}, podWork{UID: "u", Pod: &v1.Pod{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			release := make(chan struct{})
			var mu sync.Mutex
			var calls []bool // per sync: whether its context was cancelled when it ended
			var first context.Context
			w := newPodWorkers(ctx, func(ctx context.Context, work podWork) {
				mu.Lock()
				n := len(calls)
				calls = append(calls, false)
				if n == 0 {
					first = ctx
				}
				mu.Unlock()
				if n == 0 {
					select {
					case <-ctx.Done():
					case <-release:
					}
				}
				mu.Lock()
				calls[n] = ctx.Err() != nil
				mu.Unlock()
			})
			w.Update(tc.first)
			waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) == 1 })
			w.Update(tc.next) // a kill cancels the sync in hand before Update returns
			if !tc.wantCancel {
				mu.Lock()
				cancelled := first.Err() != nil
				mu.Unlock()
				if cancelled {
					t.Error("the sync in hand was cancelled")
				}
				close(release)
			}
			waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(calls) == 2 && !w.Busy("u") })
			mu.Lock()
			defer mu.Unlock()
			if calls[0] != tc.wantCancel {
				t.Errorf("first sync cancelled: %v, want %v", calls[0], tc.wantCancel)
			}
			if calls[1] {
				t.Error("the pending request ran under a cancelled context")
			}
		})
	}
}

// A UID given up by one pod and taken by another (REMOVE a, then ADD b, as
// the merger sends it) while the worker is busy: the kill still runs before
// the new pod's sync, which would otherwise adopt the old pod's containers.
func TestPodWorkersSyncAfterPendingKillWaitsForIt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var seen []string
	w := newPodWorkers(ctx, func(ctx context.Context, work podWork) {
		name := "kill"
		if !work.Kill {
			name = work.Pod.Name
		}
		mu.Lock()
		seen = append(seen, name)
		mu.Unlock()
		if name == "a" {
			<-ctx.Done() // busy until the kill cancels it
		}
	})
	mk := func(name string) podWork {
		return podWork{UID: "u1", Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "u1"}}}
	}
	w.Update(mk("a"))
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1 })
	w.Update(podWork{UID: "u1", Pod: mk("a").Pod, Kill: true})
	w.Update(mk("b"))
	waitUntil(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 3 })
	waitUntil(t, func() bool { return !w.Busy("u1") })
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen) != "[a kill b]" {
		t.Errorf("worker ran %v, want [a kill b]", seen)
	}
}
