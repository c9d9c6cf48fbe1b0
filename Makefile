# packline Makefile. Everything it needs is built from the Go module proxy into
# a cache folder outside the clone (CACHE), so a fresh clone on the same machine
# reuses it.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

CACHE ?= $(or $(PACKLINE_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/packline)
export PACKLINE_CACHE := $(CACHE)
TOOLS := $(CACHE)/bin

CONTROLLER_GEN_VERSION ?= v0.21.0
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
K8S_VERSION ?= 1.36.3
export K8S_VERSION

GO_TEST_FLAGS ?=

.PHONY: all
all: build

##@ Development

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS)
	@echo "installing controller-gen $(CONTROLLER_GEN_VERSION) into $(TOOLS)"
	GOBIN=$(TOOLS)/tmp go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS)/tmp/controller-gen $(CONTROLLER_GEN) && rmdir $(TOOLS)/tmp

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Write CRDs and RBAC from the API markers.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=packline-manager webhook paths=./controllers/... output:rbac:artifacts:config=config/rbac output:webhook:artifacts:config=config/webhook

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Write deepcopy code.
	$(CONTROLLER_GEN) object paths=./api/...

# crd-ref-docs writes docs/reference/api.md from the types; docsgen writes
# the reasons and flags tables from the code (test/docs).
API_DOCS_CONFIG := test/tools/crd-ref-docs.yaml

.PHONY: docs
docs: ## Write the generated reference: docs/reference/api.md (crd-ref-docs); reasons, labels, metrics and flags tables (test/tools/docsgen).
	"$$(test/tools/crd-ref-docs.sh)" --log-level=WARN --source-path=./api/v1alpha1 --config=$(API_DOCS_CONFIG) \
		--renderer=markdown --output-path=docs/reference/api.md
	go run ./test/tools/docsgen

