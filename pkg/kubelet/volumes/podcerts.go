package volumes

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodCertificates makes and reads the PodCertificateRequests of the
// node's pods, as the Node authorizer lets a node (create, and get those
// of its pods), and reads what a request names: the pod's service account
// and this Node (their UIDs).
type PodCertificates interface {
	ServiceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error)
	Node(ctx context.Context, name string) (*v1.Node, error)
	CreatePodCertificateRequest(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error)
	PodCertificateRequest(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error)
}

// pcrAbandonAfter is how long a request that cannot be found is taken for
// the informer's lag before it is taken for deleted and made again, as the
// kubelet's podcertificate manager (it adds up to 5 minutes of jitter).
const pcrAbandonAfter = 10 * time.Minute

// certKey is one podCertificate source of a pod's projected volume.
type certKey struct {
	volume string
	source int
}

// podCert is the state of one podCertificate source, as the kubelet's
// podcertificate manager keeps it: the credentials issued last (served
// until the next are issued), and the request waiting, if any. A denied or
// failed request is final for the pod.
type podCert struct {
	key, chain          []byte // PEM; nil until the first issuance
	refreshAt, notAfter time.Time

	pending    string // the request waiting to be issued
	pendingKey []byte
	abandonAt  time.Time

	final error // denied or failed
}

// errNotIssued: the pod waits (FailedMount, retried on back-off) until the
// signer issues its certificate.
var errNotIssued = errors.New("not issued yet")

// podCertificate returns the key and certificate chain of a pod's
// podCertificate source: the first call requests them (a new key, its
// PodCertificateRequest to the signer) and the pod waits until they are
// issued; from the certificate's beginRefreshAt (plus up to 5 minutes of
// jitter) a new key is requested while the issued one is served. The pod's
// worker is the only caller for the pod, so a source's state needs no lock
// of its own.
func (m *Manager) podCertificate(ctx context.Context, pod *v1.Pod, k certKey, src *v1.PodCertificateProjection) ([]byte, []byte, error) {
	if m.podCerts == nil {
		return nil, nil, fmt.Errorf("%w to request a pod certificate", ErrNoAPIServer)
	}
	m.mu.Lock()
	if m.certs[pod.UID] == nil {
		m.certs[pod.UID] = map[certKey]*podCert{}
	}
	st := m.certs[pod.UID][k]
	if st == nil {
		st = &podCert{}
		m.certs[pod.UID][k] = st
	}
	m.mu.Unlock()
	if st.final != nil {
		return nil, nil, st.final
	}
	now := m.now()
	if st.pending != "" {
		if err := m.checkRequest(ctx, pod, st, now); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case st.chain == nil && st.pending == "":
		if err := m.requestCertificate(ctx, pod, st, src, now); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("PodCertificateRequest %s/%s for signer %s: %w", pod.Namespace, st.pending, src.SignerName, errNotIssued)
	case st.chain == nil:
		return nil, nil, fmt.Errorf("PodCertificateRequest %s/%s for signer %s: %w", pod.Namespace, st.pending, src.SignerName, errNotIssued)
	case st.pending == "" && !now.Before(st.refreshAt):
		// Time to refresh: the issued credentials serve until the new
		// ones are; a failure to ask is tried again at the next refresh.
		if err := m.requestCertificate(ctx, pod, st, src, now); err != nil {
			return st.key, st.chain, nil
		}
	}
	return st.key, st.chain, nil
}

