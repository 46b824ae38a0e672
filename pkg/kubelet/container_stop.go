package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// killPod stops and removes every container of a pod that is no longer
// desired, then its directory. pod is its last spec, if known (for preStop
// hooks). It reports whether it acted on Docker.
func (k *Kubelet) killPod(ctx context.Context, uid types.UID, pod *v1.Pod, state *kubecontainer.PodState) (bool, error) {
	k.probes.RemovePod(uid)
	switch {
	case pod != nil:
		k.metrics.ForgetPod(uid, pod.Namespace, pod.Name)
	case state != nil:
		k.metrics.ForgetPod(uid, state.Namespace, state.Name)
	}
	acted := state != nil && len(state.Containers) > 0
	if acted {
		glog.Infof("Killing pod %s/%s (uid %s)", state.Namespace, state.Name, uid)
		var running []*kubecontainer.ContainerState
		for _, c := range state.Containers {
			if c.Running {
				running = append(running, c)
			}
		}
		grace := labelGrace(state)
		if pod != nil {
			grace = gracePeriod(pod)
		}
		if err := k.stopAll(ctx, pod, state, running, grace); err != nil {
			return true, err
		}
		for _, c := range state.Containers {
			if err := k.removeContainer(ctx, c); err != nil {
				return true, err
			}
		}
	}
	k.forgetPod(uid)
	// The pod cgroup before the directory: the directory marks the pod as
	// this agent's for the GC that finishes what a crash interrupts.
	if err := k.removePodCgroup(uid); err != nil {
		return acted, err
	}
	if err := volumes.CleanupPodDir(k.podDir(uid)); err != nil {
		return acted, fmt.Errorf("remove pod directory: %w", err)
	}
	return acted, nil
}

// stopAll stops containers within one grace period, in the order the
// kubelet terminates a pod: every preStop hook starts at once; an app
// container gets its stop signal when its hook is done; sidecars only once
// every app container is gone, the last declared first; the infra container
// (which holds the network the others may use while they shut down) last.
// A grace of 0 kills everything at once, without hooks: for containers
// whose sandbox is gone.
func (k *Kubelet) stopAll(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, cs []*kubecontainer.ContainerState, grace time.Duration) error {
	if grace == 0 {
		return parallel(cs, func(c *kubecontainer.ContainerState) error { return k.docker.Stop(ctx, c.ID, 0) })
	}
	deadline := time.Now().Add(grace)
	var apps, sidecars, infra []*kubecontainer.ContainerState
	hooks := map[string]<-chan struct{}{} // by container ID: closed when its preStop hook is done
	for _, c := range cs {
		if c.Name == infraName {
			infra = append(infra, c)
			continue
		}
		if spec := containerSpec(pod, c.Name); spec != nil && api.IsSidecar(spec) {
			sidecars = append(sidecars, c)
		} else {
			apps = append(apps, c)
		}
		hooks[c.ID] = k.preStop(ctx, pod, state, c, deadline)
	}
	stop := func(c *kubecontainer.ContainerState) error {
		if done := hooks[c.ID]; done != nil {
			<-done
		}
		return k.docker.Stop(ctx, c.ID, max(time.Until(deadline), minStopGrace))
	}
	errs := []error{parallel(apps, stop)}
	sort.SliceStable(sidecars, func(i, j int) bool { return initIndex(pod, sidecars[i].Name) > initIndex(pod, sidecars[j].Name) })
	for _, c := range sidecars {
		errs = append(errs, stop(c))
	}
	errs = append(errs, parallel(infra, stop))
	return errors.Join(errs...)
}

// parallel runs f on each container at once and joins the errors.
func parallel(cs []*kubecontainer.ContainerState, f func(*kubecontainer.ContainerState) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(c)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// initIndex is the position of an init container in the pod's spec.
func initIndex(pod *v1.Pod, name string) int {
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return i
		}
	}
	return -1
}

// preStop runs the container's preStop hook (when its spec is known) in the
// background, bounded by the grace deadline; the channel closes when it is
// done.
func (k *Kubelet) preStop(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, c *kubecontainer.ContainerState, deadline time.Time) <-chan struct{} {
	done := make(chan struct{})
	if pod != nil {
		k.cfg.Events.Event(events.PodRef(pod, c.Name), false, "Killing", "Stopping container %s", c.Name)
	}
	spec := containerSpec(pod, c.Name)
	if spec == nil || spec.Lifecycle == nil || spec.Lifecycle.PreStop == nil {
		close(done)
		return done
	}
	podIP := ""
	if infra := state.RunningInfra(); infra != nil {
		podIP = infra.IP
	}
	if pod.Spec.HostNetwork {
		podIP = hostNetworkIP
	}
	go func() {
		defer close(done)
		hctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		if err := k.runHook(hctx, pod, spec, c.ID, podIP, spec.Lifecycle.PreStop); err != nil {
			glog.Errorf("Pod %s: preStop hook of %s: %v", api.Key(pod), c.Name, err)
		}
	}()
	return done
}

// containerSpec finds a container (app or init) of the pod by name.
func containerSpec(pod *v1.Pod, name string) *v1.Container {
	if pod == nil {
		return nil
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

func (k *Kubelet) removeQuietly(ctx context.Context, id string) {
	if err := k.docker.Remove(ctx, id); err != nil {
		glog.V(2).Infof("Remove container %s: %v", dockertools.ShortID(id), err)
	}
}

func gracePeriod(pod *v1.Pod) time.Duration {
	g := time.Duration(api.DefaultTerminationGracePeriod) * time.Second
	if p := pod.Spec.TerminationGracePeriodSeconds; p != nil {
		g = time.Duration(*p) * time.Second
	}
	return max(g, minStopGrace)
}

// labelGrace is the grace period recorded on a pod's containers, for pods
// whose spec is gone.
func labelGrace(state *kubecontainer.PodState) time.Duration {
	for _, c := range state.Containers {
		var secs int64
		if _, err := fmt.Sscan(c.Labels[dockertools.LabelGracePeriod], &secs); err == nil {
			return max(time.Duration(secs)*time.Second, minStopGrace)
		}
	}
	return time.Duration(api.DefaultTerminationGracePeriod) * time.Second
}
