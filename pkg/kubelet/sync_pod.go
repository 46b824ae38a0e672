package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/config"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
)

const (
	infraName = dockertools.InfraContainerName
	// minStopGrace is the shortest stop grace period: even a pod asking for
	// 0 gets a moment to exit cleanly, as Kubernetes does.
	minStopGrace = 2 * time.Second
	// pullInactivity cancels a pull that makes no progress for this long.
	pullInactivity = time.Minute
)

// podActions is what syncPod must do to bring a pod to its spec.
type podActions struct {
	createInfra bool
	kill        []*ContainerState // running containers to stop (app or infra)
	remove      []*ContainerState // dead containers not worth keeping
	start       []int             // indexes into spec.containers, in order
	restarts    map[int]int       // restart count for each start
	crashed     map[int]string    // back-off key of each start that restarts a crash
	waiting     []string          // containers held back by crash back-off
}

// computePodActions compares a pod's spec with its containers. It is pure:
// every decision is made here, so it is tested without Docker.
func computePodActions(pod *v1.Pod, state *PodState, now time.Time, bo *backoff) podActions {
	a := podActions{restarts: map[int]int{}, crashed: map[int]string{}}
	if state == nil {
		state = &PodState{}
	}
	infraHash := dockertools.HashInfra(pod)
	var infra *ContainerState
	for _, c := range state.Infra() {
		if c.Running && c.Hash == infraHash && infra == nil {
			infra = c
		} else if c.Running {
			a.kill = append(a.kill, c)
		}
	}
	a.createInfra = infra == nil

	inSpec := map[string]bool{infraName: true}
	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		inSpec[c.Name] = true
		hash := dockertools.HashContainer(pod, c)
		instances := state.Instances(c.Name)
		var running *ContainerState
		for _, inst := range instances {
			if inst.Running && inst.Hash == hash && running == nil && !a.createInfra {
				running = inst
			} else if inst.Running {
				a.kill = append(a.kill, inst)
			}
		}
		if running != nil {
			keep++
			continue
		}
		restartCount := 0
		if len(instances) > 0 {
			last := instances[0]
			restartCount = last.RestartCount + 1
			// A container that exited by itself with an unchanged spec is
			// restarted as the restart policy says, after its back-off.
			if !last.Running && last.Hash == hash {
				if !shouldRestart(pod.Spec.RestartPolicy, last.ExitCode) {
					continue
				}
				key := backoffKey(pod.UID, c.Name, hash)
				if bo.waiting(key, last, now) {
					a.waiting = append(a.waiting, c.Name)
					continue
				}
				a.crashed[i] = key
			}
		}
		a.start = append(a.start, i)
		a.restarts[i] = restartCount
	}

	// Containers no longer in the spec are stopped.
	for _, c := range state.Containers {
		if !inSpec[c.Name] && c.Running {
			a.kill = append(a.kill, c)
		}
	}

	// A pod with nothing left to run (every container finished as its restart
	// policy says) needs no infra container: stop it to free its ports.
	if keep == 0 && len(a.start) == 0 && len(a.waiting) == 0 {
		a.createInfra = false
		if infra != nil {
			a.kill = append(a.kill, infra)
		}
	}

	// Keep the newest dead instance of each container in the spec (for its
	// exit status and logs); remove older ones and those of removed containers.
	keptDead := map[string]bool{}
	for _, c := range state.Containers { // newest first
		if c.Running {
			continue
		}
		if inSpec[c.Name] && !keptDead[c.Name] {
			keptDead[c.Name] = true
			continue
		}
		a.remove = append(a.remove, c)
	}
	return a
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
func (k *Kubelet) syncPod(ctx context.Context, pod *v1.Pod, state *PodState) (bool, error) {
	a := computePodActions(pod, state, time.Now(), k.backoff)
	acted := a.createInfra || len(a.start) > 0 || len(a.kill) > 0 || len(a.remove) > 0
	return acted, k.applyActions(ctx, pod, state, a)
}

