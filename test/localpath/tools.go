//go:build tools

// Package localpath pins the version of rancher's local-path-provisioner
// that hack/ensure-local-path-provisioner.sh builds for the e2e tests.
package localpath

import _ "github.com/rancher/local-path-provisioner"
