//go:build tools

// Package deviceplugin pins Kubernetes' sample device plugin, which the
// device-plugin end-to-end test builds, so that `go mod tidy` keeps its
// dependencies in go.sum.
package deviceplugin

import (
	_ "k8s.io/kubernetes/test/images/sample-device-plugin"
)
