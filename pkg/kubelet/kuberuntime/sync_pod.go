package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// Waiting reasons of a pod's sandbox, as Kubernetes reports them.
const (
	reasonCreateSandbox = "CreatePodSandboxError"
	reasonVolumeSetup   = "FailedMount"
)

// podActions is what SyncPod must do to bring a pod to its spec.
type podActions struct {
	createInfra bool
	kill        []*kubecontainer.ContainerState      // running containers to stop (app or infra)
	killReasons map[string]string                    // container ID → why, in the kubelet's words, when not obvious
	killGrace   map[string]time.Duration             // container ID → its failed probe's terminationGracePeriodSeconds, over the pod's
	startInit   int                                  // index into spec.initContainers to start, or -1
	start       []int                                // indexes into spec.containers, in order
	ephemeral   []int                                // indexes into spec.ephemeralContainers to start (once)
	restarts    map[string]int                       // restart count of each container to start, by name
	crashed     map[string]string                    // back-off key of each start that retries a failure, by name ("POD": the sandbox)
	waiting     []string                             // containers held back by back-off ("POD": the sandbox)
	pullWaits   map[string]*kubecontainer.StartError // of those, the ones whose image is in pull back-off, and why
	retryAt     time.Time                            // when the first of them may restart
	initFailed  bool                                 // an init container failed for good: the pod has failed
	sandboxGone bool                                 // the infra container stopped: kill the rest without grace
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

// computePodActions compares a pod's spec with its containers. It is pure:
// every decision is made here, so it is tested without Docker.
func computePodActions(pod *v1.Pod, state *kubecontainer.PodState, now time.Time, bo *backoff, checks podChecks) podActions {
	a := podActions{startInit: -1, restarts: map[string]int{}, crashed: map[string]string{}, killReasons: map[string]string{}, killGrace: map[string]time.Duration{},
		pullWaits: map[string]*kubecontainer.StartError{}}
	if state == nil {
		state = &kubecontainer.PodState{}
	}
	unhealthy, started, pullBackOff := checks.unhealthy, checks.started, checks.pullBackOff
	if unhealthy == nil {
		unhealthy = func(string) (bool, string) { return false, "" }
	}
	if started == nil {
		started = func(*v1.Container, string) bool { return true }
	}
	if pullBackOff == nil {
		pullBackOff = func(*v1.Container) (time.Time, *kubecontainer.StartError) { return time.Time{}, nil }
	}
	if pod.Annotations[api.RestoredAnnotation] != "" && state.RunningInfra() == nil {
		// Restored from an old checkpoint generation: it may have been
		// deleted since. Kept where it runs, never started.
		return a
	}
	if kubecontainer.PodFinished(pod, state) {
		// Nothing runs again: stop what still runs (the infra container,
		// freeing its ports), keep the final containers for inspection.
		for _, c := range state.Containers {
			if c.Running {
				a.kill = append(a.kill, c)
			}
		}
		return a
	}
	// sick reports whether a running container failed its probe, and says
	// why it is killed as the kubelet's Killing event does.
	sick := func(c *v1.Container, id string) bool {
		bad, probe := unhealthy(id)
		if bad {
			p := c.LivenessProbe
			if probe == "startup" {
				p = c.StartupProbe
			}
			if p != nil && p.TerminationGracePeriodSeconds != nil {
				a.killGrace[id] = time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
			}
		}
		switch {
		case !bad:
		case api.IsSidecar(c):
			a.killReasons[id] = fmt.Sprintf("Init container %s failed %s probe", c.Name, probe)
		case pod.Spec.RestartPolicy == v1.RestartPolicyNever:
			a.killReasons[id] = fmt.Sprintf("Container %s failed %s probe", c.Name, probe)
		default:
			a.killReasons[id] = fmt.Sprintf("Container %s failed %s probe, will be restarted", c.Name, probe)
		}
		return bad
	}
	infraHash := kubecontainer.HashInfra(pod)
	var infra *kubecontainer.ContainerState
	for _, c := range state.Infra() {
		if c.Running && c.Hash == infraHash && infra == nil {
			infra = c
		} else if c.Running {
			a.kill = append(a.kill, c)
		}
	}
	a.createInfra = infra == nil
	// A sandbox that stopped running (removed or killed from outside) took
	// the pod's network and ports with it: its app containers are orphans,
	// killed at once so the pod is whole again quickly.
	a.sandboxGone = infra == nil && len(state.Infra()) > 0 && !state.Infra()[0].Running
	// Instances created before the current infra container belong to an
	// earlier incarnation of the pod: a new infra container means init
	// containers run again.
	current := func(c *kubecontainer.ContainerState) bool {
		return infra != nil && !c.CreatedAt.Before(infra.CreatedAt)
	}

	// restartDecision says whether a container whose newest instance is last
	// (not running) starts again now: "start", "done" or "wait".
	// A container that never got an instance because creating it failed
	// (bad config, image never pulled) waits on the same back-off.
	restartDecision := func(c *v1.Container, hash string, last *kubecontainer.ContainerState) string {
		if last != nil && last.Hash != hash {
			last = nil // a changed spec starts afresh
		}
		if last != nil && !kubecontainer.Restarts(pod, c, last.ExitCode) {
			return "done"
		}
		key := backoffKey(pod.UID, c.Name, hash)
		if until, wait := bo.waiting(key, last, now); wait {
			a.wait(c.Name, until)
			return "wait"
		}
		// An image whose pull failed is not pulled again (nor the pod
		// synced for it) until its own back-off ends.
		if until, why := pullBackOff(c); why != nil && now.Before(until) {
			a.wait(c.Name, until)
			a.pullWaits[c.Name] = why
			return "wait"
		}
		if last != nil || bo.pending(key) {
			a.crashed[c.Name] = key
		}
		return "start"
	}
	restartCount := func(instances []*kubecontainer.ContainerState) int {
		if len(instances) == 0 {
			return 0
		}
		return instances[0].RestartCount + 1
	}

	inSpec := map[string]bool{infraName: true}
	// Once an app container has started in this incarnation the pod is
	// initialized: a sidecar restarting later holds nothing back.
	initialized := false
	for _, c := range pod.Spec.Containers {
		for _, inst := range state.Instances(c.Name) {
			initialized = initialized || current(inst)
		}
	}
	// Init containers run one at a time, in order, each to success; a
	// sidecar (restartPolicy Always) instead to started, and is kept
	// running.
	initDone := true
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		inSpec[c.Name] = true
		if !initDone {
			continue
		}
		hash := kubecontainer.HashContainer(pod, c)
		instances := state.Instances(c.Name)
		var last *kubecontainer.ContainerState
		for _, inst := range instances {
			if inst.Running && (!current(inst) || inst.Hash != hash) {
				a.kill = append(a.kill, inst)
			} else if last == nil && current(inst) {
				last = inst
			}
		}
		if api.IsSidecar(c) {
			switch {
			case last != nil && last.Running && sick(c, last.ID):
				a.kill = append(a.kill, last)
				initDone = initialized // restarted once it has exited
			case last != nil && last.Running:
				initDone = initialized || started(c, last.ID)
			default:
				initDone = initialized
				// One init container starts per sync; another sidecar
				// that is down starts on the next.
				if a.startInit < 0 && restartDecision(c, hash, last) == "start" {
					a.startInit = i
					a.restarts[c.Name] = restartCount(instances)
				}
			}
			continue
		}
		switch {
		case last != nil && last.Running:
			initDone = false // still running: wait for it
		case last != nil && last.ExitCode == 0 && last.Hash == hash:
			// completed in this incarnation
		case last != nil && last.ExitCode != 0 && pod.Spec.RestartPolicy == v1.RestartPolicyNever:
			initDone, a.initFailed = false, true
		default:
			initDone = false
			if restartDecision(c, hash, last) == "wait" {
				break
			}
			a.startInit = i
			a.restarts[c.Name] = restartCount(instances)
		}
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		inSpec[c.Name] = true
		hash := kubecontainer.HashContainer(pod, c)
		instances := state.Instances(c.Name)
		var running *kubecontainer.ContainerState
		failedProbe := false
		for _, inst := range instances {
			switch {
			case inst.Running && inst.Hash == hash && running == nil && !a.createInfra && !sick(c, inst.ID):
				running = inst
			case inst.Running:
				a.kill = append(a.kill, inst)
				if sick(c, inst.ID) {
					failedProbe = failedProbe || inst.Hash == hash
				} else if inst.Hash != hash {
					a.killReasons[inst.ID] = fmt.Sprintf("Container %s definition changed, will be restarted", c.Name)
				}
			}
		}
		if running != nil {
			keep++
			continue
		}
		if failedProbe && !a.createInfra {
			// Killed for failing its probe: like a crash, it restarts on a
			// later sync, once it has exited, as policy and back-off say.
			keep++
			continue
		}
		if !initDone {
			continue // app containers wait for the init containers
		}
		var last *kubecontainer.ContainerState
		if len(instances) > 0 && !instances[0].Running {
			last = instances[0]
		}
		if restartDecision(c, hash, last) != "start" {
			continue
		}
		a.start = append(a.start, i)
		a.restarts[c.Name] = restartCount(instances)
	}
	// Ephemeral containers (kubectl debug) start once the sandbox runs,
	// initialized or not, as the kubelet's. One that was created never
	// starts again, not even in a new sandbox (the one still running in
	// the old sandbox is stopped with it); one whose creation failed is
	// retried on its back-off.
	for i := range pod.Spec.EphemeralContainers {
		c := kubecontainer.EphemeralSpec(pod, i)
		inSpec[c.Name] = true
		instances := state.Instances(c.Name)
		for _, inst := range instances {
			if inst.Running && !current(inst) {
				a.kill = append(a.kill, inst)
			}
		}
		if infra != nil && len(instances) == 0 &&
			restartDecision(c, kubecontainer.HashContainer(pod, c), nil) == "start" {
			a.ephemeral = append(a.ephemeral, i)
		}
	}
	// Containers no longer in the spec are stopped.
	for _, c := range state.Containers {
		if !inSpec[c.Name] && c.Running {
			a.kill = append(a.kill, c)
		}
	}

	// A pod with nothing left to run (every container finished as its restart
	// policy says, or an init container failed for good) needs no infra
	// container: stop it to free its ports.
	initPending := a.startInit >= 0 || (!initDone && !a.initFailed)
	if keep == 0 && len(a.start) == 0 && len(a.waiting) == 0 && !initPending {
		a.createInfra, a.ephemeral = false, nil
		if infra != nil {
			a.kill = append(a.kill, infra)
		}
	}
	// A sandbox that could not be made (infra image missing, volumes not
	// set up) is retried on the back-off; nothing starts without it.
	if a.createInfra {
		key := backoffKey(pod.UID, infraName, infraHash)
		if until, wait := bo.waiting(key, nil, now); wait {
			a.createInfra, a.startInit, a.start = false, -1, nil
			a.wait(infraName, until)
		} else if bo.pending(key) {
			a.crashed[infraName] = key
		}
	}
	return a
}

