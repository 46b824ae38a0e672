package config

import (
	"context"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"

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
// restored for it (call after LoadCheckpoints).
func NewAPISource(ctx context.Context, node string, m *Merger) *APISource {
	s := &APISource{node: node, sink: m, pods: map[string]*v1.Pod{}}
	for _, p := range m.Snapshot(SourceAPI) {
		s.pods[api.Key(p)] = p
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.send(ctx)
	return s
}

// Upsert adds or replaces the body's pods by namespace/name. An invalid body
// changes nothing and the error names the document and field.
func (s *APISource) Upsert(ctx context.Context, body []byte) ([]string, error) {
	return s.change(ctx, body, false)
}

// Replace makes the body's pods this source's whole set.
func (s *APISource) Replace(ctx context.Context, body []byte) ([]string, error) {
	return s.change(ctx, body, true)
}

func (s *APISource) change(ctx context.Context, body []byte, replace bool) ([]string, error) {
	pods, _, err := api.Parse(body, s.node, SourceAPI)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if replace {
		s.pods = map[string]*v1.Pod{}
	}
	keys := make([]string, 0, len(pods))
	for _, p := range pods {
		s.pods[api.Key(p)] = p
		keys = append(keys, api.Key(p))
	}
	s.send(ctx)
	return keys, nil
}

// Delete removes one pod; it reports whether the pod was there.
func (s *APISource) Delete(ctx context.Context, namespace, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := namespace + "/" + name
	if _, ok := s.pods[key]; !ok {
		return false
	}
	delete(s.pods, key)
	s.send(ctx)
	return true
}

// send delivers the current set; callers hold mu.
func (s *APISource) send(ctx context.Context) {
	keys := make([]string, 0, len(s.pods))
	for k := range s.pods {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pods := make([]*v1.Pod, 0, len(keys))
	for _, k := range keys {
		pods = append(pods, s.pods[k])
	}
	s.sink.Set(ctx, SourceAPI, pods)
}
