//go:build tools

// Package conformance pins the commands hack/conformance-images.sh and
// hack/conformance.sh build, so that `go mod tidy` keeps their dependencies
// in go.sum.
package conformance

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "k8s.io/kubernetes/test/images/agnhost"
	_ "k8s.io/kubernetes/test/images/nonewprivs"
)
