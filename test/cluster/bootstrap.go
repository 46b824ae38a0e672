package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// KubeadmNodeGroup is the group kubeadm's join tokens put nodes in.
const KubeadmNodeGroup = "system:bootstrappers:kubeadm:default-node-token"

// BootstrapKubeconfig makes a bootstrap token (a Secret in kube-system) of
// the given group and writes a kubeconfig that authenticates with it, as
// `kubeadm join` writes bootstrap-kubelet.conf. The group may create CSRs
// (system:node-bootstrapper); with autoApprove, kube-controller-manager's
// csrapproving approves its nodes' client CSRs, and nodes their own
// renewals, by the bindings kubeadm makes. Without it, a test approves or
// denies the CSRs itself.
func (c *Cluster) BootstrapKubeconfig(ctx context.Context, group string, autoApprove bool) (string, error) {
	id, secret := randomHex(3), randomHex(8)
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system"},
		Type:       corev1.SecretTypeBootstrapToken,
		StringData: map[string]string{"token-id": id, "token-secret": secret, "usage-bootstrap-authentication": "true",
			"usage-bootstrap-signing": "true", "auth-extra-groups": group},
	}
	if _, err := c.admin.CoreV1().Secrets("kube-system").Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("bootstrap token: %w", err)
	}
	roles := []string{"system:node-bootstrapper"}
	if autoApprove {
		roles = append(roles, "system:certificates.k8s.io:certificatesigningrequests:nodeclient")
	}
	for _, role := range roles {
		if err := c.bindGroup(ctx, role, group); err != nil {
			return "", err
		}
	}
	if autoApprove {
		if err := c.bindGroup(ctx, "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", "system:nodes"); err != nil {
			return "", err
		}
	}
	path := filepath.Join(c.Dir, "bootstrap", id+".kubeconfig")
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"cluster": {Server: c.Server, CertificateAuthority: c.CAFile}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"tls-bootstrap-token-user": {Token: id + "." + secret}},
		Contexts:       map[string]*clientcmdapi.Context{"tls-bootstrap": {Cluster: "cluster", AuthInfo: "tls-bootstrap-token-user"}},
		CurrentContext: "tls-bootstrap",
	}
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		return "", fmt.Errorf("bootstrap kubeconfig: %w", err)
	}
	return path, nil
}

// bindGroup binds a ClusterRole to a group, once.
func (c *Cluster) bindGroup(ctx context.Context, role, group string) error {
	name := strings.NewReplacer(":", "-", "/", "-").Replace("e2e:" + role + ":" + group)
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
	}
	if _, err := c.admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s to %s: %w", role, group, err)
	}
	return nil
}

// randomHex is n random bytes in hex: a bootstrap token's id (6
// characters) and secret (16) are [a-z0-9].
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
