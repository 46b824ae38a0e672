package certificate

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// pair makes a self-signed certificate for cn valid from notBefore to
// notAfter, as PEM certificate and key.
func pair(t *testing.T, cn string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func write(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeconfig writes a kubeconfig of server https://api:6443 whose user
// authenticates with auth.
func kubeconfig(t *testing.T, path string, auth *clientcmdapi.AuthInfo) string {
	t.Helper()
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: "https://api:6443", InsecureSkipTLSVerify: true}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": auth},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestNeedsBootstrap(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	validCert, validKey := pair(t, "system:node:n1", now.Add(-time.Hour), now.Add(time.Hour))
	oldCert, oldKey := pair(t, "system:node:n1", now.Add(-2*time.Hour), now.Add(-time.Minute))
	cases := []struct {
		name      string
		path      string
		want      bool
		wantWhy   string
		wantError bool
	}{
		{"missing", filepath.Join(dir, "none"), true, "no kubeconfig", false},
		{"not a kubeconfig", write(t, filepath.Join(dir, "garbage"), []byte("{{{")), true, "unusable", false},
		{"token only", kubeconfig(t, filepath.Join(dir, "token"), &clientcmdapi.AuthInfo{Token: "abc"}), true, "no client certificate", false},
		{"inline, valid", kubeconfig(t, filepath.Join(dir, "inline"), &clientcmdapi.AuthInfo{ClientCertificateData: validCert, ClientKeyData: validKey}), false, "", false},
		{"files, valid", kubeconfig(t, filepath.Join(dir, "files"), &clientcmdapi.AuthInfo{
			ClientCertificate: write(t, filepath.Join(dir, "c.pem"), validCert), ClientKey: write(t, filepath.Join(dir, "k.pem"), validKey)}), false, "", false},
		{"expired", kubeconfig(t, filepath.Join(dir, "expired"), &clientcmdapi.AuthInfo{ClientCertificateData: oldCert, ClientKeyData: oldKey}), true, "expired at 2029-12-31T23:59:00Z", false},
		{"certificate file gone", kubeconfig(t, filepath.Join(dir, "gone"), &clientcmdapi.AuthInfo{
			ClientCertificate: filepath.Join(dir, "gone.pem"), ClientKey: filepath.Join(dir, "gone.pem")}), true, "unable to read client-cert", false},
		{"a directory", dir, true, "unusable", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, why, err := NeedsBootstrap(c.path, now)
			if (err != nil) != c.wantError {
				t.Fatalf("error %v, want error %v", err, c.wantError)
			}
			if got != c.want || !strings.Contains(why, c.wantWhy) {
				t.Errorf("NeedsBootstrap = %v (%q), want %v (%q)", got, why, c.want, c.wantWhy)
			}
		})
	}
}

func TestWriteKubeconfig(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name       string
		boot       *rest.Config
		wantCAFile string
		wantCAData string
	}{
		{"CA by path", &rest.Config{Host: "https://10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAFile: "/etc/kubernetes/pki/ca.crt"}},
			"/etc/kubernetes/pki/ca.crt", ""},
		{"CA inline", &rest.Config{Host: "https://10.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("CA")}}, "", "CA"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "sub", c.name+".conf")
			pemPath := filepath.Join(dir, "pki", "kubelet-client-current.pem")
			if err := WriteKubeconfig(path, c.boot, pemPath); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("kubeconfig %v, %v: want a private file", fi, err)
			}
			cfg, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cl, auth := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster], cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
			if cl.Server != c.boot.Host || cl.CertificateAuthority != c.wantCAFile || string(cl.CertificateAuthorityData) != c.wantCAData {
				t.Errorf("cluster %+v", cl)
			}
			if auth.ClientCertificate != pemPath || auth.ClientKey != pemPath || auth.Token != "" {
				t.Errorf("user %+v, want the pem %s for certificate and key", auth, pemPath)
			}
		})
	}
}

