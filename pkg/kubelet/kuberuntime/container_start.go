package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/credentialprovider"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
)

const (
	infraName = kubecontainer.InfraContainerName
	// MinStopGrace is the shortest stop grace period (lifecycle's).
	MinStopGrace = lifecycle.MinStopGrace
	// postStartTimeout bounds a postStart hook (Kubernetes sets none; a
	// hook hanging forever would hold the pod's worker forever).
	postStartTimeout = 2 * time.Minute
	// HostNetworkIP is where probes and hooks reach a host-network pod.
	HostNetworkIP = "127.0.0.1"
)

// Waiting reasons of failed starts, as Kubernetes reports them.
const (
	reasonRunError         = "RunContainerError"
	reasonImagePull        = kubecontainer.ReasonErrImagePull
	reasonImageNeverPull   = kubecontainer.ReasonErrImageNeverPull
	reasonImagePullBackOff = kubecontainer.ReasonImagePullBackOff
	reasonPostStartFailed  = "PostStartHookError"
	reasonInfraImageAbsent = "InfraImageMissing"
)

// containerMade reports whether the failure left a container behind (it
// failed to start, or its postStart hook failed): that instance is the
// record of the failure.
func containerMade(e *kubecontainer.StartError) bool {
	return e.Reason == reasonRunError || e.Reason == reasonPostStartFailed
}

// waitsWithReason reports a failure the container's status shows as its
// waiting reason and message until it next starts: every failure but a
// start Docker refused, whose dead instance says why. A failed postStart
// hook's container is dead too, but only the reason says what the hook
// said (PostStartHookError and the handler's message, as the kubelet's
// reason cache keeps them).
func waitsWithReason(e *kubecontainer.StartError) bool {
	return !containerMade(e) || e.Reason == reasonPostStartFailed
}

// startInfra creates and starts the pod's infra container and returns its
// ID and, when a container of the pod needs it (UsesPodIP) or a network
// plugin attached it, its IP. A network that is not ready fails it before
// any runtime call; one whose plugin fails to attach it removes it.
func (m *Manager) startInfra(ctx context.Context, pod *v1.Pod, handler string) (id, ip string, err error) {
	mode, err := m.network.SandboxMode(pod)
	if err != nil {
		return "", "", &kubecontainer.StartError{Reason: reasonCreateSandbox, Message: err.Error()}
	}
	present, err := m.runtime.ImagePresent(ctx, m.cfg.InfraImage)
	if err != nil {
		return "", "", err
	}
	if !present && m.cfg.PauseBinary != "" {
		// A fresh node: build the infra image from the pause program
		// installed beside the agent. It is never pulled.
		klog.Infof("Building infra image %s from %s", m.cfg.InfraImage, m.cfg.PauseBinary)
		if err := m.runtime.BuildPauseImage(ctx, m.cfg.InfraImage, m.cfg.PauseBinary); err != nil {
			return "", "", err
		}
		present = true
	}
	if !present {
		return "", "", &kubecontainer.StartError{Reason: reasonInfraImageAbsent, Message: fmt.Sprintf("infra image %s is not present (build it with `make images`, or install the pause program beside the agent)", m.cfg.InfraImage)}
	}
	spec, err := m.infraSpec(pod, mode)
	if err != nil {
		return "", "", err
	}
	spec.Runtime = handler
	release, err := m.starts.acquire(ctx, true)
	if err != nil {
		return "", "", err
	}
	id, err = m.runtime.Create(ctx, spec)
	if err == nil {
		started := m.relist.Starting(id)
		if err = m.runtime.Start(ctx, id); err != nil {
			m.removeQuietly(ctx, id)
		}
		started()
	}
	release()
	if err != nil {
		return "", "", err
	}
	klog.Infof("Pod %s: started infra container %s", api.Key(pod), spec.Name)
	if mode == "none" {
		return m.attachInfra(ctx, pod, id)
	}
	if !usesPodIP(pod) {
		return id, "", nil // the relist learns the IP moments later
	}
	d, err := m.runtime.Inspect(ctx, id)
	if err != nil {
		return "", "", err
	}
	return id, d.IP, nil
}

// attachInfra has the network plugin attach the running infra container's
// network namespace, and returns its IP. On failure the infra container is
// removed (its next attempt, after the back-off, makes a new one), and the
// plugin's error is the sandbox's.
func (m *Manager) attachInfra(ctx context.Context, pod *v1.Pod, id string) (string, string, error) {
	d, err := m.runtime.Inspect(ctx, id)
	if err == nil && (!d.Running || d.Pid <= 0) {
		err = fmt.Errorf("infra container %s exited as it started", kubecontainer.ShortID(id))
	}
	var ip string
	if err == nil {
		ip, err = m.network.SetUp(ctx, pod, id, d.Pid)
	}
	if err == nil {
		// The relist may have inspected the sandbox before it had its IP.
		m.relist.Refresh(id)
		return id, ip, nil
	}
	if serr := m.runtime.Stop(ctx, id, 0); serr != nil {
		klog.V(2).Infof("Pod %s: stop infra container %s: %v", api.Key(pod), kubecontainer.ShortID(id), serr)
	}
	m.removeQuietly(ctx, id)
	if errors.Is(err, kubecontainer.ErrRuntimeUnavailable) || errors.Is(err, context.Canceled) {
		return "", "", err
	}
	return "", "", &kubecontainer.StartError{Reason: reasonCreateSandbox, Message: err.Error()}
}

