#!/usr/bin/env bash
# Installs what the end-to-end tests run besides Docker: Debian's
# docker-registry (a real registry the image tests push to, on loopback).
set -euo pipefail
if ! command -v docker-registry >/dev/null 2>&1; then
  echo "ensure-test-deps: installing docker-registry" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker-registry >/dev/null
fi