func TestLoadClientConfigs(t *testing.T) {
	now := time.Now()
	validCert, validKey := pair(t, "system:node:n1", now.Add(-time.Hour), now.Add(time.Hour))
	cases := []struct {
		name       string
		kubeconfig func(dir string) string
		bootstrap  bool
		want       bool   // bootstrapped
		wantToken  string // of the configuration that requests certificates
	}{
		{"no bootstrap kubeconfig: --kubeconfig as it is", func(dir string) string {
			return kubeconfig(t, filepath.Join(dir, "kc"), &clientcmdapi.AuthInfo{Token: "abc"})
		}, false, false, "abc"},
		{"valid: no bootstrap, the token kept for an expiry", func(dir string) string {
			return kubeconfig(t, filepath.Join(dir, "kc"), &clientcmdapi.AuthInfo{ClientCertificateData: validCert, ClientKeyData: validKey})
		}, true, false, "abcdef.0123456789abcdef"},
		{"missing: bootstrap", func(dir string) string { return filepath.Join(dir, "kc") }, true, true, "abcdef.0123456789abcdef"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			kc, boot := c.kubeconfig(dir), ""
			if c.bootstrap {
				boot = kubeconfig(t, filepath.Join(dir, "boot"), &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"})
			}
			cfgs, why, err := LoadClientConfigs(kc, boot, filepath.Join(dir, "pki"), now)
			if err != nil {
				t.Fatal(err)
			}
			if cfgs.Bootstrapped != c.want || (why != "") != c.want {
				t.Fatalf("bootstrapped %v (%q), want %v", cfgs.Bootstrapped, why, c.want)
			}
			if cfgs.Cert.BearerToken != c.wantToken {
				t.Errorf("certificates requested with token %q, want %q", cfgs.Cert.BearerToken, c.wantToken)
			}
			if !c.want {
				return
			}
			pemPath := filepath.Join(dir, "pki", "kubelet-client-current.pem")
			if cfgs.Cert.BearerToken != "abcdef.0123456789abcdef" || cfgs.Client.BearerToken != "" || cfgs.Client.CertFile != pemPath {
				t.Errorf("cert config token %q, client config token %q cert %q", cfgs.Cert.BearerToken, cfgs.Client.BearerToken, cfgs.Client.CertFile)
			}
			if written, err := clientcmd.LoadFromFile(kc); err != nil || written.AuthInfos["default-auth"].ClientCertificate != pemPath {
				t.Errorf("--kubeconfig not written to use %s: %v", pemPath, err)
			}
		})
	}
}

func TestServingTemplate(t *testing.T) {
	cases := []struct {
		name      string
		addrs     []v1.NodeAddress
		wantNil   bool
		wantNames string
		wantIPs   string
	}{
		{"IP and host name", []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.2"}, {Type: v1.NodeHostName, Address: "host-a"}}, false, "host-a", "10.0.0.2"},
		{"host name only: no request", []v1.NodeAddress{{Type: v1.NodeHostName, Address: "host-a"}}, true, "", ""},
		{"an IP as host name, duplicates, DNS", []v1.NodeAddress{{Type: v1.NodeHostName, Address: "10.0.0.3"}, {Type: v1.NodeInternalIP, Address: "10.0.0.3"},
			{Type: v1.NodeExternalIP, Address: "192.0.2.1"}, {Type: v1.NodeInternalDNS, Address: "a.internal"}, {Type: v1.NodeInternalIP, Address: ""}},
			false, "a.internal", "10.0.0.3,192.0.2.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := servingTemplate("n1", c.addrs)
			if (got == nil) != c.wantNil {
				t.Fatalf("template %v, want nil %v", got, c.wantNil)
			}
			if got == nil {
				return
			}
			ips := make([]string, len(got.IPAddresses))
			for i, ip := range got.IPAddresses {
				ips[i] = ip.String()
			}
			if got.Subject.CommonName != "system:node:n1" || strings.Join(got.Subject.Organization, ",") != "system:nodes" ||
				strings.Join(got.DNSNames, ",") != c.wantNames || strings.Join(ips, ",") != c.wantIPs {
				t.Errorf("template %v %v names %v ips %v", got.Subject.CommonName, got.Subject.Organization, got.DNSNames, ips)
			}
		})
	}
}
