#!/usr/bin/env bash
# Builds the real Kubernetes control plane the node-mode tests run against —
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl (and, with
# E2E=1, Kubernetes' e2e.test) — from the k8s.io/kubernetes module of
# test/controlplane, once per machine: the binaries are cached under
# $KUBE_CACHE (default ~/.cache/classic-kubelet/kubernetes-<version>-<go.sum
# hash>), and a second call returns at once. Prints the bin directory. It
# also holds kube-proxy (the multi-node clusters'), built from the same
# release in a module of its own, test/kubeproxy, and cached under that
# module's hash (kube-proxy-<version>-<hash>): adding it to test/controlplane
# would have changed that module's hash, and every machine would have built
# the control plane again.
# Cold, the four binaries take about 10 minutes on 2 cores (linking
# kube-apiserver peaks near 3 GiB). With --check it builds nothing: it prints
# the bin directory if the four binaries are there, and otherwise names the
# missing ones and fails (the tests use it to skip, or fail under CI, at once).
set -euo pipefail
cd "$(dirname "$0")/../test/controlplane"
version=v1.37.2
sum=$(cat go.mod go.sum | sha256sum | cut -c1-12)
dir=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/classic-kubelet/kubernetes-$version-$sum}
if [ "${1:-}" = --check ]; then
  missing=()
  for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$dir/bin/$b" ] || missing+=("$b")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "ensure-control-plane: not built: ${missing[*]} (in $dir/bin; hack/ensure-control-plane.sh builds them, about 10 minutes cold)" >&2
    exit 1
  fi
  echo "$dir/bin"
  exit 0
fi
mkdir -p "$dir/bin"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 -X k8s.io/component-base/version.gitTreeState=clean"
ldflags="$ldflags -X k8s.io/client-go/pkg/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=37"
build() { # name package [test]
  local out="$dir/bin/$1"
  [ -x "$out" ] && return 0
  echo "ensure-control-plane: building $1 $version (cached in $dir)" >&2
  if [ "${3:-}" = test ]; then
    CGO_ENABLED=0 go test -c -ldflags "$ldflags" -o "$out.tmp" "$2"
  else
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$2"
  fi
  mv "$out.tmp" "$out"
}
# One at a time: two links of this size at once would need twice the memory.
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kubectl k8s.io/kubernetes/cmd/kubectl
proxysum=$(cat ../kubeproxy/go.mod ../kubeproxy/go.sum | sha256sum | cut -c1-12)
proxydir=$(dirname "$dir")/kube-proxy-$version-$proxysum
if [ ! -x "$proxydir/kube-proxy" ]; then
  echo "ensure-control-plane: building kube-proxy $version (cached in $proxydir)" >&2
  mkdir -p "$proxydir"
  (cd ../kubeproxy && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$proxydir/kube-proxy.tmp" k8s.io/kubernetes/cmd/kube-proxy)
  mv "$proxydir/kube-proxy.tmp" "$proxydir/kube-proxy"
fi
ln -sfn "$proxydir/kube-proxy" "$dir/bin/kube-proxy"
if [ "${E2E:-}" = 1 ]; then
  build e2e.test k8s.io/kubernetes/test/e2e test
fi
echo "$dir/bin"
