package kuberuntime

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// podActions is what SyncPod must do to bring a pod to its spec.
type podActions struct {
	createInfra bool
	kill        []containerKill                      // running containers to stop (app or infra), and why
	startInit   int                                  // index into spec.initContainers to start, or -1
	start       []int                                // indexes into spec.containers, in order
	ephemeral   []int                                // indexes into spec.ephemeralContainers to start (once)
	restarts    map[string]int                       // restart count of each container to start, by name
	crashed     map[string]containerKey              // back-off key of each start that retries a failure, by name ("POD": the sandbox)
	waiting     []string                             // containers held back by back-off ("POD": the sandbox)
	pullWaits   map[string]*kubecontainer.StartError // of those, the ones whose image is in pull back-off, and why
	retryAt     time.Time                            // when the first of them may restart
	initFailed  bool                                 // an init container failed for good: the pod has failed
	sandboxGone bool                                 // the infra container stopped: kill the rest without grace
	resize      []containerResize                    // running containers resized in place
}

// podChecks is what computePodActions asks beyond the pod's containers and
// back-off. A nil field answers for every container as noted.
type podChecks struct {
	// unhealthy reports running containers that failed their liveness or
	// startup probe, and which probe (nil: none).
	unhealthy func(id string) (bool, string)
	// started reports whether a running sidecar has passed its startup
	// probe (nil: every one has).
	started func(c *v1.Container, id string) bool
	// pullBackOff reports a container whose image may not be pulled again
	// before until, and why (nil error: none is in back-off).
	pullBackOff func(c *v1.Container) (until time.Time, why *kubecontainer.StartError)
}

// withDefaults is checks with each nil check answering as podChecks says.
func (checks podChecks) withDefaults() podChecks {
	if checks.unhealthy == nil {
		checks.unhealthy = func(string) (bool, string) { return false, "" }
	}
	if checks.started == nil {
		checks.started = func(*v1.Container, string) bool { return true }
	}
	if checks.pullBackOff == nil {
		checks.pullBackOff = func(*v1.Container) (time.Time, *kubecontainer.StartError) { return time.Time{}, nil }
	}
	return checks
}

// computePodActions compares a pod's spec with its containers. It is pure:
// every decision is made here, so it is tested without Docker. It looks at
// the pod once (newPodView), then decides in phases, each over that view
// and what the phases before it decided: the sandbox, the init containers,
// the app containers, the ephemeral containers, the containers no longer
// in the spec, and last whether anything is left to run and whether the
// sandbox may be made now. bo is only asked (waiting, pending).
func computePodActions(pod *v1.Pod, state *kubecontainer.PodState, now time.Time, bo *backoff, checks podChecks) podActions {
	a := podActions{startInit: -1, restarts: map[string]int{}, crashed: map[string]containerKey{},
		pullWaits: map[string]*kubecontainer.StartError{}}
	if state == nil {
		state = &kubecontainer.PodState{}
	}
	if pod.Annotations[api.RestoredAnnotation] != "" && state.RunningInfra() == nil {
		// Restored from an old checkpoint generation: it may have been
		// deleted since. Kept where it runs, never started.
		return a
	}
	p := &planner{v: newPodView(pod, state, checks), now: now, bo: bo, a: &a}
	p.sandbox()
	initDone := p.initContainers()
	keep := p.appContainers(initDone)
	p.ephemeralContainers()
	p.orphans()
	p.stopIfDone(keep, initDone)
	p.sandboxBackOff()
	return a
}

// planner fills one sync's actions from the pod's view, phase by phase.
type planner struct {
	v   *podView
	now time.Time
	bo  *backoff
	a   *podActions
}

// startDecision is what becomes of a container that does not run.
type startDecision int

const (
	decideStart startDecision = iota // it starts now
	decideDone                       // its restart policy says it is done
	decideWait                       // it waits for its back-off
)

// kill stops a running container for why.
func (p *planner) kill(c *kubecontainer.ContainerState, why killReason) {
	p.a.kill = append(p.a.kill, containerKill{c: c, reason: why})
}

// failedProbe reports whether the running instance inst of c failed its
// liveness or startup probe, and if so, the kill that says so as the
// kubelet's Killing event does, within the probe's own grace if it has one.
func (p *planner) failedProbe(c *v1.Container, inst *kubecontainer.ContainerState) (containerKill, bool) {
	bad, probe := p.v.checks.unhealthy(inst.ID)
	if !bad {
		return containerKill{}, false
	}
	sidecar := api.IsSidecar(c)
	k := containerKill{c: inst, reason: killReason{kind: killProbe, probe: probe, sidecar: sidecar,
		restart: !sidecar && p.v.pod.Spec.RestartPolicy != v1.RestartPolicyNever}}
	spec := c.LivenessProbe
	if probe == "startup" {
		spec = c.StartupProbe
	}
	if spec != nil && spec.TerminationGracePeriodSeconds != nil {
		k.grace, k.ownGrace = time.Duration(*spec.TerminationGracePeriodSeconds)*time.Second, true
	}
	return k, true
}

