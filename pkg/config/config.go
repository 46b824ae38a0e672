// Package config gathers the pods this node should run from its sources and
// merges them into one desired set. Each source sends complete snapshots; the
// Merger is the only place that decides what is desired, and it emits what was
// added, updated and removed.
package config

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/golang/glog"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// Op is what happened to the pods of a PodUpdate.
type Op int

// The operations, emitted in this order for one change.
const (
	ADD Op = iota
	UPDATE
	REMOVE
)

func (o Op) String() string { return [...]string{"ADD", "UPDATE", "REMOVE"}[o] }

// PodUpdate is one change to the desired set.
type PodUpdate struct {
	Op   Op
	Pods []*v1.Pod
}

// Source names, as recorded on infra containers.
const (
	SourceFile = "file"
)

type sourceState struct {
	pods        []*v1.Pod
	seen        bool // has delivered a snapshot
	lastSuccess time.Time
	lastError   string
}

// admission records when a pod (by namespace/name) was first admitted; the
// lower sequence wins any conflict, and the record is checkpointed so the
// outcome is the same after a restart.
type admission struct {
	Seq    int64  `json:"seq"`
	Source string `json:"source"`
}

// Merger keeps the last snapshot of each source and merges them. Conflicts
// (one pod declared by two sources, two pods claiming one host port) are
// settled by admission order: the first admitted wins, the other is rejected
// with an error naming both.
type Merger struct {
	// sendMu serializes emission so updates leave in the order they were
	// computed, without holding mu while the consumer is busy.
	sendMu sync.Mutex
	out    chan PodUpdate

	mu             sync.Mutex // guards everything below
	sources        map[string]*sourceState
	admitted       map[string]admission
	nextSeq        int64
	desired        map[string]*v1.Pod
	rejections     map[string]string // pod key@source → reason, as last logged
	checkpointPath string
}

// NewMerger returns a merger whose admission order is checkpointed in
// checkpointDir (loaded now if present).
func NewMerger(checkpointDir string) (*Merger, error) {
	m := &Merger{
		out:            make(chan PodUpdate),
		sources:        map[string]*sourceState{},
		admitted:       map[string]admission{},
		desired:        map[string]*v1.Pod{},
		rejections:     map[string]string{},
		checkpointPath: filepath.Join(checkpointDir, "admission.json"),
	}
	data, err := os.ReadFile(m.checkpointPath)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return nil, fmt.Errorf("read admission checkpoint: %w", err)
	default:
		if err := json.Unmarshal(data, &m.admitted); err != nil {
			glog.Errorf("Ignoring corrupt admission checkpoint %s: %v", m.checkpointPath, err)
			m.admitted = map[string]admission{}
		}
		for _, a := range m.admitted {
			if a.Seq >= m.nextSeq {
				m.nextSeq = a.Seq + 1
			}
		}
	}
	return m, nil
}

// Updates is the stream of changes to the desired set.
func (m *Merger) Updates() <-chan PodUpdate { return m.out }

// Seen reports whether source has delivered a snapshot, i.e. whether its
// silence about a pod means the pod should not run.
func (m *Merger) Seen(source string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sources[source]
	return ok && s.seen
}

// SetError records that source failed; its last snapshot stays in force.
func (m *Merger) SetError(source string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.source(source).lastError = err.Error()
}

func (m *Merger) source(name string) *sourceState {
	s, ok := m.sources[name]
	if !ok {
		s = &sourceState{}
		m.sources[name] = s
	}
	return s
}

// Set replaces source's snapshot with pods (already defaulted and valid) and
// emits the resulting changes. It blocks until they are consumed or ctx ends.
func (m *Merger) Set(ctx context.Context, source string, pods []*v1.Pod) {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()

	m.mu.Lock()
	s := m.source(source)
	s.pods, s.seen, s.lastSuccess = pods, true, time.Now()
	updates := m.merge()
	m.mu.Unlock()

	for _, u := range updates {
		select {
		case m.out <- u:
		case <-ctx.Done():
			return
		}
	}
}

