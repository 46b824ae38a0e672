package volumes

import (
	"context"
	"encoding/pem"
	"errors"
	"slices"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeTrustBundles []certificatesv1.ClusterTrustBundle

func (f fakeTrustBundles) ClusterTrustBundles(context.Context) ([]certificatesv1.ClusterTrustBundle, error) {
	return f, nil
}

// pemOf is certificates as PEM (their DER stands for itself: nothing parses it).
func pemOf(ders ...string) string {
	var b strings.Builder
	for _, d := range ders {
		b.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte(d)}))
	}
	return b.String()
}

// ders are the DER contents of a PEM file, sorted.
func ders(data []byte) []string {
	var out []string
	for {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		out = append(out, string(b.Bytes))
	}
	slices.Sort(out)
	return out
}

func TestTrustAnchors(t *testing.T) {
	bundle := func(name, signer string, labels map[string]string, certs ...string) certificatesv1.ClusterTrustBundle {
		return certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: pemOf(certs...)}}
	}
	bundles := fakeTrustBundles{
		bundle("plain", "", nil, "a", "b"),
		bundle("s:one", "example.com/s", map[string]string{"team": "x"}, "c", "d"),
		bundle("s:two", "example.com/s", map[string]string{"team": "y"}, "d", "e"),
		bundle("t:one", "example.com/t", map[string]string{"team": "x"}, "f"),
	}
	m := NewManager(Config{RootDir: t.TempDir()}, Deps{TrustBundles: bundles})
	str := func(s string) *string { return &s }
	yes := true
	cases := []struct {
		name string
		src  v1.ClusterTrustBundleProjection
		want []string // the certificates, or nil for an error holding wantErr
		err  string
	}{
		{"by name", v1.ClusterTrustBundleProjection{Name: str("plain")}, []string{"a", "b"}, ""},
		{"by name, missing", v1.ClusterTrustBundleProjection{Name: str("gone")}, nil, `clustertrustbundles.certificates.k8s.io "gone" not found`},
		{"by name, missing, optional", v1.ClusterTrustBundleProjection{Name: str("gone"), Optional: &yes}, []string{}, ""},
		{"signer, every label, deduplicated", v1.ClusterTrustBundleProjection{SignerName: str("example.com/s"), LabelSelector: &metav1.LabelSelector{}},
			[]string{"c", "d", "e"}, ""},
		{"signer, one label", v1.ClusterTrustBundleProjection{SignerName: str("example.com/s"),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "y"}}}, []string{"d", "e"}, ""},
		{"signer, no selector matches nothing", v1.ClusterTrustBundleProjection{SignerName: str("example.com/s")}, nil,
			"combination of signerName and labelSelector matched zero ClusterTrustBundles"},
		{"signer, nothing, optional", v1.ClusterTrustBundleProjection{SignerName: str("example.com/u"), LabelSelector: &metav1.LabelSelector{}, Optional: &yes},
			[]string{}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data, err := m.trustAnchors(context.Background(), &tc.src)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("got %q %v, want an error with %q", data, err, tc.err)
				}
				return
			}
			if got := ders(data); err != nil || !slices.Equal(got, tc.want) && (len(got) != 0 || len(tc.want) != 0) {
				t.Errorf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
	// The order is the agent's: the same whatever the bundles' order.
	reversed := slices.Clone(bundles)
	slices.Reverse(reversed)
	a, b := normalizeTrustAnchors(bundles), normalizeTrustAnchors(reversed)
	if string(a) != string(b) {
		t.Errorf("the order follows the bundles':\n%s\n%s", a, b)
	}
	standalone := NewManager(Config{RootDir: t.TempDir()}, Deps{})
	if _, err := standalone.trustAnchors(context.Background(), &v1.ClusterTrustBundleProjection{Name: str("plain")}); !errors.Is(err, ErrNoAPIServer) {
		t.Errorf("standalone: %v", err)
	}
}
