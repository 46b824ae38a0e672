package events

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRecorder(t *testing.T) {
	r := New("node-1")
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"}}
	r.Event(PodRef(pod, "server"), false, "Started", "Started container %s", "server")
	r.Event(PodRef(pod, "server"), true, "BackOff", "Back-off restarting failed container")
	r.Event(PodRef(pod, "server"), true, "BackOff", "Back-off restarting failed container") // folded
	l := r.List()
	if len(l.Items) != 2 {
		t.Fatalf("%d events, want 2", len(l.Items))
	}
	e := l.Items[1]
	if e.Reason != "BackOff" || e.Type != v1.EventTypeWarning || e.Count != 2 || e.InvolvedObject.FieldPath != "spec.containers{server}" ||
		e.Source.Host != "node-1" || e.InvolvedObject.Name != "web" {
		t.Errorf("event %+v", e)
	}
	for i := 0; i < ringSize+10; i++ {
		r.Event(Ref{Name: "p", UID: "u2"}, false, "Pulled", "image %d", i)
	}
	if n := len(r.List().Items); n != ringSize {
		t.Errorf("ring holds %d events, want %d", n, ringSize)
	}
	// Without an etcd writer nothing is queued (no copies kept for nobody).
	if len(r.queue) != 0 || r.Dropped() != 0 {
		t.Errorf("no writer: %d events queued, %d dropped; want none", len(r.queue), r.Dropped())
	}
	// With a writer that does not keep up the queue fills, then events are
	// dropped from it, never blocking the caller.
	r.writing.Store(true)
	for i := 0; i < queueSize+10; i++ {
		r.Event(Ref{Name: "p", UID: "u2"}, false, "Pulled", "image %d", i)
	}
	if len(r.queue) != queueSize || r.Dropped() != 10 {
		t.Errorf("stalled writer: %d queued, %d dropped; want %d, 10", len(r.queue), r.Dropped(), queueSize)
	}
	var nilRecorder *Recorder
	nilRecorder.Event(Ref{}, false, "X", "no panic")
}

// The kubelet's container references name a container by the list that
// holds it (pkg/kubelet/container/ref.go, fieldPath): an init container's
// or a sidecar's events point at spec.initContainers{x}, an ephemeral
// one's at spec.ephemeralContainers{x}.
func TestPodRefFieldPath(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job", Namespace: "default", UID: "u1"}, Spec: v1.PodSpec{
		InitContainers:      []v1.Container{{Name: "setup"}, {Name: "proxy", RestartPolicy: &always}},
		Containers:          []v1.Container{{Name: "main"}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger"}}},
	}}
	for _, tc := range []struct {
		container, want string
	}{
		{"", ""},
		{"main", "spec.containers{main}"},
		{"setup", "spec.initContainers{setup}"},
		{"proxy", "spec.initContainers{proxy}"},
		{"debugger", "spec.ephemeralContainers{debugger}"},
		{"POD", "spec.containers{POD}"},
	} {
		t.Run(tc.container, func(t *testing.T) {
			if got := PodRef(pod, tc.container).FieldPath; got != tc.want {
				t.Errorf("PodRef(pod, %q).FieldPath = %q, want %q", tc.container, got, tc.want)
			}
		})
	}
}
