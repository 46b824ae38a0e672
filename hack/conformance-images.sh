#!/usr/bin/env bash
# Builds, into the machine's Docker, every image Kubernetes' NodeConformance
# specs run, under the exact names and tags of the suite's image manifest
# (k8s.io/kubernetes v1.37.2, test/utils/image/manifest.go): nothing can be
# pulled here. agnhost and nonewprivs' nnp are built from the module's own
# sources (test/conformance pins them); busybox 1.37.0 is built from
# Debian's source package (as upstream's: see busybox() below); the others are stand-ins with the behaviour
# the specs rely on (docs/conformance.md says which). Binaries are cached
# beside the control plane's; a second run only re-tags. With --ginkgo it
# builds nothing but the ginkgo command, and prints its path.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/ensure-docker.sh
need=()
for tool in gcc make patch bzip2 xz curl; do command -v $tool >/dev/null || need+=($tool); done
[ -e /usr/lib/x86_64-linux-gnu/libc.a ] || need+=(libc6-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "conformance-images: installing ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]/xz/xz-utils}" >/dev/null
fi

mod=test/conformance
sum=$(cat $mod/go.mod $mod/go.sum | sha256sum | cut -c1-12)
root=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/classic-kubelet}
cache=$root/conformance-$sum
bbcache=$root/busybox-1.37.0-6 # its recipe below, not test/conformance's modules
mkdir -p "$cache" "$bbcache"
gobuild() { # name package
  [ -x "$cache/$1" ] && return 0
  echo "conformance-images: building $1 (cached in $cache)" >&2
  (cd $mod && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$cache/$1.tmp" "$2")
  mv "$cache/$1.tmp" "$cache/$1"
}
# busybox 1.37.0, static, from Debian's source package: upstream's source
# with Debian's static configuration and its build fix for current kernel
# headers, without Debian's patch that drops environment variables whose
# names are not shell identifiers (data-1, which envFrom sets) as ash
# starts, for its installer. The suite's busybox (docker-library's,
# upstream's ash) keeps them, and the ConfigMap and Secret "via the
# environment" specs print them with sh -c env; other specs compare ash's
# own messages, so no other shell will do.
busybox() {
  [ -x "$bbcache/busybox" ] && return 0
  echo "conformance-images: building busybox 1.37.0 (cached in $bbcache)" >&2
  local b pool=http://deb.debian.org/debian/pool/main/b/busybox
  b=$(mktemp -d)
  (cd "$b" &&
    curl -fsSLO $pool/busybox_1.37.0.orig.tar.bz2 && curl -fsSLO $pool/busybox_1.37.0-6.debian.tar.xz &&
    sha256sum -c --quiet <<SUMS &&
3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4  busybox_1.37.0.orig.tar.bz2
10b2cd64b41c26ae134e1cd6135b68575bbe79356c20985f35e32f32a1746c34  busybox_1.37.0-6.debian.tar.xz
SUMS
    tar xjf busybox_1.37.0.orig.tar.bz2 && tar xJf busybox_1.37.0-6.debian.tar.xz &&
    cd busybox-1.37.0 && patch -p1 -s <../debian/patches/busybox-1.36.1-no-cbq.patch &&
    cp ../debian/config/pkg/static .config && { (set +o pipefail; yes "" | make -s oldconfig >/dev/null 2>&1); } &&
    make -s -j"$(nproc)" >"$b/build.log" 2>&1 && cp busybox "$bbcache/busybox.tmp") ||
    { cat "$b/build.log" >&2 2>/dev/null; rm -rf "$b"; echo "conformance-images: busybox build failed" >&2; exit 1; }
  rm -rf "$b"
  mv "$bbcache/busybox.tmp" "$bbcache/busybox"
}
if [ "${1:-}" = --ginkgo ]; then # hack/conformance.sh: the ginkgo command, built once
  gobuild ginkgo github.com/onsi/ginkgo/v2/ginkgo
  echo "$cache/ginkgo"
  exit 0
fi
gobuild agnhost k8s.io/kubernetes/test/images/agnhost
gobuild nnp k8s.io/kubernetes/test/images/nonewprivs
busybox
src=$(cd $mod && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/test/images

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
export DOCKER_BUILDKIT=0
build() { # tag dir
  docker build -q -t "$1" "$2" >/dev/null 2>"$ctx/err" || { cat "$ctx/err" >&2; exit 1; }
  echo "built $1"
}
e2e=registry.k8s.io/e2e-test-images

# busybox: the static busybox built above with its applets, and the users
# and groups a minimal image has.
mkdir -p "$ctx/busybox"
cp "$bbcache/busybox" "$ctx/busybox/busybox"
cat >"$ctx/busybox/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
RUN ["/bin/sh", "-c", "mkdir -p /tmp /etc /root /var/log /usr/bin /usr/sbin /sbin && chmod 1777 /tmp && printf 'root:x:0:0:root:/root:/bin/sh\\nnobody:x:65534:65534:nobody:/:/bin/sh\\n' > /etc/passwd && printf 'root:x:0:\\nnogroup:x:65534:\\n' > /etc/group && echo 127.0.0.1 localhost > /etc/hosts"]
CMD ["sh"]
DOCKERFILE
build $e2e/busybox:1.37.0-2 "$ctx/busybox"

# agnhost: the module's agnhost on busybox, laid out as upstream's image
# (/agnhost, /agnhost-2, /uploads, porter's certificate, the user and group
# "defined in image" the supplemental-groups specs look for).
mkdir -p "$ctx/agnhost/root"
cp "$cache/agnhost" "$src/agnhost/porter/localhost.crt" "$src/agnhost/porter/localhost.key" "$ctx/agnhost/"
# Upstream's image has curl, bash and OpenBSD's netcat (the networking specs
# dial through curl and nc -u, some specs script in bash): the machine's go
# in with the shared libraries they link, nc before busybox's in PATH. Its
# shell runs commands by PATH, as Alpine's busybox does: Debian's static
# busybox prefers its own applets (its nc has no -u), so the shell here is
# Debian's dynamic busybox (fetched, not installed: it conflicts with
# busybox-static).
(cd "$ctx" && apt-get download busybox >/dev/null 2>&1 || { apt-get update -qq && apt-get download busybox >/dev/null; })
dpkg-deb -x "$ctx"/busybox_*.deb "$ctx/busybox-dyn"
# The DNS specs' probers run dig (+search, over UDP and TCP) and getent
# hosts, as upstream's agnhost (Alpine's bind-tools and musl's getent) has
# them: Debian's dig and glibc's getent go in too, with an nsswitch.conf
# that reads /etc/hosts before DNS, as musl does.
missing=()
[ -x /usr/bin/curl ] || missing+=(curl)
[ -x /bin/nc.openbsd ] || missing+=(netcat-openbsd)
[ -x /usr/bin/dig ] || missing+=(bind9-dnsutils)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
mkdir -p "$ctx/agnhost/root/etc"
printf 'hosts: files dns\n' >"$ctx/agnhost/root/etc/nsswitch.conf"
for pair in "$ctx/busybox-dyn/bin/busybox:/bin/busybox" /usr/bin/curl:/usr/bin/curl /bin/bash:/bin/bash /bin/nc.openbsd:/usr/bin/nc \
  /usr/bin/dig:/usr/bin/dig /usr/bin/getent:/usr/bin/getent; do
  bin=${pair%%:*} dst=${pair#*:}
  mkdir -p "$ctx/agnhost/root$(dirname "$dst")" && cp -L "$bin" "$ctx/agnhost/root$dst"
  for f in $(ldd "$bin" | grep -o '/[^ ]*'); do
    mkdir -p "$ctx/agnhost/root$(dirname "$f")" && cp -L "$f" "$ctx/agnhost/root$f"
  done
done
cat >"$ctx/agnhost/Dockerfile" <<DOCKERFILE
FROM $e2e/busybox:1.37.0-2
RUN ["/bin/sh", "-c", "mkdir /uploads && echo 'user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh' >> /etc/passwd && printf 'user-defined-in-image:x:1000:\\\\ngroup-defined-in-image:x:50000:user-defined-in-image\\\\n' >> /etc/group"]
COPY localhost.crt localhost.key /
COPY root /
COPY agnhost /agnhost
RUN ["/bin/ln", "-s", "agnhost", "/agnhost-2"]
ENTRYPOINT ["/agnhost"]
CMD ["pause"]
DOCKERFILE
build $e2e/agnhost:2.66.1 "$ctx/agnhost"
# The previous agnhost (the suite's AgnhostPrev, 2.55), which the
# StatefulSet specs start from and roll away from (a stand-in: the same
# build under the older tag; those specs compare image names, and run it
# as they run the current one).
docker tag $e2e/agnhost:2.66.1 $e2e/agnhost:2.55 && echo "built $e2e/agnhost:2.55"

# kitten and nautilus: agnhost's test-webserver serving a file of its own.
for img in kitten nautilus; do
  mkdir -p "$ctx/$img"
  cp "$src/$img/html/data.json" "$ctx/$img/"
  printf 'FROM %s/agnhost:2.66.1\nCOPY data.json /data.json\nCMD ["test-webserver"]\n' $e2e >"$ctx/$img/Dockerfile"
  build $e2e/$img:1.8 "$ctx/$img"
done

# nginx (a stand-in): busybox's httpd serving an index page on port 80, as
# the specs that run nginx only need a server that stays up there.
mkdir -p "$ctx/nginx"
cat >"$ctx/nginx/Dockerfile" <<DOCKERFILE
FROM $e2e/busybox:1.37.0-2
RUN ["/bin/sh", "-c", "mkdir -p /usr/share/nginx/html && echo '<h1>Welcome to nginx!</h1>' > /usr/share/nginx/html/index.html"]
EXPOSE 80
CMD ["httpd", "-f", "-p", "80", "-h", "/usr/share/nginx/html"]
DOCKERFILE
build $e2e/nginx:1.27.0-2 "$ctx/nginx"
docker tag $e2e/nginx:1.27.0-2 $e2e/nginx:1.28.0-2 && echo "built $e2e/nginx:1.28.0-2"

# nonroot: busybox running as uid 1234, as upstream's.
mkdir -p "$ctx/nonroot"
printf 'FROM %s/busybox:1.37.0-2\nUSER 1234\n' $e2e >"$ctx/nonroot/Dockerfile"
build $e2e/nonroot:1.5 "$ctx/nonroot"

# nonewprivs: the module's nnp, setuid root, printing its effective uid.
mkdir -p "$ctx/nonewprivs"
cp "$cache/nnp" "$ctx/nonewprivs/"
printf 'FROM %s/busybox:1.37.0-2\nCOPY nnp /usr/local/bin/nnp\nRUN ["/bin/chmod", "+s", "/usr/local/bin/nnp"]\nCMD ["nnp"]\n' $e2e >"$ctx/nonewprivs/Dockerfile"
build $e2e/nonewprivs:1.4 "$ctx/nonewprivs"

# glibc-dns-testing (a stand-in): the specs that run it read the hostname
# (hostname, hostname -f), which busybox answers, and the DNS specs' glibc
# prober runs dig and getent hosts (glibc's): busybox with agnhost's tools
# (its shell stays the suite's busybox).
mkdir -p "$ctx/glibc-dns-testing"
cp -a "$ctx/agnhost/root" "$ctx/glibc-dns-testing/root" && rm "$ctx/glibc-dns-testing/root/bin/busybox"
printf 'FROM %s/busybox:1.37.0-2\nCOPY root /\n' $e2e >"$ctx/glibc-dns-testing/Dockerfile"
build $e2e/glibc-dns-testing:2.1.1 "$ctx/glibc-dns-testing"

# pause: the project's pause program, under the suite's name.
mkdir -p "$ctx/pause"
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$ctx/pause/pause" ./cmd/pause
printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$ctx/pause/Dockerfile"
build registry.k8s.io/pause:3.10.2 "$ctx/pause"
