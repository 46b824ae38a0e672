package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// The rotator closes the API client's connections when, and only when, the
// certificate changes: the first one after none (connections made without
// it are anonymous for their whole life) and each renewal.
func TestRotatorClosesConnectionsOnNewCertificate(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	var cur atomic.Pointer[tls.Certificate]
	cfg, r, err := RotatingConfig(&rest.Config{Host: "https://" + l.Addr().String(), BearerToken: "boot"}, cur.Load)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Transport == nil || cfg.BearerToken != "" {
		t.Fatalf("config: transport %v, token %q: want the rotating transport and no credentials of its own", cfg.Transport, cfg.BearerToken)
	}
	dial := func() net.Conn {
		c, err := r.dialer.DialContext(context.Background(), "tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, err := c.Read(make([]byte, 1))
		var ne net.Error
		return err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	steps := []struct {
		name       string
		cert       *tls.Certificate // stored before the check; nil: unchanged
		wantHas    bool
		wantClosed bool
	}{
		{"no certificate yet", nil, false, false},
		{"the first certificate", &tls.Certificate{Leaf: &x509.Certificate{}}, true, true},
		{"unchanged", nil, true, false},
		{"renewed", &tls.Certificate{Leaf: &x509.Certificate{}}, true, true},
	}
	for _, s := range steps {
		conn := dial()
		if s.cert != nil {
			cur.Store(s.cert)
		}
		if has := r.check(); has != s.wantHas {
			t.Errorf("%s: check = %v, want %v", s.name, has, s.wantHas)
		}
		if got := closed(conn); got != s.wantClosed {
			t.Errorf("%s: connection closed %v, want %v", s.name, got, s.wantClosed)
		}
		conn.Close()
	}
}
