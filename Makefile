# Targets call scripts in hack/; see README.md.
GO ?= go

PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all build images run cluster test unit e2e bench scale conformance conformance-images install clean

all: build

build:
	$(GO) build -o bin/kubelet ./cmd/kubelet
	CGO_ENABLED=0 $(GO) build -o bin/pause ./cmd/pause

images:
	hack/ensure-docker.sh
	hack/images.sh

# Runs the agent on examples/manifests (Ctrl-C stops it; pods keep running).
run: build images
	hack/run.sh

# A real Kubernetes control plane with the agent as its node (Ctrl-C stops
# it all); prints the KUBECONFIG to export. NODES=n: n nodes, each a machine
# of its own on this host, with CNI, kube-proxy and CoreDNS.
NODES ?= 1
cluster: build images
	NODES=$(NODES) hack/cluster.sh

# Unit and end-to-end tests against the real Docker daemon.
test: images
	hack/ensure-test-deps.sh
	hack/test.sh

unit:
	$(GO) test ./pkg/... ./cmd/...

e2e: images
	hack/ensure-test-deps.sh
	$(GO) test -count=1 ./test/e2e/...

# Benchmarks against the Docker API baseline; writes docs/benchmarks.md.
bench: images
	hack/bench.sh

# Simulated fleets of 100, 500 and 1,000 nodes against one real etcd, then
# the long end-to-end scenarios (a hundred pods, a fleet, a certificate
# rotation);
# writes docs/scale.md (a smoke run of 20 nodes is part of make test).
scale: images
	hack/scale.sh

# Kubernetes' own NodeConformance specs (e2e.test v1.37.2) against the agent
# as the node of a real control plane; writes docs/conformance.md.
# SUITE=conformance: the whole [Conformance] suite against a two-node
# cluster (kube-proxy, CoreDNS); writes docs/conformance-full.md.
SUITE ?= node
conformance:
	SUITE=$(SUITE) hack/conformance.sh

# The images those specs run, built offline under the suite's names.
conformance-images:
	hack/conformance-images.sh

# Installs the agent as classic-kubelet, the pause program beside it (the
# agent builds its infra image from it on a node that lacks the image), the
# systemd unit and, if absent, a config file.
install: build
	hack/install.sh "$(DESTDIR)" "$(PREFIX)"

clean:
	rm -rf bin
