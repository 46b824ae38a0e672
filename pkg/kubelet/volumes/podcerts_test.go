package volumes

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

// fakePCRs is the API server's side of pod certificate requests.
type fakePCRs struct {
	made []*certificatesv1.PodCertificateRequest
	gets int
}

func (f *fakePCRs) ServiceAccount(_ context.Context, ns, name string) (*v1.ServiceAccount, error) {
	return &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "sa-uid"}}, nil
}

func (f *fakePCRs) Node(_ context.Context, name string) (*v1.Node, error) {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: "node-uid"}}, nil
}

func (f *fakePCRs) CreatePodCertificateRequest(_ context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	pcr = pcr.DeepCopy()
	pcr.Name = fmt.Sprintf("req-%d", len(f.made))
	f.made = append(f.made, pcr)
	return pcr, nil
}

func (f *fakePCRs) PodCertificateRequest(_ context.Context, ns, name string) (*certificatesv1.PodCertificateRequest, error) {
	f.gets++
	for _, p := range f.made {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "podcertificaterequests"}, name)
}

// issue answers request i as a signer does.
func (f *fakePCRs) issue(i int, refreshAt time.Time, chain string) {
	p := f.made[i]
	p.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue}}
	p.Status.CertificateChain = chain
	p.Status.BeginRefreshAt = &metav1.Time{Time: refreshAt}
	p.Status.NotAfter = &metav1.Time{Time: refreshAt.Add(time.Hour)}
}

// A pod certificate: requested with a new key of the asked type and a
// proof of it, waited for until issued, served, renewed with a new key
// from its beginRefreshAt while the issued one serves; a denial is final.
func TestPodCertificate(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	api := &fakePCRs{}
	m := NewManager(Config{RootDir: t.TempDir(), NodeName: "node-1", Clock: clk}, Deps{PodCertificates: api})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "pod-uid"}, Spec: v1.PodSpec{ServiceAccountName: "sa"}}
	src := &v1.PodCertificateProjection{SignerName: "e2e.example.com/s", KeyType: "ECDSAP256", MaxExpirationSeconds: ptr.To(int32(3600)),
		UserAnnotations: map[string]string{"e2e.example.com/path": "x"}}
	ctx, key := context.Background(), certKey{"certs", 0}

	// First: a request, and the pod waits.
	if _, _, err := m.podCertificate(ctx, pod, key, src); !errors.Is(err, errNotIssued) {
		t.Fatalf("first setup: %v, want it to wait for issuance", err)
	}
	if len(api.made) != 1 {
		t.Fatalf("%d requests", len(api.made))
	}
	req := api.made[0]
	if s := req.Spec; s.PodName != "p" || s.PodUID != "pod-uid" || s.ServiceAccountName != "sa" || s.ServiceAccountUID != "sa-uid" ||
		s.NodeName != "node-1" || s.NodeUID != "node-uid" || s.SignerName != src.SignerName || *s.MaxExpirationSeconds != 3600 ||
		s.UnverifiedUserAnnotations["e2e.example.com/path"] != "x" || req.OwnerReferences[0].UID != "pod-uid" {
		t.Errorf("request %+v", req)
	}
	stub, err := x509.ParseCertificateRequest(req.Spec.StubPKCS10Request)
	if err != nil || stub.CheckSignature() != nil || stub.PublicKeyAlgorithm != x509.ECDSA {
		t.Fatalf("stub PKCS#10 request: %v", err)
	}
	// Still pending: one read, no new request.
	if _, _, err := m.podCertificate(ctx, pod, key, src); !errors.Is(err, errNotIssued) || len(api.made) != 1 || api.gets != 1 {
		t.Fatalf("pending: %v, %d requests, %d reads", err, len(api.made), api.gets)
	}
	// Issued: the key is the one the request proved.
	refreshAt := clk.Now().Add(30 * time.Minute)
	api.issue(0, refreshAt, "junk\n-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n")
	keyPEM, chain, err := m.podCertificate(ctx, pod, key, src)
	if err != nil {
		t.Fatal(err)
	}
	if string(chain) != "-----BEGIN CERTIFICATE-----\nAAEC\n-----END CERTIFICATE-----\n" {
		t.Errorf("chain %q: only its certificates, re-encoded", chain)
	}
	block, _ := pem.Decode(keyPEM)
	priv, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil || !priv.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(stub.PublicKey) {
		t.Fatalf("the key is not the request's: %v", err)
	}
	// Before its refresh time nothing is asked.
	gets := api.gets
	if _, _, err := m.podCertificate(ctx, pod, key, src); err != nil || len(api.made) != 1 || api.gets != gets {
		t.Errorf("a fresh certificate cost requests %d, reads %d (%v)", len(api.made), api.gets-gets, err)
	}
	// Past it (and its jitter): a new key is requested, the old one serves.
	clk.SetTime(refreshAt.Add(6 * time.Minute))
	if k, _, err := m.podCertificate(ctx, pod, key, src); err != nil || string(k) != string(keyPEM) || len(api.made) != 2 {
		t.Fatalf("refresh: %v, %d requests; the issued key must serve", err, len(api.made))
	}
	api.issue(1, refreshAt.Add(time.Hour), "-----BEGIN CERTIFICATE-----\nAAED\n-----END CERTIFICATE-----\n")
	if k, c, err := m.podCertificate(ctx, pod, key, src); err != nil || string(k) == string(keyPEM) || !strings.Contains(string(c), "AAED") {
		t.Fatalf("after the refresh was issued: %v %q", err, c)
	}

	// A denied request is final for the pod, and asks nothing more.
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns", UID: "q-uid"}}
	_, _, _ = m.podCertificate(ctx, other, key, src)
	api.made[2].Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue, Reason: "NotAllowed", Message: "no"}}
	for range 2 {
		_, _, err := m.podCertificate(ctx, other, key, src)
		if err == nil || err.Error() != `PodCertificateRequest ns/req-2 was denied, reason="NotAllowed", message="no"` {
			t.Fatalf("denied: %v", err)
		}
	}
	if len(api.made) != 3 {
		t.Errorf("%d requests after a denial", len(api.made))
	}
	m.Forget("q-uid")
	if _, ok := m.certs["q-uid"]; ok {
		t.Error("Forget kept the pod's certificates")
	}
}
