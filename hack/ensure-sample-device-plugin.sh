#!/usr/bin/env bash
# Builds Kubernetes' sample device plugin (test/images/sample-device-plugin
# of k8s.io/kubernetes v1.37.2: two devices of example.com/resource, each
# allocated as a bind mount of /tmp/<device>) from the module of
# test/deviceplugin, once per machine: the binary is cached under
# $KUBE_CACHE (default ~/.cache/classic-kubelet/sample-device-plugin-
# <version>-<go.sum hash>), and a second call returns at once. Prints the
# binary's path. Cold, it takes about 40 s on 2 cores (the module cache of
# the control plane's build serves most of it). With --check it builds
# nothing: it prints the path if the binary is there, and otherwise fails.
set -euo pipefail
cd "$(dirname "$0")/../test/deviceplugin"
version=v1.37.2
sum=$(cat go.mod go.sum | sha256sum | cut -c1-12)
dir=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/classic-kubelet}/sample-device-plugin-$version-$sum
out=$dir/sample-device-plugin
if [ "${1:-}" = --check ]; then
  if [ ! -x "$out" ]; then
    echo "ensure-sample-device-plugin: not built: $out (hack/ensure-sample-device-plugin.sh builds it, about 40 s cold)" >&2
    exit 1
  fi
  echo "$out"
  exit 0
fi
if [ ! -x "$out" ]; then
  echo "ensure-sample-device-plugin: building the sample device plugin $version (cached in $dir)" >&2
  mkdir -p "$dir"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out.tmp" k8s.io/kubernetes/test/images/sample-device-plugin
  mv "$out.tmp" "$out"
fi
echo "$out"
