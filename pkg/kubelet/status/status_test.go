package status

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/await"
)

// Stamping never writes the checkpoint itself; Run does, in the background,
// and once more when it stops, so a new manager reads the same times.
func TestStampSavesInTheBackground(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conditions.json")
	clk := await.NewFakeClock(time.Now())
	m := NewManager(path, clk)
	conds := m.Stamp("u1", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}})
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("Stamp wrote the checkpoint itself (%v)", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		m.Run(ctx)
	}()
	clk.AwaitWait(t, 1) // the spacing after a checkpoint
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Run did not checkpoint the stamped condition: %v", err)
	}
	m.Forget("u1")
	stamped := m.Stamp("u2", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}})[0].LastTransitionTime
	cancel()
	wg.Wait()
	m2 := NewManager(path, nil)
	if _, ok := m2.conds["u1"]; ok {
		t.Error("a forgotten pod came back from the checkpoint")
	}
	m2.SetClock(testingclock.NewFakeClock(time.Now().Add(time.Hour)))
	got := m2.Stamp("u2", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}})[0].LastTransitionTime
	if !got.Equal(&stamped) || conds[0].LastTransitionTime.IsZero() {
		t.Errorf("restored transition time %v, want %v: the last change before Run stopped was not saved", got, stamped)
	}
}

// Changes that come within saveSpacing of a checkpoint wait for the next
// one, which holds them all: a burst of pods does not write and sync the
// file at each change. The clock is fake: the spacing is measured in steps
// of it, not in how fast this machine writes a file.
func TestCheckpointsAreSpaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conditions.json")
	clk := await.NewFakeClock(time.Now())
	m := NewManager(path, clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }() // Run's last checkpoint lands before the directory goes
	holds := func(uid string) bool {
		data, _ := os.ReadFile(path)
		return strings.Contains(string(data), uid)
	}
	// A checkpoint is followed by a wait of saveSpacing on the clock, which
	// only this test moves: evidence that the background write is done.
	checkpointed := func(n int) {
		t.Helper()
		if d := clk.AwaitWait(t, n); d != saveSpacing {
			t.Fatalf("Run waits %v after checkpoint %d, want saveSpacing", d, n)
		}
	}
	m.Stamp("first", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}})
	checkpointed(1)
	if !holds("first") {
		t.Fatal("the first change was not checkpointed")
	}
	m.Stamp("second", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}})
	m.Stamp("third", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}})
	clk.Step(saveSpacing - time.Nanosecond)
	if !clk.HasWaiters() {
		t.Fatal("the spacing ended before saveSpacing had passed")
	}
	if holds("second") {
		t.Fatal("a change right after a checkpoint was written before saveSpacing had passed")
	}
	clk.Step(time.Nanosecond)
	checkpointed(2)
	if !holds("second") || !holds("third") {
		t.Fatal("the changes after the first checkpoint were not written together")
	}
}
