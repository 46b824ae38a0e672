#!/usr/bin/env bash
# Runs Kubernetes' own NodeConformance specs (e2e.test of k8s.io/kubernetes
# v1.37.2, as published) against the agent as the node of a real control
# plane (test/cluster/cmd/cluster, as `make cluster`), in parallel with the
# ginkgo command of the same module: first the parallel-safe specs, then the
# serial ones. JUnit XML goes to bin/conformance/, and docs/conformance.md
# lists every spec with its result (hack/conformancereport).
#
#   hack/conformance.sh           the whole run (about 30 minutes here)
#   hack/conformance.sh --smoke   make test's smoke, in one ginkgo run
#                                 against a two-node cluster with kube-proxy
#                                 and CoreDNS: the NodeConformance specs of
#                                 hack/conformance-smoke.txt (a few across
#                                 areas) and the sig-network [Conformance]
#                                 specs of hack/conformance-network-smoke.txt
#                                 (cluster DNS, Services) and the other sigs'
#                                 of hack/conformance-cluster-smoke.txt (a
#                                 webhook, kubectl, a Deployment, a
#                                 StatefulSet, pod certificates); it fails unless
#                                 each passes, and writes no docs
#
# PROCS (default 10: most specs wait) is ginkgo's parallelism; SERIAL=0
# skips the serial part; FOCUS (a regular expression) runs only the specs
# whose names it matches, and checks them instead of writing docs; NODE_NAME, PORT and HEALTHZ_PORT set the node's
# name and the agent's ports. NODES=n (n > 1) runs the whole run against n
# nodes, each a machine of its own with kube-proxy and CoreDNS (as `make
# cluster NODES=n`; the nodes are NODE_NAME-1 ... NODE_NAME-n); LABELS
# replaces the parallel part's label filter (say 'Conformance && !Serial &&
# !Slow && !Disruptive' for the [Conformance] specs of every area).
set -euo pipefail
cd "$(dirname "$0")/.."
smoke= out=bin/conformance nodes=${NODES:-1}
# SUITE=conformance: the whole [Conformance] focus, as the certification
# runs it (every sig; [Disruptive] and [Flaky] skipped, [Slow] run), on two
# nodes unless NODES says otherwise, written to docs/conformance-full.md.
suite=${SUITE:-node} docs=docs/conformance.md
parallel=${LABELS:-'NodeConformance && !Serial && !Slow && !Disruptive && !Flaky'}
serial='NodeConformance && Serial && !Disruptive'
title='NodeConformance: Kubernetes v1.37.2'"'"'s own node suite against the agent'
if [ "$suite" = conformance ]; then
  nodes=${NODES:-2} docs=docs/conformance-full.md
  parallel=${LABELS:-'Conformance && !Serial && !Disruptive && !Flaky'}
  serial='Conformance && Serial && !Disruptive && !Flaky'
  title='Conformance: Kubernetes v1.37.2'"'"'s [Conformance] suite against a cluster of these agents'
fi
case "${1:-}" in
--smoke) smoke=(hack/conformance-smoke.txt hack/conformance-network-smoke.txt hack/conformance-cluster-smoke.txt) nodes=2 ;;
esac
hack/ensure-docker.sh
hack/ensure-test-deps.sh
bin=$(E2E=1 hack/ensure-control-plane.sh)
hack/conformance-images.sh >/dev/null
make -s build
go build -o bin/cluster ./test/cluster/cmd/cluster
ginkgo=$(hack/conformance-images.sh --ginkgo)

rm -rf "$out" && mkdir -p "$out"
dir=/tmp/classic-kubelet-conformance
node=${NODE_NAME:-conformance-node}
root="$dir/kubelet"
clusterargs=(--bin-dir "$bin" --dir "$dir" --node-name "$node" --port "${PORT:-10250}")
if [ "$nodes" -gt 1 ]; then
  # Its own ranges, beside `make cluster`'s and the e2e tests' defaults.
  clusterargs+=(--nodes "$nodes" --cni-bin-dir "$(hack/ensure-cni-plugins.sh)" --coredns-image "$(hack/ensure-coredns.sh)"
    --cluster-cidr 10.253.0.0/16 --lan 10.254.0.0/24)
  # The specs that look into a node's root dir find the first node's.
  root="$dir/nodes/$node-1/root"
fi
# The nodes: the agents started by the cluster command (their logs are in
# $dir).
bin/cluster "${clusterargs[@]}" -- --healthz-port "${HEALTHZ_PORT:-10248}" --read-only-port 0 >"$out/cluster.out" 2>"$out/cluster.log" &
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
  --kubelet-root-dir="$root" --volume-dir="$root")
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
if [ -n "$smoke" ]; then
  # sig-network's and the other sigs' specs are [Conformance], not
  # NodeConformance: they ask for a cluster. The lists in one run, one
  # cluster: the cluster specs mostly wait (DNS probes, endpoints, the
  # NodePort spec's minute, rollouts), and the node specs run beside them.
  parallel='(NodeConformance || Conformance) && !Serial && !Slow && !Disruptive && !Flaky'
  run smoke "$parallel" "${PROCS:-8}" "$(cat "${smoke[@]}" | grep -v '^#' | paste -sd'|')"
  go run ./hack/conformancereport --check "$out/smoke.xml"
  exit
fi
run parallel "$parallel" "${PROCS:-10}" "${FOCUS:-}"
xml=("$out/parallel.xml")
if [ "${SERIAL:-1}" != 0 ]; then
  run serial "$serial" 1 "${FOCUS:-}"
  xml+=("$out/serial.xml")
fi
if [ -n "${FOCUS:-}" ]; then
  # A focused run is a partial one: it checks, and writes no docs.
  go run ./hack/conformancereport --check "${xml[@]}"
  exit
fi
go run ./hack/conformancereport --title "$title" --times "$out/times.txt" "${xml[@]}" >"$docs"
echo "conformance: $docs written" >&2
