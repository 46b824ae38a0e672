package config

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

// APISource holds the pods POSTed, PUT and DELETEd through the agent's HTTP
// API. Its state is authoritative from the start: it begins with its
// checkpointed snapshot (or nothing), so it never keeps pods of others alive.
type APISource struct {
	node string
	sink *Merger

	mu   sync.Mutex // serializes changes, so snapshots reach the merger in order
	pods map[string]*v1.Pod
}

// NewAPISource returns the API source, starting from the snapshot the merger
// restored for it (call after LoadCheckpoints). If that checkpoint was
// degraded or lost, the source stays unseen (what runs for it is kept)
// until a PUT replaces its whole set.
func NewAPISource(ctx context.Context, node string, m *Merger) *APISource {
	s := &APISource{node: node, sink: m, pods: map[string]*v1.Pod{}}
	for _, p := range m.Snapshot(api.SourceAPI) {
		s.pods[api.Key(p)] = p
	}
	if m.checkpointState(api.SourceAPI) != "" {
		return s
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.send(ctx, s.pods, true); err != nil {
		klog.Errorf("API source: %v", err)
	}
	return s
}

// Upsert adds or replaces the body's pods by namespace/name. An invalid body
// changes nothing and the error names the document and field; so does a
// change that cannot be checkpointed (ErrNotDurable).
func (s *APISource) Upsert(ctx context.Context, body []byte) ([]string, error) {
	return s.change(ctx, body, false)
}

// Replace makes the body's pods this source's whole set.
func (s *APISource) Replace(ctx context.Context, body []byte) ([]string, error) {
	return s.change(ctx, body, true)
}

// ErrNotDurable wraps a change the API source refused because it could not
// be checkpointed: acknowledging it would lose it on the next restart.
var ErrNotDurable = errors.New("change not durable")

func (s *APISource) change(ctx context.Context, body []byte, replace bool) ([]string, error) {
	pods, _, err := api.Parse(body, s.node, api.SourceAPI)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := map[string]*v1.Pod{}
	if !replace {
		maps.Copy(next, s.pods)
	}
	keys := make([]string, 0, len(pods))
	for _, p := range pods {
		next[api.Key(p)] = p
		keys = append(keys, api.Key(p))
	}
	if err := s.send(ctx, next, replace); err != nil {
		return nil, err
	}
	return keys, nil
}

// Delete removes one pod; it reports whether the pod was there.
func (s *APISource) Delete(ctx context.Context, namespace, name string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + name
	if _, ok := s.pods[key]; !ok {
		return false, nil
	}
	next := maps.Clone(s.pods)
	delete(next, key)
	return true, s.send(ctx, next, false)
}

// send commits next as the source's set and, once durable, makes it the
// source's state; callers hold mu.
func (s *APISource) send(ctx context.Context, next map[string]*v1.Pod, complete bool) error {
	keys := make([]string, 0, len(next))
	for k := range next {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pods := make([]*v1.Pod, 0, len(keys))
	for _, k := range keys {
		pods = append(pods, next[k])
	}
	if err := s.sink.Commit(ctx, api.SourceAPI, pods, complete); err != nil {
		return fmt.Errorf("%w: %w", ErrNotDurable, err)
	}
	s.pods = next
	return nil
}