// restartDecision says whether container c, whose newest instance is last
// (nil: none, or it runs), starts now. A container that never got an
// instance because creating it failed (bad config, image never pulled)
// waits on the same back-off as one that crashed.
func (p *planner) restartDecision(c *specContainer, last *kubecontainer.ContainerState) startDecision {
	name := c.spec.Name
	if last != nil && !p.v.same(c, last) {
		last = nil // a changed spec starts afresh
	}
	if last != nil && !kubecontainer.Restarts(p.v.pod, c.spec, last.ExitCode) {
		return decideDone
	}
	key := backoffKey(name, c.hash)
	if until, wait := p.bo.waiting(key, last, p.now); wait {
		p.a.wait(name, until)
		return decideWait
	}
	// An image whose pull failed is not pulled again (nor the pod synced
	// for it) until its own back-off ends.
	if until, why := p.v.checks.pullBackOff(c.spec); why != nil && p.now.Before(until) {
		p.a.wait(name, until)
		p.a.pullWaits[name] = why
		return decideWait
	}
	if last != nil || p.bo.pending(key) {
		p.a.crashed[name] = key
	}
	return decideStart
}

// wait records a container held back by its back-off until until.
func (a *podActions) wait(name string, until time.Time) {
	a.waiting = append(a.waiting, name)
	if a.retryAt.IsZero() || until.Before(a.retryAt) {
		a.retryAt = until
	}
}

// sandbox keeps the pod's current infra container and stops the other
// running ones; without a current one, the pod gets a new one.
func (p *planner) sandbox() {
	for _, c := range p.v.state.Infra() {
		switch {
		case !c.Running || c == p.v.infra:
		case c.Hash != p.v.infraHash:
			p.kill(c, killReason{kind: killSandboxChanged})
		default:
			p.kill(c, killReason{kind: killDuplicate})
		}
	}
	p.a.createInfra = p.v.infra == nil
	// A sandbox that stopped running (removed or killed from outside) took
	// the pod's network and ports with it: its app containers are orphans,
	// killed at once so the pod is whole again quickly.
	p.a.sandboxGone = p.v.sandboxGone
}

// stopIfDone stops the infra container of a pod with nothing left to run
// (every container finished as its restart policy says, or an init
// container failed for good), freeing its ports; keep is how many app
// containers run or restart later.
func (p *planner) stopIfDone(keep int, initDone bool) {
	initPending := p.a.startInit >= 0 || (!initDone && !p.a.initFailed)
	if keep > 0 || len(p.a.start) > 0 || len(p.a.waiting) > 0 || initPending {
		return
	}
	p.a.createInfra, p.a.ephemeral = false, nil
	if p.v.infra != nil {
		p.kill(p.v.infra, killReason{kind: killPodDone})
	}
}

// sandboxBackOff holds back a sandbox that could not be made (infra image
// missing, volumes not set up): it is retried on the back-off, and nothing
// starts without it.
func (p *planner) sandboxBackOff() {
	if !p.a.createInfra {
		return
	}
	key := backoffKey(infraName, p.v.infraHash)
	if until, wait := p.bo.waiting(key, nil, p.now); wait {
		p.a.createInfra, p.a.startInit, p.a.start = false, -1, nil
		p.a.wait(infraName, until)
	} else if p.bo.pending(key) {
		p.a.crashed[infraName] = key
	}
}

// initContainers runs the init containers one at a time, in order, each to
// success; a sidecar (restartPolicy Always) instead to started, and keeps
// it running. It reports whether they are all done: the app containers may
// start.
func (p *planner) initContainers() bool {
	for i := range p.v.init {
		c := &p.v.init[i]
		last := p.currentInit(c)
		var done bool
		if api.IsSidecar(c.spec) {
			done = p.sidecar(c, last)
		} else {
			done = p.initContainer(c, last)
		}
		if !done {
			return false
		}
	}
	return true
}

// currentInit stops the running instances of init container c from an
// earlier sandbox or of an earlier spec, and returns its newest other
// instance of the current sandbox (nil: none).
func (p *planner) currentInit(c *specContainer) (last *kubecontainer.ContainerState) {
	for _, inst := range c.instances {
		switch {
		case inst.Running && !p.v.current(inst):
			p.kill(inst, p.v.staleReason())
		case inst.Running && !p.v.same(c, inst):
			p.kill(inst, killReason{kind: killInitSpecChanged})
		case last == nil && p.v.current(inst):
			last = inst
		}
	}
	return last
}

