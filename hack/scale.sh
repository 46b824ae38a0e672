#!/usr/bin/env bash
# Simulates 100, 500 and 1,000 nodes against one real etcd (no Docker) and
# writes docs/scale.md. About 15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/ensure-test-deps.sh
ulimit -n 65536 || true
go test -count=1 -timeout 60m -run TestScale -v ./test/scale \
  -nodes "${NODES:-100,500,1000}" -measure 30s -idle 30s -report "$PWD/docs/scale.md"
# The end-to-end scale scenarios against real Docker (not in make test):
# a hundred API pods bound at once, three agents on a 3-member etcd, and a
# client certificate rotated past its expiry (4 minutes of its lifetime).
CI=true exec go test -count=1 -timeout 20m -run '^(TestNodeHundredPodsAtOnce|TestFleet|TestCertificateRotation)$' -v ./test/e2e
