package certificate

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"
)

// rotationCheckPeriod is how often the transport looks for a new client
// certificate once it has one (the kubelet's period); until it has one it
// looks every second, so that a node just bootstrapped joins at once.
const (
	rotationCheckPeriod = 10 * time.Second
	firstCertPeriod     = time.Second
)

// Rotator closes the API client's connections when its client certificate
// changes: a TLS connection keeps the certificate of its handshake, so only
// new connections present the new one. Requests in flight on a closed
// connection fail and are retried by their callers (informers re-list and
// watch again), as with the kubelet.
type Rotator struct {
	dialer  *connrotation.Dialer
	current func() *tls.Certificate
	last    *tls.Certificate // only Run's goroutine touches it
}

// newRotator gives cfg (without credentials of its own) a transport whose
// TLS client certificate is current's at each handshake and whose
// connections the Rotator can close.
func newRotator(cfg *rest.Config, current func() *tls.Certificate) (*Rotator, error) {
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("API client TLS: %w", err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := current(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil // none: the API server sees an anonymous client
	}
	d := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext)
	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         d.DialContext,
	})
	// The transport holds the TLS settings: the config's own would make
	// client-go refuse a custom transport.
	cfg.CAData, cfg.CAFile, cfg.Insecure, cfg.NextProtos = nil, "", false, nil
	return &Rotator{dialer: d, current: current, last: current()}, nil
}

// Run checks for a new certificate until ctx ends.
func (r *Rotator) Run(ctx context.Context) {
	period := rotationCheckPeriod
	if r.last == nil {
		period = firstCertPeriod
	}
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r.check() && period != rotationCheckPeriod {
			period = rotationCheckPeriod
			t.Reset(period)
		}
	}
}

// check closes every connection if the certificate changed since the last
// check, and reports whether there is one.
func (r *Rotator) check() bool {
	cur := r.current()
	if cur == nil || cur == r.last {
		return cur != nil
	}
	r.last = cur
	klog.Infof("Client certificate rotated (%s): closing the API client's connections so new ones present it", describe(cur))
	r.dialer.CloseAll()
	return true
}
