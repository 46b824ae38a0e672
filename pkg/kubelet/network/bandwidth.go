package network

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The pod annotations that limit its traffic (bits per second), as the
// kubelet reads them for CNI's bandwidth capability.
const (
	IngressBandwidthAnnotation = "kubernetes.io/ingress-bandwidth"
	EgressBandwidthAnnotation  = "kubernetes.io/egress-bandwidth"
)

// bandwidth is the bandwidth capability (CNI's conventions): rates in bits
// per second, bursts in bits.
type bandwidth struct {
	IngressRate  int64 `json:"ingressRate,omitempty"`
	IngressBurst int64 `json:"ingressBurst,omitempty"`
	EgressRate   int64 `json:"egressRate,omitempty"`
	EgressBurst  int64 `json:"egressBurst,omitempty"`
}

// Rates outside [1 kbit/s, 1 Pbit/s] are refused, as the kubelet refuses
// them: a typo rather than a limit.
var (
	minBandwidth = resource.MustParse("1k")
	maxBandwidth = resource.MustParse("1P")
)

// podBandwidth is the pod's bandwidth capability, nil without the
// annotations. The burst is the largest the bandwidth plugin takes
// (MaxInt32 bits, about 2 Gbit), as the kubelet sets it: the rate alone
// limits.
func podBandwidth(annotations map[string]string) (*bandwidth, error) {
	rate := func(key string) (int64, error) {
		s, ok := annotations[key]
		if !ok {
			return 0, nil
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return 0, fmt.Errorf("annotation %s: %w", key, err)
		}
		switch {
		case q.Value() < minBandwidth.Value():
			return 0, fmt.Errorf("annotation %s: resource is unreasonably small (< 1kbit)", key)
		case q.Value() > maxBandwidth.Value():
			return 0, fmt.Errorf("annotation %s: resource is unreasonably large (> 1Pbit)", key)
		}
		return q.Value(), nil
	}
	in, err := rate(IngressBandwidthAnnotation)
	if err != nil {
		return nil, err
	}
	out, err := rate(EgressBandwidthAnnotation)
	if err != nil {
		return nil, err
	}
	if in == 0 && out == 0 {
		return nil, nil
	}
	bw := &bandwidth{IngressRate: in, EgressRate: out}
	if in > 0 {
		bw.IngressBurst = math.MaxInt32
	}
	if out > 0 {
		bw.EgressBurst = math.MaxInt32
	}
	return bw, nil
}