// wait records a container held back by its back-off until until.
func (a *podActions) wait(name string, until time.Time) {
	a.waiting = append(a.waiting, name)
	if a.retryAt.IsZero() || until.Before(a.retryAt) {
		a.retryAt = until
	}
}

// Result is what a SyncPod did, for the Kubelet to record: the Manager
// keeps no per-pod state of the Kubelet's.
type Result struct {
	// Acted reports whether the sync acted on the runtime: only then must
	// the next sync wait for a fresher relist.
	Acted bool
	// RetryAt is when the pod must be synced again because a back-off
	// ends (zero: nothing waits): nothing of the runtime's will change
	// then to wake it.
	RetryAt time.Time
	// Waiting are the reasons, by container name, why containers wait (as
	// their status shows them); a nil reason clears the one recorded
	// before (the container started, or its dead instance says why).
	// Containers not named keep theirs.
	Waiting map[string]*kubecontainer.StartError
	// Stopping are the IDs of the running containers the sync stopped or
	// meant to: they are no longer probed.
	Stopping map[string]bool
}

// retry asks for the pod to be synced again at t (the earliest asked wins).
func (r *Result) retry(t time.Time) {
	if !t.IsZero() && (r.RetryAt.IsZero() || t.Before(r.RetryAt)) {
		r.RetryAt = t
	}
}