// startContainer creates and starts one container of the pod, then runs its
// postStart hook. Why it waits (nil: it started, or its dead instance says
// why) goes to r; a failure that is not the container's (the runtime not
// answering, ctx cancelled) leaves its waiting reason as it was.
func (m *Manager) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, sb sandbox, restartCount int, r *Result) error {
	typ := "container"
	switch {
	case isInitContainer(pod, c.Name):
		typ = "init_container"
	case kubecontainer.Ephemeral(pod, c.Name) != nil:
		typ = "ephemeral_container"
	}
	m.cfg.Metrics.StartedContainers.WithLabelValues(typ).Inc()
	pulled, err := m.createAndStart(ctx, pod, c, sb, restartCount)
	r.Pulling += pulled
	var ce *kubecontainer.StartError
	if errors.As(err, &ce) {
		m.cfg.Metrics.StartedContainerErrors.WithLabelValues(typ, ce.Reason).Inc()
		if waitsWithReason(ce) {
			r.Waiting[c.Name] = ce
		} else {
			r.Waiting[c.Name] = nil // the dead instance says why
		}
		// Pull failures have the image manager's events, a failed hook its
		// own.
		if ce.Reason == reasonImageNeverPull {
			m.cfg.Events.Event(events.PodRef(pod, c.Name), true, reasonImageNeverPull, "%s", ce.Message)
		}
		if ce.Reason != reasonImagePull && ce.Reason != reasonImagePullBackOff && ce.Reason != reasonPostStartFailed {
			m.cfg.Events.Event(events.PodRef(pod, c.Name), true, "Failed", "Error: %s", failedEventDetail(ce))
		}
	} else if err != nil {
		m.cfg.Metrics.StartedContainerErrors.WithLabelValues(typ, "Unknown").Inc()
	}
	if err != nil {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	r.Waiting[c.Name] = nil
	return nil
}

// failedEventDetail is what the Failed event says after "Error: ", as the
// kubelet's (pkg/kubelet/kuberuntime/kuberuntime_container.go,
// startContainer): for an image the image manager refused, its error,
// which is the reason alone ("InvalidImageName", "ErrImageNeverPull");
// else the message.
func failedEventDetail(ce *kubecontainer.StartError) string {
	if ce.Reason == kubecontainer.ReasonInvalidImageName || ce.Reason == kubecontainer.ReasonErrImageNeverPull {
		return ce.Reason
	}
	return ce.Message
}

func isInitContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// createAndStart makes the container's image present, then creates and
// starts the container; pulled is how long a pull of its image took.
func (m *Manager) createAndStart(ctx context.Context, pod *v1.Pod, c *v1.Container, sb sandbox, restartCount int) (pulled time.Duration, err error) {
	creds := func() *credentialprovider.Keyring { return m.pullCredentials(ctx, pod, sb.record) }
	if pulled, err = m.images.Ensure(ctx, pod, c, creds); err != nil {
		return pulled, err
	}
	return pulled, m.create(ctx, pod, c, sb, restartCount)
}

// create creates and starts the container, then runs its postStart hook.
func (m *Manager) create(ctx context.Context, pod *v1.Pod, c *v1.Container, sb sandbox, restartCount int) error {
	spec, err := m.appSpec(ctx, pod, c, sb, restartCount)
	if err != nil {
		return err
	}
	release, err := m.starts.acquire(ctx, false)
	if err != nil {
		return err
	}
	id, err := m.runtime.Create(ctx, spec)
	if err != nil {
		release()
		if errors.Is(err, kubecontainer.ErrRuntimeUnavailable) {
			return err
		}
		if inner := errors.Unwrap(err); inner != nil {
			err = inner // Docker's reason, without the random container name
		}
		return &kubecontainer.StartError{Reason: reasonCreateError, Message: err.Error()}
	}
	ref := events.PodRef(pod, c.Name)
	m.cfg.Events.Event(ref, false, "Created", "Created container %s", c.Name)
	started := m.relist.Starting(id)
	err = m.runtime.Start(ctx, id)
	started()
	release()
	if err != nil {
		// A container that failed to start stays as the record of why.
		// Docker's list still shows it "created", as before the start:
		// have the relist inspect it for its exit code and error.
		m.relist.Refresh(id)
		if errors.Is(err, kubecontainer.ErrRuntimeUnavailable) {
			return err
		}
		// Docker's reason alone: the same failure reads the same on each
		// retry, whichever container it was.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return &kubecontainer.StartError{Reason: reasonRunError, Message: err.Error()}
	}
	klog.Infof("Pod %s: started container %s (restart %d)", api.Key(pod), spec.Name, restartCount)
	m.cfg.Events.Event(ref, false, "Started", "Started container %s", c.Name)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		hctx, cancel := context.WithTimeout(ctx, postStartTimeout)
		err := m.runHook(hctx, pod, c, id, sb.podIP, c.Lifecycle.PostStart)
		cancel()
		if err != nil {
			// As Kubernetes: the container is killed and its restart policy
			// decides what happens next.
			klog.Errorf("Pod %s: postStart hook of %s failed, killing it: %v", api.Key(pod), c.Name, err)
			// The kubelet's events, without the hook's output (it may
			// hold secrets: pkg/kubelet/kuberuntime/kuberuntime_container.go,
			// startContainer); the output is in the container's waiting
			// message.
			m.cfg.Events.Event(ref, true, "FailedPostStartHook", "PostStartHook failed")
			m.cfg.Events.Event(ref, false, "Killing", "FailedPostStartHook")
			if serr := m.runtime.Stop(ctx, id, 0); serr != nil {
				klog.Errorf("Pod %s: kill %s: %v", api.Key(pod), c.Name, serr)
			}
			return &kubecontainer.StartError{Reason: reasonPostStartFailed, Message: err.Error()}
		}
	}
	return nil
}
