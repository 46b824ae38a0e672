package eviction

import (
	"fmt"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Reason is the reason of an evicted pod's status, of its event and of a
// pod refused under pressure, as the kubelet's.
const Reason = "Evicted"

// systemCriticalPriority is the lowest priority of a critical pod
// (system-cluster-critical; system-node-critical is 2000001000).
const systemCriticalPriority = 2000000000

// Config is the eviction manager's configuration.
type Config struct {
	Thresholds []Threshold
	// MaxPodGracePeriod bounds a soft eviction's grace period
	// (--eviction-max-pod-grace-period).
	MaxPodGracePeriod time.Duration
	// PressureTransitionPeriod is how long a pressure condition stays
	// after its signal recovered (--eviction-pressure-transition-period).
	PressureTransitionPeriod time.Duration
}

// Observation is a signal's value: what is available of a capacity.
type Observation struct {
	Available, Capacity int64
}

// Observations are the signals observed in one round; a signal that could
// not be observed is absent (its thresholds are not evaluated).
type Observations map[Signal]Observation

// ContainerUsage is what one container uses.
type ContainerUsage struct {
	Name   string
	Memory int64 // working set, bytes
	Disk   int64 // writable layer and logs, bytes
}

// PodUsage is what a pod uses; Known is false when it could not be
// measured (such a pod ranks after every measured one: see rank).
type PodUsage struct {
	Pod        *v1.Pod
	Known      bool
	Memory     int64 // working set, bytes
	Disk       int64 // writable layers, logs and local volumes, bytes
	Processes  int64
	Containers []ContainerUsage
}

// Eviction is the decision to evict one pod.
type Eviction struct {
	Pod *v1.Pod
	// GracePeriod is the stop's grace: 0 for a hard threshold (the
	// caller's minimum applies), else min(pod's, MaxPodGracePeriod).
	GracePeriod time.Duration
	Message     string
}

// Manager keeps the state between rounds: when each threshold was first
// met, when each condition was last seen, which thresholds are being
// reclaimed. Safe for concurrent use.
type Manager struct {
	cfg   Config
	clock clock.PassiveClock

	mu            sync.Mutex
	firstObserved map[Threshold]time.Time
	lastObserved  map[v1.NodeConditionType]time.Time
	reclaiming    []Threshold // met at the last round, past their grace
	conditions    []v1.NodeConditionType
}

// NewManager returns a manager with no pressure.
func NewManager(cfg Config, c clock.PassiveClock) *Manager {
	return &Manager{cfg: cfg, clock: c, firstObserved: map[Threshold]time.Time{}, lastObserved: map[v1.NodeConditionType]time.Time{}}
}

// Signals are the signals some threshold needs (only those are observed).
func (m *Manager) Signals() map[Signal]bool {
	out := map[Signal]bool{}
	for _, t := range m.cfg.Thresholds {
		out[t.Signal] = true
	}
	return out
}

// Observe takes a round's observations: it updates the node conditions
// (held for the transition period) and returns the thresholds to act on,
// those met whose grace period has passed, memory first. A threshold met
// before stays met until its minimum reclaim is reached.
func (m *Manager) Observe(obs Observations) []Threshold {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	met := thresholdsMet(m.cfg.Thresholds, obs, false)
	for _, t := range thresholdsMet(m.reclaiming, obs, true) {
		met = appendUnique(met, t)
	}
	first := map[Threshold]time.Time{}
	for _, t := range met {
		if at, ok := m.firstObserved[t]; ok {
			first[t] = at
		} else {
			first[t] = now
		}
		m.lastObserved[signalCondition[t.Signal]] = now
	}
	m.firstObserved = first
	m.conditions = nil
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if at, ok := m.lastObserved[c]; ok && now.Sub(at) <= m.cfg.PressureTransitionPeriod {
			m.conditions = append(m.conditions, c)
		}
	}
	var due []Threshold
	for _, t := range met {
		if now.Sub(first[t]) >= t.GracePeriod {
			due = append(due, t)
		}
	}
	sort.SliceStable(due, func(i, j int) bool {
		return due[i].Signal == SignalMemoryAvailable && due[j].Signal != SignalMemoryAvailable
	})
	m.reclaiming = due
	return due
}

// FirstObserved is when t was first met in its current run of rounds
// (zero if it is not met).
func (m *Manager) FirstObserved(t Threshold) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.firstObserved[t]
}

// StillMet reports whether t is still met (minimum reclaim included):
// after node-level reclaim, a pod is evicted only if it is.
func StillMet(t Threshold, obs Observations) bool {
	return len(thresholdsMet([]Threshold{t}, obs, true)) > 0
}

func appendUnique(ts []Threshold, t Threshold) []Threshold {
	for _, have := range ts {
		if have == t {
			return ts
		}
	}
	return append(ts, t)
}

// thresholdsMet are those whose signal's availability is below the
// threshold (plus its minimum reclaim when enforced).
func thresholdsMet(ts []Threshold, obs Observations, withMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.of(o.Capacity)
		if withMinReclaim && t.MinReclaim != nil {
			q += t.MinReclaim.of(o.Capacity)
		}
		if o.Available < q {
			out = append(out, t)
		}
	}
	return out
}

// Conditions are the node's pressure conditions now.
func (m *Manager) Conditions() []v1.NodeConditionType {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]v1.NodeConditionType(nil), m.conditions...)
}

