#!/usr/bin/env bash
# Runs Kubernetes' own NodeConformance specs (e2e.test of k8s.io/kubernetes
# v1.37.2, as published) against the agent as the one node of a real control
# plane (test/cluster/cmd/cluster, as `make cluster`), in parallel with the
# ginkgo command of the same module: first the parallel-safe specs, then the
# serial ones. JUnit XML goes to bin/conformance/, and docs/conformance.md
# lists every spec with its result (hack/conformancereport).
#
#   hack/conformance.sh           the whole run (about 30 minutes here)
#   hack/conformance.sh --smoke   the specs of hack/conformance-smoke.txt, a
#                                 few across areas (make test runs it); it
#                                 fails unless each passes, and writes no docs
#
# PROCS (default 10: most specs wait) is ginkgo's parallelism; SERIAL=0
# skips the serial part; NODE_NAME, PORT and HEALTHZ_PORT set the node's
# name and the agent's ports.
set -euo pipefail
cd "$(dirname "$0")/.."
smoke=
[ "${1:-}" = --smoke ] && smoke=1
hack/ensure-docker.sh
hack/ensure-test-deps.sh
bin=$(E2E=1 hack/ensure-control-plane.sh)
hack/conformance-images.sh >/dev/null
make -s build
go build -o bin/cluster ./test/cluster/cmd/cluster
ginkgo=$(hack/conformance-images.sh --ginkgo)

out=bin/conformance
rm -rf "$out" && mkdir -p "$out"
dir=/tmp/classic-kubelet-conformance
# The node: the agent started by the cluster command (its log is in $dir).
bin/cluster --bin-dir "$bin" --dir "$dir" --node-name "${NODE_NAME:-conformance-node}" --port "${PORT:-10250}" \
  -- --healthz-port "${HEALTHZ_PORT:-10248}" --read-only-port 0 >"$out/cluster.out" 2>"$out/cluster.log" &
cluster=$!
cleanup() {
  kill -TERM "$cluster" 2>/dev/null || true
  wait "$cluster" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 300); do
  grep -q '^export KUBECONFIG=' "$out/cluster.out" 2>/dev/null && break
  kill -0 "$cluster" 2>/dev/null || { cat "$out/cluster.log" >&2; exit 1; }
  sleep 1
done
kubeconfig=$(sed -n 's/^export KUBECONFIG=//p' "$out/cluster.out")
[ -n "$kubeconfig" ] || { echo "conformance: the cluster did not come up" >&2; cat "$out/cluster.log" >&2; exit 1; }

e2eflags=(--kubeconfig="$kubeconfig" --provider=skeleton --report-dir="$out" --dump-logs-on-failure=false --kubectl-path="$bin/kubectl"
  --kubelet-root-dir="$dir/kubelet" --volume-dir="$dir/kubelet")
run() { # name label-filter procs [focus regex]
  local name=$1 filter=$2 procs=$3 focus=${4:-}
  local args=(--label-filter="$filter" --procs="$procs" --timeout=2h --output-dir="$out" --junit-report="$name.xml"
    --json-report="$name.json" --no-color --succinct)
  [ -n "$focus" ] && args+=(--focus="$focus")
  [ "$procs" -gt 1 ] && args+=(-p)
  local began=$SECONDS rc=0
  "$ginkgo" run "${args[@]}" "$bin/e2e.test" -- "${e2eflags[@]}" >"$out/$name.log" 2>&1 || rc=$?
  echo "$name: $((SECONDS - began)) s (ginkgo exit $rc; log $out/$name.log)" | tee -a "$out/times.txt" >&2
}
parallel='NodeConformance && !Serial && !Slow && !Disruptive && !Flaky'
if [ -n "$smoke" ]; then
  run smoke "$parallel" "${PROCS:-4}" "$(paste -sd'|' hack/conformance-smoke.txt)"
  go run ./hack/conformancereport --check "$out/smoke.xml"
  exit
fi
run parallel "$parallel" "${PROCS:-10}"
xml=("$out/parallel.xml")
if [ "${SERIAL:-1}" != 0 ]; then
  run serial 'NodeConformance && Serial && !Disruptive' 1
  xml+=("$out/serial.xml")
fi
go run ./hack/conformancereport --times "$out/times.txt" "${xml[@]}" >docs/conformance.md
echo "conformance: docs/conformance.md written" >&2
