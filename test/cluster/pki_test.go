package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"testing"
)

func TestIssue(t *testing.T) {
	ca, err := newAuthority("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.certPEM)
	for _, tc := range []struct {
		name  string
		spec  certSpec
		usage x509.ExtKeyUsage
		host  string // verified against the certificate's SANs; "" for client certificates
	}{
		{"node client", certSpec{commonName: "system:node:n1", orgs: []string{"system:nodes"}, client: true}, x509.ExtKeyUsageClientAuth, ""},
		{"admin", certSpec{commonName: "admin", orgs: []string{"system:masters"}, client: true}, x509.ExtKeyUsageClientAuth, ""},
		{"serving by IP", certSpec{commonName: "n1", server: true, ips: []net.IP{net.ParseIP("172.17.0.1")}, dnsNames: []string{"n1", "localhost"}}, x509.ExtKeyUsageServerAuth, "172.17.0.1"},
		{"serving by name", certSpec{commonName: "n1", server: true, ips: []net.IP{net.ParseIP("172.17.0.1")}, dnsNames: []string{"n1", "localhost"}}, x509.ExtKeyUsageServerAuth, "n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ca.issue(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			block, _ := pem.Decode(p.certPEM)
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if cert.Subject.CommonName != tc.spec.commonName || !slices.Equal(cert.Subject.Organization, tc.spec.orgs) {
				t.Errorf("subject %v, want CN=%s O=%v", cert.Subject, tc.spec.commonName, tc.spec.orgs)
			}
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.host, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Errorf("verify: %v", err)
			}
			if _, err := x509.ParseECPrivateKey(mustDecode(t, p.keyPEM)); err != nil {
				t.Errorf("key: %v", err)
			}
		})
	}
}

func TestFirstIP(t *testing.T) {
	for cidr, want := range map[string]string{"10.96.0.0/16": "10.96.0.1", "10.0.0.0/24": "10.0.0.1"} {
		_, n, _ := net.ParseCIDR(cidr)
		if got := firstIP(n).String(); got != want {
			t.Errorf("firstIP(%s) = %s, want %s", cidr, got, want)
		}
	}
}

func mustDecode(t *testing.T, data []byte) []byte {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("no PEM block")
	}
	return b.Bytes
}
