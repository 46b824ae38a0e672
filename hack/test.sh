#!/usr/bin/env bash
# Runs every test: unit tests and the end-to-end tests that start the real
# binary against the real Docker daemon. The console shows each package's
# result, every failed test's output and the ten slowest tests; the whole
# run, as `go test -json`, goes to $TEST_LOG (default bin/test.json).
set -euo pipefail
cd "$(dirname "$0")/.."
log=${TEST_LOG:-bin/test.json}
mkdir -p bin "$(dirname "$log")"
hack/check-boundaries.sh
go build -o bin/testreport ./hack/testreport
# What the tests build while they run (the agent with the race detector, the
# metrics-server scraper) is built once here first: on a fresh machine each
# takes minutes of both cores, which the tests running beside it would lose.
go build -race -o /dev/null ./cmd/kubelet
(cd test/metricsserver && go build -o /dev/null .)
# Kubernetes' e2e.test, for the conformance smoke at the end: built once per
# machine (about 20 minutes cold), beside the control plane.
E2E=1 hack/ensure-control-plane.sh >/dev/null
# The reference CNI plugins of the CNI-mode tests (about a minute cold), and
# the two-node tests' CoreDNS image (about 4 minutes cold).
hack/ensure-cni-plugins.sh >/dev/null
hack/ensure-coredns.sh >/dev/null
# Kubernetes' sample device plugin, for the device-plugin test (about 40 s cold).
hack/ensure-sample-device-plugin.sh >/dev/null
# The CSI node plugin of the CSI test (csi-test's driver harness, about 30 s cold).
hack/ensure-csi-plugin.sh >/dev/null
# rancher's local-path-provisioner, for the StatefulSet test (about a minute cold).
hack/ensure-local-path-provisioner.sh >/dev/null
# The images the conformance smokes run, built offline (minutes cold: agnhost,
# busybox from Debian's source).
hack/conformance-images.sh >/dev/null
# The unit tests first, their packages built and run side by side: they
# drive fake clocks and assert no timing. Then the packages under test/ one
# at a time: the end-to-end tests, the benchmark and scale smokes measure
# time, and must not compete with each other for two cores. Within the e2e
# package, the tests that assert no timing of their own (a cost counted by
# the agent's own metrics included) and mostly wait (on back-off, grace
# periods, control planes) call t.Parallel: Go runs them after every other
# test of the package, four at a time. (The conformance smoke beside those
# was tried: 2.5 minutes less, but under its load the graceful-shutdown and
# sidecar tests missed their grace periods in one run of two.)
# The e2e package's long scenarios run in make scale (a hundred pods at
# once, the fleet of agents on an etcd cluster, a client certificate
# rotated after it expired: 4 minutes of waiting on its lifetime, which
# ran alone for the last two minutes of the parallel part when Go resumed
# it late) and make bench (an idle node's cost to the API server); the
# scale and bench smokes, and the TLS bootstrap tests, stay here.
long='^(TestNodeHundredPodsAtOnce|TestFleet|TestNodeIdleCostsTheAPIServerLittle|TestCertificateRotation)$'
{
  rc=0
  go test -json -count=1 -timeout 10m $(go list ./... | grep -v /test/) "$@" || rc=$?
  go test -json -p 1 -parallel 4 -count=1 -timeout 45m -skip "$long" ./test/... "$@" || rc=$?
  exit $rc
} | bin/testreport "$log"
# Kubernetes' own specs against two agents as a real cluster's nodes, with
# kube-proxy and CoreDNS, in one run: a smoke of NodeConformance specs
# across areas (hack/conformance-smoke.txt; `make conformance` runs all of
# them), sig-network's DNS and Service [Conformance] specs
# (hack/conformance-network-smoke.txt) and [Conformance] specs of other
# sigs (hack/conformance-cluster-smoke.txt).
hack/conformance.sh --smoke
