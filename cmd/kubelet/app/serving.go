package app

import (
	"context"
	"crypto/tls"
	"fmt"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/certificate"
)

// servingTLS is the full-access port's TLS, if configured: HTTPS with the
// serving certificate of the API server (--rotate-server-certificates) or
// of --tls-cert-file, and, with a client CA, client certificates required.
// The certificate and the CA are looked up at each handshake, so a
// renewed certificate or a changed file serves without a restart; the
// goroutines that keep them run until ctx ends.
func (a *agent) servingTLS(ctx context.Context, o *Options, goRun func(func())) (*tls.Config, error) {
	if o.TLSCertFile == "" && !o.RotateServerCertificates {
		return nil, nil
	}
	current, err := a.servingCert(ctx, o, goRun)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if c := current(); c != nil {
			return c, nil
		}
		return nil, certificate.ErrNoServingCertificate
	}}
	if o.ClientCAFile == "" {
		return cfg, nil
	}
	ca, err := certificate.WatchCA(o.ClientCAFile, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	goRun(func() { ca.Run(ctx) })
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	if o.AuthenticationTokenWebhook || o.AnonymousAuth {
		// A bearer token, or nothing, may stand for a certificate.
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	}
	// The CA pool of each handshake is the file's latest.
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := cfg.Clone()
		c.GetConfigForClient = nil
		c.ClientCAs = ca.Current()
		return c, nil
	}
	return cfg, nil
}

// servingCert starts what keeps the serving certificate and returns its
// getter: the certificate manager with --rotate-server-certificates (the
// --tls-cert-file pair, if given, serving until the first is issued, as
// with the kubelet), else the --tls-cert-file pair (or the self-signed
// one) reloaded when it changes on disk.
func (a *agent) servingCert(ctx context.Context, o *Options, goRun func(func())) (func() *tls.Certificate, error) {
	if o.RotateServerCertificates {
		srv, err := certificate.NewServer(certificate.ServerConfig{NodeName: o.HostnameOverride, CertDir: o.CertDir,
			CertFile: o.TLSCertFile, KeyFile: o.TLSPrivateKeyFile, Addresses: a.node.Addresses, Client: a.nm.client,
			Registry: a.metrics.Registry})
		if err != nil {
			return nil, err
		}
		goRun(func() { srv.Run(ctx) })
		if srv.Current() == nil {
			klog.Infof("Serving certificate: requesting one from the API server (signer kubernetes.io/kubelet-serving); the full-access port fails TLS handshakes until it is approved and issued")
		}
		return srv.Current, nil
	}
	if o.SelfSignedCert {
		if err := ensureSelfSignedCert(o.TLSCertFile, o.TLSPrivateKeyFile, o.HostnameOverride); err != nil {
			return nil, err
		}
	}
	pair, err := certificate.WatchKeyPair(o.TLSCertFile, o.TLSPrivateKeyFile, clock.RealClock{})
	if err != nil {
		return nil, err
	}
	goRun(func() { pair.Run(ctx) })
	return pair.Current, nil
}

// ensureSelfSignedCert makes the serving certificate the kubelet makes when
// given none (kubelet.crt and kubelet.key under --cert-dir, for the node
// name and localhost), unless a readable pair is there already.
func ensureSelfSignedCert(certFile, keyFile, node string) error {
	if ok, _ := certutil.CanReadCertAndKey(certFile, keyFile); ok {
		return nil
	}
	cert, key, err := certutil.GenerateSelfSignedCertKey(node, nil, nil)
	if err != nil {
		return fmt.Errorf("self-signed serving certificate: %w", err)
	}
	if err := certutil.WriteCert(certFile, cert); err != nil {
		return fmt.Errorf("self-signed serving certificate: %w", err)
	}
	if err := keyutil.WriteKey(keyFile, key); err != nil {
		return fmt.Errorf("self-signed serving certificate key: %w", err)
	}
	klog.Infof("Serving the full-access port with a self-signed certificate, %s (no --tls-cert-file given)", certFile)
	return nil
}
