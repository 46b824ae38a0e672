#!/usr/bin/env bash
# Installs what the end-to-end tests run besides Docker: Debian's
# docker-registry (a real registry the image tests push to, on loopback) and
# systemd-analyze (to verify the service unit; systemd need not run).
set -euo pipefail
missing=()
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
if [ ${#missing[@]} -gt 0 ]; then
  echo "ensure-test-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
