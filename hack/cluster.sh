#!/usr/bin/env bash
# Runs a real Kubernetes v1.37.2 control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) with agents as its nodes, in the
# foreground: it prints the KUBECONFIG to export, and Ctrl-C stops
# everything it started and removes what it made on this host.
#
#   NODES=1 (default): the agent as the one node, named after this host, on
#     Docker's bridge address, its pods on Docker's bridge, as before.
#   NODES=n (n > 1), or NETWORK=cni: every node a machine of its own on this
#     host (a network namespace with an address on a LAN bridge), the agents
#     in CNI mode on the nodes' podCIDRs, kube-proxy on every machine and
#     CoreDNS as the kube-dns Service at 10.96.0.10 (docs/kubernetes.md).
#
# The control plane's binaries (and kube-proxy), the CNI plugins and the
# CoreDNS image are built once per machine (about 10 minutes cold; cached
# afterwards). Flags go to test/cluster/cmd/cluster; flags after `--` to the
# agents.
set -euo pipefail
cd "$(dirname "$0")/.."
nodes=${NODES:-1}
network=${NETWORK:-}
[ -z "$network" ] && { [ "$nodes" -gt 1 ] && network=cni || network=docker; }
hack/ensure-docker.sh
hack/ensure-test-deps.sh # etcd-server, iproute2, iptables, the control plane, CNI plugins, CoreDNS
bin=$(hack/ensure-control-plane.sh)
args=(--nodes "$nodes" --network "$network")
if [ "$network" = cni ]; then
  args+=(--cni-bin-dir "$(hack/ensure-cni-plugins.sh)" --coredns-image "$(hack/ensure-coredns.sh)")
fi
go build -o bin/cluster ./test/cluster/cmd/cluster
exec bin/cluster --bin-dir "$bin" --agent bin/kubelet "${args[@]}" "$@"
