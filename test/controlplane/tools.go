//go:build tools

// Package controlplane pins the Kubernetes commands hack/ensure-control-plane.sh
// builds, so that `go mod tidy` keeps their dependencies in go.sum.
package controlplane

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/test/e2e"
)
