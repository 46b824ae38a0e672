package prober

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/probe"
)

type noMetrics struct{}

func (noMetrics) ObserveProbe(string, bool, string, string, string, types.UID, time.Duration) {}

type recordedEvents struct{ refs []events.Ref }

func (r *recordedEvents) Event(ref events.Ref, _ bool, _, _ string, _ ...any) {
	r.refs = append(r.refs, ref)
}

// A failed probe's Unhealthy event points at the container where the pod's
// spec holds it: a sidecar's at spec.initContainers{x}.
func TestReportFieldPath(t *testing.T) {
	for _, tc := range []struct {
		name, fieldPath, want string
	}{
		{"app container", "", "spec.containers{c}"},
		{"sidecar", "spec.initContainers{c}", "spec.initContainers{c}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := &recordedEvents{}
			Report(noMetrics{}, ev)(Target{PodUID: "u", PodKey: "ns/p", Container: v1.Container{Name: "c"}, FieldPath: tc.fieldPath},
				Liveness, probe.Failure, "boom", time.Millisecond)
			if len(ev.refs) != 1 || ev.refs[0].FieldPath != tc.want || ev.refs[0].Name != "p" || ev.refs[0].Namespace != "ns" {
				t.Errorf("events %+v, want one about %s", ev.refs, tc.want)
			}
		})
	}
}
