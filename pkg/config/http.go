package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

const (
	// maxManifestBody bounds what the URL source reads from one answer.
	maxManifestBody = 10 << 20
	// urlTimeout bounds one poll of the manifest URL.
	urlTimeout = 10 * time.Second
)

// URLSource polls a URL for the pods of this node. The body is a Pod, a
// PodList/List, several YAML documents, or the classic formats. An answer
// that fails in any way (timeout, non-2xx status, empty or invalid body)
// keeps the last good snapshot; an unchanged body (304, or the same bytes)
// does no work.
type URLSource struct {
	url     string
	header  http.Header
	node    string
	period  time.Duration
	sink    Sink
	client  *http.Client
	etag    string // owned by Run's goroutine, as are the fields below
	body    string
	lastErr string
}

// NewURLSource returns a source polling url every period, sending header
// with each request.
func NewURLSource(url string, header http.Header, node string, period time.Duration, sink Sink) *URLSource {
	return &URLSource{url: url, header: header, node: node, period: period, sink: sink,
		client: &http.Client{Timeout: urlTimeout}}
}

// Run polls until ctx is cancelled.
func (s *URLSource) Run(ctx context.Context) {
	ticker := time.NewTicker(s.period)
	defer ticker.Stop()
	for {
		s.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func (s *URLSource) poll(ctx context.Context) {
	pods, err := s.fetch(ctx)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		s.sink.SetError(api.SourceHTTP, err)
		if err.Error() != s.lastErr {
			klog.Errorf("URL source %s: %v (keeping its last good pods)", s.url, err)
		}
		s.lastErr = err.Error()
		return
	}
	s.sink.SetError(api.SourceHTTP, nil)
	s.lastErr = ""
	if pods != nil {
		s.sink.Set(ctx, api.SourceHTTP, *pods)
	}
}

// fetch returns the pods of a new body, nil for an unchanged one.
func (s *URLSource) fetch(ctx context.Context) (*[]*v1.Pod, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range s.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if s.etag != "" {
		req.Header.Set("If-None-Match", s.etag)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotModified {
		return nil, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxManifestBody+1))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	if len(data) > maxManifestBody {
		return nil, fmt.Errorf("body larger than %d bytes", maxManifestBody)
	}
	if string(data) == s.body && s.body != "" {
		return nil, nil
	}
	pods, ignored, err := api.Parse(data, s.node, api.SourceHTTP)
	if errors.Is(err, api.ErrEmpty) {
		return nil, errors.New("empty body (an explicit empty list means zero pods)")
	}
	if err != nil {
		return nil, err
	}
	for _, f := range ignored {
		klog.Infof("URL source: %s is ignored by this agent", f)
	}
	s.body = string(data)
	s.etag = resp.Header.Get("ETag")
	return &pods, nil
}

// ParseHeaders turns "Name:value" strings into a header.
func ParseHeaders(list []string) (http.Header, error) {
	h := http.Header{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("header %q: want Name:value", kv)
		}
		h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return h, nil
}
