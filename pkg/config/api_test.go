package config

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// drain consumes a merger's updates until stopped, recording them.
func drain(m *Merger) (stop func() []string) {
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		for {
			select {
			case u := <-m.Updates():
				mu.Lock()
				for _, p := range u.Pods {
					got = append(got, u.Op.String()+" "+p.Namespace+"/"+p.Name)
				}
				mu.Unlock()
			case <-done:
				return
			}
		}
	}()
	return func() []string {
		close(done)
		<-finished
		return got
	}
}

func TestAPISource(t *testing.T) {
	dir := t.TempDir()
	m, _ := NewMerger(dir, MergerOptions{}, api.SourceAPI)
	stop := drain(m)
	ctx := context.Background()
	s := NewAPISource(ctx, "node", m)
	if !m.Seen(api.SourceAPI) {
		t.Error("API source not seen at start")
	}
	if _, err := s.Upsert(ctx, []byte(manifest("a", "i:1")+"---\n"+manifest("b", "i:1"))); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Upsert(ctx, []byte(manifest("a", "i:2"))); err != nil {
		t.Fatal(err)
	}
	_, err := s.Upsert(ctx, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: c}\nspec: {containers: [{name: c, image: i, ports: [{containerPort: 99999}]}]}\n"))
	if err == nil || !strings.Contains(err.Error(), "spec.containers[0].ports[0].containerPort") {
		t.Errorf("invalid body: %v", err)
	}
	if ok, _ := s.Delete(ctx, "default", "b"); !ok {
		t.Error("delete of a present pod failed")
	}
	if ok, _ := s.Delete(ctx, "default", "b"); ok {
		t.Error("delete of an absent pod succeeded")
	}
	if _, err := s.Replace(ctx, []byte(manifest("z", "i:1"))); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(stop(), "; ")
	want := "ADD default/a; ADD default/b; UPDATE default/a; REMOVE default/b; REMOVE default/a; ADD default/z"
	if got != want {
		t.Errorf("updates %q, want %q", got, want)
	}

	// A restart remembers the POSTed pods.
	m2, _ := NewMerger(dir, MergerOptions{}, api.SourceAPI)
	stop2 := drain(m2)
	m2.LoadCheckpoints(ctx)
	s2 := NewAPISource(ctx, "node", m2)
	if ok, _ := s2.Delete(ctx, "default", "z"); !ok {
		t.Error("restored API source lacks its pod")
	}
	if got := strings.Join(stop2(), "; "); got != "ADD default/z; REMOVE default/z" {
		t.Errorf("after restart: %q", got)
	}
}

// A checkpoint cut in half never kills a POSTed pod: with the previous
// generation readable, its pods are restored marked (kept where they run,
// never started) and the source is unseen; with nothing readable, nothing is
// restored and the source stays unseen (its running pods are left alone)
// until a PUT.
func TestAPISourceCorruptCheckpoint(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		corrupt   func(path string)
		wantState string
		wantAdds  string
	}{
		{"newest truncated", func(p string) { truncate(t, p) }, CheckpointDegraded, "ADD default/a"},
		{"both truncated", func(p string) { truncate(t, p); truncate(t, p+prevSuffix) }, CheckpointLost, ""},
		{"newest gone, previous truncated", func(p string) { _ = os.Remove(p); truncate(t, p+prevSuffix) }, CheckpointLost, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m, _ := NewMerger(dir, MergerOptions{}, api.SourceAPI)
			stop := drain(m)
			s := NewAPISource(ctx, "node", m)
			for _, name := range []string{"a", "b"} {
				if _, err := s.Upsert(ctx, []byte(manifest(name, "i:1"))); err != nil {
					t.Fatal(err)
				}
			}
			stop()
			tc.corrupt(m.snapshotPath(api.SourceAPI))

			m2, _ := NewMerger(dir, MergerOptions{}, api.SourceAPI)
			stop2 := drain(m2)
			m2.LoadCheckpoints(ctx)
			s2 := NewAPISource(ctx, "node", m2)
			if m2.Seen(api.SourceAPI) {
				t.Error("source seen with an unreadable checkpoint: its silence would kill running pods")
			}
			if st := m2.Status()[0]; st.Checkpoint != tc.wantState {
				t.Errorf("/sources checkpoint %q, want %q", st.Checkpoint, tc.wantState)
			}
			for _, p := range m2.Snapshot(api.SourceAPI) {
				if p.Annotations[api.RestoredAnnotation] == "" {
					t.Errorf("restored pod %s not marked", api.Key(p))
				}
			}
			// A POST of another pod keeps the hold; a PUT ends it.
			if _, err := s2.Upsert(ctx, []byte(manifest("c", "i:1"))); err != nil {
				t.Fatal(err)
			}
			if m2.Seen(api.SourceAPI) {
				t.Error("a POST of another pod ended the hold")
			}
			if _, err := s2.Replace(ctx, []byte(manifest("c", "i:1"))); err != nil {
				t.Fatal(err)
			}
			if !m2.Seen(api.SourceAPI) || m2.Status()[0].Checkpoint != "" {
				t.Error("a PUT did not end the hold")
			}
			got := strings.Join(stop2(), "; ")
			if want := strings.TrimPrefix(tc.wantAdds+"; ADD default/c", "; "); !strings.HasPrefix(got, want) {
				t.Errorf("updates %q, want them to begin %q", got, want)
			}
		})
	}
}

func truncate(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
}

// A change that cannot be checkpointed is refused and changes nothing.
func TestAPISourceRefusesNonDurableChange(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m, _ := NewMerger(dir, MergerOptions{}, api.SourceAPI)
	stop := drain(m)
	s := NewAPISource(ctx, "node", m)
	if _, err := s.Upsert(ctx, []byte(manifest("a", "i:1"))); err != nil {
		t.Fatal(err)
	}
	// The checkpoint's place becomes unwritable: a directory where the
	// temporary file must go is replaced by a file.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(dir)
	_, err := s.Upsert(ctx, []byte(manifest("b", "i:1")))
	if !errors.Is(err, ErrNotDurable) {
		t.Fatalf("Upsert with an unwritable checkpoint: %v, want ErrNotDurable", err)
	}
	if ok, err := s.Delete(ctx, "default", "a"); !errors.Is(err, ErrNotDurable) || !ok {
		t.Fatalf("Delete with an unwritable checkpoint: %v %v, want ErrNotDurable", ok, err)
	}
	if got := strings.Join(stop(), "; "); got != "ADD default/a" {
		t.Errorf("updates %q: a refused change was applied", got)
	}
	if keys := len(s.pods); keys != 1 {
		t.Errorf("source holds %d pods after refused changes, want 1", keys)
	}
}
