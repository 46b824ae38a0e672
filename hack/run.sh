#!/usr/bin/env bash
# Runs the agent in the foreground on examples/manifests, with its state in
# a directory of its own so it never mixes with another agent's.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bin/kubelet \
  --pod-manifest-path "${MANIFESTS:-examples/manifests}" \
  --root-dir "${ROOT_DIR:-/var/lib/classic-kubelet}" \
  -v "${V:-1}" "$@"
