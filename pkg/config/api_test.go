package config

import (
	"context"
	"strings"
	"sync"
	"testing"
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
	m, _ := NewMerger(dir, SourceAPI)
	stop := drain(m)
	ctx := context.Background()
	s := NewAPISource(ctx, "node", m)
	if !m.Seen(SourceAPI) {
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
	if !s.Delete(ctx, "default", "b") || s.Delete(ctx, "default", "b") {
		t.Error("delete of a present pod failed, or of an absent one succeeded")
	}
	if _, err := s.Replace(ctx, []byte(manifest("z", "i:1"))); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(stop(), "; ")
	want := "ADD default/a; ADD default/b; UPDATE default/a; REMOVE default/b; ADD default/z; REMOVE default/a"
	if got != want {
		t.Errorf("updates %q, want %q", got, want)
	}

	// A restart remembers the POSTed pods.
	m2, _ := NewMerger(dir, SourceAPI)
	stop2 := drain(m2)
	m2.LoadCheckpoints(ctx)
	s2 := NewAPISource(ctx, "node", m2)
	if !s2.Delete(ctx, "default", "z") {
		t.Error("restored API source lacks its pod")
	}
	if got := strings.Join(stop2(), "; "); got != "ADD default/z; REMOVE default/z" {
		t.Errorf("after restart: %q", got)
	}
}
