package metrics

import (
	"testing"
	"time"
)

func TestProbeSeriesGoWithThePod(t *testing.T) {
	m := New("node-1")
	m.ObserveProbe("Readiness", true, "app", "web", "default", "uid-1", 5*time.Millisecond)
	m.ObserveProbe("Liveness", false, "app", "web", "default", "uid-1", time.Second)
	m.ObserveProbe("Readiness", true, "app", "db", "default", "uid-2", time.Millisecond)
	count := func() map[string]int {
		mfs, err := m.ProbeRegistry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, mf := range mfs {
			out[mf.GetName()] = len(mf.Metric)
		}
		return out
	}
	// Failed probes are counted but not timed, as the kubelet does.
	if got := count(); got["prober_probe_total"] != 3 || got["prober_probe_duration_seconds"] != 2 {
		t.Errorf("series %v, want 3 results and 2 durations", got)
	}
	m.ForgetPod("uid-1", "default", "web")
	if got := count(); got["prober_probe_total"] != 1 || got["prober_probe_duration_seconds"] != 1 {
		t.Errorf("after the pod went: series %v, want db's only", got)
	}
}

func TestNodeName(t *testing.T) {
	mfs, err := New("node-1").Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "kubelet_node_name" {
			if l := mf.Metric[0].Label[0]; l.GetName() != "node" || l.GetValue() != "node-1" || mf.Metric[0].Gauge.GetValue() != 1 {
				t.Errorf("kubelet_node_name %v", mf.Metric[0])
			}
			return
		}
	}
	t.Error("no kubelet_node_name")
}
