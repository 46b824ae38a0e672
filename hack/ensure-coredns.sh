#!/usr/bin/env bash
# Builds CoreDNS v1.15.0 from the github.com/coredns/coredns module of
# test/coredns (static, with upstream's build tags and flags) and packs it
# as the local image classic-kubelet/coredns:1.15.0, laid out as upstream's
# (FROM scratch here: /coredns with cap_net_bind_service, user 65532,
# entrypoint /coredns). No registry exists here: the image is built on this
# machine, once. The binary is cached under $KUBE_CACHE (default
# ~/.cache/classic-kubelet/coredns-<version>-<go.sum hash>) and the image
# carries its recipe's hash as a label: a second call returns at once, and a
# changed recipe builds it again. Prints the image's name. Cold, about 4
# minutes on 2 cores.
#
# With --check it builds nothing: it prints the image's name if the image of
# this recipe is there, and otherwise fails saying so (the tests use it to
# skip, or fail under CI, at once).
set -euo pipefail
cd "$(dirname "$0")/.."
version=v1.15.0
image=classic-kubelet/coredns:${version#v}
mod=test/coredns
recipe=$(cat "$0" $mod/go.mod $mod/go.sum | sha256sum | cut -c1-12)
sum=$(cat $mod/go.mod $mod/go.sum | sha256sum | cut -c1-12)
dir=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/classic-kubelet}/coredns-$version-$sum
have=$(docker image inspect -f '{{index .Config.Labels "io.classic-kubelet.recipe"}}' "$image" 2>/dev/null || true)
if [ "$have" = "$recipe" ]; then
  echo "$image"
  exit 0
fi
if [ "${1:-}" = --check ]; then
  echo "ensure-coredns: image $image of this recipe ($recipe) is not built (hack/ensure-coredns.sh builds it, about 4 minutes cold)" >&2
  exit 1
fi
mkdir -p "$dir"
if [ ! -x "$dir/coredns" ]; then
  echo "ensure-coredns: building coredns $version (cached in $dir)" >&2
  # As upstream's Makefile: static, grpcnotrace, stripped, the version as
  # its commit.
  (cd $mod && CGO_ENABLED=0 go build -trimpath -tags grpcnotrace \
    -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$version" \
    -o "$dir/coredns.tmp" github.com/coredns/coredns)
  mv "$dir/coredns.tmp" "$dir/coredns"
fi
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$dir/coredns" "$ctx/coredns"
# Upstream's image binds :53 as user 65532 by this file capability (the
# build context's capabilities go into the image with the file). Pods
# running it with allowPrivilegeEscalation: false (kubeadm's) cannot use it,
# and bind by the ip_unprivileged_port_start=0 that Docker sets in every
# network namespace it makes.
if command -v setcap >/dev/null; then
  setcap cap_net_bind_service=+ep "$ctx/coredns"
fi
cat >"$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY coredns /coredns
USER 65532:65532
WORKDIR /
EXPOSE 53 53/udp
LABEL io.classic-kubelet.recipe=$recipe
ENTRYPOINT ["/coredns"]
DOCKERFILE
DOCKER_BUILDKIT=0 docker build -q -t "$image" "$ctx" >/dev/null 2>"$ctx/err" || { cat "$ctx/err" >&2; exit 1; }
echo "$image"
