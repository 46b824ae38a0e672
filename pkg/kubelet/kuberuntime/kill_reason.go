package kuberuntime

import (
	"fmt"
	"time"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// killKind is why computePodActions stops a running container.
type killKind int

const (
	// killProbe: it failed its liveness or startup probe.
	killProbe killKind = iota + 1
	// killSpecChanged: an app container whose spec changed (its hash).
	killSpecChanged
	// killInitSpecChanged: an init container whose spec changed while it
	// ran.
	killInitSpecChanged
	// killSandboxGone: its infra container stopped (killed or removed from
	// outside), taking the pod's network with it.
	killSandboxGone
	// killNewSandbox: the pod gets a new infra container (the old one's
	// spec changed, or none runs), and its containers start afresh in it.
	killNewSandbox
	// killSandboxChanged: an infra container whose spec (ports, DNS, ...)
	// is no longer the pod's.
	killSandboxChanged
	// killStaleIncarnation: it was created before the pod's current infra
	// container, in an earlier sandbox.
	killStaleIncarnation
	// killDuplicate: a newer instance of its container (or of the infra
	// container) is the one kept running.
	killDuplicate
	// killNotInSpec: its container is no longer in the pod's spec.
	killNotInSpec
	// killPodDone: the infra container of a pod with nothing left to run
	// (every container finished as its restart policy says, or an init
	// container failed for good): stopped to free its ports.
	killPodDone
	// killResizeRestart: its resources changed and its resizePolicy for
	// one of them is RestartContainer (or its memory limit was lifted,
	// which the runtime cannot do in place).
	killResizeRestart
)

var killKindNames = map[killKind]string{
	killProbe:            "probe",
	killSpecChanged:      "spec-changed",
	killInitSpecChanged:  "init-spec-changed",
	killSandboxGone:      "sandbox-gone",
	killNewSandbox:       "new-sandbox",
	killSandboxChanged:   "sandbox-changed",
	killStaleIncarnation: "stale-incarnation",
	killDuplicate:        "duplicate",
	killNotInSpec:        "not-in-spec",
	killPodDone:          "pod-done",
	killResizeRestart:    "resize-restart",
}

// String is the kind's short name, as the tests' data files write it.
func (k killKind) String() string {
	if s, ok := killKindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("killKind(%d)", int(k))
}

// killReason says why a running container is stopped: tests assert it, the
// Killing event and the agent's log render it.
type killReason struct {
	kind killKind
	// probe is the probe that failed (killProbe): "liveness" or "startup".
	probe string
	// sidecar (killProbe): the container has restartPolicy Always, which
	// the kubelet words as an init container's failure.
	sidecar bool
	// restart (killProbe, not a sidecar): the pod's restart policy starts
	// it again, which the Killing event says.
	restart bool
}

// String is the reason in short, as the tests' data files write it:
// "probe(liveness,restart)", "spec-changed", ...
func (r killReason) String() string {
	if r.kind != killProbe {
		return r.kind.String()
	}
	s := "probe(" + r.probe
	if r.sidecar {
		s += ",sidecar"
	}
	if r.restart {
		s += ",restart"
	}
	return s + ")"
}

// event is the Killing event's message for container name, in the
// kubelet's words; "" for the kubelet's plain one ("Stopping container
// <name>", which preStop writes).
func (r killReason) event(name string) string {
	switch {
	case r.kind == killProbe && r.sidecar:
		return fmt.Sprintf("Init container %s failed %s probe", name, r.probe)
	case r.kind == killProbe && r.restart:
		return fmt.Sprintf("Container %s failed %s probe, will be restarted", name, r.probe)
	case r.kind == killProbe:
		return fmt.Sprintf("Container %s failed %s probe", name, r.probe)
	case r.kind == killSpecChanged:
		return fmt.Sprintf("Container %s definition changed, will be restarted", name)
	case r.kind == killResizeRestart:
		return fmt.Sprintf("Container %s resize requires restart", name)
	}
	return ""
}

// killLogs are the log's words of the kinds whose Killing event has the
// plain message.
var killLogs = map[killKind]string{
	killInitSpecChanged:  "its definition changed",
	killSandboxGone:      "its infra container is gone",
	killNewSandbox:       "the pod gets a new infra container",
	killSandboxChanged:   "the pod's infra container changed",
	killStaleIncarnation: "it ran in an earlier infra container",
	killDuplicate:        "a newer instance runs",
	killNotInSpec:        "no longer in the pod's spec",
	killPodDone:          "the pod has nothing left to run",
}

// describe is why container name is stopped, for the agent's log.
func (r killReason) describe(name string) string {
	if msg := r.event(name); msg != "" {
		return msg
	}
	if s, ok := killLogs[r.kind]; ok {
		return s
	}
	return "no longer wanted as it runs"
}

// containerKill is a running container computePodActions stops, and why.
type containerKill struct {
	c      *kubecontainer.ContainerState
	reason killReason
	// grace is the terminationGracePeriodSeconds of the probe that failed,
	// when it has one (ownGrace): the container is stopped within it
	// rather than the pod's.
	grace    time.Duration
	ownGrace bool
}
