#!/usr/bin/env bash
# Runs every test: unit tests and the end-to-end tests that start the real
# binary against the real Docker daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
# One package at a time: the end-to-end tests and the benchmark smoke run
# measure time, and must not compete with each other for two cores.
exec go test -p 1 -count=1 -timeout 30m ./... "$@"
