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
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/backoff"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// Checkpoint states of a source, as /sources shows them.
const (
	// CheckpointDegraded: the newest checkpoint was unreadable, the previous
	// generation is in force (its pods kept if they run, never started).
	CheckpointDegraded = "checkpoint degraded"
	// CheckpointLost: no generation was readable; the pods running for the
	// source are left alone until it delivers a complete snapshot.
	CheckpointLost = "checkpoint lost"
)

type sourceState struct {
	pods        []*v1.Pod
	seen        bool   // has delivered a snapshot, or its checkpoint was loaded
	restored    bool   // the snapshot in force came from the checkpoint
	checkpoint  string // "" or CheckpointDegraded/Lost, until a complete snapshot
	behind      string // why the snapshot in force is not on disk yet ("" it is)
	lastSuccess time.Time
	lastError   string
	lastErrorAt time.Time
}

// SourceStatus is what GET /sources shows of one source.
type SourceStatus struct {
	Name        string     `json:"name"`
	Seen        bool       `json:"seen"`
	Restored    bool       `json:"restoredFromCheckpoint,omitempty"`
	Checkpoint  string     `json:"checkpoint,omitempty"`
	Pods        int        `json:"pods"`
	LastSuccess *time.Time `json:"lastSuccess,omitempty"`
	LastError   string     `json:"lastError,omitempty"`
	LastErrorAt *time.Time `json:"lastErrorTime,omitempty"`
	Rejected    []string   `json:"rejected,omitempty"`
	// RejectedMore counts the rejections past the first
	// maxListedRejections, which alone are listed.
	RejectedMore int `json:"rejectedMore,omitempty"`
	// CheckpointBehind is the error of the last attempt to write the
	// snapshot in force, while it is not on disk (retried with back-off).
	CheckpointBehind string `json:"checkpointBehind,omitempty"`
}

// A source can declare thousands of pods that cannot run (a generated file,
// a hostile POST): /sources lists the first rejections of each source and
// counts the rest, and one merge logs only the first few new ones.
const (
	maxListedRejections = 100
	maxLoggedRejections = 20
)

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
	opts MergerOptions

	// sendMu serializes emission so updates leave in the order they were
	// computed, without holding mu while the consumer is busy.
	sendMu sync.Mutex
	out    chan api.PodUpdate

	mu             sync.Mutex // guards everything below
	configured     map[string]bool
	sources        map[string]*sourceState
	admitted       map[string]admission
	nextSeq        int64
	delivered      map[string]*v1.Pod   // the desired set as the consumer has received it
	rejections     map[string]string    // pod key@source → reason, as last logged
	rejected       map[string]Rejection // pod key@source → the rejected pod and why
	checkpointDir  string
	checkpointPath string

	// A checkpoint that cannot be written is retried, with back-off, by
	// Run's goroutine when retry fires; whoever finds a write failing arms
	// it (under mu), so a failure costs nothing between attempts.
	write            func(path string, data []byte) error
	clock            clock.Clock
	retry            clock.Timer
	retryArmed       bool
	retryBackoff     *backoff.Backoff[backoff.One]
	admissionsBehind bool
}

// checkpointRetry is the back-off of checkpoint write retries: 1 s, doubling
// while any write fails, started over once all are written.
var checkpointRetry = backoff.Policy{Initial: time.Second, Max: time.Minute}

// MergerOptions are the merger's admission limits and whom it tells of
// failures and rejections.
type MergerOptions struct {
	// MaxPods caps the desired pods across all sources (0: no cap); pods
	// beyond it, in admission order, are rejected as OutOfpods until room
	// is made.
	MaxPods int
	// Allocatable, if set, is the node's allocatable cpu and memory: a pod
	// whose requests alone pass it is rejected (OutOfcpu, OutOfmemory).
	Allocatable v1.ResourceList
	// OnReject, if set, is called (without blocking) for each pod newly
	// rejected, or rejected for a new reason.
	OnReject func(Rejection)
	// OnError, if set, is called (without blocking) for each source failure.
	OnError func(source string, err error)
}

// NewMerger returns a merger for the named sources (the ones configured on
// this agent) that admits pods as opts says. Admission order and each
// source's last good snapshot are checkpointed in checkpointDir; the
// admission order is loaded now, the snapshots by LoadCheckpoints.
func NewMerger(checkpointDir string, opts MergerOptions, sources ...string) (*Merger, error) {
	return newMerger(checkpointDir, opts, clock.RealClock{}, safefile.WriteAtomic, sources...)
}