// SyncPod brings an admitted pod to its spec: it decides what to do
// (computePodActions, pure) and does it. rec is the pod's record, which its
// worker owns and passes to each of its syncs: the decisions read its
// back-off and the actions update it. The Result says what happened even
// when err says the sync failed.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, rec *PodRecord) (Result, error) {
	m.warnPullSecrets(pod, rec)
	rec.backoff.gc(m.cfg.Clock.Now())
	a := computePodActions(pod, state, m.cfg.Clock.Now(), rec.backoff, podChecks{
		unhealthy:   m.probes.Unhealthy,
		started:     m.probes.Started,
		pullBackOff: func(c *v1.Container) (time.Time, *kubecontainer.StartError) { return m.images.BackOff(pod, c) },
	})
	r := Result{
		Acted:    a.createInfra || a.startInit >= 0 || len(a.start) > 0 || len(a.ephemeral) > 0 || len(a.kill) > 0,
		Waiting:  map[string]*kubecontainer.StartError{},
		Stopping: map[string]bool{},
	}
	for _, c := range a.kill {
		r.Stopping[c.ID] = true
	}
	r.retry(a.retryAt) // nothing else may wake the pod when its back-off ends
	err := m.applyActions(ctx, pod, state, a, rec, &r)
	return r, err
}

