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
)

// Stamping never writes the checkpoint itself; Run does, in the background,
// and once more when it stops, so a new manager reads the same times.
func TestStampSavesInTheBackground(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conditions.json")
	m := NewManager(path)
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
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not checkpoint the stamped condition")
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.Forget("u1")
	stamped := m.Stamp("u2", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}})[0].LastTransitionTime
	cancel()
	wg.Wait()
	m2 := NewManager(path)
	if _, ok := m2.conds["u1"]; ok {
		t.Error("a forgotten pod came back from the checkpoint")
	}
	m2.SetClock(func() time.Time { return time.Now().Add(time.Hour) })
	got := m2.Stamp("u2", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}})[0].LastTransitionTime
	if !got.Equal(&stamped) || conds[0].LastTransitionTime.IsZero() {
		t.Errorf("restored transition time %v, want %v: the last change before Run stopped was not saved", got, stamped)
	}
}

// Changes that come within saveSpacing of a checkpoint wait for the next
// one, which holds them all: a burst of pods does not write and sync the
// file at each change.
func TestCheckpointsAreSpaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conditions.json")
	m := NewManager(path)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	defer func() { cancel(); <-done }() // Run's last checkpoint lands before the directory goes
	holds := func(uid string) bool {
		data, _ := os.ReadFile(path)
		return strings.Contains(string(data), uid)
	}
	m.Stamp("first", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}})
	for deadline := time.Now().Add(5 * time.Second); !holds("first"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first change was not checkpointed")
		}
	}
	written := time.Now()
	m.Stamp("second", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}})
	m.Stamp("third", []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}})
	if holds("second") && time.Since(written) < saveSpacing/2 {
		t.Fatal("a change right after a checkpoint was written at once")
	}
	for deadline := time.Now().Add(5 * time.Second); !holds("second") || !holds("third"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the changes after the first checkpoint were never written")
		}
	}
}
