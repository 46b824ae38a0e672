package certificate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/certificate"
)

// ServerPairPrefix names the serving certificate's files in the cert dir,
// as the kubelet's.
const ServerPairPrefix = "kubelet-server"

// ErrNoServingCertificate fails a TLS handshake on the full-access port
// while there is no serving certificate: with --rotate-server-certificates,
// until the node's CSR is approved and signed (the kubelet's behaviour: the
// port listens, and serves nothing).
var ErrNoServingCertificate = errors.New("certificate: no serving certificate available for the kubelet")

// ServerConfig says how to keep the serving certificate.
type ServerConfig struct {
	NodeName string
	CertDir  string
	// CertFile and KeyFile, if given, serve until the first certificate is
	// issued (the store's fallback), as the kubelet's --tls-cert-file does.
	CertFile, KeyFile string
	// Addresses are the node's, whose names and IPs the certificate is for.
	Addresses func() []v1.NodeAddress
	Client    kubernetes.Interface
	Registry  prometheus.Registerer
}

// Server keeps the serving certificate with client-go's certificate
// manager: a CSR of signer kubernetes.io/kubelet-serving for
// system:node:<name> in system:nodes with the node's addresses as names,
// which nothing approves automatically (kubectl certificate approve, or an
// approver of the cluster's), renewed at 70–90 % of its life and whenever
// the node's addresses change.
type Server struct {
	m certificate.Manager
}

// NewServer builds the manager and registers its metrics; Run starts it.
func NewServer(c ServerConfig) (*Server, error) {
	store, err := certificate.NewFileStore(ServerPairPrefix, c.CertDir, c.CertDir, c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate store in %s: %w", c.CertDir, err)
	}
	renewErrors := prometheus.NewCounter(prometheus.CounterOpts{Name: "kubelet_server_expiration_renew_errors",
		Help: "Counter of certificate renewal errors."})
	rotation := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kubelet_certificate_manager_server_rotation_seconds",
		Help:    "Histogram of the number of seconds the previous certificate lived before being rotated.",
		Buckets: []float64{60, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000}})
	reporter := &csrReporter{}
	m, err := certificate.NewManager(&certificate.Config{
		ClientsetFn:             func(*tls.Certificate) (kubernetes.Interface, error) { return reporter.wrap(c.Client), nil },
		GetTemplate:             func() *x509.CertificateRequest { return servingTemplate(c.NodeName, c.Addresses()) },
		SignerName:              certificatesv1.KubeletServingSignerName,
		GetUsages:               certificate.DefaultKubeletServingGetUsages,
		CertificateStore:        store,
		CertificateRotation:     rotation,
		CertificateRenewFailure: renewErrors,
		Name:                    "kubelet serving",
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	ttl := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kubelet_certificate_manager_server_ttl_seconds",
		Help: "Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF."},
		func() float64 { return ttlSeconds(m.Current()) })
	if err := registerAll(c.Registry, renewErrors, rotation, ttl); err != nil {
		return nil, err
	}
	return &Server{m: m}, nil
}

// Current is the serving certificate, nil while there is none.
func (s *Server) Current() *tls.Certificate { return s.m.Current() }

// Run runs the manager until ctx ends.
func (s *Server) Run(ctx context.Context) {
	s.m.Start()
	<-ctx.Done()
	s.m.Stop()
}

// servingTemplate is the serving CSR's template for the node's addresses:
// host names and DNS addresses as names, IP addresses (a host name that is
// an IP among them) as IPs, each once, in order. Nil without an IP: the
// kubelet asks for no certificate the API server could not check against
// the address it dials.
func servingTemplate(node string, addrs []v1.NodeAddress) *x509.CertificateRequest {
	names, ips := map[string]bool{}, map[string]net.IP{}
	for _, a := range addrs {
		ip := net.ParseIP(a.Address)
		switch {
		case a.Address == "":
		case ip != nil && (a.Type == v1.NodeHostName || a.Type == v1.NodeInternalIP || a.Type == v1.NodeExternalIP):
			ips[ip.String()] = ip
		case ip == nil && (a.Type == v1.NodeHostName || a.Type == v1.NodeInternalDNS || a.Type == v1.NodeExternalDNS):
			names[a.Address] = true
		}
	}
	if len(ips) == 0 {
		return nil
	}
	t := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}
	for n := range names {
		t.DNSNames = append(t.DNSNames, n)
	}
	sort.Strings(t.DNSNames)
	keys := make([]string, 0, len(ips))
	for k := range ips {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.IPAddresses = append(t.IPAddresses, ips[k])
	}
	return t
}
