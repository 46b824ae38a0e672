#!/usr/bin/env bash
# Makes a Docker daemon available: installs Debian's docker.io if there is no
# dockerd, and starts dockerd in the background if `docker info` fails (these
# machines have no systemd).
set -euo pipefail

if docker info >/dev/null 2>&1; then
  exit 0
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "ensure-docker: installing docker.io" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  echo "ensure-docker: starting dockerd" >&2
  nohup dockerd >/var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && exit 0
    sleep 1
  done
  echo "ensure-docker: dockerd did not come up; see /var/log/dockerd.log" >&2
  tail -20 /var/log/dockerd.log >&2 || true
  exit 1
fi
