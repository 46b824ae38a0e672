package certificate

import (
	"context"
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestWatchedReload(t *testing.T) {
	now := time.Now()
	certA, keyA := pair(t, "a", now.Add(-time.Hour), now.Add(time.Hour))
	certB, keyB := pair(t, "b", now.Add(-time.Hour), now.Add(time.Hour))
	cases := []struct {
		name        string
		cert, key   []byte // written before Reload; nil: left as is
		wantChanged bool
		wantErr     bool
		wantCN      string
	}{
		{"unchanged", nil, nil, false, false, "a"},
		{"same content rewritten", certA, keyA, false, false, "a"},
		{"renewed", certB, keyB, true, false, "b"},
		{"half-written: last good kept", certA, keyB, false, true, "a"},
		{"garbage: last good kept", []byte("x"), []byte("y"), false, true, "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cf, kf := write(t, filepath.Join(dir, "c"), certA), write(t, filepath.Join(dir, "k"), keyA)
			w, err := WatchKeyPair(cf, kf, clocktesting.NewFakeClock(now))
			if err != nil {
				t.Fatal(err)
			}
			if c.cert != nil {
				write(t, cf, c.cert)
				write(t, kf, c.key)
			}
			changed, err := w.Reload()
			if changed != c.wantChanged || (err != nil) != c.wantErr {
				t.Errorf("Reload = %v, %v; want changed %v, error %v", changed, err, c.wantChanged, c.wantErr)
			}
			if cn := w.Current().Leaf.Subject.CommonName; cn != c.wantCN {
				t.Errorf("serving %q, want %q", cn, c.wantCN)
			}
		})
	}
}

func TestWatchedStartNeedsGoodFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := WatchKeyPair(filepath.Join(dir, "none"), filepath.Join(dir, "none"), clocktesting.NewFakeClock(time.Now())); err == nil {
		t.Error("missing files accepted")
	}
	if _, err := WatchCA(write(t, filepath.Join(dir, "ca"), []byte("not PEM")), clocktesting.NewFakeClock(time.Now())); err == nil {
		t.Error("a CA file without certificates accepted")
	}
}

// Run reloads on its clock's period: a CA file replaced on disk is the
// pool of the next period, not before.
func TestWatchedRunFollowsClock(t *testing.T) {
	now := time.Now()
	caA, _ := pair(t, "ca-a", now.Add(-time.Hour), now.Add(time.Hour))
	caB, _ := pair(t, "ca-b", now.Add(-time.Hour), now.Add(time.Hour))
	path := write(t, filepath.Join(t.TempDir(), "ca.crt"), caA)
	clk := clocktesting.NewFakeClock(now)
	w, err := WatchCA(path, clk)
	if err != nil {
		t.Fatal(err)
	}
	first := w.Current()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	write(t, path, caB)
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	if w.Current() != first {
		t.Fatal("reloaded before the period")
	}
	clk.Step(FileReloadPeriod)
	deadline := time.Now().Add(5 * time.Second)
	for w.Current() == first {
		if time.Now().After(deadline) {
			t.Fatal("not reloaded after a period")
		}
		time.Sleep(time.Millisecond)
	}
	if !w.Current().Equal(mustPool(t, caB)) {
		t.Error("reloaded pool is not the new file's")
	}
}

func mustPool(t *testing.T, pemData []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemData) {
		t.Fatal("no certificates")
	}
	return p
}
