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
# The images the conformance smokes run, built offline (minutes cold: agnhost,
# busybox from Debian's source), not while the tests beside them run.
hack/conformance-images.sh >/dev/null
# The unit tests first, their packages built and run side by side: they
# drive fake clocks and assert no timing, but a few count what the host's
# Docker runs, so nothing runs beside them.
# Then the end-to-end tests that time or count what they run (Docker calls,
# CPU, back-off gaps, probe kills, eviction thresholds against the machine's
# memory and disk, a Docker daemon restart), and the other packages under
# test/ (the benchmark smoke moves dockerd between cgroups, as under
# systemd): they have the machine to themselves. Last, side by side, the
# end-to-end tests that begin with t.Parallel (they assert no time or cost
# of their own and mostly wait, on back-off, grace periods, control planes;
# hack/e2ephases lists them), four at a time, and Kubernetes' own
# conformance smokes, one after the other: NodeConformance specs across
# areas (hack/conformance-smoke.txt) against the agent as a real cluster's
# node (`make conformance` runs all of them), then sig-network's DNS and
# Service [Conformance] specs of hack/conformance-network-smoke.txt against
# two nodes with kube-proxy and CoreDNS.
# The e2e package's long scenarios run in make scale (a hundred pods at
# once, the fleet of agents on an etcd cluster) and make bench (an idle
# node's cost to the API server).
long='^(TestNodeHundredPodsAtOnce|TestFleet|TestNodeIdleCostsTheAPIServerLittle)$'
side=$(go run ./hack/e2ephases test/e2e)
parts=${log%.json}-parts # each part's go test -json and console, kept
rm -rf "$parts" && mkdir -p "$parts"
rc=0
echo "== unit tests"
go test -json -count=1 -timeout 10m $(go list ./... | grep -v /test/) "$@" | bin/testreport "$parts/unit.json" || rc=1
echo "== end-to-end tests that time or count what they run, alone"
go test -json -count=1 -timeout 30m -skip "$side|$long" ./test/e2e "$@" | bin/testreport "$parts/alone.json" || rc=1
echo "== the benchmark and scale smokes, alone"
go test -json -p 1 -count=1 -timeout 30m $(go list ./test/... | grep -v /test/e2e) "$@" | bin/testreport "$parts/test.json" || rc=1
echo "== the other end-to-end tests, beside the conformance smokes"
(go test -json -count=1 -timeout 30m -parallel 4 -run "$side" -skip "$long" ./test/e2e "$@" |
  bin/testreport "$parts/e2e.json") >"$parts/e2e.out" 2>&1 &
e2e=$!
hack/conformance.sh --smoke || rc=1
hack/conformance.sh --network-smoke || rc=1
wait "$e2e" || rc=1
cat "$parts/e2e.out"
cat "$parts"/{unit,alone,test,e2e}.json >"$log"
exit $rc
