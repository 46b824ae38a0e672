#!/usr/bin/env bash
# Builds every image the project and its tests use, locally (nothing can be
# pulled): the pause image and the test image. Tags are fixed, never latest.
set -euo pipefail
cd "$(dirname "$0")/.."

PAUSE_IMAGE=${PAUSE_IMAGE:-classic-kubelet/pause:1}
TEST_IMAGE=${TEST_IMAGE:-classic-kubelet/testserver:1}
BUSYBOX=${BUSYBOX:-/bin/busybox}

# Debian's busybox-static: a static busybox that runs in a FROM scratch image.
if [ "$BUSYBOX" = /bin/busybox ] && ! dpkg -s busybox-static >/dev/null 2>&1; then
  echo "images: installing busybox-static" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
fi

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

# docker build sends the context; the legacy builder needs no buildx plugin.
export DOCKER_BUILDKIT=0

mkdir -p "$ctx/pause"
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/pause/pause" ./cmd/pause
cat >"$ctx/pause/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY pause /pause
ENTRYPOINT ["/pause"]
DOCKERFILE
docker build -q -t "$PAUSE_IMAGE" "$ctx/pause" >/dev/null 2>"$ctx/err" || { cat "$ctx/err" >&2; exit 1; }
echo "built $PAUSE_IMAGE"

mkdir -p "$ctx/test"
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/test/testserver" ./test/images/testserver
cp "$BUSYBOX" "$ctx/test/busybox"
cat >"$ctx/test/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/mkdir", "-p", "/tmp", "/etc", "/root", "/var/log"]
RUN ["/bin/sh", "-c", "echo 'root:x:0:0:root:/root:/bin/sh' > /etc/passwd && echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >> /etc/passwd && echo 'root:x:0:' > /etc/group && echo 'nogroup:x:65534:' >> /etc/group"]
COPY testserver /testserver
CMD ["/testserver"]
DOCKERFILE
docker build -q -t "$TEST_IMAGE" "$ctx/test" >/dev/null 2>"$ctx/err" || { cat "$ctx/err" >&2; exit 1; }
echo "built $TEST_IMAGE"
