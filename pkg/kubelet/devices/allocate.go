package devices

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// assignment is one container's devices of one resource: their IDs
// (sorted), their NUMA nodes (by ID; none: no topology), and what the
// plugin's Allocate answered for them.
type assignment struct {
	IDs      []string
	NUMA     map[string][]int64
	Response *pluginapi.ContainerAllocateResponse
}

// byNUMA lists the assignment's devices by NUMA node, as the checkpoint
// keeps them.
func (a *assignment) byNUMA() map[int64][]string { return groupByNUMA(a.IDs, a.NUMA) }

// groupByNUMA lists ids by NUMA node (those without topology under
// noTopology), each node's in the order of ids.
func groupByNUMA(ids []string, numa map[string][]int64) map[int64][]string {
	out := map[int64][]string{}
	for _, id := range ids {
		nodes := numa[id]
		if len(nodes) == 0 {
			out[noTopology] = append(out[noTopology], id)
		}
		for _, n := range nodes {
			out[n] = append(out[n], id)
		}
	}
	return out
}

// numaNodes are the NUMA nodes of devs' devices among ids (all of them
// when ids is nil), by device ID.
func numaNodes(devs map[string]*pluginapi.Device, ids []string) map[string][]int64 {
	out := map[string][]int64{}
	add := func(id string, d *pluginapi.Device) {
		if d != nil && d.Topology != nil {
			for _, n := range d.Topology.Nodes {
				out[id] = append(out[id], n.ID)
			}
		}
	}
	if ids == nil {
		for id, d := range devs {
			add(id, d)
		}
	}
	for _, id := range ids {
		add(id, devs[id])
	}
	return out
}

// podAssignments are a pod's assignments by container, then resource.
type podAssignments map[string]map[string]*assignment

// assign records a in all.
func assign(all map[types.UID]podAssignments, uid types.UID, container, res string, a *assignment) {
	pod := all[uid]
	if pod == nil {
		pod = podAssignments{}
		all[uid] = pod
	}
	if pod[container] == nil {
		pod[container] = map[string]*assignment{}
	}
	pod[container][res] = a
}

// set is a set of device IDs.
type set map[string]bool

func newSet(ids ...string) set {
	s := set{}
	for _, id := range ids {
		s[id] = true
	}
	return s
}

func (s set) sorted() []string {
	out := make([]string, 0, len(s))
	for id := range s {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// request is what one container needs of one resource at admission.
type request struct {
	resource string
	need     int
	// reusable are the devices of the pod's init containers that have
	// finished before this container starts: taken first.
	reusable set
	// healthy are the resource's healthy devices; inUse those assigned
	// to any container (the reusable ones among them).
	healthy, inUse set
	// preferred is the plugin's preference among the free devices (nil:
	// it gave none, or was not asked).
	preferred []string
}

// free are the healthy devices no container holds.
func (r request) free() set {
	out := set{}
	for id := range r.healthy {
		if !r.inUse[id] {
			out[id] = true
		}
	}
	return out
}

// errUnavailable is the kubelet's refusal of a request beyond the free
// devices (the admission wraps it in UnexpectedAdmissionError).
func errUnavailable(res string, need, available int) error {
	return fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", res, need, available)
}

// choose picks r.need devices, as the kubelet does: the reusable ones
// first, then the plugin's preferred ones that are free, then the free
// ones in ID order (deterministic, unlike the kubelet's map order). It
// fails when too few are free.
func choose(r request) ([]string, error) {
	picked := set{}
	take := func(ids []string) bool {
		for _, id := range ids {
			if len(picked) == r.need {
				return true
			}
			picked[id] = true
		}
		return len(picked) == r.need
	}
	healthyReusable := set{}
	for id := range r.reusable {
		if r.healthy[id] {
			healthyReusable[id] = true
		}
	}
	if take(healthyReusable.sorted()) {
		return picked.sorted(), nil
	}
	free := r.free()
	if left := r.need - len(picked); len(free) < left {
		return nil, errUnavailable(r.resource, left, len(free))
	}
	var preferred []string
	for _, id := range r.preferred {
		if free[id] && !picked[id] {
			preferred = append(preferred, id)
		}
	}
	if take(preferred) || take(free.sorted()) {
		return picked.sorted(), nil
	}
	return nil, fmt.Errorf("unexpectedly allocated less resources than required. Requested: %d, Got: %d", r.need, len(picked))
}
