package kubelet

import "maps"

// podStateSizes counts the entries the agent keeps per pod (and per
// container), by table, for kubelet_pod_state_entries: each must fall back
// when pods go, or a node that runs pods for months grows without bound.
func (k *Kubelet) podStateSizes() map[string]int {
	sizes := map[string]int{
		"desired":  k.desired.len(),
		"records":  k.records.len(),
		"dirty":    k.dirty.len(),
		"retries":  k.retries.len(),
		"cache":    k.cache.Len(),
		"relisted": k.cache.RelistedLen(),
		"statuses": k.status.Len(),
		"probes":   k.probes.Len(),
	}
	maps.Copy(sizes, k.runtime.StateSizes()) // "backoff"
	if w := k.workers.Load(); w != nil {
		sizes["workers"] = w.len()
	}
	return sizes
}

func (d *desiredSet) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pods)
}

func (d *dirtySet) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.uids)
}

func (r *podRecords) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

func (q *retryQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.wake)
}

func (p *podWorkers) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.updates) + len(p.pending)
}
