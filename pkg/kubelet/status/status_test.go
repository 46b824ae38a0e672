package status

import (
	"context"
	"os"
	"path/filepath"
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
