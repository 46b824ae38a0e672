// Package gc decides which dead containers the node may let go: the
// policy of --minimum-container-ttl-duration,
// --maximum-dead-containers-per-container and --maximum-dead-containers,
// as a pure function of the relist's view (the kubelet carries it out).
package gc

import (
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Policy bounds the dead containers kept on the node.
type Policy struct {
	// MinAge: a container dead for less than this is never removed.
	MinAge time.Duration
	// MaxPerContainer dead instances are kept per container of a pod (at
	// least 1: the newest is the record of the last exit and of "previous"
	// logs).
	MaxPerContainer int
	// MaxTotal dead containers are kept on the node (< 0: no limit); the
	// oldest removable ones go first, but never a kept newest instance.
	MaxTotal int
}

// DeadContainersToRemove picks, from the cached state, the dead containers
// the policy lets go. It never picks a running container, the newest dead
// instance of a container (for a desired pod: that includes its completed
// init containers and the final containers of a finished pod), or anything
// younger than MinAge. Pods no longer desired are not its business: their
// worker removes all of their containers.
func DeadContainersToRemove(pods map[types.UID]*kubecontainer.PodState, desired func(types.UID) *v1.Pod, p Policy, now time.Time) []*kubecontainer.ContainerState {
	perContainer := max(p.MaxPerContainer, 1)
	type dead struct {
		c      *kubecontainer.ContainerState
		pinned bool // the newest instance: never removed
	}
	var all []dead
	var out []*kubecontainer.ContainerState
	for uid, pod := range pods {
		spec := desired(uid)
		if spec == nil {
			continue
		}
		inSpec := map[string]bool{kubecontainer.InfraContainerName: true}
		for _, c := range spec.Spec.InitContainers {
			inSpec[c.Name] = true
		}
		for _, c := range spec.Spec.Containers {
			inSpec[c.Name] = true
		}
		count := map[string]int{}
		for _, c := range pod.Containers { // newest first
			if c.Running {
				continue
			}
			count[c.Name]++
			old := now.Sub(c.ExitedAt()) >= p.MinAge // a container that never started: since created
			switch {
			case !inSpec[c.Name] && old:
				out = append(out, c) // its container is gone from the spec
			case count[c.Name] == 1:
				all = append(all, dead{c, true})
			case count[c.Name] > perContainer && old:
				out = append(out, c)
			default:
				all = append(all, dead{c, false})
			}
		}
	}
	if p.MaxTotal >= 0 && len(all) > p.MaxTotal {
		sort.Slice(all, func(i, j int) bool { return all[i].c.ExitedAt().Before(all[j].c.ExitedAt()) })
		excess := len(all) - p.MaxTotal
		for _, d := range all {
			if excess == 0 {
				break
			}
			if !d.pinned && now.Sub(d.c.ExitedAt()) >= p.MinAge {
				out = append(out, d.c)
				excess--
			}
		}
	}
	return out
}
