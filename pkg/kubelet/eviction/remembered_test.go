package eviction

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// An eviction remembered is found again by a Remembered loaded from the
// same file (an agent restart) for the pod with the same manifest; with
// another manifest it is forgotten, and so it is by Forget and by Prune.
// A file that cannot be read remembers nothing.
func TestRemembered(t *testing.T) {
	evicted := func() *v1.Pod {
		p := podWithUID("evicted")
		p.Annotations = map[string]string{api.ConfigSourceAnnotation: "file"}
		return p
	}
	edited := evicted()
	edited.Spec.Containers[0].Image = "img:2"
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		after   func(r *Remembered) // before the restart
		lookup  *v1.Pod
		wantMsg string // "": not remembered
		wantLen int    // after the lookup
	}{
		{name: "same manifest: still evicted", lookup: evicted(), wantMsg: "low on disk", wantLen: 1},
		{name: "another manifest: a new pod, forgotten", lookup: edited, wantLen: 0},
		{name: "forgotten with its pod", after: func(r *Remembered) { r.Forget("evicted") }, lookup: evicted()},
		{name: "pruned: its source spoke without it",
			after: func(r *Remembered) {
				r.Prune(func(uid types.UID, source string) bool { return source != "file" })
			}, lookup: evicted()},
		{name: "kept by prune while its source has not spoken",
			after: func(r *Remembered) {
				r.Prune(func(uid types.UID, source string) bool { return true })
			}, lookup: evicted(), wantMsg: "low on disk", wantLen: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "checkpoints", "evictions.json")
			r := LoadRemembered(path)
			if err := r.Remember(evicted(), "low on disk", at); err != nil {
				t.Fatal(err)
			}
			if tc.after != nil {
				tc.after(r)
			}
			restarted := LoadRemembered(path)
			msg, ok := restarted.Lookup(tc.lookup)
			if ok != (tc.wantMsg != "") || msg != tc.wantMsg {
				t.Errorf("lookup after restart: %q %v, want %q", msg, ok, tc.wantMsg)
			}
			if n := LoadRemembered(path).Len(); n != tc.wantLen {
				t.Errorf("%d pods in the file after the lookup, want %d", n, tc.wantLen)
			}
		})
	}
}

func TestRememberedUnreadableOrFailing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "evictions.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := LoadRemembered(path)
	if _, ok := r.Lookup(podWithUID("evicted")); ok || r.Len() != 0 {
		t.Errorf("a corrupt file remembers %d pods", r.Len())
	}
	// A write that fails is reported: the caller logs that the pod would
	// run again after a restart.
	r.write = func(string, []byte) error { return errors.New("disk full") }
	if err := r.Remember(podWithUID("evicted"), "m", time.Now()); err == nil {
		t.Error("Remember with a failing write: no error")
	}
}
