package kubelet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
)

const (
	infraName = dockertools.InfraContainerName
	// minStopGrace is the shortest stop grace period: even a pod asking for
	// 0 gets a moment to exit cleanly, as Kubernetes does.
	minStopGrace = 2 * time.Second
	// postStartTimeout bounds a postStart hook (Kubernetes sets none; a
	// hook hanging forever would hold the pod's worker forever).
	postStartTimeout = 2 * time.Minute
	// hostNetworkIP is where probes and hooks reach a host-network pod.
	hostNetworkIP = "127.0.0.1"
)

// Waiting reasons, as Kubernetes reports them.
const (
	reasonCreating         = "ContainerCreating"
	reasonCrashLoop        = "CrashLoopBackOff"
	reasonInitializing     = "PodInitializing"
	reasonCreateError      = "CreateContainerError"
	reasonRunError         = "RunContainerError"
	reasonImagePull        = kubecontainer.ReasonErrImagePull
	reasonImageNeverPull   = kubecontainer.ReasonErrImageNeverPull
	reasonImagePullBackOff = kubecontainer.ReasonImagePullBackOff
	reasonPostStartFailed  = "PostStartHookError"
	reasonInfraImageAbsent = "InfraImageMissing"
	reasonCreateSandbox    = "CreatePodSandboxError"
	reasonVolumeSetup      = "FailedMount"
	// reasonCannotRun is the terminated reason of a container Docker
	// created but could not start, as dockershim reported it.
	reasonCannotRun = "ContainerCannotRun"
)

// containerMade reports whether the failure left a container behind (it
// failed to start, or its postStart hook failed): that instance is the
// record of the failure.
func containerMade(e *kubecontainer.StartError) bool {
	return e.Reason == reasonRunError || e.Reason == reasonPostStartFailed
}

func (k *Kubelet) startInfra(ctx context.Context, pod *v1.Pod) (id, ip string, err error) {
	present, err := k.docker.ImagePresent(ctx, k.cfg.InfraImage)
	if err != nil {
		return "", "", err
	}
	if !present && k.cfg.PauseBinary != "" {
		// A fresh node: build the infra image from the pause program
		// installed beside the agent. It is never pulled.
		glog.Infof("Building infra image %s from %s", k.cfg.InfraImage, k.cfg.PauseBinary)
		if err := k.docker.BuildPauseImage(ctx, k.cfg.InfraImage, k.cfg.PauseBinary); err != nil {
			return "", "", err
		}
		present = true
	}
	if !present {
		return "", "", &kubecontainer.StartError{Reason: reasonInfraImageAbsent, Message: fmt.Sprintf("infra image %s is not present (build it with `make images`, or install the pause program beside the agent)", k.cfg.InfraImage)}
	}
	spec, err := k.infraSpec(pod)
	if err != nil {
		return "", "", err
	}
	release, err := k.starts.acquire(ctx, true)
	if err != nil {
		return "", "", err
	}
	id, err = k.docker.Create(ctx, spec)
	if err == nil {
		started := k.relist.Starting(id)
		if err = k.docker.Start(ctx, id); err != nil {
			k.removeQuietly(ctx, id)
		}
		started()
	}
	release()
	if err != nil {
		return "", "", err
	}
	glog.Infof("Pod %s: started infra container %s", api.Key(pod), spec.Name)
	if !usesPodIP(pod) {
		return id, "", nil // the relist learns the IP moments later
	}
	d, err := k.docker.Inspect(ctx, id)
	if err != nil {
		return "", "", err
	}
	return id, d.IP, nil
}

// usesPodIP reports whether starting the pod's containers needs its IP: an
// environment value from status.podIP, or a postStart HTTP hook aimed at the
// pod. Most pods need neither, and skip an inspect on the way to running.
func usesPodIP(pod *v1.Pod) bool {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && (e.ValueFrom.FieldRef.FieldPath == "status.podIP" || e.ValueFrom.FieldRef.FieldPath == "status.podIPs") {
					return true
				}
			}
			if l := c.Lifecycle; l != nil && l.PostStart != nil && l.PostStart.HTTPGet != nil && l.PostStart.HTTPGet.Host == "" {
				return true
			}
		}
	}
	return false
}

// startContainer creates and starts one container of the pod, then runs its
// postStart hook. A failure is recorded as the container's waiting reason.
func (k *Kubelet) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, infraID, podIP string, hostPaths map[string]string, restartCount int) error {
	typ := "container"
	if isInitContainer(pod, c.Name) {
		typ = "init_container"
	}
	k.metrics.StartedContainers.WithLabelValues(typ).Inc()
	err := k.createAndStart(ctx, pod, c, infraID, podIP, hostPaths, restartCount)
	var ce *kubecontainer.StartError
	if errors.As(err, &ce) {
		k.metrics.StartedContainerErrors.WithLabelValues(typ, ce.Reason).Inc()
		if containerMade(ce) {
			k.records.setWaiting(pod.UID, c.Name, nil) // the dead instance says why
		} else {
			k.records.setWaiting(pod.UID, c.Name, ce)
		}
		if ce.Reason != reasonImagePull && ce.Reason != reasonImagePullBackOff {
			k.cfg.Events.Event(events.PodRef(pod, c.Name), true, "Failed", "Error: %s", ce.Message)
		}
	} else if err != nil {
		k.metrics.StartedContainerErrors.WithLabelValues(typ, "Unknown").Inc()
	}
	if err != nil {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	k.records.setWaiting(pod.UID, c.Name, nil)
	return nil
}

func isInitContainer(pod *v1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func (k *Kubelet) createAndStart(ctx context.Context, pod *v1.Pod, c *v1.Container, infraID, podIP string, hostPaths map[string]string, restartCount int) error {
	if err := k.images.Ensure(ctx, pod, c); err != nil {
		return err
	}
	spec, err := k.appSpec(ctx, pod, c, infraID, podIP, hostPaths, restartCount)
	if err != nil {
		return err
	}
	release, err := k.starts.acquire(ctx, false)
	if err != nil {
		return err
	}
	id, err := k.docker.Create(ctx, spec)
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
	k.cfg.Events.Event(ref, false, "Created", "Created container %s", c.Name)
	started := k.relist.Starting(id)
	err = k.docker.Start(ctx, id)
	started()
	release()
	if err != nil {
		// A container that failed to start stays as the record of why.
		// Docker's list still shows it "created", as before the start:
		// have the relist inspect it for its exit code and error.
		k.relist.Refresh(id)
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
	glog.Infof("Pod %s: started container %s (restart %d)", api.Key(pod), spec.Name, restartCount)
	k.cfg.Events.Event(ref, false, "Started", "Started container %s", c.Name)
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		hctx, cancel := context.WithTimeout(ctx, postStartTimeout)
		err := k.runHook(hctx, pod, c, id, podIP, c.Lifecycle.PostStart)
		cancel()
		if err != nil {
			// As Kubernetes: the container is killed and its restart policy
			// decides what happens next.
			glog.Errorf("Pod %s: postStart hook of %s failed, killing it: %v", api.Key(pod), c.Name, err)
			if serr := k.docker.Stop(ctx, id, 0); serr != nil {
				glog.Errorf("Pod %s: kill %s: %v", api.Key(pod), c.Name, serr)
			}
			return &kubecontainer.StartError{Reason: reasonPostStartFailed, Message: err.Error()}
		}
	}
	return nil
}

func podSourceOf(pod *v1.Pod) string {
	if s := pod.Annotations[api.ConfigSourceAnnotation]; s != "" {
		return s
	}
	return api.SourceFile
}