type candidate struct {
	pod    *v1.Pod
	source string
	seq    int64
}

// merge recomputes the desired set from the snapshots; callers hold mu.
func (m *Merger) merge() []PodUpdate {
	// Admit pods seen for the first time, in source order.
	declared := map[string]bool{}
	var cands []candidate
	for _, name := range m.sourceNames() {
		for _, pod := range m.sources[name].pods {
			key := api.Key(pod)
			id := key + "@" + name
			a, ok := m.admitted[id]
			if !ok {
				a = admission{Seq: m.nextSeq, Source: name}
				m.nextSeq++
				m.admitted[id] = a
			}
			declared[id] = true
			cands = append(cands, candidate{pod: pod, source: name, seq: a.Seq})
		}
	}
	// Only a source that has spoken can give up a pod: until then its
	// admissions (loaded from the checkpoint) keep their place in line.
	for id, a := range m.admitted {
		if src := m.sources[a.Source]; !declared[id] && src != nil && src.seen {
			delete(m.admitted, id)
		}
	}
	m.saveAdmissions()
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].seq < cands[j].seq })

	desired := map[string]*v1.Pod{}
	owner := map[string]string{} // pod key → source that won it
	rejections := map[string]string{}
	var ports []struct {
		hp  api.HostPort
		key string
		src string
	}
	for _, c := range cands {
		key := api.Key(c.pod)
		id := key + "@" + c.source
		if src, taken := owner[key]; taken {
			rejections[id] = fmt.Sprintf("pod %s from source %q rejected: source %q declared it first", key, c.source, src)
			continue
		}
		conflict := ""
		for _, hp := range api.HostPorts(c.pod) {
			for _, p := range ports {
				if hp.Conflicts(p.hp) {
					conflict = fmt.Sprintf("pod %s from source %q rejected: host port %s is claimed by pod %s from source %q, admitted first", key, c.source, hp, p.key, p.src)
					break
				}
			}
			if conflict != "" {
				break
			}
		}
		if conflict != "" {
			rejections[id] = conflict
			continue
		}
		for _, hp := range api.HostPorts(c.pod) {
			ports = append(ports, struct {
				hp  api.HostPort
				key string
				src string
			}{hp, key, c.source})
		}
		owner[key] = c.source
		desired[key] = c.pod
	}
	for id, reason := range rejections {
		if m.rejections[id] != reason {
			glog.Errorf("%s", reason)
		}
	}
	m.rejections = rejections

	var added, updated, removed []*v1.Pod
	for _, key := range sortedKeys(desired) {
		old, ok := m.desired[key]
		switch {
		case !ok:
			added = append(added, desired[key])
		case !apiequality.Semantic.DeepEqual(old, desired[key]):
			updated = append(updated, desired[key])
		}
	}
	for _, key := range sortedKeys(m.desired) {
		if _, ok := desired[key]; !ok {
			removed = append(removed, m.desired[key])
		}
	}
	m.desired = desired
	var out []PodUpdate
	for _, u := range []PodUpdate{{ADD, added}, {UPDATE, updated}, {REMOVE, removed}} {
		if len(u.Pods) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// Rejections returns the current rejection messages, sorted.
func (m *Merger) Rejections() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.rejections {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

func (m *Merger) sourceNames() []string {
	names := make([]string, 0, len(m.sources))
	for n := range m.sources {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func sortedKeys(pods map[string]*v1.Pod) []string {
	keys := make([]string, 0, len(pods))
	for k := range pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// saveAdmissions checkpoints the admission order atomically; callers hold mu.
// A failure is logged, not fatal: it only weakens ordering across restarts.
func (m *Merger) saveAdmissions() {
	data, err := json.Marshal(m.admitted)
	if err == nil {
		err = WriteFileAtomic(m.checkpointPath, data)
	}
	if err != nil {
		glog.Errorf("Checkpoint admission order: %v", err)
	}
}

// WriteFileAtomic replaces path with data so that a crash leaves either the
// old or the new content, never a torn file.
func WriteFileAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func podsEqual(a, b []*v1.Pod) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}
