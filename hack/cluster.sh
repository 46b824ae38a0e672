#!/usr/bin/env bash
# Runs a real Kubernetes v1.37.2 control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) with the agent as its one node,
# named after this host, on Docker's bridge address, in the foreground:
# it prints the KUBECONFIG to export, and Ctrl-C stops everything it
# started (the node's containers too). The control plane's binaries are
# built once per machine (about 10 minutes cold; cached afterwards). Flags
# go to test/cluster/cmd/cluster; flags after `--` to the agent.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/ensure-docker.sh
hack/ensure-test-deps.sh # etcd-server
bin=$(hack/ensure-control-plane.sh)
go build -o bin/cluster ./test/cluster/cmd/cluster
exec bin/cluster --bin-dir "$bin" --agent bin/kubelet "$@"
