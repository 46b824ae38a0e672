#!/usr/bin/env bash
# Installs what the end-to-end tests and benchmarks run besides Docker:
# Debian's docker-registry (a real registry the image tests push to, on
# loopback), systemd-analyze (to verify the service unit; systemd need not
# run), and the peers the benchmark measures the agent against: podman (with
# catatonit, from which it builds its pause image) and docker-compose;
# dbus-daemon (a private bus for the graceful node shutdown test); gcc
# for the -race build; Prometheus; etcd's server and etcdctl. Last, the real
# Kubernetes control plane of the node-mode tests: built once per machine
# (about 10 minutes cold), at once when cached; the reference CNI plugins of
# the CNI-mode tests (about a minute cold); CoreDNS's image (about 4 minutes
# cold).
set -euo pipefail
missing=()
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v catatonit >/dev/null 2>&1 || missing+=(catatonit)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
# The -race build of the agent (test/e2e/race_test.go) needs cgo's C toolchain.
command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
# The client tests scrape the agent with a real Prometheus and check its
# exposition with promtool.
command -v prometheus >/dev/null 2>&1 || missing+=(prometheus)
# The fleet test runs a 3-member etcd cluster of real etcd server processes
# (etcdctl reads the keys as an operator would).
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
# The Docker restart test gives its private daemon a bridge of its own.
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
# The two-node clusters' machines: network namespaces, bridges, routes and
# kube-proxy's rules.
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
# The graceful node shutdown test runs a private D-Bus bus (the reference
# dbus-daemon) with a logind stand-in on it.
command -v dbus-daemon >/dev/null 2>&1 || missing+=(dbus-daemon)
if [ ${#missing[@]} -gt 0 ]; then
  echo "ensure-test-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
"$(dirname "$0")/ensure-control-plane.sh" >/dev/null
"$(dirname "$0")/ensure-cni-plugins.sh" >/dev/null
"$(dirname "$0")/ensure-coredns.sh" >/dev/null
"$(dirname "$0")/ensure-sample-device-plugin.sh" >/dev/null
"$(dirname "$0")/ensure-csi-plugin.sh" >/dev/null
"$(dirname "$0")/ensure-local-path-provisioner.sh" >/dev/null
