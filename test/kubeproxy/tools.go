//go:build tools

// Package kubeproxy pins kube-proxy, which hack/ensure-control-plane.sh
// builds, so that `go mod tidy` keeps its dependencies in go.sum.
package kubeproxy

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
