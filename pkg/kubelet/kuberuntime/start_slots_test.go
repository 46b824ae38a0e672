package kuberuntime

import (
	"context"
	"testing"
	"time"

	"github.com/classic-kubelet/kubelet/pkg/await"
)

// Freed slots go to waiting pods' own containers before waiting infra
// starts, each kind in arrival order; a waiter whose context ends leaves
// the queue, and a slot granted to it as it left is passed on.
func TestStartSlotsOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		waiters []bool // infra? in arrival order, while both slots are held
		cancel  int    // index of a waiter cancelled before any release (-1: none)
		want    []int  // the order the waiters get a slot, one release at a time
	}{
		{"apps before infras", []bool{true, false, true, false}, -1, []int{1, 3, 0, 2}},
		{"infras in arrival order", []bool{true, true, true}, -1, []int{0, 1, 2}},
		{"apps in arrival order", []bool{false, false}, -1, []int{0, 1}},
		{"a cancelled waiter leaves", []bool{false, true, false}, 0, []int{2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStartSlots(2)
			for range 2 { // both held; each s.release below frees one
				if _, err := s.acquire(context.Background(), true); err != nil {
					t.Fatal(err)
				}
			}
			got, left := make(chan int, len(tc.waiters)), make(chan int, len(tc.waiters))
			cancels := make([]context.CancelFunc, len(tc.waiters))
			for i, infra := range tc.waiters {
				ctx, cancel := context.WithCancel(context.Background())
				cancels[i] = cancel
				go func() {
					if _, err := s.acquire(ctx, infra); err == nil {
						got <- i // and keeps the slot
					} else {
						left <- i
					}
				}()
				// Queued (a waiter parks once it is), after the ones before.
				await.Parked(t, i+1, "kuberuntime.(*startSlots).acquire(")
			}
			if tc.cancel >= 0 {
				cancels[tc.cancel]()
				if i := <-left; i != tc.cancel {
					t.Fatalf("waiter %d left the queue, want %d", i, tc.cancel)
				}
			}
			for _, want := range tc.want {
				s.release()
				select {
				case i := <-got:
					if i != want {
						t.Fatalf("waiter %d got the slot, want %d", i, want)
					}
				case <-time.After(2 * time.Second):
					t.Fatalf("no waiter got the slot, want %d", want)
				}
			}
			for _, c := range cancels {
				c()
			}
		})
	}
}

// A slot is free again once released, and acquire does not wait then.
func TestStartSlotsBound(t *testing.T) {
	s := newStartSlots(1)
	r, err := s.acquire(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.acquire(ctx, false); err == nil {
		t.Fatal("acquired a second slot of one")
	}
	r()
	if _, err := s.acquire(context.Background(), true); err != nil {
		t.Fatalf("slot not given back: %v", err)
	}
}
