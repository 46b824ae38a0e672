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
// younger than MinAge. Infra containers go as the kubelet's sandboxes do: one
// that is not running and not the pod's newest goes once no container made
// in its time is left (an agent killed between an infra container's create
// and its start leaves one that never ran, and the pod gets a new one).
// Pods no longer desired are not its business: their worker removes all of
// their containers.
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
		// An ephemeral container's dead instance is kept too: it is the
		// record that it ran, and is never started again.
		for _, c := range spec.Spec.EphemeralContainers {
			inSpec[c.Name] = true
		}
		stale := staleInfra(pod)
		count := map[string]int{}
		for _, c := range pod.Containers { // newest first
			if c.Running {
				continue
			}
			old := now.Sub(c.ExitedAt()) >= p.MinAge // a container that never started: since created
			if stale[c] {
				if old {
					out = append(out, c)
				}
				continue
			}
			count[c.Name]++
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

// staleInfra returns the pod's infra containers that are neither running
// nor its newest and have no container left of their incarnation: those
// created from them on and before the next infra container.
func staleInfra(pod *kubecontainer.PodState) map[*kubecontainer.ContainerState]bool {
	infra := pod.Infra() // newest first
	stale := map[*kubecontainer.ContainerState]bool{}
	for i := 1; i < len(infra); i++ {
		c, next := infra[i], infra[i-1]
		if c.Running {
			continue
		}
		active := false
		for _, o := range pod.Containers {
			if o.Name != kubecontainer.InfraContainerName && !o.CreatedAt.Before(c.CreatedAt) && o.CreatedAt.Before(next.CreatedAt) {
				active = true
				break
			}
		}
		stale[c] = !active
	}
	return stale
}
