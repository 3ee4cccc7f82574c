# emptyDir guard — build, test and demo entry points. See README.md.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -s -w \
  -X github.com/prometheus/common/version.Version=$(VERSION) \
  -X github.com/prometheus/common/version.Revision=$(REVISION) \
  -X github.com/prometheus/common/version.Branch=main

.PHONY: all build deps k8s-binaries vet unit test-rules test-dashboards test-helm test-cluster test demo clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

deps:
	./hack/install-deps.sh

k8s-binaries:
	./test/k8sbin/build.sh kube-apiserver kubelet

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

test-rules:
	./rules/test.sh

test-dashboards:
	cd dashboards/generator && $(GO) test -count=1 ./...

# The Helm chart: helm lint and helm template (Helm pinned in test/helm/go.mod), the generated
# kustomize base and chart files being current. Also builds the Helm tool the chart's
# real-cluster test runs (go tool helm).
test-helm:
	cd test/helm && $(GO) vet ./... && $(GO) test -count=1 ./... && $(GO) tool helm version

# Real kube-apiserver + etcd + kubelet + containerd; needs root. EMPTYDIR_GUARD_CLUSTER=1 turns
# a missing part into a failure with a clear message instead of a skip.
test-cluster: deps k8s-binaries build
	EMPTYDIR_GUARD_CLUSTER=1 EMPTYDIR_GUARD_BIN_DIR=$(CURDIR)/$(BIN) K8S_BIN_DIR="$$(./test/k8sbin/build.sh kube-apiserver kubelet)" \
	  $(GO) test -count=1 -timeout 40m -v ./test/e2e/...

test: deps vet unit test-rules test-dashboards test-helm test-cluster

demo: deps k8s-binaries build
	./hack/demo.sh

clean:
	rm -rf $(BIN)
