// Package kubeapi is what the agent exchanges with a Kubernetes API server
// in node mode (--kubeconfig): it registers the Node and keeps its status
// and Lease, writes pod statuses and finishes deletions. It holds node
// credentials only and reads objects one by one, as the Node authorizer
// allows; an API server that goes away never stops a pod.
package kubeapi

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// NewClient returns a client of the API server kubeconfig names, sending at
// most qps requests a second (burst above it), as userAgent.
func NewClient(kubeconfig string, qps float32, burst int, userAgent string) (kubernetes.Interface, *rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	c, err := NewClientForConfig(cfg, qps, burst, userAgent)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return c, cfg, nil
}

// NewClientForConfig is NewClient for a configuration built elsewhere (one
// whose transport presents a rotating client certificate); it sets cfg's
// rate limits, user agent and content type.
func NewClientForConfig(cfg *rest.Config, qps float32, burst int, userAgent string) (kubernetes.Interface, error) {
	cfg.QPS, cfg.Burst, cfg.UserAgent = qps, burst, userAgent
	// Protobuf, as the kubelet: a third of JSON's size and decoding cost.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	return c, nil
}
