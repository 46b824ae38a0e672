package e2e

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// fitPod is a pod whose one container requests cpu; extra goes into its
// spec (a priorityClassName, say).
func fitPod(name, cpu, extra string) string {
	return lifecyclePod(name, "Always", extra+`  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    resources: {requests: {cpu: `+cpu+`}}
`)
}

// The kubelet's resource-fit admission on a node of one allocatable cpu
// (the rest given to --system-reserved; kubepods left at the host's
// capacity, which other agents here share): a pod that fits runs, one
// beyond what is left is Failed OutOfcpu with the kubelet's message and
// never gets a container; a system-node-critical pod that does not fit
// preempts the first (Failed, Preempting, DisruptionTarget) and runs; a
// restart of the agent keeps the critical pod running as it was.
func TestResourceFitAdmission(t *testing.T) {
	t.Parallel()
	reserved := fmt.Sprintf("cpu=%dm", max(runtime.NumCPU()-1, 0)*1000)
	a := startAgent(t, "--system-reserved", reserved, "--enforce-node-allocatable", "none")

	a.writeManifest("fita.yaml", fitPod("fit-a", "600m", ""))
	a.waitRunning("fit-a", "app")
	a.writeManifest("fitb.yaml", fitPod("fit-b", "600m", ""))
	want := "Pod was rejected: Node didn't have enough resource: cpu, requested: 600, used: 600, capacity: 1000"
	waitFor(t, 10*time.Second, func() (bool, string) {
		s := a.status("fit-b")
		return s.Phase == "Failed" && s.Reason == "OutOfcpu" && s.Message == want, fmt.Sprintf("fit-b %s %s %q", s.Phase, s.Reason, s.Message)
	})
	waitFor(t, 5*time.Second, func() (bool, string) {
		e, ok := a.findEvent("fit-b", "OutOfcpu")
		return ok && e.Type == "Warning" && e.Message == want[len("Pod was rejected: "):], fmt.Sprintf("OutOfcpu event %+v", e)
	})

	a.writeManifest("fitcritical.yaml", fitPod("fit-critical", "600m", "  priorityClassName: system-node-critical\n"))
	running := a.waitRunning("fit-critical", "app")
	waitFor(t, 10*time.Second, func() (bool, string) {
		s := a.status("fit-a")
		disrupted := false
		for _, c := range s.Conditions {
			disrupted = disrupted || c.Type == "DisruptionTarget" && c.Status == "True"
		}
		return s.Phase == "Failed" && s.Reason == "Preempting" && s.Message == "Preempted in order to admit critical pod" && disrupted,
			fmt.Sprintf("fit-a %s %s %q %+v", s.Phase, s.Reason, s.Message, s.Conditions)
	})
	if n := len(a.running("fit-a")); n != 0 {
		t.Errorf("%d containers of the preempted pod still run", n)
	}
	if _, ok := a.findEvent("fit-a", "Preempting"); !ok {
		t.Error("no Preempting event for the preempted pod")
	}
	if n := a.metric("kubelet_preemptions", map[string]string{"preemption_signal": "cpu"}); n != 1 {
		t.Errorf("kubelet_preemptions{preemption_signal=cpu} %v, want 1", n)
	}
	if n := len(a.containers("fit-b")); n != 0 {
		t.Errorf("the refused pod has %d containers", n)
	}

	// A restart decides the pods again: the running one is admitted as it
	// is, the stopped ones do not fit beside it.
	a.stop(syscall.SIGTERM)
	a.start()
	waitFor(t, 15*time.Second, func() (bool, string) {
		sa, sb := a.status("fit-a"), a.status("fit-b")
		return sa.Reason == "OutOfcpu" && sb.Reason == "OutOfcpu", fmt.Sprintf("after the restart: fit-a %s %s, fit-b %s %s", sa.Phase, sa.Reason, sb.Phase, sb.Reason)
	})
	if s := a.status("fit-critical"); s.Phase != "Running" {
		t.Errorf("critical pod %s %s %q after the restart, want Running", s.Phase, s.Reason, s.Message)
	}
	after := a.running("fit-critical")
	for name, c := range running {
		if after[name].ID != c.ID {
			t.Errorf("critical pod's container %s replaced by the restart", name)
		}
	}
	if n := len(a.running("fit-a")) + len(a.containers("fit-b")); n != 0 {
		t.Errorf("%d containers of the stopped or refused pods after the restart", n)
	}
}
