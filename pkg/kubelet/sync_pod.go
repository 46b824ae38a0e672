package kubelet

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/prober"
)

// podActions is what syncPod must do to bring a pod to its spec.
type podActions struct {
	createInfra bool
	kill        []*kubecontainer.ContainerState // running containers to stop (app or infra)
	killReasons map[string]string               // container ID → why, when not obvious
	startInit   int                             // index into spec.initContainers to start, or -1
	start       []int                           // indexes into spec.containers, in order
	restarts    map[string]int                  // restart count of each container to start, by name
	crashed     map[string]string               // back-off key of each start that retries a failure, by name ("POD": the sandbox)
	waiting     []string                        // containers held back by back-off ("POD": the sandbox)
	retryAt     time.Time                       // when the first of them may restart
	initFailed  bool                            // an init container failed for good: the pod has failed
	sandboxGone bool                            // the infra container stopped: kill the rest without grace
}

// computePodActions compares a pod's spec with its containers. It is pure:
// every decision is made here, so it is tested without Docker. unhealthy
// reports running containers that failed their liveness or startup probe;
// started, whether a running sidecar has passed its startup probe (nil:
// every one has).
func computePodActions(pod *v1.Pod, state *kubecontainer.PodState, now time.Time, bo *backoff, unhealthy func(id string) bool, started func(c *v1.Container, id string) bool) podActions {
	a := podActions{startInit: -1, restarts: map[string]int{}, crashed: map[string]string{}, killReasons: map[string]string{}}
	if state == nil {
		state = &kubecontainer.PodState{}
	}
	if unhealthy == nil {
		unhealthy = func(string) bool { return false }
	}
	if started == nil {
		started = func(*v1.Container, string) bool { return true }
	}
	if pod.Annotations[api.RestoredAnnotation] != "" && state.RunningInfra() == nil {
		// Restored from an old checkpoint generation: it may have been
		// deleted since. Kept where it runs, never started.
		return a
	}
	if podFinished(pod, state) {
		// Nothing runs again: stop what still runs (the infra container,
		// freeing its ports), keep the final containers for inspection.
		for _, c := range state.Containers {
			if c.Running {
				a.kill = append(a.kill, c)
			}
		}
		return a
	}
	infraHash := dockertools.HashInfra(pod)
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
		if last != nil && !shouldRestart(restartPolicyOf(pod, c), last.ExitCode) {
			return "done"
		}
		key := backoffKey(pod.UID, c.Name, hash)
		if until, wait := bo.waiting(key, last, now); wait {
			a.wait(c.Name, until)
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
		hash := dockertools.HashContainer(pod, c)
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
			case last != nil && last.Running && unhealthy(last.ID):
				a.kill = append(a.kill, last)
				a.killReasons[last.ID] = "unhealthy"
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
		hash := dockertools.HashContainer(pod, c)
		instances := state.Instances(c.Name)
		var running *kubecontainer.ContainerState
		failedProbe := false
		for _, inst := range instances {
			switch {
			case inst.Running && inst.Hash == hash && running == nil && !a.createInfra && !unhealthy(inst.ID):
				running = inst
			case inst.Running:
				a.kill = append(a.kill, inst)
				if unhealthy(inst.ID) {
					a.killReasons[inst.ID] = "unhealthy"
					failedProbe = failedProbe || inst.Hash == hash
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
		a.createInfra = false
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

// podFinished reports whether a pod will run nothing again: under
// OnFailure or Never every app container's last instance exited and is not
// to be restarted, or under Never an init container failed.
func podFinished(pod *v1.Pod, state *kubecontainer.PodState) bool {
	if pod.Spec.RestartPolicy == v1.RestartPolicyAlways || len(pod.Spec.Containers) == 0 {
		return false
	}
	appStarted := false
	for _, c := range pod.Spec.Containers {
		if len(state.Instances(c.Name)) > 0 {
			appStarted = true
		}
	}
	if pod.Spec.RestartPolicy == v1.RestartPolicyNever && !appStarted {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if inst := state.Instances(c.Name); !api.IsSidecar(c) && len(inst) > 0 && !inst[0].Running && inst[0].ExitCode != 0 {
				return true
			}
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		inst := state.Instances(c.Name)
		if len(inst) == 0 || inst[0].Running || inst[0].Hash != dockertools.HashContainer(pod, c) ||
			shouldRestart(pod.Spec.RestartPolicy, inst[0].ExitCode) {
			return false
		}
	}
	return true
}

// restartPolicyOf is the restart policy of one container: the pod's, but
// a sidecar restarts whatever the pod's policy.
func restartPolicyOf(pod *v1.Pod, c *v1.Container) v1.RestartPolicy {
	if api.IsSidecar(c) {
		return v1.RestartPolicyAlways
	}
	return pod.Spec.RestartPolicy
}

func shouldRestart(policy v1.RestartPolicy, exitCode int) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// syncPod brings one desired pod to its spec. It reports whether it acted
// on Docker: only then must the next sync wait for a fresher relist.
func (k *Kubelet) syncPod(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState) (bool, error) {
	if rej := k.admit(pod); rej != nil {
		if k.records.rejectedFor(pod.UID) == nil {
			glog.Errorf("Pod %s rejected: %s: %s", api.Key(pod), rej.reason, rej.message)
			k.cfg.Events.Event(events.PodRef(pod, ""), true, rej.reason, "%s", rej.message)
		}
		k.records.setRejected(pod.UID, rej)
		return false, nil // nothing of it runs; its status says why
	}
	k.records.setRejected(pod.UID, nil)
	a := computePodActions(pod, state, time.Now(), k.backoff, func(id string) bool {
		bad, _ := k.probes.Unhealthy(id)
		return bad
	}, k.probes.Started)
	acted := a.createInfra || a.startInit >= 0 || len(a.start) > 0 || len(a.kill) > 0
	if !a.retryAt.IsZero() {
		k.retries.add(pod.UID, a.retryAt) // nothing else may wake the pod when its back-off ends
	}
	err := k.applyActions(ctx, pod, state, a)
	k.syncProbes(pod, state, a)
	return acted, err
}

func (k *Kubelet) applyActions(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, a podActions) error {
	key := api.Key(pod)
	if len(a.waiting) > 0 {
		glog.V(2).Infof("Pod %s: %s in back-off", key, strings.Join(a.waiting, ", "))
		for _, name := range a.waiting {
			if name != infraName {
				k.cfg.Events.Event(events.PodRef(pod, name), true, "BackOff", "Back-off restarting failed container %s", name)
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
			glog.Infof("Pod %s: stopping container %s (%s): %s", key, c.Name, dockertools.ShortID(c.ID), why)
		}
		grace := gracePeriod(pod)
		if a.sandboxGone {
			grace = 0
		}
		if err := k.stopAll(ctx, pod, state, a.kill, grace); err != nil {
			return err
		}
	}
	if !a.createInfra && a.startInit < 0 && len(a.start) == 0 {
		return nil
	}

	infraID, podIP, hostPaths, err := k.prepareSandbox(ctx, pod, state, a)
	if err != nil {
		return err
	}
	start := func(c *v1.Container) error {
		bkey := backoffKey(pod.UID, c.Name, dockertools.HashContainer(pod, c))
		if _, ok := a.crashed[c.Name]; ok {
			k.backoff.restarted(bkey, time.Now())
			k.metrics.ContainerRestarts.Inc()
		}
		err := k.startContainer(ctx, pod, c, infraID, podIP, hostPaths, a.restarts[c.Name])
		var ce *kubecontainer.StartError
		switch {
		case err == nil || (errors.As(err, &ce) && containerMade(ce)):
			k.backoff.created(bkey) // a failed start or hook: the instance dates the failure
		case retryAtOnce(err):
		default:
			k.backoff.failed(bkey, time.Now())
		}
		return err
	}
	var errs []error
	if a.startInit >= 0 {
		if err := start(&pod.Spec.InitContainers[a.startInit]); err != nil {
			return err
		}
	}
	for _, i := range a.start {
		if err := start(&pod.Spec.Containers[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// prepareSandbox sets up the pod's volumes and, if asked, its infra
// container, and returns what its app containers join. A failure is the
// pod's (shown on every container that waits for it) and backs off.
func (k *Kubelet) prepareSandbox(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, a podActions) (infraID, podIP string, hostPaths map[string]string, err error) {
	bkey := backoffKey(pod.UID, infraName, dockertools.HashInfra(pod))
	if _, ok := a.crashed[infraName]; ok {
		k.backoff.restarted(bkey, time.Now())
	}
	if a.createInfra {
		k.metrics.StartedPods.Inc()
	}
	hostPaths, err = k.volumes.Setup(pod)
	if err != nil {
		err = &kubecontainer.StartError{Reason: reasonVolumeSetup, Message: err.Error()}
	} else if err = k.ensurePodCgroup(pod); err != nil {
		err = &kubecontainer.StartError{Reason: reasonCreateSandbox, Message: err.Error()}
	} else if a.createInfra {
		infraID, podIP, err = k.startInfra(ctx, pod)
	} else {
		infra := state.RunningInfra()
		infraID, podIP = infra.ID, infra.IP
	}
	if err != nil {
		var ce *kubecontainer.StartError
		if !errors.As(err, &ce) {
			ce = &kubecontainer.StartError{Reason: reasonCreateSandbox, Message: err.Error()}
		}
		k.records.setWaiting(pod.UID, infraName, ce)
		if a.createInfra {
			k.metrics.StartedPodErrors.Inc()
		}
		if !retryAtOnce(err) {
			k.backoff.failed(bkey, time.Now())
		}
		return "", "", nil, err
	}
	k.records.setWaiting(pod.UID, infraName, nil)
	k.backoff.created(bkey)
	if pod.Spec.HostNetwork {
		podIP = hostNetworkIP
	}
	return infraID, podIP, hostPaths, nil
}

// retryAtOnce reports failures that are not the pod's fault and have a
// back-off of their own: Docker not answering (the relist backs off and
// every pod is retried once it answers) and image pulls (the image manager
// backs off per image).
func retryAtOnce(err error) bool {
	var ce *kubecontainer.StartError
	if errors.As(err, &ce) && (ce.Reason == reasonImagePull || ce.Reason == reasonImagePullBackOff) {
		return true
	}
	return errors.Is(err, kubecontainer.ErrRuntimeUnavailable) || errors.Is(err, context.Canceled)
}

// syncProbes points the pod's probe workers at its running app containers
// and sidecars.
func (k *Kubelet) syncProbes(pod *v1.Pod, state *kubecontainer.PodState, a podActions) {
	killed := map[string]bool{}
	for _, c := range a.kill {
		killed[c.ID] = true
	}
	podIP := ""
	if infra := state.RunningInfra(); infra != nil {
		podIP = infra.IP
	}
	if pod.Spec.HostNetwork {
		podIP = hostNetworkIP
	}
	var targets []prober.Target
	probed := pod.Spec.Containers
	for _, c := range pod.Spec.InitContainers {
		if api.IsSidecar(&c) {
			probed = append(probed[:len(probed):len(probed)], c)
		}
	}
	for _, c := range probed {
		inst := state.Instances(c.Name)
		if len(inst) == 0 || !inst[0].Running || killed[inst[0].ID] {
			continue
		}
		targets = append(targets, prober.Target{PodUID: pod.UID, PodKey: api.Key(pod), Container: c,
			ContainerID: inst[0].ID, StartedAt: inst[0].StartedAt, PodIP: podIP})
	}
	k.probes.Sync(k.life, pod.UID, targets)
}

// podDir is the pod's directory under the root dir.
func (k *Kubelet) podDir(uid types.UID) string { return k.volumes.PodDir(uid) }
