//go:build tools

// Package coredns pins the CoreDNS command hack/ensure-coredns.sh builds, so
// that `go mod tidy` keeps its dependencies in go.sum.
package coredns

import (
	_ "github.com/coredns/coredns"
)