// initContainer runs a (non-sidecar) init container whose newest instance
// of this sandbox is last, and reports whether it is done.
func (p *planner) initContainer(c *specContainer, last *kubecontainer.ContainerState) bool {
	switch {
	case last != nil && last.Running:
		return false // still running: wait for it
	case last != nil && last.ExitCode == 0 && p.v.same(c, last):
		return true // completed in this incarnation
	case last != nil && last.ExitCode != 0 && p.v.pod.Spec.RestartPolicy == v1.RestartPolicyNever:
		p.a.initFailed = true
		return false
	}
	if p.restartDecision(c, last) != decideWait {
		p.a.startInit = c.index
		p.a.restarts[c.spec.Name] = c.restartCount()
	}
	return false
}

// sidecar keeps a sidecar running, restarting it once it has exited (a
// failed probe kills it), and reports whether the init containers after it
// may go on: once it has started, or at once in a pod already initialized.
func (p *planner) sidecar(c *specContainer, last *kubecontainer.ContainerState) bool {
	if last != nil && last.Running {
		if k, sick := p.failedProbe(c.spec, last); sick {
			p.a.kill = append(p.a.kill, k)
			return p.v.initialized // restarted once it has exited
		}
		if !p.resizeRunning(c, last) {
			return p.v.initialized || p.v.checks.started(c.spec, last.ID)
		}
		last = nil // stopped for its resize: it starts again now
	}
	// One init container starts per sync; another sidecar that is down
	// starts on the next.
	if p.a.startInit < 0 && p.restartDecision(c, last) == decideStart {
		p.a.startInit = c.index
		p.a.restarts[c.spec.Name] = c.restartCount()
	}
	return p.v.initialized
}

// appContainers keeps each app container running as its restart policy
// says, once the init containers are done (initDone). It returns how many
// are kept: running, or killed by a probe and restarted on a later sync.
func (p *planner) appContainers(initDone bool) (keep int) {
	for i := range p.v.apps {
		c := &p.v.apps[i]
		running, probeKilled := p.runningApp(c)
		if running != nil || (probeKilled && !p.a.createInfra) {
			// One killed for failing its probe restarts like a crash, on a
			// later sync once it has exited, as policy and back-off say.
			keep++
			continue
		}
		if !initDone {
			continue // app containers wait for the init containers
		}
		var last *kubecontainer.ContainerState
		if len(c.instances) > 0 && !c.instances[0].Running {
			last = c.instances[0]
		}
		if p.restartDecision(c, last) == decideStart {
			p.a.start = append(p.a.start, c.index)
			p.a.restarts[c.spec.Name] = c.restartCount()
		}
	}
	return keep
}

// runningApp keeps app container c's newest healthy instance with the
// spec's hash running, in the current sandbox, and stops its other running
// instances. probeKilled: an instance with the spec's hash was stopped for
// failing its probe.
func (p *planner) runningApp(c *specContainer) (running *kubecontainer.ContainerState, probeKilled bool) {
	for _, inst := range c.instances {
		if !inst.Running {
			continue
		}
		k, sick := p.failedProbe(c.spec, inst)
		switch {
		case !sick && p.v.same(c, inst) && running == nil && !p.a.createInfra:
			if p.resizeRunning(c, inst) {
				continue // stopped, and started again with its new bounds
			}
			running = inst
			continue
		case sick:
			probeKilled = probeKilled || p.v.same(c, inst)
		case !p.v.same(c, inst):
			k = containerKill{c: inst, reason: killReason{kind: killSpecChanged}}
		case p.a.createInfra:
			k = containerKill{c: inst, reason: p.v.staleReason()}
		default:
			k = containerKill{c: inst, reason: killReason{kind: killDuplicate}}
		}
		p.a.kill = append(p.a.kill, k)
	}
	return running, probeKilled
}

// ephemeralContainers starts ephemeral containers (kubectl debug) once the
// sandbox runs, initialized or not, as the kubelet's. One that was created
// never starts again, not even in a new sandbox (the one still running in
// the old sandbox is stopped with it); one whose creation failed is retried
// on its back-off.
func (p *planner) ephemeralContainers() {
	for i := range p.v.ephemeral {
		c := &p.v.ephemeral[i]
		for _, inst := range c.instances {
			if inst.Running && !p.v.current(inst) {
				p.kill(inst, p.v.staleReason())
			}
		}
		if p.v.infra != nil && len(c.instances) == 0 && p.restartDecision(c, nil) == decideStart {
			p.a.ephemeral = append(p.a.ephemeral, c.index)
		}
	}
}

// orphans stops the containers no longer in the spec.
func (p *planner) orphans() {
	for _, c := range p.v.state.Containers {
		if c.Running && !p.v.inSpec[c.Name] {
			p.kill(c, killReason{kind: killNotInSpec})
		}
	}
}