// newMerger is NewMerger with the clock of checkpoint retries and the
// writer of checkpoint files (atomic: it replaces path or fails) given.
func newMerger(checkpointDir string, opts MergerOptions, clk clock.Clock, write func(path string, data []byte) error, sources ...string) (*Merger, error) {
	retry := clk.NewTimer(checkpointRetry.Initial)
	retry.Stop()
	m := &Merger{
		opts:           opts,
		write:          write,
		clock:          clk,
		retry:          retry,
		retryBackoff:   backoff.New[backoff.One](checkpointRetry, clk),
		out:            make(chan api.PodUpdate),
		configured:     map[string]bool{},
		sources:        map[string]*sourceState{},
		admitted:       map[string]admission{},
		delivered:      map[string]*v1.Pod{},
		rejections:     map[string]string{},
		rejected:       map[string]Rejection{},
		checkpointDir:  checkpointDir,
		checkpointPath: filepath.Join(checkpointDir, "admission.json"),
	}
	for _, s := range sources {
		m.configured[s] = true
	}
	data, err := os.ReadFile(m.checkpointPath)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return nil, fmt.Errorf("read admission checkpoint: %w", err)
	default:
		if err := json.Unmarshal(data, &m.admitted); err != nil {
			klog.Errorf("Ignoring corrupt admission checkpoint %s: %v", m.checkpointPath, err)
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

// SetConfigured replaces the set of configured sources (after a reload). A
// source no longer configured gives up its pods as soon as a snapshot of any
// source is merged; its checkpoint stays on disk.
func (m *Merger) SetConfigured(sources ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.configured = map[string]bool{}
	for _, s := range sources {
		m.configured[s] = true
	}
	for name := range m.sources {
		if !m.configured[name] {
			delete(m.sources, name)
		}
	}
}

// Updates is the stream of changes to the desired set.
func (m *Merger) Updates() <-chan api.PodUpdate { return m.out }

// Seen reports whether source's silence about a pod means the pod should
// not run: the source has delivered a snapshot (or its checkpoint was
// loaded), or it is no longer configured on this agent at all.
func (m *Merger) Seen(source string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.configured[source] {
		return true
	}
	s, ok := m.sources[source]
	return ok && s.seen
}

// SetError records that source failed (nil: that it works again); its last
// snapshot stays in force either way.
func (m *Merger) SetError(source string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.source(source)
	if err == nil {
		s.lastError = ""
		return
	}
	s.lastError, s.lastErrorAt = err.Error(), time.Now()
	if m.opts.OnError != nil {
		m.opts.OnError(source, err)
	}
}

// checkpointState is CheckpointDegraded or CheckpointLost while source's
// unreadable checkpoint holds it, else "".
func (m *Merger) checkpointState(source string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sources[source]; ok {
		return s.checkpoint
	}
	return ""
}

// Snapshot returns the snapshot in force for source.
func (m *Merger) Snapshot(source string) []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.sources[source]; ok {
		return s.pods
	}
	return nil
}

// Status describes every configured source, sorted by name.
func (m *Merger) Status() []SourceStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := map[string]bool{}
	for n := range m.configured {
		names[n] = true
	}
	for n := range m.sources {
		names[n] = true
	}
	var out []SourceStatus
	for n := range names {
		st := SourceStatus{Name: n}
		if s, ok := m.sources[n]; ok {
			st.Seen, st.Restored, st.Pods, st.LastError = s.seen, s.restored, len(s.pods), s.lastError
			st.Checkpoint, st.CheckpointBehind = s.checkpoint, s.behind
			if !s.lastSuccess.IsZero() {
				t := s.lastSuccess
				st.LastSuccess = &t
			}
			if s.lastError != "" {
				t := s.lastErrorAt
				st.LastErrorAt = &t
			}
		}
		for id, reason := range m.rejections {
			if strings.HasSuffix(id, "@"+n) {
				st.Rejected = append(st.Rejected, reason)
			}
		}
		sort.Strings(st.Rejected)
		if len(st.Rejected) > maxListedRejections {
			st.RejectedMore = len(st.Rejected) - maxListedRejections
			st.Rejected = st.Rejected[:maxListedRejections]
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LoadCheckpoints puts each configured source's checkpointed snapshot in
// force, as if the source had just delivered it, so nothing starts or stops
// by accident while a source is slow to answer after a restart. It emits the
// resulting changes like Set.
//
// A checkpoint that cannot be read never kills a pod. If the newest
// generation is unreadable, the previous one is put in force with each pod
// marked (api.RestoredAnnotation): kept if it runs, never started. If none
// is readable, nothing is put in force. Either way the source does not
// count as seen (pods it is silent about keep running) until it delivers a
// complete snapshot.
func (m *Merger) LoadCheckpoints(ctx context.Context) {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	m.mu.Lock()
	var loaded []string
	for name := range m.configured {
		pods, state, err := readCheckpoint(m.snapshotPath(name))
		switch {
		case err != nil && state == "":
			continue // never checkpointed
		case state == CheckpointLost:
			klog.Errorf("Source %s: no readable checkpoint (%v); its running pods are left alone until it delivers a complete snapshot", name, err)
		case state == CheckpointDegraded:
			klog.Errorf("Source %s: newest checkpoint unreadable (%v); %d pods of the previous one are kept where they run, none started", name, err, len(pods))
		default:
			klog.Infof("Source %s: %d pods restored from its checkpoint", name, len(pods))
		}
		s := m.source(name)
		s.pods, s.restored, s.checkpoint = pods, true, state
		if state == "" {
			loaded = append(loaded, name)
		}
	}
	updates := m.merge()
	m.mu.Unlock()
	m.emitThenSeen(ctx, updates, loaded...)
}

// readCheckpoint reads a source's checkpoint: the newest generation, else
// the previous one (its pods marked restored, state CheckpointDegraded),
// else nothing (CheckpointLost). A checkpoint never written is an error with
// state "".
func readCheckpoint(path string) ([]*v1.Pod, string, error) {
	pods, err := readPods(path)
	if err == nil {
		return pods, "", nil
	}
	if os.IsNotExist(err) {
		if _, perr := os.Stat(path + prevSuffix); perr != nil {
			return nil, "", err
		}
	}
	prev, perr := readPods(path + prevSuffix)
	if perr != nil {
		return nil, CheckpointLost, err
	}
	for _, p := range prev {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[api.RestoredAnnotation] = "previous-checkpoint"
	}
	return prev, CheckpointDegraded, err
}

func readPods(path string) ([]*v1.Pod, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pods []*v1.Pod
	if err := json.Unmarshal(data, &pods); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if pods == nil && string(data) != "[]" {
		return nil, fmt.Errorf("%s: not a list of pods", path)
	}
	return pods, nil
}

// prevSuffix names the previous generation of a checkpoint.
const prevSuffix = ".prev"

// emitThenSeen emits updates, then marks the sources seen. The order
// matters: a source counts as seen (its silence may remove running pods)
// only once the consumer has received the pods it declares, or the consumer
// could kill a pod it is about to be told to keep.
func (m *Merger) emitThenSeen(ctx context.Context, updates []api.PodUpdate, sources ...string) {
	if !m.emit(ctx, updates) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range sources {
		if s, ok := m.sources[name]; ok {
			s.seen = true
		}
	}
}

func (m *Merger) snapshotPath(source string) string {
	return filepath.Join(m.checkpointDir, "source-"+source+".json")
}

// emit sends updates in order, recording each as delivered once it is; it
// reports whether all were sent.
func (m *Merger) emit(ctx context.Context, updates []api.PodUpdate) bool {
	for _, u := range updates {
		select {
		case m.out <- u:
		case <-ctx.Done():
			return false
		}
		m.mu.Lock()
		for _, p := range u.Pods {
			if u.Op == api.REMOVE {
				delete(m.delivered, api.Key(p))
			} else {
				m.delivered[api.Key(p)] = p
			}
		}
		m.mu.Unlock()
	}
	return true
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
// emits the resulting changes. It blocks until they are consumed or ctx ends;
// what is not consumed then is emitted by a later change. A snapshot that
// cannot be checkpointed is logged and applied all the same: the source
// still holds it.
func (m *Merger) Set(ctx context.Context, source string, pods []*v1.Pod) {
	_ = m.commit(ctx, source, pods, true, false)
}

// Commit is Set for a source whose only durable record is its checkpoint
// (the API source): the snapshot is written first, and if it cannot be, Commit
// returns the error and changes nothing. complete says the snapshot is the
// source's whole word: it ends a degraded or lost checkpoint's hold.
func (m *Merger) Commit(ctx context.Context, source string, pods []*v1.Pod, complete bool) error {
	return m.commit(ctx, source, pods, complete, true)
}

func (m *Merger) commit(ctx context.Context, source string, pods []*v1.Pod, complete, durable bool) error {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()

	m.mu.Lock()
	s := m.source(source)
	changed := !s.seen || s.restored || s.behind != "" || !podsEqual(s.pods, pods)
	if changed && m.configured[source] {
		if err := m.saveSnapshot(source, pods); err != nil {
			if durable {
				m.mu.Unlock()
				return err
			}
			// Applied all the same (the source still holds it), and
			// written as soon as it can be: a restart in between would
			// put the older checkpoint in force.
			klog.Errorf("%v (retried)", err)
			s.behind = err.Error()
			m.scheduleRetry()
		} else {
			s.behind = ""
		}
	}
	s.pods, s.restored, s.lastSuccess = pods, false, time.Now()
	held := s.checkpoint != ""
	if complete {
		s.checkpoint = ""
	}
	updates := m.merge()
	m.mu.Unlock()
	if held && !complete {
		m.emit(ctx, updates) // its silence still keeps what runs
		return nil
	}
	m.emitThenSeen(ctx, updates, source)
	return nil
}

// saveSnapshot checkpoints a source's snapshot, keeping the previous
// generation beside it; callers hold mu.
func (m *Merger) saveSnapshot(source string, pods []*v1.Pod) error {
	if pods == nil {
		pods = []*v1.Pod{}
	}
	data, err := json.Marshal(pods)
	if err != nil {
		return fmt.Errorf("checkpoint source %s: %w", source, err)
	}
	path := m.snapshotPath(source)
	if old, err := os.ReadFile(path); err == nil && string(old) == string(data) {
		return nil
	}
	// The newest readable generation becomes the previous one (a hard
	// link: at no moment is there no newest file).
	if _, err := readPods(path); err == nil {
		_ = os.Remove(path + prevSuffix)
		if err := os.Link(path, path+prevSuffix); err != nil {
			return fmt.Errorf("checkpoint source %s: keep previous generation: %w", source, err)
		}
	}
	if err := m.write(path, data); err != nil {
		return fmt.Errorf("checkpoint source %s: %w", source, err)
	}
	return nil
}

// scheduleRetry arms the retry timer unless it is armed; callers hold mu.
func (m *Merger) scheduleRetry() {
	if m.retryArmed {
		return
	}
	m.retryArmed = true
	m.retry.Reset(m.retryBackoff.Next(backoff.One{}, m.clock.Now()))
}

// Run retries the checkpoints that could not be written until ctx ends:
// each time the retry timer fires, every one still behind is written again;
// the delay doubles while any fails (up to checkpointRetryMax) and starts
// over once all are written.
func (m *Merger) Run(ctx context.Context) {
	defer m.retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.retry.C():
			m.retryCheckpoints()
		}
	}
}

func (m *Merger) retryCheckpoints() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retryArmed = false
	for _, name := range m.sourceNames() {
		s := m.sources[name]
		if s.behind == "" || !m.configured[name] {
			continue
		}
		if err := m.saveSnapshot(name, s.pods); err != nil {
			m.scheduleRetry() // the first failure of the round doubles the delay
			klog.Errorf("%v (retried in %v)", err, m.retryBackoff.Get(backoff.One{}))
			s.behind = err.Error()
			continue
		}
		klog.Infof("Source %s: checkpoint written after failing", name)
		s.behind = ""
	}
	if m.admissionsBehind {
		m.saveAdmissions()
	}
	if !m.retryArmed {
		m.retryBackoff.Reset(backoff.One{})
	}
}

type candidate struct {
	pod    *v1.Pod
	source string
	seq    int64
}

// merge recomputes the desired set from the snapshots; callers hold mu.
func (m *Merger) merge() []api.PodUpdate {
	desired, rejected := m.admit(m.candidates())
	m.noteRejections(rejected)
	return m.diff(desired)
}

// candidates are the pods of every snapshot in admission order; a pod seen
// for the first time is admitted now (in source order), and the admission
// of one its source no longer declares is forgotten. Callers hold mu.
func (m *Merger) candidates() []candidate {
	declared := map[string]bool{}
	var cands []candidate
	for _, name := range m.sourceNames() {
		for _, pod := range m.sources[name].pods {
			id := api.Key(pod) + "@" + name
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
	return cands
}

// claimed is what the pods admitted so far hold: names (pod key → source),
// UIDs (→ pod key) and host ports.
type claimed struct {
	owner map[string]string
	uids  map[types.UID]string
	ports []claimedPort
	pods  int
}

type claimedPort struct {
	hp       api.HostPort
	key, src string
}

// admit walks the candidates in admission order and returns the desired
// set (by pod key) and the pods refused (by key@source).
func (m *Merger) admit(cands []candidate) (map[string]*v1.Pod, map[string]Rejection) {
	desired := map[string]*v1.Pod{}
	rejected := map[string]Rejection{}
	held := claimed{owner: map[string]string{}, uids: map[types.UID]string{}}
	for _, c := range cands {
		key := api.Key(c.pod)
		if reason, msg := m.refusal(c, key, &held); reason != "" {
			rejected[key+"@"+c.source] = Rejection{Pod: c.pod, Reason: reason, Message: msg}
			continue
		}
		for _, hp := range api.HostPorts(c.pod) {
			held.ports = append(held.ports, claimedPort{hp, key, c.source})
		}
		held.owner[key] = c.source
		held.uids[c.pod.UID] = key
		held.pods++
		desired[key] = c.pod
	}
	return desired, rejected
}

// refusal is why candidate c (key) cannot join the pods admitted before
// it, as a reason and a message, or "" if it can: the first admitted wins
// a name, a UID or a host port, and pods past MaxPods wait.
func (m *Merger) refusal(c candidate, key string, held *claimed) (reason, msg string) {
	if src, taken := held.owner[key]; taken {
		return "NameConflict", fmt.Sprintf("pod %s from source %q rejected: source %q declared it first", key, c.source, src)
	}
	if other, taken := held.uids[c.pod.UID]; taken {
		// Two pods with one UID would share containers: the second
		// would take over the first's infra container.
		return "UIDConflict", fmt.Sprintf("pod %s from source %q rejected: its uid %s is that of pod %s from source %q, admitted first",
			key, c.source, c.pod.UID, other, held.owner[other])
	}
	// A pod the kubelet runs already whose resources grew past the node
	// (an in-place resize) is not refused: the kubelet keeps its resize
	// pending (Infeasible) and the pod running as it was.
	if old, running := m.delivered[key]; !running || old.UID != c.pod.UID {
		if reason, msg := m.tooLarge(c.pod, key, c.source); reason != "" {
			return reason, msg
		}
	}
	if m.opts.MaxPods > 0 && held.pods >= m.opts.MaxPods {
		return "OutOfpods", fmt.Sprintf("pod %s from source %q rejected (OutOfpods): the node already runs its maximum of %d pods (--max-pods)", key, c.source, m.opts.MaxPods)
	}
	// An API server's pod whose host port is taken is refused by the
	// Kubelet's admission instead, for good (Failed, NodePorts), as the
	// kubelet refuses it: its controller makes another (a StatefulSet's
	// evicted pod). A node's own pods wait here until the port is free.
	if c.source == api.SourceAPIServer {
		return "", ""
	}
	for _, hp := range api.HostPorts(c.pod) {
		for _, p := range held.ports {
			if hp.Conflicts(p.hp) {
				return "NodePorts", fmt.Sprintf("pod %s from source %q rejected: host port %s is claimed by pod %s from source %q, admitted first", key, c.source, hp, p.key, p.src)
			}
		}
	}
	return "", ""
}

// tooLarge is why pod can never run on this node, whatever else runs: its
// requests of cpu or memory (a limit standing for a request not written,
// as the API server defaults it) pass the node's allocatable. The
// kubelet's admission refuses it with these reasons (OutOfmemory for a
// memory limit of 8Ei, say). A pod that fits the node alone but not
// beside the pods admitted before it is refused by the Kubelet's own
// admission (pkg/kubelet/admission.go), which knows which pods still run.
func (m *Merger) tooLarge(pod *v1.Pod, key, source string) (reason, msg string) {
	if m.opts.Allocatable == nil {
		return "", ""
	}
	reqs := api.PodRequests(pod)
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		alloc, ok := m.opts.Allocatable[name]
		req, asked := reqs[name]
		if !ok || !asked || req.Cmp(alloc) <= 0 {
			continue
		}
		reason = "OutOf" + string(name)
		msg = fmt.Sprintf("pod %s from source %q rejected (%s): it requests %s of %s, more than the node's allocatable %s",
			key, source, reason, req.String(), name, alloc.String())
		if where, q := api.LargestRequest(pod, name); where != "" {
			standsFor := ""
			if strings.Contains(where, ".limits[") {
				standsFor = ", the request it lacks"
			}
			msg += fmt.Sprintf(" (%s: %s%s)", where, q.String(), standsFor)
		}
		return reason, msg
	}
	return "", ""
}

// noteRejections makes rejected the rejections in force, logging (the
// first few) and reporting those that are new or whose reason changed.
// Callers hold mu.
func (m *Merger) noteRejections(rejected map[string]Rejection) {
	rejections := make(map[string]string, len(rejected))
	for id, r := range rejected {
		rejections[id] = r.Message
	}
	fresh := 0
	for _, id := range sortedIDs(rejections) {
		if m.rejections[id] != rejections[id] {
			if fresh < maxLoggedRejections {
				klog.Errorf("%s", rejections[id])
			}
			fresh++
			if m.opts.OnReject != nil {
				m.opts.OnReject(rejected[id])
			}
		}
	}
	if fresh > maxLoggedRejections {
		klog.Errorf("... and %d more pods rejected (see GET /sources)", fresh-maxLoggedRejections)
	}
	m.rejections, m.rejected = rejections, rejected
}

// diff is what turns the pods the consumer has received into desired,
// removals first. Callers hold mu.
func (m *Merger) diff(desired map[string]*v1.Pod) []api.PodUpdate {
	var added, updated, removed []*v1.Pod
	// The diff is against what the consumer has received, not what was
	// last computed: an emission cut short (its caller's ctx ended) is
	// sent again by the next merge.
	for _, key := range sortedKeys(desired) {
		old, ok := m.delivered[key]
		switch {
		case !ok:
			added = append(added, desired[key])
		case old.UID != desired[key].UID:
			// The consumer keeps pods by UID: a new UID under the same
			// name (edited in place, or the name passed to another
			// source) is another pod, and the old one must go.
			removed = append(removed, old)
			added = append(added, desired[key])
		case !apiequality.Semantic.DeepEqual(old, desired[key]):
			updated = append(updated, desired[key])
		}
	}
	for _, key := range sortedKeys(m.delivered) {
		if _, ok := desired[key]; !ok {
			removed = append(removed, m.delivered[key])
		}
	}
	// Removals first, as the kubelet's config sends them: a UID given up by
	// one pod and taken by another in the same merge is freed before it is
	// taken, or the consumer would drop the pod that took it.
	var out []api.PodUpdate
	for _, u := range []api.PodUpdate{{Op: api.REMOVE, Pods: removed}, {Op: api.ADD, Pods: added}, {Op: api.UPDATE, Pods: updated}} {
		if len(u.Pods) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// Rejection is a pod the merger refused, and why: Reason as the kubelet
// names it (NodePorts, OutOfpods) or ours (NameConflict, UIDConflict), and
// a message naming what holds the pod back. It is admitted as soon as that
// clears.
type Rejection struct {
	Pod     *v1.Pod `json:"-"`
	Key     string  `json:"pod"`
	Reason  string  `json:"reason"`
	Message string  `json:"message"`
}

// RejectedPods returns the pods the merger refused, each a copy whose
// status says so (phase Pending: the rejection can clear), sorted.
func (m *Merger) RejectedPods() []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*v1.Pod
	for _, id := range sortedRejectionIDs(m.rejected) {
		r := m.rejected[id]
		p := *r.Pod // shallow: pods are never changed once decoded
		p.Status = v1.PodStatus{Phase: v1.PodPending, Reason: r.Reason, Message: "Pod was rejected: " + r.Message}
		out = append(out, &p)
	}
	return out
}

// RejectedOf returns the rejections, as they stand, of source's pods keys.
func (m *Merger) RejectedOf(source string, keys []string) []Rejection {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Rejection
	for _, key := range keys {
		if r, ok := m.rejected[key+"@"+source]; ok {
			r.Key = key
			out = append(out, r)
		}
	}
	return out
}

func sortedRejectionIDs(m map[string]Rejection) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
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

func sortedIDs(m map[string]string) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
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
// A failure is logged and retried, not fatal: it only weakens ordering
// across restarts.
func (m *Merger) saveAdmissions() {
	data, err := json.Marshal(m.admitted)
	if err == nil {
		err = m.write(m.checkpointPath, data)
	}
	m.admissionsBehind = err != nil
	if err != nil {
		klog.Errorf("Checkpoint admission order: %v", err)
		m.scheduleRetry()
	}
}

func podsEqual(a, b []*v1.Pod) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}
