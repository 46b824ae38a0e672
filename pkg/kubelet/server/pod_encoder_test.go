package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// countingEncoder counts encodes and the most under way at once; each
// waits for release to be closed, so concurrent requests pile up behind it.
type countingEncoder struct {
	release          chan struct{}
	started          chan struct{} // one send per encode
	n, inFlight, max atomic.Int32
}

func (c *countingEncoder) encode(v any) ([]byte, error) {
	c.n.Add(1)
	if f := c.inFlight.Add(1); f > c.max.Load() {
		c.max.Store(f)
	}
	defer c.inFlight.Add(-1)
	c.started <- struct{}{}
	<-c.release
	return encodeJSON(v)
}

func encoderPod(name string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{"a": strings.Repeat("x", 1<<10)}},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i"}}}, Status: v1.PodStatus{Phase: phase}}
}

// Thirty concurrent lists of unchanged pods are encoded once, one encode at
// a time, and all get the same bytes.
func TestPodEncoderEncodesOnceForConcurrentLists(t *testing.T) {
	e := newPodEncoder()
	c := &countingEncoder{release: make(chan struct{}), started: make(chan struct{}, 64)}
	e.encode = c.encode
	desired := encoderPod("web", v1.PodRunning)
	snapshot := func() []*v1.Pod {
		cp := *desired // shallow, as the host's copies
		return []*v1.Pod{&cp}
	}
	var wg sync.WaitGroup
	bodies := make([][]byte, 30)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := e.list(context.Background(), snapshot)
			if err != nil {
				t.Error(err)
			}
			bodies[i] = b
		}()
	}
	<-c.started // the first encode is under way; the others wait or hit
	close(c.release)
	wg.Wait()
	if n, m := c.n.Load(), c.max.Load(); n != 1 || m != 1 {
		t.Errorf("%d encodes of an unchanged list, %d at once, want 1", n, m)
	}
	for i, b := range bodies {
		if string(b) != string(bodies[0]) || !strings.Contains(string(b), `"name": "web"`) {
			t.Fatalf("body %d differs or lacks the pod: %.80q", i, b)
		}
	}
}

// A change of a pod's status, of its spec or of the set of pods is
// encoded anew; an unchanged list is not.
func TestPodEncoderFollowsChanges(t *testing.T) {
	e := newPodEncoder()
	var n int
	e.encode = func(v any) ([]byte, error) { n++; return encodeJSON(v) }
	web, db := encoderPod("web", v1.PodPending), encoderPod("db", v1.PodRunning)
	pods := []*v1.Pod{web}
	snapshot := func() []*v1.Pod {
		out := make([]*v1.Pod, 0, len(pods))
		for _, p := range pods {
			cp := *p
			out = append(out, &cp)
		}
		return out
	}
	steps := []struct {
		name    string
		change  func()
		encodes int
		want    string
	}{
		{"first list", func() {}, 1, `"phase": "Pending"`},
		{"unchanged", func() {}, 1, `"phase": "Pending"`},
		{"status changed", func() { w := *web; w.Status = v1.PodStatus{Phase: v1.PodRunning}; web = &w; pods = []*v1.Pod{web} }, 2, `"phase": "Running"`},
		{"spec replaced", func() {
			w := *web
			w.Spec = v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i:2"}}}
			web = &w
			pods = []*v1.Pod{web}
		}, 3, `"image": "i:2"`},
		{"pod added", func() { pods = []*v1.Pod{db, web} }, 4, `"name": "db"`},
		{"unchanged again", func() {}, 4, `"name": "db"`},
	}
	for _, s := range steps {
		s.change()
		body, err := e.list(context.Background(), snapshot)
		if err != nil {
			t.Fatal(err)
		}
		if n != s.encodes || !strings.Contains(string(body), s.want) {
			t.Errorf("%s: %d encodes, body has %q: %v; want %d encodes", s.name, n, s.want, strings.Contains(string(body), s.want), s.encodes)
		}
	}
}

// A request waiting for its turn to encode gives up when its client goes.
func TestPodEncoderWaitEndsWithRequest(t *testing.T) {
	e := newPodEncoder()
	c := &countingEncoder{release: make(chan struct{}), started: make(chan struct{}, 2)}
	e.encode = c.encode
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := e.one(context.Background(), encoderPod("a", v1.PodRunning)); err != nil {
			t.Error(err)
		}
	}()
	<-c.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.one(ctx, encoderPod("b", v1.PodRunning)); !errors.Is(err, context.Canceled) {
		t.Errorf("a request whose client went: %v, want context.Canceled", err)
	}
	close(c.release)
	<-done
	if m := c.max.Load(); m != 1 {
		t.Errorf("%d encodes at once, want 1", m)
	}
}
