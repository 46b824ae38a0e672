// Package certificate keeps the node's certificates as the kubelet does:
// the client certificate it authenticates to the API server with, obtained
// with bootstrap credentials (TLS bootstrap) and renewed before it expires,
// and the serving certificate of its full-access port, requested from the
// API server or read from files that are watched for changes. Requests and
// renewals are client-go's certificate manager's; this package gives it the
// kubelet's templates, stores, metrics and transport.
package certificate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"

	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// ClientPairPrefix names the client certificate's files in the cert dir
// (kubelet-client-<time>.pem and the kubelet-client-current.pem link), as
// the kubelet's.
const ClientPairPrefix = "kubelet-client"

// NeedsBootstrap reports whether the kubeconfig at path gives no usable
// client certificate at now, and why: the file is missing, cannot be read
// as a kubeconfig, holds no certificate, or one of its certificates has
// expired. A kubeconfig that authenticates otherwise (a token) needs one
// too: the kubelet's rule, since bootstrap exists to give the node a
// certificate of its own. Only an error reading the file other than its
// absence stops the agent: bootstrapping over a file that is there but
// unreadable would hide the fault.
func NeedsBootstrap(path string, now time.Time) (bool, string, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return true, "no kubeconfig", nil
	} else if err != nil {
		return false, "", fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return true, fmt.Sprintf("kubeconfig unusable: %v", err), nil
	}
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return true, fmt.Sprintf("kubeconfig's client certificate unreadable: %v", err), nil
	}
	if len(cfg.CertData) == 0 {
		return true, "kubeconfig has no client certificate", nil
	}
	certs, err := certutil.ParseCertsPEM(cfg.CertData)
	if err != nil {
		return true, fmt.Sprintf("kubeconfig's client certificate: %v", err), nil
	}
	for _, c := range certs {
		if now.After(c.NotAfter) {
			return true, fmt.Sprintf("kubeconfig's client certificate expired at %s", c.NotAfter.UTC().Format(time.RFC3339)), nil
		}
	}
	return false, "", nil
}

// ClientConfigs are the configurations of the node's API client as TLS
// bootstrap sees them.
type ClientConfigs struct {
	// Cert requests certificates while the node has no valid certificate
	// of its own: the bootstrap kubeconfig's credentials, if it can be
	// read, else --kubeconfig's.
	Cert *rest.Config
	// Client is the node's own: --kubeconfig, or, after bootstrap, the
	// bootstrap kubeconfig's server and CA with the cert dir's current pair.
	Client *rest.Config
	// Bootstrapped: --kubeconfig was written to point at the cert dir.
	Bootstrapped bool
}

// LoadClientConfigs loads --kubeconfig, unless it needs bootstrap (see
// NeedsBootstrap) and a bootstrap kubeconfig is given: --kubeconfig is then
// written to point at the cert dir's current pair (which may not exist
// yet: the certificate manager makes it), and certificates are requested
// with the bootstrap kubeconfig's credentials. A restart thus uses the
// node's last certificate rather than the bootstrap token, as the kubelet.
func LoadClientConfigs(kubeconfig, bootstrapKubeconfig, certDir string, now time.Time) (ClientConfigs, string, error) {
	need, why := false, ""
	if bootstrapKubeconfig != "" {
		var err error
		if need, why, err = NeedsBootstrap(kubeconfig, now); err != nil {
			return ClientConfigs{}, "", err
		}
	}
	if !need {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return ClientConfigs{}, "", fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		// Should the certificate expire while the agent runs (a renewal
		// that kept failing), the bootstrap credentials ask for the next,
		// where the kubelet exits to be restarted into bootstrap. kubeadm
		// deletes its bootstrap kubeconfig after the join: without one,
		// --kubeconfig's credentials are all there is.
		cert := cfg
		if boot, err := clientcmd.BuildConfigFromFlags("", bootstrapKubeconfig); bootstrapKubeconfig != "" && err == nil {
			cert = boot
		}
		return ClientConfigs{Cert: cert, Client: rest.CopyConfig(cfg)}, "", nil
	}
	boot, err := clientcmd.BuildConfigFromFlags("", bootstrapKubeconfig)
	if err != nil {
		return ClientConfigs{}, "", fmt.Errorf("--bootstrap-kubeconfig %s: %w", bootstrapKubeconfig, err)
	}
	store, err := certificate.NewFileStore(ClientPairPrefix, certDir, certDir, "", "")
	if err != nil {
		return ClientConfigs{}, "", fmt.Errorf("--cert-dir %s: %w", certDir, err)
	}
	client := rest.AnonymousClientConfig(boot)
	client.CertFile, client.KeyFile = store.CurrentPath(), store.CurrentPath()
	if err := WriteKubeconfig(kubeconfig, boot, store.CurrentPath()); err != nil {
		return ClientConfigs{}, "", err
	}
	return ClientConfigs{Cert: boot, Client: client, Bootstrapped: true}, why, nil
}

// WriteKubeconfig writes, atomically, a kubeconfig of the bootstrap
// configuration's server and CA (by path if it names one, else inline) that
// authenticates with the certificate and key in pemPath, as the kubelet
// writes it after bootstrap.
func WriteKubeconfig(path string, boot *rest.Config, pemPath string) error {
	cluster := &clientcmdapi.Cluster{Server: boot.Host, InsecureSkipTLSVerify: boot.Insecure, CertificateAuthority: boot.CAFile}
	if boot.CAFile == "" {
		cluster.CertificateAuthorityData = boot.CAData
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"default-cluster": cluster},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: pemPath, ClientKey: pemPath}},
		Contexts:       map[string]*clientcmdapi.Context{"default-context": {Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default"}},
		CurrentContext: "default-context",
	}
	data, err := clientcmd.Write(cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if err := safefile.WriteAtomic(path, data); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}
