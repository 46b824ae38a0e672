package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A projected clusterTrustBundle source (before: the volume failed at
// setup): the named bundle's certificate in the file, read by the node
// with its own credentials; an optional bundle that does not exist is an
// empty file, and the pod runs.
func TestNodeClusterTrustBundleProjection(t *testing.T) {
	t.Parallel()
	cl := sharedCluster(t)
	a := startNode(t)
	c, ns := readyNode(t, cl, a)
	ctx := context.Background()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "e2e trust anchor"}, IsCA: true,
		BasicConstraintsValid: true, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	name := "e2e-" + ns // bundles are cluster-wide
	if _, err := c.CertificatesV1().ClusterTrustBundles().Create(ctx, &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.ClusterTrustBundleSpec{TrustBundle: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.CertificatesV1().ClusterTrustBundles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	ctr := sleepy("app")
	ctr.VolumeMounts = []v1.VolumeMount{{Name: "ca", MountPath: "/ca"}}
	spec := onNode(a.node, ctr)
	spec.Volumes = []v1.Volume{{Name: "ca", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To(name), Path: "bundle.pem"}},
		{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To(name + "-absent"), Path: "absent.pem", Optional: ptr.To(true)}},
	}}}}}
	createPod(t, c, ns, "ca", spec)
	waitPodPhase(t, c, ns, "ca", v1.PodRunning, startupWait)
	out, err := cl.Kubectl("-n", ns, "exec", "ca", "--", "cat", "/ca/bundle.pem")
	if block, _ := pem.Decode([]byte(out)); err != nil || block == nil || string(block.Bytes) != string(der) {
		t.Errorf("bundle.pem %q %v, want the bundle's certificate", out, err)
	}
	if out, err := cl.Kubectl("-n", ns, "exec", "ca", "--", "wc", "-c", "/ca/absent.pem"); err != nil || out != "0 /ca/absent.pem\n" {
		t.Errorf("the optional absent bundle's file: %q %v, want empty", out, err)
	}
}
