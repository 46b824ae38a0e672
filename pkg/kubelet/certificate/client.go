package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/klog/v2"
)

// ClientConfig says how to keep the node's client certificate.
type ClientConfig struct {
	NodeName string
	CertDir  string
	Configs  ClientConfigs
	// Rotate renews the certificate at 70–90 % of its life
	// (--rotate-certificates). Without it, a bootstrapped node gets its
	// first certificate and keeps it; a restart with an expired one
	// bootstraps again.
	Rotate bool
	// Registry gets the manager's metrics, by the kubelet's names.
	Registry prometheus.Registerer
}

// Client keeps the node's client certificate with client-go's certificate
// manager: the cert dir's current pair (or, the first time, --kubeconfig's
// own certificate, which it then rotates, as the kubelet does for kubeadm's
// kubeconfigs), renewed by a CSR of signer
// kubernetes.io/kube-apiserver-client-kubelet for system:node:<name> in
// system:nodes. A CSR is made with the node's own certificate while it is
// valid, else with the bootstrap credentials: an expired certificate thus
// falls back to bootstrap without a restart.
type Client struct {
	m      certificate.Manager
	rotate bool
}

// NewClient builds the manager and registers its metrics; Run starts it.
func NewClient(c ClientConfig) (*Client, error) {
	store, err := certificate.NewFileStore(ClientPairPrefix, c.CertDir, c.CertDir, c.Configs.Client.CertFile, c.Configs.Client.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("client certificate store in %s: %w", c.CertDir, err)
	}
	renewErrors := prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_certificate_manager_client_expiration_renew_errors",
		Help: "Counter of certificate renewal errors."})
	reporter := &csrReporter{}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn: func(current *tls.Certificate) (kubernetes.Interface, error) {
			cfg := c.Configs.Cert
			if current != nil {
				cfg = c.Configs.Client
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return nil, fmt.Errorf("certificate signing request client: %w", err)
			}
			return reporter.wrap(cs), nil
		},
		Template: &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + c.NodeName,
			Organization: []string{"system:nodes"}}},
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:  certificate.DefaultKubeletClientGetUsages,
		// kubeadm's kubeconfig on a control-plane node holds a certificate
		// inline: it serves until the first rotation replaces it.
		BootstrapCertificatePEM: c.Configs.Client.CertData,
		BootstrapKeyPEM:         c.Configs.Client.KeyData,
		CertificateStore:        store,
		CertificateRenewFailure: renewErrors,
		Name:                    "kubelet client",
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate manager: %w", err)
	}
	ttl := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kubelet_certificate_manager_client_ttl_seconds",
		Help: "Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF."},
		func() float64 { return ttlSeconds(m.Current()) })
	if err := registerAll(c.Registry, renewErrors, ttl); err != nil {
		return nil, err
	}
	return &Client{m: m, rotate: c.Rotate}, nil
}

// Current is the certificate to present, nil while there is none (before
// bootstrap completes, or once it expired).
func (c *Client) Current() *tls.Certificate { return c.m.Current() }

// Run runs the manager until ctx ends. Without rotation it runs only
// while the node has no certificate: a valid one (even kubeadm's inline
// one, which rotation would replace at once) is kept as it is.
func (c *Client) Run(ctx context.Context) {
	if !c.rotate && c.m.Current() != nil {
		return
	}
	c.m.Start()
	defer c.m.Stop()
	if c.rotate {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for c.m.Current() == nil {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	klog.Infof("Client certificate obtained; not rotated (--rotate-certificates is off)")
}

// ttlSeconds is the kubelet's TTL gauge's value: seconds until cert expires,
// +Inf without one.
func ttlSeconds(cert *tls.Certificate) float64 {
	if cert == nil || cert.Leaf == nil {
		return math.Inf(1)
	}
	return math.Trunc(time.Until(cert.Leaf.NotAfter).Seconds())
}

// registerAll registers cs in reg, if any.
func registerAll(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	if reg == nil {
		return nil
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("certificate metrics: %w", err)
		}
	}
	return nil
}

// RotatingConfig is cfg with a transport that presents current's
// certificate at each handshake (none while it has none), and the rotator
// that closes the transport's connections when the certificate changes.
// cfg's own client credentials are dropped.
func RotatingConfig(cfg *rest.Config, current func() *tls.Certificate) (*rest.Config, *Rotator, error) {
	out := rest.AnonymousClientConfig(cfg)
	r, err := newRotator(out, current)
	if err != nil {
		return nil, nil, err
	}
	return out, r, nil
}
