package server

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podEncoder encodes the answers of GET /pods and GET /pods/<ns>/<name>
// one at a time, and keeps the encoding of the last list until the pods
// change. An encoding costs some four times its size (a 10 MiB pod: 45 MB),
// and the read-only port is unauthenticated: encoded per request, 30
// clients of one large pod made the agent 1.3 GB.
type podEncoder struct {
	slot   chan struct{}               // cap 1: the encode under way
	encode func(v any) ([]byte, error) // encodeJSON; replaced in tests

	mu   sync.Mutex // guards pods and body
	pods []*v1.Pod  // the list body encodes
	body []byte
}

func newPodEncoder() *podEncoder {
	return &podEncoder{slot: make(chan struct{}, 1), encode: encodeJSON}
}

// list returns the encoded PodList of the pods snapshot returns: the cached
// encoding while they are unchanged, else a new one. Requests that wait
// while another encodes take its snapshot's encoding if theirs is the same.
func (e *podEncoder) list(ctx context.Context, snapshot func() []*v1.Pod) ([]byte, error) {
	if body, ok := e.cached(snapshot()); ok {
		return body, nil
	}
	if err := e.acquire(ctx); err != nil {
		return nil, err
	}
	defer e.release()
	// Taken again now that this is the only encode: an older snapshot
	// would otherwise replace the newer one a request before it encoded.
	pods := snapshot()
	if body, ok := e.cached(pods); ok {
		return body, nil
	}
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: make([]v1.Pod, 0, len(pods))}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	body, err := e.encode(list)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.pods, e.body = pods, body
	e.mu.Unlock()
	return body, nil
}

// one encodes v, waiting for its turn.
func (e *podEncoder) one(ctx context.Context, v any) ([]byte, error) {
	if err := e.acquire(ctx); err != nil {
		return nil, err
	}
	defer e.release()
	return e.encode(v)
}

func (e *podEncoder) acquire(ctx context.Context) error {
	select {
	case e.slot <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *podEncoder) release() { <-e.slot }

// cached returns the cached encoding if it is of pods. The pods the host
// gives share their metadata, spec and status with what it keeps, so the
// comparison stops at each shared map and slice: it costs little next to
// an encoding. reflect.DeepEqual, not a semantic equality: equal values
// encode alike.
func (e *podEncoder) cached(pods []*v1.Pod) ([]byte, bool) {
	e.mu.Lock()
	old, body := e.pods, e.body
	e.mu.Unlock()
	if body == nil || len(old) != len(pods) {
		return nil, false
	}
	for i := range pods {
		if !reflect.DeepEqual(old[i], pods[i]) {
			return nil, false
		}
	}
	return body, true
}

// encodeJSON is the encoding writeJSON writes.
func encodeJSON(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
