package volumes

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TrustBundles lists the cluster's ClusterTrustBundles (node mode; every
// node may read them), from a cache as config maps are.
type TrustBundles interface {
	ClusterTrustBundles(ctx context.Context) ([]certificatesv1.ClusterTrustBundle, error)
}

// orderSeed orders a projected bundle's certificates: stable while the
// agent runs (the file is not rewritten for nothing), another order after
// a restart, as the kubelet does, so that no client comes to depend on the
// first certificate.
var orderSeed = rand.Uint64()

// trustAnchors is a clusterTrustBundle projection's file, as the kubelet's
// ClusterTrustBundle manager makes it: the certificates of the named
// bundle, or of every bundle of the signer whose labels the selector
// matches (nil matches none, empty all), deduplicated, as PEM.
func (m *Manager) trustAnchors(ctx context.Context, src *v1.ClusterTrustBundleProjection) ([]byte, error) {
	if m.trustBundles == nil {
		return nil, fmt.Errorf("%w to read ClusterTrustBundles", ErrNoAPIServer)
	}
	all, err := m.trustBundles.ClusterTrustBundles(ctx)
	if err != nil {
		return nil, fmt.Errorf("while listing ClusterTrustBundles: %w", err)
	}
	optional := src.Optional != nil && *src.Optional
	var picked []certificatesv1.ClusterTrustBundle
	if src.Name != nil {
		for _, b := range all {
			if b.Name == *src.Name {
				picked = append(picked, b)
			}
		}
		if len(picked) == 0 {
			if optional {
				return []byte{}, nil
			}
			return nil, fmt.Errorf("while getting ClusterTrustBundle: clustertrustbundles.certificates.k8s.io %q not found", *src.Name)
		}
	} else {
		selector, err := metav1.LabelSelectorAsSelector(src.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("while parsing label selector: %w", err)
		}
		signer := ""
		if src.SignerName != nil {
			signer = *src.SignerName
		}
		for _, b := range all {
			if b.Spec.SignerName == signer && selector.Matches(labels.Set(b.Labels)) {
				picked = append(picked, b)
			}
		}
		if len(picked) == 0 {
			if optional {
				return []byte{}, nil
			}
			return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
		}
	}
	return normalizeTrustAnchors(picked), nil
}

// normalizeTrustAnchors deduplicates the bundles' certificates and writes
// them as PEM in the agent's order (orderSeed).
func normalizeTrustAnchors(bundles []certificatesv1.ClusterTrustBundle) []byte {
	seen := map[string]bool{}
	var ders [][]byte
	for _, b := range bundles {
		rest := []byte(b.Spec.TrustBundle)
		for {
			var block *pem.Block
			if block, rest = pem.Decode(rest); block == nil {
				break
			}
			if !seen[string(block.Bytes)] {
				seen[string(block.Bytes)] = true
				ders = append(ders, block.Bytes)
			}
		}
	}
	key := func(der []byte) uint64 {
		h := sha256.New()
		_ = binary.Write(h, binary.LittleEndian, orderSeed)
		h.Write(der)
		return binary.LittleEndian.Uint64(h.Sum(nil))
	}
	sort.Slice(ders, func(i, j int) bool {
		if ki, kj := key(ders[i]), key(ders[j]); ki != kj {
			return ki < kj
		}
		return bytes.Compare(ders[i], ders[j]) < 0
	})
	var out []byte
	for _, der := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	return out
}