// HasCondition reports whether the node is under that pressure.
func (m *Manager) HasCondition(c v1.NodeConditionType) bool {
	for _, have := range m.Conditions() {
		if have == c {
			return true
		}
	}
	return false
}

// Admit is the kubelet's eviction admission: under memory pressure alone
// only BestEffort pods (not tolerating it) are refused; under any other
// pressure every pod; critical pods never. It returns the refusal's
// message, "" to admit.
func (m *Manager) Admit(pod *v1.Pod, qos v1.PodQOSClass) string {
	conds := m.Conditions()
	if len(conds) == 0 || IsCritical(pod) {
		return ""
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if qos != v1.PodQOSBestEffort {
			return ""
		}
		taint := v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
		for i := range pod.Spec.Tolerations {
			if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), &taint, false) {
				return ""
			}
		}
	}
	return fmt.Sprintf("The node had condition: %v. ", conds)
}

// IsCritical reports whether a pod is never evicted: a priority of
// system-cluster-critical or above, or its priority class named. The
// kubelet also counts every static pod critical; here every pod is
// static (there is no API server), so that rule would disable eviction.
func IsCritical(pod *v1.Pod) bool {
	switch pod.Spec.PriorityClassName {
	case "system-node-critical", "system-cluster-critical":
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// Pick ranks the pods for the threshold as the kubelet ranks them and
// returns the eviction of the first one that is not critical (nil if
// none is).
func (m *Manager) Pick(t Threshold, obs Observations, pods []PodUsage) *Eviction {
	res := signalResource[t.Signal]
	ranked := append([]PodUsage(nil), pods...)
	rank(ranked, res)
	for _, p := range ranked {
		if IsCritical(p.Pod) {
			continue
		}
		grace := time.Duration(0)
		if !t.Hard() {
			grace = m.cfg.MaxPodGracePeriod
			if s := p.Pod.Spec.TerminationGracePeriodSeconds; s != nil {
				grace = min(grace, time.Duration(*s)*time.Second)
			}
		}
		return &Eviction{Pod: p.Pod, GracePeriod: grace, Message: message(res, t, obs, p)}
	}
	return nil
}

// usage is what a pod uses of res (what ranking compares).
func (p PodUsage) usage(res v1.ResourceName) int64 {
	switch res {
	case v1.ResourceMemory:
		return p.Memory
	case resourcePIDs:
		return p.Processes
	default:
		// Per-pod inode counts are not measured: inode pressure ranks by
		// bytes, the closest measure the agent has.
		return p.Disk
	}
}

func request(pod *v1.Pod, res v1.ResourceName) int64 {
	if res == resourceInodes {
		res = v1.ResourceEphemeralStorage
	}
	q := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[res]
	return q.Value()
}

// rank orders pods as the kubelet's rankMemoryPressure,
// rankDiskPressureFunc and rankPIDPressure: those using more than they
// request first, then lower priority, then more usage above the request;
// PID pressure ranks by priority, then process count.
//
// A pod that could not be measured ranks after every measured one. The
// kubelet ranks a pod without stats first, but its stats come from
// cAdvisor, which has every running pod's: a pod without them there is a
// rare exception. Here a pod goes unmeasured when its pod cgroup cannot be
// read (it just started, or the cgroups are off) or a layer of it is
// in no measurement yet; ranked first it was evicted in place of the pod
// causing the pressure (issue 49), so it waits behind the pods known to
// use something.
func rank(pods []PodUsage, res v1.ResourceName) {
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if a.Known != b.Known {
			return a.Known
		}
		if res != resourcePIDs {
			ea, eb := a.usage(res) > request(a.Pod, res), b.usage(res) > request(b.Pod, res)
			if ea != eb {
				return ea
			}
		}
		if pa, pb := corev1helpers.PodPriority(a.Pod), corev1helpers.PodPriority(b.Pod); pa != pb {
			return pa < pb
		}
		if res == resourcePIDs {
			return a.Processes > b.Processes
		}
		return a.usage(res)-request(a.Pod, res) > b.usage(res)-request(b.Pod, res)
	})
}

// message is the kubelet's eviction message: the resource, the threshold
// and what was available, then each container using more than it
// requests.
func message(res v1.ResourceName, t Threshold, obs Observations, p PodUsage) string {
	format := resource.BinarySI
	if res == resourceInodes || res == resourcePIDs {
		format = resource.DecimalSI
	}
	msg := fmt.Sprintf("The node was low on resource: %v. ", res)
	if o, ok := obs[t.Signal]; ok {
		msg += fmt.Sprintf("Threshold quantity: %v, available: %v. ",
			resource.NewQuantity(t.Value.of(o.Capacity), format), resource.NewQuantity(o.Available, format))
	}
	if !p.Known || (res != v1.ResourceMemory && res != v1.ResourceEphemeralStorage) {
		return msg
	}
	for _, cu := range p.Containers {
		for i := range p.Pod.Spec.Containers {
			c := &p.Pod.Spec.Containers[i]
			if c.Name != cu.Name {
				continue
			}
			used := cu.Memory
			if res == v1.ResourceEphemeralStorage {
				used = cu.Disk
			}
			req := c.Resources.Requests[res]
			if u := resource.NewQuantity(used, resource.BinarySI); u.Cmp(req) > 0 {
				msg += fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of %v. ", c.Name, u, req.String(), res)
			}
		}
	}
	return msg
}