// applyActions carries out what computePodActions decided, recording in r
// what the Kubelet must know of it.
func (m *Manager) applyActions(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, a podActions, rec *PodRecord, r *Result) error {
	key := api.Key(pod)
	if !a.createInfra && state.RunningInfra() != nil {
		// A running pod's downwardAPI, config map, secret and projected
		// volumes follow its metadata and their objects (from a cache: a
		// sync with nothing due asks the API server nothing) and their
		// tokens are renewed when due.
		if err := m.volumes.Refresh(ctx, pod); err != nil {
			glog.V(2).Infof("Pod %s: refresh volumes: %v", key, err)
		}
	}
	if len(a.waiting) > 0 {
		glog.V(2).Infof("Pod %s: %s in back-off", key, strings.Join(a.waiting, ", "))
		for _, name := range a.waiting {
			if why := a.pullWaits[name]; why != nil {
				r.Waiting[name] = why
				m.cfg.Events.Event(events.PodRef(pod, name), false, "BackOff", "Back-off pulling image %q", imageOf(pod, name))
			} else if name != infraName && len(state.Instances(name)) > 0 {
				// One never created was not restarted: its failure's own
				// event (ErrImageNeverPull, Failed, ...) says why it waits.
				m.cfg.Events.Event(events.PodRef(pod, name), true, "BackOff", "Back-off restarting failed container %s", name)
			}
		}
	}
	if len(a.kill) > 0 {
		for _, c := range a.kill {
			why := a.killReasons[c.ID]
			if why == "" && a.sandboxGone {
				why = "its infra container is gone"
			}
			if why == "" {
				why = "no longer wanted as it runs"
			}
			glog.Infof("Pod %s: stopping container %s (%s): %s", key, c.Name, kubecontainer.ShortID(c.ID), why)
		}
		grace := GracePeriod(pod)
		if a.sandboxGone {
			grace = 0
		}
		// A container killed by a probe with a grace period of its own is
		// stopped within that one (at least MinStopGrace, as the kubelet's
		// minimum), beside the others.
		var own, rest []*kubecontainer.ContainerState
		for _, c := range a.kill {
			if _, ok := a.killGrace[c.ID]; ok && grace > 0 {
				own = append(own, c)
			} else {
				rest = append(rest, c)
			}
		}
		err := errors.Join(parallel(own, func(c *kubecontainer.ContainerState) error {
			return m.StopAll(ctx, pod, state, []*kubecontainer.ContainerState{c}, a.killReasons, max(a.killGrace[c.ID], MinStopGrace))
		}), m.StopAll(ctx, pod, state, rest, a.killReasons, grace))
		if err != nil {
			return err
		}
	}
	if !a.createInfra && a.startInit < 0 && len(a.start) == 0 && len(a.ephemeral) == 0 {
		return nil
	}

	sb, err := m.prepareSandbox(ctx, pod, state, a, rec, r)
	if err != nil {
		return err
	}
	start := func(c *v1.Container) error {
		bkey := backoffKey(pod.UID, c.Name, kubecontainer.HashContainer(pod, c))
		if _, ok := a.crashed[c.Name]; ok {
			rec.backoff.restarted(bkey, m.cfg.Clock.Now())
			m.cfg.Metrics.ContainerRestarts.Inc()
		}
		err := m.startContainer(ctx, pod, c, sb, a.restarts[c.Name], r)
		var ce *kubecontainer.StartError
		switch {
		case err == nil || (errors.As(err, &ce) && containerMade(ce)):
			rec.backoff.created(bkey) // a failed start or hook: the instance dates the failure
		case ownBackOff(err):
		default:
			r.retry(rec.backoff.failed(bkey, m.cfg.Clock.Now()))
		}
		return err
	}
	// Ephemeral containers first, as the kubelet's: they are how a failing
	// init container is debugged.
	var errs []error
	for _, i := range a.ephemeral {
		if err := start(kubecontainer.EphemeralSpec(pod, i)); err != nil {
			errs = append(errs, err)
		}
	}
	if a.startInit >= 0 {
		if err := start(&pod.Spec.InitContainers[a.startInit]); err != nil {
			return errors.Join(append(errs, err)...)
		}
	}
	for _, i := range a.start {
		if err := start(&pod.Spec.Containers[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sandbox is what a pod's containers join: its infra container (and the
// pod's IP, when known), its volumes' host paths, and its containers as
// the relist saw them (an ephemeral container joins its target's PID
// namespace).
type sandbox struct {
	infraID, podIP string
	hostPaths      map[string]string
	state          *kubecontainer.PodState
	record         *PodRecord
}

// prepareSandbox sets up the pod's volumes and, if asked, its infra
// container, and returns what its app containers join. A failure is the
// pod's (an event; its containers wait with the default reason) and backs
// off.
func (m *Manager) prepareSandbox(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, a podActions, rec *PodRecord, r *Result) (sandbox, error) {
	sb := sandbox{state: state, record: rec}
	bkey := backoffKey(pod.UID, infraName, kubecontainer.HashInfra(pod))
	if _, ok := a.crashed[infraName]; ok {
		rec.backoff.restarted(bkey, m.cfg.Clock.Now())
	}
	if a.createInfra {
		m.cfg.Metrics.StartedPods.Inc()
	}
	var mountErr *volumes.SetupError
	var err error
	sb.hostPaths, err = m.volumes.Setup(ctx, pod)
	if err != nil {
		errors.As(err, &mountErr)
		err = &kubecontainer.StartError{Reason: reasonVolumeSetup, Message: err.Error()}
	} else if err = m.ensurePodCgroup(pod); err != nil {
		err = &kubecontainer.StartError{Reason: reasonCreateSandbox, Message: err.Error()}
	} else if a.createInfra {
		sb.infraID, sb.podIP, err = m.startInfra(ctx, pod)
	} else {
		infra := state.RunningInfra()
		sb.infraID, sb.podIP = infra.ID, infra.IP
	}
	if err != nil {
		var ce *kubecontainer.StartError
		if !errors.As(err, &ce) {
			ce = &kubecontainer.StartError{Reason: reasonCreateSandbox, Message: err.Error()}
		}
		if a.createInfra {
			m.cfg.Metrics.StartedPodErrors.Inc()
		}
		if !ownBackOff(err) {
			r.retry(rec.backoff.failed(bkey, m.cfg.Clock.Now()))
			// As the kubelet: the containers keep waiting with the
			// default reason, and the failure is the pod's event, at each
			// failed try (repeats fold into its count).
			switch {
			case mountErr != nil:
				m.cfg.Events.Event(events.PodRef(pod, ""), true, reasonVolumeSetup, "MountVolume.SetUp failed for volume %q : %v", mountErr.Volume, mountErr.Err)
			case ce.Reason == reasonVolumeSetup:
				m.cfg.Events.Event(events.PodRef(pod, ""), true, reasonVolumeSetup, "%s", ce.Message)
			default:
				m.cfg.Events.Event(events.PodRef(pod, ""), true, "FailedCreatePodSandBox", "Failed to create pod sandbox: %s", ce.Message)
			}
		}
		return sandbox{}, err
	}
	rec.backoff.created(bkey)
	if pod.Spec.HostNetwork {
		sb.podIP = HostNetworkIP
	}
	return sb, nil
}

// ownBackOff reports failures that are not the pod's fault and have a
// back-off of their own: Docker not answering (the relist backs off and
// every pod is retried once it answers) and image pulls (the image manager
// backs off per image).
func ownBackOff(err error) bool {
	var ce *kubecontainer.StartError
	if errors.As(err, &ce) && (ce.Reason == reasonImagePull || ce.Reason == reasonImagePullBackOff) {
		return true
	}
	return errors.Is(err, kubecontainer.ErrRuntimeUnavailable) || errors.Is(err, context.Canceled)
}

// imageOf is the image of the pod's container name.
func imageOf(pod *v1.Pod, name string) string {
	if c := kubecontainer.ContainerSpec(pod, name); c != nil {
		return c.Image
	}
	return ""
}

// StopPod stops every running container of a pod, preStop hooks first,
// within grace: the one way a pod's containers are stopped when it ends
// (its worker's terminating step). pod is its spec, if known (for its
// hooks; nil for a pod found on the node without one). It reports whether
// it acted on the runtime.
func (m *Manager) StopPod(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, grace time.Duration) (bool, error) {
	var running []*kubecontainer.ContainerState
	if state != nil {
		for _, c := range state.Containers {
			if c.Running {
				running = append(running, c)
			}
		}
	}
	if len(running) == 0 {
		return false, nil
	}
	return true, m.StopAll(ctx, pod, state, running, nil, max(grace, MinStopGrace))
}

// RemovePod removes every container of a pod that has left the node (they
// are stopped). It reports whether it acted on the runtime.
func (m *Manager) RemovePod(ctx context.Context, state *kubecontainer.PodState) (bool, error) {
	if state == nil || len(state.Containers) == 0 {
		return false, nil
	}
	for _, c := range state.Containers {
		if err := m.RemoveContainer(ctx, c); err != nil {
			return true, err
		}
	}
	return true, nil
}

// GracePeriod is the pod's grace period: the deletion's, once the API
// server set one (kubectl delete --grace-period), else the spec's.
func GracePeriod(pod *v1.Pod) time.Duration {
	g := time.Duration(api.DefaultTerminationGracePeriod) * time.Second
	if p := pod.Spec.TerminationGracePeriodSeconds; p != nil {
		g = time.Duration(*p) * time.Second
	}
	if p := pod.DeletionGracePeriodSeconds; p != nil {
		g = time.Duration(*p) * time.Second
	}
	return max(g, MinStopGrace)
}

// LabelGrace is the grace period recorded on a pod's containers, for pods
// whose spec is gone.
func LabelGrace(state *kubecontainer.PodState) time.Duration {
	for _, c := range state.Containers {
		var secs int64
		if _, err := fmt.Sscan(c.Labels[kubecontainer.LabelGracePeriod], &secs); err == nil {
			return max(time.Duration(secs)*time.Second, MinStopGrace)
		}
	}
	return time.Duration(api.DefaultTerminationGracePeriod) * time.Second
}
