package kubelet

// podStateSizes counts the entries the agent keeps per pod (and per
// container), by table, for kubelet_pod_state_entries: each must fall back
// when pods go, or a node that runs pods for months grows without bound.
// What is remembered of a pod between its syncs is in its worker's record,
// and goes with the worker ("workers").
func (k *Kubelet) podStateSizes() map[string]int {
	return map[string]int{
		"desired":   k.desired.len(),
		"workers":   k.workers.len(),
		"forgotten": k.workers.forgottenLen(),
		"dirty":     k.dirty.Len(),
		"retries":   k.retries.Len(),
		"cache":     k.cache.Len(),
		"relisted":  k.cache.RelistedLen(),
		"statuses":  k.status.Len(),
		"probes":    k.probes.Len(),
	}
}

func (d *desiredSet) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pods)
}

func (p *podWorkers) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pods)
}

func (p *podWorkers) forgottenLen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.forgotten)
}
