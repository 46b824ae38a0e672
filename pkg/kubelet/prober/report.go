package prober

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/probe"
)

// Metrics takes each probe's result and duration (metrics.Metrics: the
// kubelet's prober_probe_total and prober_probe_duration_seconds).
type Metrics interface {
	ObserveProbe(probeType string, success bool, container, pod, namespace string, uid types.UID, took time.Duration)
}

// Events records what happens to pods (events.Recorder).
type Events interface {
	Event(ref events.Ref, warning bool, reason, format string, args ...any)
}

// Report is the Observer of the agent: each result goes to m, and a
// failure or a warning is the kubelet's event about the container
// (Unhealthy, ProbeWarning) with the probe's output, cut short.
func Report(m Metrics, ev Events) Observer {
	return func(t Target, typ Type, r probe.Result, out string, took time.Duration) {
		ns, name, _ := strings.Cut(t.PodKey, "/")
		m.ObserveProbe(typ.Title(), r != probe.Failure, t.Container.Name, name, ns, t.PodUID, took)
		fp := t.FieldPath
		if fp == "" {
			fp = "spec.containers{" + t.Container.Name + "}"
		}
		ref := events.Ref{Namespace: ns, Name: name, UID: t.PodUID, FieldPath: fp}
		switch r {
		case probe.Failure:
			ev.Event(ref, true, "Unhealthy", "%s probe failed: %s", typ.Title(), probe.Truncate(out))
		case probe.Warning:
			ev.Event(ref, true, "ProbeWarning", "%s probe warning: %s", typ.Title(), probe.Truncate(out))
		}
	}
}