.PHONY: verify-generated
verify-generated: manifests generate docs ## Fail when generated files differ from what is committed.
	@git diff --exit-code -- api config docs/reference || { echo "generated files are stale: run 'make manifests generate docs' and commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- api config docs/reference); \
		if [ -n "$$untracked" ]; then echo "generated files are not committed:"; echo "$$untracked"; exit 1; fi

.PHONY: build
build: ## Build the manager and worker binaries into bin/.
	CGO_ENABLED=0 go build -trimpath -o bin/ ./cmd/...

.PHONY: k8s-assets
k8s-assets: ## Build or reuse kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kubectl and etcd in the cache.
	@test/tools/k8s-assets.sh >/dev/null

.PHONY: registry
registry: ## Build or reuse the distribution v3 registry in the cache.
	@test/tools/registry.sh >/dev/null

.PHONY: flux
flux: ## Build or reuse Flux's source-controller and kustomize-controller (and their CRDs) in the cache.
	@test/tools/flux.sh >/dev/null

.PHONY: kueue
kueue: ## Build or reuse Kueue's manager (v0.17.0) and its CRDs and webhook manifests in the cache.
	@test/tools/kueue.sh >/dev/null

.PHONY: cosign
cosign: ## Build or reuse the cosign CLI in the cache (the signing tests verify with it).
	@test/tools/cosign.sh >/dev/null

.PHONY: node-assets
node-assets: ## Build or reuse kubelet, kube-scheduler, containerd and the CNI plugins in the cache, and install runc: the sandbox's real node.
	@test/tools/kube-node.sh >/dev/null
	@test/tools/containerd.sh >/dev/null
	@test/tools/cni.sh >/dev/null
	@test/tools/runc.sh >/dev/null

# The real node's binaries, for the sandbox (see test/sandbox/realnode.go).
NODE_ENV = PACKLINE_KUBE_NODE_DIR="$$(test/tools/kube-node.sh)" PACKLINE_CONTAINERD_DIR="$$(test/tools/containerd.sh)" \
	PACKLINE_CNI_DIR="$$(test/tools/cni.sh)" PACKLINE_RUNC_BIN="$$(test/tools/runc.sh)"

##@ Images

IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
# REGISTRY=127.0.0.1:5000/packline pushes <REGISTRY>/manager and /worker
# (add PLAIN_HTTP=1 for a registry without TLS); unset, the images go to the
# OCI layout dist/oci. IMAGE_FLAGS passes more flags (--tag, --version).
REGISTRY ?=
PLAIN_HTTP ?=
IMAGE_FLAGS ?=

.PHONY: images
images: ## Build the manager and worker images without a daemon (OCI layout in dist/oci, or push to REGISTRY).
	go run ./images/build --platforms $(IMAGE_PLATFORMS) \
		$(if $(REGISTRY),--push $(REGISTRY) $(if $(PLAIN_HTTP),--plain-http),--oci-layout dist/oci) $(IMAGE_FLAGS)

##@ Tests

.PHONY: test
test: k8s-assets registry flux cosign kueue ## Run the whole test suite against a real apiserver and registry.
	KUBEBUILDER_ASSETS="$$(test/tools/k8s-assets.sh)" PACKLINE_REGISTRY_BIN="$$(test/tools/registry.sh)" PACKLINE_FLUX_DIR="$$(test/tools/flux.sh)" PACKLINE_COSIGN_BIN="$$(test/tools/cosign.sh)" PACKLINE_KUEUE_DIR="$$(test/tools/kueue.sh)" \
		go test $(GO_TEST_FLAGS) -count=1 -timeout 45m ./...

# The packages whose tests need no API server (the real registry and Git
# server still run, on loopback): a fast inner loop. make test runs them too.
UNIT_PKGS := ./jobs/... ./cmd/worker ./cmd/kubectl-packline/... ./controllers/pipeline ./controllers/claims ./controllers/entitlement

.PHONY: unit
unit: registry cosign ## Run the tests that need no API server (worker, pipeline builders, rules).
	PACKLINE_REGISTRY_BIN="$$(test/tools/registry.sh)" PACKLINE_COSIGN_BIN="$$(test/tools/cosign.sh)" go test $(GO_TEST_FLAGS) -count=1 $(UNIT_PKGS)

# Tests gated by PACKLINE_SLOW=1, too slow for every make test: the
# multi-architecture image build (make test builds the host's platform only).
SLOW_PKGS := ./images/imagebuild

.PHONY: test-slow
test-slow: registry ## Run the slow tests (PACKLINE_SLOW=1): the amd64+arm64 image build. CI runs it.
	PACKLINE_SLOW=1 PACKLINE_REGISTRY_BIN="$$(test/tools/registry.sh)" \
		go test $(GO_TEST_FLAGS) -count=1 -timeout 45m $(SLOW_PKGS)

.PHONY: bench
bench: k8s-assets registry flux cosign kueue ## Run the benchmarks; they print ratios against baselines measured in the same run.
	KUBEBUILDER_ASSETS="$$(test/tools/k8s-assets.sh)" PACKLINE_REGISTRY_BIN="$$(test/tools/registry.sh)" PACKLINE_FLUX_DIR="$$(test/tools/flux.sh)" PACKLINE_COSIGN_BIN="$$(test/tools/cosign.sh)" PACKLINE_KUEUE_DIR="$$(test/tools/kueue.sh)" \
		go test -run '^$$' -bench . -benchtime 1x -timeout 60m ./...

# NODE=real runs the pods in containers: kubelet, containerd, runc, CNI
# (make node-assets); empty, on the process node.
NODE ?=

# The demo's kubeconfig, at a fixed path so a second terminal finds it
# (docs/tutorials); removed when the demo stops.
DEMO_KUBECONFIG ?= $(CURDIR)/bin/demo.kubeconfig

.PHONY: demo
demo: build k8s-assets registry flux $(if $(filter real,$(NODE)),node-assets) ## Run the local sandbox, apply config/samples, pull the digests back; DEMO_FLAGS=--once exits after, NODE=real runs a real node.
	KUBEBUILDER_ASSETS="$$(test/tools/k8s-assets.sh)" PACKLINE_REGISTRY_BIN="$$(test/tools/registry.sh)" PACKLINE_FLUX_DIR="$$(test/tools/flux.sh)" \
		$(if $(filter real,$(NODE)),$(NODE_ENV)) \
		bin/sandbox --manager-bin bin/manager --worker-bin bin/worker --write-kubeconfig=$(DEMO_KUBECONFIG) $(if $(NODE),--node=$(NODE)) $(DEMO_FLAGS)

.PHONY: test-node
test-node: k8s-assets registry flux node-assets ## Run the real-node tests (test/realnode): pods in containers under a kubelet, containerd and runc. Needs root.
	PACKLINE_REAL_NODE=1 KUBEBUILDER_ASSETS="$$(test/tools/k8s-assets.sh)" PACKLINE_REGISTRY_BIN="$$(test/tools/registry.sh)" PACKLINE_FLUX_DIR="$$(test/tools/flux.sh)" $(NODE_ENV) \
		go test $(GO_TEST_FLAGS) -p 1 -count=1 -timeout 20m -v ./test/realnode/...

.PHONY: e2e
e2e: k8s-assets registry flux cosign ## Run only the end-to-end suite on the sandbox (also part of `make test`).
	KUBEBUILDER_ASSETS="$$(test/tools/k8s-assets.sh)" PACKLINE_REGISTRY_BIN="$$(test/tools/registry.sh)" PACKLINE_FLUX_DIR="$$(test/tools/flux.sh)" PACKLINE_COSIGN_BIN="$$(test/tools/cosign.sh)" \
		go test $(GO_TEST_FLAGS) -count=1 -timeout 15m ./test/e2e

.PHONY: tutorials
tutorials: k8s-assets ## Run every command of docs/tutorials on make demo, with a real kubectl and the plugin (test/tutorial; also part of `make test`).
	KUBEBUILDER_ASSETS="$$(test/tools/k8s-assets.sh)" go test $(GO_TEST_FLAGS) -count=1 -timeout 20m ./test/tutorial

.PHONY: e2e-kueue
e2e-kueue: k8s-assets registry flux kueue ## Run the queueing tests on the sandbox with real Kueue (test/e2e/kueue; also part of `make test`).
	KUBEBUILDER_ASSETS="$$(test/tools/k8s-assets.sh)" PACKLINE_REGISTRY_BIN="$$(test/tools/registry.sh)" PACKLINE_FLUX_DIR="$$(test/tools/flux.sh)" PACKLINE_KUEUE_DIR="$$(test/tools/kueue.sh)" \
		go test $(GO_TEST_FLAGS) -count=1 -timeout 20m ./test/e2e/kueue

.PHONY: e2e-multikueue
e2e-multikueue: k8s-assets registry flux kueue ## Run the MultiKueue tests: a second control plane as the worker cluster, real Kueue on both (test/e2e/multikueue; also part of `make test`).
	KUBEBUILDER_ASSETS="$$(test/tools/k8s-assets.sh)" PACKLINE_REGISTRY_BIN="$$(test/tools/registry.sh)" PACKLINE_FLUX_DIR="$$(test/tools/flux.sh)" PACKLINE_KUEUE_DIR="$$(test/tools/kueue.sh)" \
		go test $(GO_TEST_FLAGS) -count=1 -timeout 20m ./test/e2e/multikueue

.PHONY: fmt vet
fmt:
	gofmt -w $$(git ls-files '*.go')
vet:
	go vet ./...

.PHONY: help
help:
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "%-18s %s\n", $$1, $$2}'
