#!/usr/bin/env bash
# Runs the full benchmark (about 10 minutes); results go to docs/benchmarks.md
# and docs/benchmarks.json.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -count=1 -timeout 30m -run TestBench -v ./test/bench -full
