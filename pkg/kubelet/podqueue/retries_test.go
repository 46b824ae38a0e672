package podqueue

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

func TestRetryQueue(t *testing.T) {
	start := time.Now()
	clk := testingclock.NewFakeClock(start)
	q := NewRetries(clk)
	ctx, cancel := context.WithCancel(context.Background())
	fired := make(chan []types.UID, 10)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		q.Run(ctx, func(uids []types.UID) { fired <- uids })
	}()
	q.Add("a", start.Add(300*time.Millisecond))
	q.Add("a", start.Add(50*time.Millisecond)) // the earlier time wins
	q.Add("b", start.Add(100*time.Millisecond))
	q.Add("gone", start.Add(80*time.Millisecond))
	q.Forget("gone")

	// step moves the clock and returns what fired up to then: a pod added
	// as due now fires after (or with) everything due before it.
	step := func(d time.Duration) []types.UID {
		t.Helper()
		clk.Step(d)
		q.Add("barrier", clk.Now())
		var got []types.UID
		for {
			select {
			case uids := <-fired:
				done := false
				for _, u := range uids {
					if u == "barrier" {
						done = true
					} else {
						got = append(got, u)
					}
				}
				if done {
					sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
					return got
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("a pod due now did not fire (fired before it: %v)", got)
			}
		}
	}
	if got := step(49 * time.Millisecond); len(got) != 0 {
		t.Fatalf("fired %v before any time was due", got)
	}
	if got := step(time.Millisecond); len(got) != 1 || got[0] != "a" {
		t.Fatalf("at +50 ms fired %v, want a (its earlier time)", got)
	}
	if got := step(50 * time.Millisecond); len(got) != 1 || got[0] != "b" {
		t.Fatalf("at +100 ms fired %v, want b (gone was forgotten)", got)
	}
	if got := step(time.Hour); len(got) != 0 {
		t.Errorf("fired %v again, or a forgotten pod", got)
	}

	// A time in the future fires when the clock reaches it, by the timer.
	q.Add("c", clk.Now().Add(time.Minute))
	clk.Step(time.Minute)
	select {
	case uids := <-fired:
		if len(uids) != 1 || uids[0] != "c" {
			t.Errorf("fired %v, want c", uids)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("c did not fire when its time came")
	}
	cancel()
	wg.Wait() // run returns once ctx is cancelled
}