// checkRequest reads the pending request: issued, its credentials replace
// the served ones; denied or failed, the source fails for good.
func (m *Manager) checkRequest(ctx context.Context, pod *v1.Pod, st *podCert, now time.Time) error {
	pcr, err := m.podCerts.PodCertificateRequest(ctx, pod.Namespace, st.pending)
	switch {
	case apierrors.IsNotFound(err) && now.After(st.abandonAt):
		st.pending = "" // deleted: asked again
		return nil
	case err != nil:
		if st.chain != nil {
			return nil // the issued credentials serve meanwhile
		}
		return fmt.Errorf("while getting PodCertificateRequest %q: %w", pod.Namespace+"/"+st.pending, err)
	}
	for _, c := range pcr.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
			verb := "was denied"
			if c.Type == certificatesv1.PodCertificateRequestConditionTypeFailed {
				verb = "failed"
			}
			st.final = fmt.Errorf("PodCertificateRequest %s %s, reason=%q, message=%q", pod.Namespace+"/"+pcr.Name, verb, c.Reason, c.Message)
			return st.final
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			st.key, st.chain = st.pendingKey, certificateChain([]byte(pcr.Status.CertificateChain))
			st.pending, st.pendingKey = "", nil
			if pcr.Status.BeginRefreshAt != nil {
				st.refreshAt = pcr.Status.BeginRefreshAt.Add(jitter())
			}
			if pcr.Status.NotAfter != nil {
				st.notAfter = pcr.Status.NotAfter.Time
			}
			return nil
		}
	}
	return nil
}

// requestCertificate makes a new key and its request, as the kubelet
// does: a PKCS#10 request signed by the key proves its possession; the
// request names the pod, its service account and this node, with their
// UIDs, and is owned by the pod.
func (m *Manager) requestCertificate(ctx context.Context, pod *v1.Pod, st *podCert, src *v1.PodCertificateProjection, now time.Time) error {
	saName := pod.Spec.ServiceAccountName
	if saName == "" {
		saName = "default"
	}
	sa, err := m.podCerts.ServiceAccount(ctx, pod.Namespace, saName)
	if err != nil {
		return fmt.Errorf("while fetching service account: %w", err)
	}
	node, err := m.podCerts.Node(ctx, m.nodeName)
	if err != nil {
		return fmt.Errorf("while getting node object: %w", err)
	}
	key, stub, err := keyAndProof(src.KeyType)
	if err != nil {
		return fmt.Errorf("while generating keypair: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("while marshaling key to PKCS#8: %w", err)
	}
	pcr, err := m.podCerts.CreatePodCertificateRequest(ctx, &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: src.SignerName, PodName: pod.Name, PodUID: pod.UID,
			ServiceAccountName: saName, ServiceAccountUID: sa.UID, NodeName: types.NodeName(m.nodeName), NodeUID: node.UID,
			MaxExpirationSeconds: src.MaxExpirationSeconds, StubPKCS10Request: stub, UnverifiedUserAnnotations: src.UserAnnotations},
	})
	if err != nil {
		return fmt.Errorf("while creating PodCertificateRequest: %w", err)
	}
	st.pending, st.pendingKey = pcr.Name, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	st.abandonAt = now.Add(pcrAbandonAfter + jitter())
	return nil
}

// keyAndProof makes a key of the projection's type and the stub PKCS#10
// request signed by it.
func keyAndProof(keyType string) (crypto.Signer, []byte, error) {
	var key crypto.Signer
	var err error
	switch keyType {
	case "RSA3072":
		key, err = rsa.GenerateKey(rand.Reader, 3072)
	case "RSA4096":
		key, err = rsa.GenerateKey(rand.Reader, 4096)
	case "ECDSAP256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ECDSAP384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ECDSAP521":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ED25519":
		_, key, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, nil, fmt.Errorf("unknown key type %q", keyType)
	}
	if err != nil {
		return nil, nil, err
	}
	stub, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	return key, stub, err
}

// certificateChain keeps the CERTIFICATE blocks of what the signer wrote,
// re-encoded (no headers, no text between them).
func certificateChain(in []byte) []byte {
	var out bytes.Buffer
	for {
		var b *pem.Block
		b, in = pem.Decode(in)
		if b == nil {
			return out.Bytes()
		}
		if b.Type == "CERTIFICATE" {
			_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})
		}
	}
}

// jitter spreads refreshes over 5 minutes, as the kubelet does.
func jitter() time.Duration { return time.Duration(mathrand.Int64N(int64(5 * time.Minute))) }
