#!/usr/bin/env bash
# Builds rancher's local-path-provisioner (the version test/localpath pins)
# for the e2e tests' StatefulSet, once per machine: the binary is cached
# under $KUBE_CACHE (default ~/.cache/classic-kubelet/local-path-
# provisioner-<hash of go.mod and go.sum>), and a second call returns at
# once. Prints the binary's path. Cold, it takes about a minute on 2 cores.
# With --check it builds nothing: it prints the path if the binary is
# there, and otherwise fails.
set -euo pipefail
cd "$(dirname "$0")/../test/localpath"
sum=$(cat go.mod go.sum | sha256sum | cut -c1-12)
dir=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/classic-kubelet}/local-path-provisioner-$sum
out=$dir/local-path-provisioner
if [ "${1:-}" = --check ]; then
  if [ ! -x "$out" ]; then
    echo "ensure-local-path-provisioner: not built: $out (hack/ensure-local-path-provisioner.sh builds it, about a minute cold)" >&2
    exit 1
  fi
  echo "$out"
  exit 0
fi
if [ ! -x "$out" ]; then
  echo "ensure-local-path-provisioner: building local-path-provisioner (cached in $dir)" >&2
  mkdir -p "$dir"
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out.tmp" github.com/rancher/local-path-provisioner
  mv "$out.tmp" "$out"
fi
echo "$out"
