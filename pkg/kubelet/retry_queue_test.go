package kubelet

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestRetryQueue(t *testing.T) {
	q := newRetryQueue()
	ctx, cancel := context.WithCancel(context.Background())
	fired := make(chan types.UID, 10)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		q.run(ctx, func(uids []types.UID) {
			for _, u := range uids {
				fired <- u
			}
		})
	}()
	start := time.Now()
	q.add("a", start.Add(300*time.Millisecond))
	q.add("a", start.Add(50*time.Millisecond)) // the earlier time wins
	q.add("b", start.Add(100*time.Millisecond))
	q.add("gone", start.Add(80*time.Millisecond))
	q.forget("gone")
	var got []types.UID
	for len(got) < 2 {
		select {
		case u := <-fired:
			got = append(got, u)
		case <-time.After(2 * time.Second):
			t.Fatalf("fired %v, want a then b", got)
		}
	}
	if got[0] != "a" || got[1] != "b" || time.Since(start) > time.Second {
		t.Errorf("fired %v after %v, want a then b within a second", got, time.Since(start))
	}
	select {
	case u := <-fired:
		t.Errorf("%s fired again, or a forgotten pod fired", u)
	case <-time.After(400 * time.Millisecond):
	}
	cancel()
	wg.Wait() // run returns once ctx is cancelled
}
