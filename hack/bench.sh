#!/usr/bin/env bash
# Runs the full benchmark (hours: see README.md) against the Docker API baseline
# and the peers (podman kube play, docker-compose up); results go to
# docs/benchmarks.md and docs/benchmarks.json.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/ensure-docker.sh
hack/ensure-test-deps.sh
go test -count=1 -timeout 8h -run TestBench -v ./test/bench -full
# An idle node's cost to the real API server (not in make test).
CI=true exec go test -count=1 -timeout 20m -run '^TestNodeIdleCostsTheAPIServerLittle$' -v ./test/e2e
