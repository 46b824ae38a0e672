#!/usr/bin/env bash
# Builds the e2e tests' CSI node plugin (test/csiplugin: csi-test v5's
# driver harness serving a directory-backed driver, with the kubelet's
# plugin-registration service as node-driver-registrar serves it) once per
# machine: the binary is cached under $KUBE_CACHE (default
# ~/.cache/classic-kubelet/csi-plugin-<hash of the module and its source>), and a second call
# returns at once. Prints the binary's path. With --check it builds
# nothing: it prints the path if the binary is there, and otherwise fails.
set -euo pipefail
cd "$(dirname "$0")/../test/csiplugin"
sum=$(cat go.mod go.sum *.go | sha256sum | cut -c1-12)
dir=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/classic-kubelet}/csi-plugin-$sum
out=$dir/csi-plugin
if [ "${1:-}" = --check ]; then
  if [ ! -x "$out" ]; then
    echo "ensure-csi-plugin: not built: $out (hack/ensure-csi-plugin.sh builds it, about 30 s cold)" >&2
    exit 1
  fi
  echo "$out"
  exit 0
fi
if [ ! -x "$out" ]; then
  echo "ensure-csi-plugin: building the CSI plugin (cached in $dir)" >&2
  mkdir -p "$dir"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out.tmp" .
  mv "$out.tmp" "$out"
fi
echo "$out"
