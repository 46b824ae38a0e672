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
# Two phases. First the end-to-end tests that time or count what they run
# (Docker calls, CPU, back-off gaps, eviction thresholds against the
# machine's own memory and disk): they have the machine to themselves. Then
# everything that asserts no time of its own, side by side: the unit tests
# (fake clocks), the end-to-end tests that begin with t.Parallel (they wait
# on back-off, grace periods, control planes; hack/e2ephases lists them),
# the other packages under test/ (the benchmark and scale smokes, which
# assert no figure), and Kubernetes' own conformance smokes: a smoke of
# NodeConformance specs across areas (hack/conformance-smoke.txt) against
# the agent as a real cluster's node (`make conformance` runs all of them),
# then sig-network's DNS and Service [Conformance] specs of
# hack/conformance-network-smoke.txt against two nodes with kube-proxy and
# CoreDNS.
# The e2e package's long scenarios run in make scale (a hundred pods at
# once, the fleet of agents on an etcd cluster) and make bench (an idle
# node's cost to the API server).
long='^(TestNodeHundredPodsAtOnce|TestFleet|TestNodeIdleCostsTheAPIServerLittle)$'
side=$(go run ./hack/e2ephases test/e2e)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rc=0
echo "== end-to-end tests that time what they run, alone"
go test -json -count=1 -timeout 30m -skip "$side|$long" ./test/e2e "$@" | bin/testreport "$out/alone.json" || rc=1
echo "== the rest, side by side"
parts=(unit e2e test conformance)
pids=()
(go test -json -count=1 -timeout 10m $(go list ./... | grep -v /test/) "$@" | bin/testreport "$out/unit.json") >"$out/unit.out" 2>&1 &
pids+=($!)
(go test -json -count=1 -timeout 30m -parallel 6 -run "$side" -skip "$long" ./test/e2e "$@" | bin/testreport "$out/e2e.json") >"$out/e2e.out" 2>&1 &
pids+=($!)
(go test -json -p 1 -count=1 -timeout 30m $(go list ./test/... | grep -v /test/e2e) "$@" | bin/testreport "$out/test.json") >"$out/test.out" 2>&1 &
pids+=($!)
(c=0; hack/conformance.sh --smoke || c=1; hack/conformance.sh --network-smoke || c=1; exit $c) >"$out/conformance.out" 2>&1 &
pids+=($!)
# Their consoles (package results, failed tests' output, the slowest
# tests) once all have ended, one after the other.
for i in "${!parts[@]}"; do
  wait "${pids[$i]}" || rc=1
  echo "== ${parts[$i]}"
  cat "$out/${parts[$i]}.out"
done
cat "$out"/alone.json "$out"/unit.json "$out"/e2e.json "$out"/test.json >"$log"
exit $rc
