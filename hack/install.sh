#!/usr/bin/env bash
# Installs the built agent: install.sh DESTDIR PREFIX (make install).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-}
prefix=${2:-/usr/local}
install -D -m 0755 bin/kubelet "$dest$prefix/bin/classic-kubelet"
install -D -m 0755 bin/pause "$dest$prefix/bin/classic-kubelet-pause"
unit=$(mktemp)
trap 'rm -f "$unit"' EXIT
sed "s|/usr/local/bin/|$prefix/bin/|" examples/systemd/classic-kubelet.service >"$unit"
install -D -m 0644 "$unit" "$dest/etc/systemd/system/classic-kubelet.service"
if [ ! -e "$dest/etc/classic-kubelet/config.yaml" ]; then
  install -D -m 0644 examples/kubelet-config.yaml "$dest/etc/classic-kubelet/config.yaml"
fi
install -d -m 0755 "$dest/etc/classic-kubelet/manifests"
echo "installed into ${dest:-/}: $prefix/bin/classic-kubelet, $prefix/bin/classic-kubelet-pause, /etc/systemd/system/classic-kubelet.service"