func (k *Kubelet) applyActions(ctx context.Context, pod *v1.Pod, state *PodState, a podActions) error {
	key := api.Key(pod)
	if len(a.waiting) > 0 {
		glog.V(2).Infof("Pod %s: containers %s in crash back-off", key, strings.Join(a.waiting, ", "))
	}
	if len(a.kill) > 0 {
		for _, c := range a.kill {
			glog.Infof("Pod %s: stopping container %s (%s)", key, c.Name, shortID(c.ID))
		}
		if err := k.stopAll(ctx, a.kill, gracePeriod(pod)); err != nil {
			return err
		}
	}
	for _, c := range a.remove {
		if err := k.docker.Remove(ctx, c.ID); err != nil {
			glog.Errorf("Pod %s: remove dead container %s: %v", key, c.DockerName, err)
		}
	}
	if !a.createInfra && len(a.start) == 0 {
		return nil
	}

	hostPaths, err := k.setupVolumes(pod)
	if err != nil {
		return err
	}
	var infraID string
	if a.createInfra {
		infraID, err = k.startInfra(ctx, pod)
		if err != nil {
			return err
		}
	} else {
		for _, c := range state.Infra() {
			if c.Running {
				infraID = c.ID
				break
			}
		}
	}
	var errs []error
	for _, i := range a.start {
		c := &pod.Spec.Containers[i]
		if key, ok := a.crashed[i]; ok {
			k.backoff.restarted(key, time.Now())
		}
		if err := k.startContainer(ctx, pod, c, infraID, hostPaths, a.restarts[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (k *Kubelet) startInfra(ctx context.Context, pod *v1.Pod) (string, error) {
	present, err := k.docker.ImagePresent(ctx, k.cfg.InfraImage)
	if err != nil {
		return "", err
	}
	if !present {
		// The infra image is built locally (make images) and never pulled.
		return "", fmt.Errorf("infra image %s is not present (build it with `make images`)", k.cfg.InfraImage)
	}
	spec := dockertools.InfraSpec(pod, k.cfg.InfraImage, k.cfg.NodeName, podSourceOf(pod))
	id, err := k.docker.Create(ctx, spec)
	if err != nil {
		return "", err
	}
	if err := k.docker.Start(ctx, id); err != nil {
		k.removeQuietly(ctx, id)
		return "", err
	}
	glog.Infof("Pod %s: started infra container %s", api.Key(pod), spec.Name)
	return id, nil
}

func (k *Kubelet) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, infraID string, hostPaths map[string]string, restartCount int) error {
	if err := k.ensureImage(ctx, c); err != nil {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	var binds []string
	for _, m := range c.VolumeMounts {
		b := hostPaths[m.Name] + ":" + m.MountPath
		if m.ReadOnly {
			b += ":ro"
		}
		binds = append(binds, b)
	}
	spec := dockertools.AppSpec(pod, c, infraID, k.cfg.NodeName, binds, restartCount)
	spec.Labels[dockertools.LabelSource] = podSourceOf(pod)
	id, err := k.docker.Create(ctx, spec)
	if err != nil {
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	if err := k.docker.Start(ctx, id); err != nil {
		// A container that failed to start stays as the record of why.
		return fmt.Errorf("container %s: %w", c.Name, err)
	}
	glog.Infof("Pod %s: started container %s (restart %d)", api.Key(pod), spec.Name, restartCount)
	return nil
}

// ensureImage makes the container's image present as its pull policy says:
// Always pulls, IfNotPresent pulls when absent, Never never pulls. Without a
// policy, ":latest" or no tag means Always, as in Kubernetes.
func (k *Kubelet) ensureImage(ctx context.Context, c *v1.Container) error {
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = v1.PullIfNotPresent
		if tagOf(c.Image) == "latest" {
			policy = v1.PullAlways
		}
	}
	if policy != v1.PullAlways {
		present, err := k.docker.ImagePresent(ctx, c.Image)
		if err != nil || present {
			return err
		}
		if policy == v1.PullNever {
			return fmt.Errorf("image %s is not present and imagePullPolicy is Never", c.Image)
		}
	}
	return k.docker.Pull(ctx, c.Image, pullInactivity)
}

// tagOf returns an image reference's tag, "latest" when it names none, and
// "" for a digest reference.
func tagOf(image string) string {
	if strings.Contains(image, "@") {
		return ""
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return "latest"
	}
	return image[i+1:]
}

// killPod stops and removes every container of a pod that is no longer
// desired, then its directory. It reports whether it acted on Docker.
func (k *Kubelet) killPod(ctx context.Context, uid types.UID, state *PodState) (bool, error) {
	acted := state != nil && len(state.Containers) > 0
	return acted, k.killContainers(ctx, uid, state)
}

func (k *Kubelet) killContainers(ctx context.Context, uid types.UID, state *PodState) error {
	if state != nil && len(state.Containers) > 0 {
		glog.Infof("Killing pod %s/%s (uid %s)", state.Namespace, state.Name, uid)
		var apps, infra []*ContainerState
		for _, c := range state.Containers {
			if !c.Running {
				continue
			}
			if c.Name == infraName {
				infra = append(infra, c)
			} else {
				apps = append(apps, c)
			}
		}
		grace := labelGrace(state)
		// Apps first: the infra container holds the network they may still
		// use while shutting down.
		if err := k.stopAll(ctx, apps, grace); err != nil {
			return err
		}
		if err := k.stopAll(ctx, infra, grace); err != nil {
			return err
		}
		for _, c := range state.Containers {
			if err := k.docker.Remove(ctx, c.ID); err != nil {
				return err
			}
		}
	}
	if err := os.RemoveAll(k.podDir(uid)); err != nil {
		return fmt.Errorf("remove pod directory: %w", err)
	}
	return nil
}

// stopAll stops containers in parallel, each with the grace period.
func (k *Kubelet) stopAll(ctx context.Context, cs []*ContainerState, grace time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = k.docker.Stop(ctx, c.ID, grace)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (k *Kubelet) removeQuietly(ctx context.Context, id string) {
	if err := k.docker.Remove(ctx, id); err != nil {
		glog.V(2).Infof("Remove container %s: %v", shortID(id), err)
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
func labelGrace(state *PodState) time.Duration {
	for _, c := range state.Containers {
		var secs int64
		if _, err := fmt.Sscan(c.Labels[dockertools.LabelGracePeriod], &secs); err == nil {
			return max(time.Duration(secs)*time.Second, minStopGrace)
		}
	}
	return time.Duration(api.DefaultTerminationGracePeriod) * time.Second
}

func podSourceOf(pod *v1.Pod) string {
	if s := pod.Annotations[api.ConfigSourceAnnotation]; s != "" {
		return s
	}
	return config.SourceFile
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// podDir is the pod's directory under the root dir.
func (k *Kubelet) podDir(uid types.UID) string {
	return filepath.Join(k.cfg.RootDir, "pods", string(uid))
}
