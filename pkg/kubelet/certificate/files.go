package certificate

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// FileReloadPeriod is how often watched files are read again: they are a
// few kilobytes, and a changed certificate (renewed by an outside tool)
// takes effect within this, as the kubelet's dynamic files' resync.
const FileReloadPeriod = 10 * time.Second

// Watched holds what a set of files parse to, read again every period and
// replaced when their content changed and parses; content that does not
// parse (a half-written rotation) is logged and the last good value kept.
type Watched[T any] struct {
	what  string // for logs: "--tls-cert-file/--tls-private-key-file a, b"
	paths []string
	parse func(contents [][]byte) (*T, error)
	clock clock.WithTicker

	cur atomic.Pointer[T]
	mu  sync.Mutex // guards last: Reload may be called beside Run
	// last is the content last read, parsed or not, so a bad file is
	// logged once, not every period.
	last [][]byte
}

// NewWatched reads paths once: they must parse at start.
func NewWatched[T any](what string, paths []string, parse func([][]byte) (*T, error), clk clock.WithTicker) (*Watched[T], error) {
	w := &Watched[T]{what: what, paths: paths, parse: parse, clock: clk}
	if _, err := w.Reload(); err != nil {
		return nil, err
	}
	return w, nil
}

// Current is the last good value.
func (w *Watched[T]) Current() *T { return w.cur.Load() }

// Reload reads the files and, if their content changed, parses it and
// replaces the value. It reports whether the value was replaced.
func (w *Watched[T]) Reload() (bool, error) {
	contents := make([][]byte, len(w.paths))
	for i, p := range w.paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return false, fmt.Errorf("%s: %w", w.what, err)
		}
		contents[i] = data
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last != nil && equalContents(w.last, contents) {
		return false, nil
	}
	w.last = contents
	v, err := w.parse(contents)
	if err != nil {
		return false, fmt.Errorf("%s: %w", w.what, err)
	}
	w.cur.Store(v)
	return true, nil
}

// Run reloads every FileReloadPeriod until ctx ends.
func (w *Watched[T]) Run(ctx context.Context) {
	t := w.clock.NewTicker(FileReloadPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		changed, err := w.Reload()
		switch {
		case err != nil:
			klog.Errorf("Reloading %v; keeping the last good one", err)
		case changed:
			klog.Infof("Reloaded %s: changed on disk", w.what)
		}
	}
}

func equalContents(a, b [][]byte) bool {
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}

// WatchKeyPair watches a serving certificate and its key
// (--tls-cert-file, --tls-private-key-file).
func WatchKeyPair(certFile, keyFile string, clk clock.WithTicker) (*Watched[tls.Certificate], error) {
	return NewWatched("--tls-cert-file/--tls-private-key-file "+certFile+", "+keyFile, []string{certFile, keyFile},
		func(c [][]byte) (*tls.Certificate, error) {
			pair, err := tls.X509KeyPair(c[0], c[1])
			if err != nil {
				return nil, err
			}
			return &pair, nil
		}, clk)
}

// WatchCA watches a CA bundle (--client-ca-file).
func WatchCA(file string, clk clock.WithTicker) (*Watched[x509.CertPool], error) {
	return NewWatched("--client-ca-file "+file, []string{file}, func(c [][]byte) (*x509.CertPool, error) {
		pool := x509.NewCertPool()
		if strings.TrimSpace(string(c[0])) == "" || !pool.AppendCertsFromPEM(c[0]) {
			return nil, fmt.Errorf("no certificates")
		}
		return pool, nil
	}, clk)
}
