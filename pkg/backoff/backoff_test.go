package backoff

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// Each step is a call at an offset of the fake clock from the start.
func TestNextDoublesUpToMaxAndStartsOver(t *testing.T) {
	const s = time.Second
	type step struct {
		at    time.Duration
		reset bool          // Reset before the failure
		want  time.Duration // Next's answer
	}
	cases := []struct {
		name   string
		policy Policy
		steps  []step
	}{
		{"doubles up to the maximum", Policy{Initial: s, Max: 5 * s},
			[]step{{0, false, s}, {s, false, 2 * s}, {3 * s, false, 4 * s}, {7 * s, false, 5 * s}, {12 * s, false, 5 * s}}},
		{"a reset starts over", Policy{Initial: s, Max: 5 * s},
			[]step{{0, false, s}, {s, false, 2 * s}, {2 * s, true, s}, {3 * s, false, 2 * s}}},
		{"without ForgetAfter an old failure still counts", Policy{Initial: s, Max: 4 * s},
			[]step{{0, false, s}, {time.Hour, false, 2 * s}}},
		{"a failure older than ForgetAfter is forgotten", Policy{Initial: s, Max: 4 * s, ForgetAfter: 8 * s},
			[]step{{0, false, s}, {8 * s, false, 2 * s}, {17 * s, false, s}}},
		{"an initial above the maximum stays", Policy{Initial: 3 * s, Max: 2 * s},
			[]step{{0, false, 3 * s}, {s, false, 2 * s}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Unix(1000, 0)
			b := New[string](tc.policy, testingclock.NewFakeClock(start))
			for i, st := range tc.steps {
				if st.reset {
					b.Reset("k")
				}
				at := start.Add(st.at)
				if got := b.Next("k", at); got != st.want {
					t.Fatalf("step %d: Next = %v, want %v", i, got, st.want)
				}
				if got := b.Get("k"); got != st.want {
					t.Errorf("step %d: Get = %v, want %v", i, got, st.want)
				}
				if until, ok := b.Until("k"); !ok || !until.Equal(at.Add(st.want)) {
					t.Errorf("step %d: Until = %v, %v; want %v", i, until, ok, at.Add(st.want))
				}
			}
			if got := b.Get("other"); got != 0 {
				t.Errorf("a key that never failed has delay %v", got)
			}
		})
	}
}

// IsInBackOffSince counts the delay from the event it is given (a crashed
// container's exit), on the back-off's clock.
func TestIsInBackOffSince(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := testingclock.NewFakeClock(start)
	b := New[string](Policy{Initial: 10 * time.Second, Max: time.Minute, ForgetAfter: 2 * time.Minute}, clk)
	if b.IsInBackOffSince("k", start) {
		t.Fatal("a key that never failed is in back-off")
	}
	b.Next("k", start) // 10 s
	exited := start.Add(time.Second)
	clk.SetTime(exited.Add(10*time.Second - time.Nanosecond))
	if !b.IsInBackOffSince("k", exited) {
		t.Error("free before its delay passed")
	}
	clk.SetTime(exited.Add(10 * time.Second))
	if b.IsInBackOffSince("k", exited) {
		t.Error("still in back-off once its delay passed")
	}
	// An event long after the last failure: the policy forgot it.
	late := start.Add(3 * time.Minute)
	clk.SetTime(late)
	if b.IsInBackOffSince("k", late) {
		t.Error("a failure older than ForgetAfter still holds an attempt back")
	}
}

type podKey struct{ uid, container string }

func TestResetFuncAndGC(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := testingclock.NewFakeClock(start)
	b := New[podKey](Policy{Initial: time.Second, Max: time.Minute, ForgetAfter: 2 * time.Minute}, clk)
	b.Next(podKey{"u1", "a"}, start)
	b.Next(podKey{"u1", "b"}, start)
	b.Next(podKey{"u2", "a"}, start.Add(time.Minute))
	b.ResetFunc(func(k podKey) bool { return k.uid == "u1" })
	if b.Len() != 1 || b.Get(podKey{"u2", "a"}) == 0 {
		t.Fatalf("ResetFunc of u1 left %d keys (u2's delay %v)", b.Len(), b.Get(podKey{"u2", "a"}))
	}
	b.Next(podKey{"u3", "a"}, start)
	clk.SetTime(start.Add(2*time.Minute + time.Second))
	b.GC()
	if b.Len() != 1 || b.Get(podKey{"u3", "a"}) != 0 {
		t.Errorf("GC kept %d keys, want only the one that failed within ForgetAfter", b.Len())
	}

	never := New[podKey](Policy{Initial: time.Second, Max: time.Minute}, clk)
	never.Next(podKey{"u1", "a"}, start)
	clk.SetTime(start.Add(24 * time.Hour))
	never.GC()
	if never.Len() != 1 {
		t.Error("GC dropped a key under a policy that never forgets")
	}
}
