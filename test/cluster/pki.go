package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// certValidity is how long the harness's certificates are valid: far longer
// than any test run or `make cluster` session, so none expires mid-run.
const certValidity = 365 * 24 * time.Hour

// authority is the cluster's one CA. It signs every certificate: the API
// server's, the components' client certificates, the API server's client
// certificate to kubelets (so agents trust it through the same CA file), and
// the agents' own. Keys are ECDSA P-256: generating one takes a millisecond,
// where an RSA key would cost a noticeable part of a cold start.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte // the controller-manager signs CSRs with it
}

func newAuthority(commonName string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour), // tolerate a little clock skew
		NotAfter:              now.Add(certValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der), keyPEM: pemBlock("EC PRIVATE KEY", keyDER)}, nil
}

// certSpec describes one leaf certificate.
type certSpec struct {
	commonName string
	orgs       []string // groups, to the API server's authenticator
	dnsNames   []string // server certificates only
	ips        []net.IP // server certificates only
	client     bool     // ExtKeyUsageClientAuth
	server     bool     // ExtKeyUsageServerAuth
}

// keyPair is a PEM certificate and its PEM private key.
type keyPair struct {
	certPEM, keyPEM []byte
}

func (a *authority) issue(s certSpec) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generate key for %s: %w", s.commonName, err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: s.commonName, Organization: s.orgs},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     s.dnsNames,
		IPAddresses:  s.ips,
	}
	if s.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if s.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return keyPair{}, fmt.Errorf("create certificate for %s: %w", s.commonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{certPEM: pemBlock("CERTIFICATE", der), keyPEM: pemBlock("EC PRIVATE KEY", keyDER)}, nil
}

// write puts the pair at <base>.crt and <base>.key and returns both paths.
func (p keyPair) write(base string) (certFile, keyFile string, err error) {
	certFile, keyFile = base+".crt", base+".key"
	if err := writeFile(certFile, p.certPEM); err != nil {
		return "", "", err
	}
	if err := writeFile(keyFile, p.keyPEM); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// serviceAccountKey returns a new signing key for service-account tokens as
// PEM: the private key (the API server signs with it, the
// controller-manager's token controller too) and its public key (the API
// server verifies with it).
func serviceAccountKey() (private, public []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate service-account key: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("EC PRIVATE KEY", keyDER), pemBlock("PUBLIC KEY", pubDER), nil
}

// writeKubeconfig writes a kubeconfig for server, trusting caPEM, that
// authenticates with the client pair; the certificates are embedded, so the
// file stands alone.
func writeKubeconfig(path, server string, caPEM []byte, user string, p keyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: p.certPEM, ClientKeyData: p.keyPEM}
	cfg.Contexts["cluster"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: user}
	cfg.CurrentContext = "cluster"
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// serial returns a random 128-bit serial number: certificates of clusters
// started one after the other never share one.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
