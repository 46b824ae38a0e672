#!/usr/bin/env bash
# Builds the reference CNI plugins the CNI-mode tests and `make cluster` run
# — bridge, host-local, portmap, loopback, bandwidth, firewall — from the
# github.com/containernetworking/plugins module of test/cniplugins, once per
# machine: they are cached under $CNI_CACHE (default
# ~/.cache/classic-kubelet/cni-plugins-<version>-<go.sum hash>), and a second
# call returns at once. Prints the bin directory (what --cni-bin-dir takes).
# Cold, the six plugins take about a minute on 2 cores. With --check it
# builds nothing: it prints the bin directory if the six plugins are there,
# and otherwise names the missing ones and fails (the tests use it to skip,
# or fail under CI, at once).
set -euo pipefail
cd "$(dirname "$0")/../test/cniplugins"
version=v1.10.0
sum=$(cat go.mod go.sum | sha256sum | cut -c1-12)
dir=${CNI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/classic-kubelet/cni-plugins-$version-$sum}
# firewall: Docker's FORWARD policy is DROP, and bridged pod traffic goes
# through FORWARD (br_netfilter); the firewall plugin accepts the pods'.
plugins=(bridge host-local portmap loopback bandwidth firewall)
if [ "${1:-}" = --check ]; then
  missing=()
  for p in "${plugins[@]}"; do
    [ -x "$dir/bin/$p" ] || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "ensure-cni-plugins: not built: ${missing[*]} (in $dir/bin; hack/ensure-cni-plugins.sh builds them, about a minute cold)" >&2
    exit 1
  fi
  echo "$dir/bin"
  exit 0
fi
mkdir -p "$dir/bin"
pkg() { # plugin name -> its package in the module
  case $1 in
    host-local) echo github.com/containernetworking/plugins/plugins/ipam/host-local ;;
    bridge | loopback) echo "github.com/containernetworking/plugins/plugins/main/$1" ;;
    portmap | bandwidth | firewall) echo "github.com/containernetworking/plugins/plugins/meta/$1" ;;
  esac
}
for p in "${plugins[@]}"; do
  out="$dir/bin/$p"
  [ -x "$out" ] && continue
  echo "ensure-cni-plugins: building $p $version (cached in $dir)" >&2
  # The version the plugins report (CNI's VERSION command and --version).
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$version" \
    -o "$out.tmp" "$(pkg "$p")"
  mv "$out.tmp" "$out"
done
echo "$dir/bin"
