// Package status keeps the pods' statuses as their workers produced them
// (a GET of every pod reads them, computing nothing), and what a status
// cannot recompute from the runtime: when each pod condition last changed.
// The times are checkpointed, so an agent restart rebuilds the same status
// instead of resetting them.
package status

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

type entry struct {
	Status v1.ConditionStatus `json:"status"`
	Time   time.Time          `json:"time"`
}

// Manager stamps pod conditions with their last transition time. Stamping
// never waits on the disk: changes are checkpointed by Run, in the
// background, coalesced (a GET of every pod used to fsync under the lock).
type Manager struct {
	path    string
	dirty   chan struct{} // cap 1: "conds changed since the last save"
	changed chan struct{} // cap 1: "a status changed since Changed was last read"

	subsMu sync.Mutex
	subs   []chan struct{} // Subscribe's, each as changed

	saveMu sync.Mutex // serializes saves, so an older snapshot never overwrites a newer one

	mu       sync.Mutex       // guards clock, conds and statuses
	clock    clock.WithTicker // stamps the times and spaces the checkpoints
	conds    map[types.UID]map[v1.PodConditionType]entry
	statuses map[types.UID]v1.PodStatus
}

// NewManager returns a manager checkpointing to path (loaded now if there),
// on clk (nil: the real clock).
func NewManager(path string, clk clock.WithTicker) *Manager {
	if clk == nil {
		clk = clock.RealClock{}
	}
	m := &Manager{path: path, clock: clk, dirty: make(chan struct{}, 1), changed: make(chan struct{}, 1),
		conds: map[types.UID]map[v1.PodConditionType]entry{}, statuses: map[types.UID]v1.PodStatus{}}
	data, err := os.ReadFile(path)
	if err == nil {
		if err := json.Unmarshal(data, &m.conds); err != nil {
			klog.Errorf("Ignoring corrupt condition checkpoint %s: %v", path, err)
			m.conds = map[types.UID]map[v1.PodConditionType]entry{}
		}
	}
	return m
}

// Stamp sets each condition's LastTransitionTime: kept from before while
// its status is unchanged, now when it changed.
func (m *Manager) Stamp(uid types.UID, conds []v1.PodCondition) []v1.PodCondition {
	m.mu.Lock()
	defer m.mu.Unlock()
	known := m.conds[uid]
	if known == nil {
		known = map[v1.PodConditionType]entry{}
		m.conds[uid] = known
	}
	changed := false
	for i := range conds {
		e, ok := known[conds[i].Type]
		if !ok || e.Status != conds[i].Status {
			e = entry{Status: conds[i].Status, Time: m.clock.Now().Truncate(time.Second)}
			known[conds[i].Type] = e
			changed = true
		}
		conds[i].LastTransitionTime = metav1.NewTime(e.Time)
	}
	if changed {
		m.save()
	}
	return conds
}

// SetClock replaces the clock (for tests); a running Run keeps the one it
// started with.
func (m *Manager) SetClock(clk clock.WithTicker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clock = clk
}

// Set keeps a pod's status, as its worker produced it after a sync.
func (m *Manager) Set(uid types.UID, st v1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.statuses[uid]; !ok || !apiequality.Semantic.DeepEqual(old, st) {
		m.poke()
	}
	m.statuses[uid] = st
}

// Changed is poked (one slot, never blocking) when a status changes or a
// pod is forgotten: for a single reader that reports statuses elsewhere.
func (m *Manager) Changed() <-chan struct{} { return m.changed }

// Subscribe returns a channel poked as Changed is, for one more reader.
func (m *Manager) Subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	m.subsMu.Lock()
	m.subs = append(m.subs, ch)
	m.subsMu.Unlock()
	return ch
}

func (m *Manager) poke() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
	m.subsMu.Lock()
	defer m.subsMu.Unlock()
	for _, ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Get returns a pod's last status, if its worker produced one.
func (m *Manager) Get(uid types.UID) (v1.PodStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.statuses[uid]
	return st, ok
}

// Forget drops a pod that is gone.
func (m *Manager) Forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.statuses, uid)
	m.poke()
	if _, ok := m.conds[uid]; ok {
		delete(m.conds, uid)
		m.save()
	}
}

// save marks the times for checkpointing; it never blocks. Callers hold mu.
func (m *Manager) save() {
	select {
	case m.dirty <- struct{}{}:
	default:
	}
}

// saveSpacing is the least time between two checkpoints. Each one writes
// and syncs every pod's times, and a burst of 100 pods changes conditions
// hundreds of times: saved at each change, the checkpoint cost the agent
// 12 % of its CPU in the burst. A crash loses at most this much of the
// times, which are whole seconds anyway.
const saveSpacing = time.Second

// Run checkpoints changes, at most once per saveSpacing, until ctx is
// cancelled, then once more.
func (m *Manager) Run(ctx context.Context) {
	m.mu.Lock()
	clk := m.clock
	m.mu.Unlock()
	for {
		select {
		case <-m.dirty:
			m.Flush()
		case <-ctx.Done():
			m.Flush()
			return
		}
		select {
		case <-clk.After(saveSpacing):
		case <-ctx.Done():
			m.Flush()
			return
		}
	}
}

// Flush checkpoints the times now.
func (m *Manager) Flush() {
	m.saveMu.Lock()
	defer m.saveMu.Unlock()
	m.mu.Lock()
	data, err := json.Marshal(m.conds)
	m.mu.Unlock()
	if err == nil {
		err = safefile.WriteAtomic(m.path, data)
	}
	if err != nil {
		klog.Errorf("Checkpoint pod conditions: %v", err)
	}
}

// Len is the number of pods the manager keeps a status or conditions of.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(len(m.statuses), len(m.conds))
}
