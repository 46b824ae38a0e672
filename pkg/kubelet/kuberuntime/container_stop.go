package kuberuntime

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
)

// StopAll stops containers within one grace period, in the order the
// kubelet terminates a pod: every preStop hook starts at once; an app
// container gets its stop signal when its hook is done; sidecars only once
// every app container is gone, the last declared first; the infra container
// (which holds the network the others may use while they shut down) last.
// A grace of 0 kills everything at once, without hooks: for containers
// whose sandbox is gone. why is the Killing event's message of a container
// (by ID) stopped for a reason of its own.
func (m *Manager) StopAll(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, cs []*kubecontainer.ContainerState, why map[string]string, grace time.Duration) error {
	if grace == 0 {
		return parallel(cs, func(c *kubecontainer.ContainerState) error {
			if err := m.runtime.Stop(ctx, c.ID, 0); err != nil {
				return err
			}
			if c.Name == infraName {
				m.detach(ctx, c)
			}
			return nil
		})
	}
	deadline := time.Now().Add(grace)
	var apps, sidecars, infra []*kubecontainer.ContainerState
	hooks := map[string]<-chan struct{}{} // by container ID: closed when its preStop hook is done
	for _, c := range cs {
		if c.Name == infraName {
			infra = append(infra, c)
			continue
		}
		if spec := kubecontainer.ContainerSpec(pod, c.Name); spec != nil && api.IsSidecar(spec) {
			sidecars = append(sidecars, c)
		} else {
			apps = append(apps, c)
		}
		hooks[c.ID] = m.preStop(ctx, pod, state, c, why[c.ID], deadline)
	}
	stop := func(c *kubecontainer.ContainerState) error {
		if done := hooks[c.ID]; done != nil {
			<-done
		}
		return m.runtime.Stop(ctx, c.ID, max(time.Until(deadline), MinStopGrace))
	}
	errs := []error{parallel(apps, stop)}
	sort.SliceStable(sidecars, func(i, j int) bool { return initIndex(pod, sidecars[i].Name) > initIndex(pod, sidecars[j].Name) })
	for _, c := range sidecars {
		errs = append(errs, stop(c))
	}
	errs = append(errs, parallel(infra, func(c *kubecontainer.ContainerState) error {
		if err := stop(c); err != nil {
			return err
		}
		m.detach(ctx, c)
		return nil
	}))
	return errors.Join(errs...)
}

// detach has the network plugin detach a sandbox that stopped (its IP and
// host ports are free again at once, as cri-dockerd's StopPodSandbox frees
// them). A failure is logged and kept: the sandbox is detached again at its
// removal, or at the agent's next start.
func (m *Manager) detach(ctx context.Context, c *kubecontainer.ContainerState) {
	if err := m.network.TearDown(ctx, c.ID); err != nil {
		klog.Errorf("Pod %s/%s: detach sandbox %s from the network: %v", c.Labels[kubecontainer.LabelPodNamespace], c.Labels[kubecontainer.LabelPodName], kubecontainer.ShortID(c.ID), err)
	}
}

// parallel runs f on each of cs at once and joins the errors.
func parallel[T any](cs []T, f func(T) error) error {
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
// done. why is the Killing event's message ("": "Stopping container X").
func (m *Manager) preStop(ctx context.Context, pod *v1.Pod, state *kubecontainer.PodState, c *kubecontainer.ContainerState, why string, deadline time.Time) <-chan struct{} {
	done := make(chan struct{})
	if why == "" {
		why = "Stopping container " + c.Name
	}
	if pod != nil {
		m.cfg.Events.Event(events.PodRef(pod, c.Name), false, "Killing", "%s", why)
	}
	spec := kubecontainer.ContainerSpec(pod, c.Name)
	if spec == nil || spec.Lifecycle == nil || spec.Lifecycle.PreStop == nil {
		close(done)
		return done
	}
	podIP := ""
	if infra := state.RunningInfra(); infra != nil {
		podIP = infra.IP
	}
	if pod.Spec.HostNetwork {
		podIP = HostNetworkIP
	}
	go func() {
		defer close(done)
		hctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		if err := m.runHook(hctx, pod, spec, c.ID, podIP, spec.Lifecycle.PreStop); err != nil {
			klog.Errorf("Pod %s: preStop hook of %s: %v", api.Key(pod), c.Name, err)
			// As the kubelet, without the hook's output (it may hold secrets).
			m.cfg.Events.Event(events.PodRef(pod, c.Name), true, "FailedPreStopHook", "PreStopHook failed")
		}
	}()
	return done
}

func (m *Manager) removeQuietly(ctx context.Context, id string) {
	if err := m.runtime.Remove(ctx, id); err != nil {
		klog.V(2).Infof("Remove container %s: %v", kubecontainer.ShortID(id), err)
	}
}

// RemoveContainer removes a container and its log symlink; an infra
// container's network is detached first (idempotent: the stop detached it
// unless it died by itself).
func (m *Manager) RemoveContainer(ctx context.Context, c *kubecontainer.ContainerState) error {
	if c.Name == infraName {
		m.detach(ctx, c)
	}
	if err := m.runtime.Remove(ctx, c.ID); err != nil {
		return err
	}
	m.logLinks.Remove(c)
	return nil
}
