package certificate

import (
	"context"
	"crypto/tls"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"
	"k8s.io/klog/v2"
)

// csrReporter logs, by name, each CertificateSigningRequest the certificate
// manager makes and how it ends when it is denied or fails: client-go's
// manager logs the outcome without the CSR's name, which an operator needs
// to find it (kubectl get csr <name>). It sees the CSRs through the
// clientset it hands the manager.
type csrReporter struct {
	mu   sync.Mutex
	last string // the last CSR and condition reported, so each is logged once
}

// wrap is cs with the CSR calls the manager makes observed.
func (r *csrReporter) wrap(cs kubernetes.Interface) kubernetes.Interface {
	return reportingClientset{Interface: cs, r: r}
}

// report logs a denied or failed CSR once.
func (r *csrReporter) report(csr *certificatesv1.CertificateSigningRequest) {
	for _, c := range csr.Status.Conditions {
		if c.Type != certificatesv1.CertificateDenied && c.Type != certificatesv1.CertificateFailed {
			continue
		}
		key := csr.Name + "/" + string(c.Type)
		r.mu.Lock()
		seen := r.last == key
		r.last = key
		r.mu.Unlock()
		if !seen {
			klog.Errorf("CertificateSigningRequest %s (signer %s) was %s: reason %q, message %q; a new one is requested after a back-off",
				csr.Name, csr.Spec.SignerName, map[bool]string{true: "denied", false: "not signed"}[c.Type == certificatesv1.CertificateDenied],
				c.Reason, c.Message)
		}
	}
}

type reportingClientset struct {
	kubernetes.Interface
	r *csrReporter
}

func (c reportingClientset) CertificatesV1() certificatesv1client.CertificatesV1Interface {
	return reportingCertificates{CertificatesV1Interface: c.Interface.CertificatesV1(), r: c.r}
}

type reportingCertificates struct {
	certificatesv1client.CertificatesV1Interface
	r *csrReporter
}

func (c reportingCertificates) CertificateSigningRequests() certificatesv1client.CertificateSigningRequestInterface {
	return reportingCSRs{CertificateSigningRequestInterface: c.CertificatesV1Interface.CertificateSigningRequests(), r: c.r}
}

type reportingCSRs struct {
	certificatesv1client.CertificateSigningRequestInterface
	r *csrReporter
}

func (c reportingCSRs) Create(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, opts metav1.CreateOptions) (*certificatesv1.CertificateSigningRequest, error) {
	out, err := c.CertificateSigningRequestInterface.Create(ctx, csr, opts)
	if err == nil {
		klog.Infof("Requested a certificate of signer %s: CertificateSigningRequest %s", out.Spec.SignerName, out.Name)
	}
	return out, err
}

func (c reportingCSRs) List(ctx context.Context, opts metav1.ListOptions) (*certificatesv1.CertificateSigningRequestList, error) {
	out, err := c.CertificateSigningRequestInterface.List(ctx, opts)
	if err == nil {
		for i := range out.Items {
			c.r.report(&out.Items[i])
		}
	}
	return out, err
}

func (c reportingCSRs) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w, err := c.CertificateSigningRequestInterface.Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if csr, ok := e.Object.(*certificatesv1.CertificateSigningRequest); ok {
			c.r.report(csr)
		}
		return e, true
	}), nil
}

// describe names a certificate for logs: its subject and expiry.
func describe(cert *tls.Certificate) string {
	if cert == nil || cert.Leaf == nil {
		return "no certificate"
	}
	return cert.Leaf.Subject.CommonName + ", valid until " + cert.Leaf.NotAfter.UTC().Format(time.RFC3339)
}
