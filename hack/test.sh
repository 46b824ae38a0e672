#!/usr/bin/env bash
# Runs every test: unit tests and the end-to-end tests that start the real
# binary against the real Docker daemon.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -count=1 -timeout 20m ./... "$@"
