# emptyDir guard — build, test and demo entry points. See README.md.
GO        ?= go
BIN       := bin
# The one version of a build, from the git tag (semver vX.Y.Z): a tagged commit is vX.Y.Z, a later
# one vX.Y.Z-N-g<sha>[-dirty]; with no such tag v0.0.0-dev-g<sha>[-dirty]. Each is semver (a
# pre-release after the tag) and a valid image tag and label value, so no "+<build>" part. It
# goes into both commands' build info (--version, *_build_info) and, as CHART_VERSION (no
# leading v), into the chart's version and appVersion when the chart is packaged:
#   helm package deploy/helm/emptydir-guard --version $(CHART_VERSION) --app-version $(CHART_VERSION)
# The chart's default image tag is then v<appVersion>, $(VERSION) again. `make version` and
# `make chart-version` print them; VERSION=v1.2.3 make ... overrides.
VERSION   ?= $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null || \
  { sha=$$(git rev-parse --short HEAD 2>/dev/null) && echo "v0.0.0-dev-g$$sha$$(git diff --quiet HEAD 2>/dev/null || echo -dirty)"; } || \
  echo v0.0.0-dev)
CHART_VERSION ?= $(patsubst v%,%,$(VERSION))
REVISION  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# Every go command runs on go.mod's toolchain line (fetched through the Go module proxy the first
# time): the machine's own Go may be older, with standard-library vulnerabilities.
GOTOOLCHAIN ?= $(shell awk '$$1 == "toolchain" {print $$2}' go.mod)
export GOTOOLCHAIN
# One build configuration for every go command of ours (vet, the tests, the kernel lane, the
# generators, the image): static and -trimpath, as the release binaries are, so that a dependency
# compiles once instead of once per configuration. Only -race (which needs cgo) and fuzzing's
# instrumentation compile them again; the pinned test tools (Kubernetes, the operator) build
# as their own projects do.
export CGO_ENABLED := 0
export GOFLAGS := $(strip $(filter-out -trimpath,$(shell go env GOFLAGS 2>/dev/null)) -trimpath)
# go test, through hack/gotest.sh: under make test it also keeps the -json events of each run,
# from which the runner lists the tests that ran (hack/test-names.sh).
GOTEST    := GO='$(GO)' $(CURDIR)/hack/gotest.sh
LDFLAGS   := -s -w \
  -X github.com/prometheus/common/version.Version=$(VERSION) \
  -X github.com/prometheus/common/version.Revision=$(REVISION) \
  -X github.com/prometheus/common/version.Branch=main

.PHONY: all build image test-image test-ocimage plugin-release release-tools chart push-image push-chart sign verify-release verify-image verify-chart release registry-login github-release version chart-version deps k8s-binaries crio-binaries prometheus-operator test-operator-path vet generate check-generated tools lint vulncheck unit fuzz test-rules test-dashboards test-helm test-cluster test demo clean

# Go modules with code of our own, for govulncheck (test/k8sbin and test/crio only pin Kubernetes
# and CRI-O; tools/ only pins the tools; tools/ocimage builds the image); golangci-lint also reads
# the test-only ones and tools/ (tools/alignmodules).
GO_MODULES := . dashboards/generator tools/ocimage
LINT_MODULES := $(GO_MODULES) test/bench test/helm tools
TOOLS_BIN  := $(BIN)/tools
# Inputs each fuzz target tries in `make test` (a count, see hack/fuzz.sh).
FUZZTIME   ?= 20000x

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# The release image without Docker (docs/deploy.md#image): both commands built as `build` builds
# them (LDFLAGS) for each of IMAGE_PLATFORMS into $(BIN)/<os>_<arch>/, then tools/ocimage writes
# the multi-arch OCI image index, on a base of its own (users root and nonroot 65532, Debian's
# CA bundle, /tmp; no shell), with an SPDX SBOM per platform attached as an OCI 1.1 referrer, as
# an OCI image layout into $(IMAGE_DIR) and prints the index's digest. Every timestamp is
# SOURCE_DATE_EPOCH (the commit's time), so the same commit, toolchain and CA bundle give the
# same digest.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGE_DIR       := $(BIN)/image
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null)
IMAGE_BUILDS    := $(addprefix image-build-,$(subst /,_,$(IMAGE_PLATFORMS)))
comma := ,
empty :=
space := $(empty) $(empty)
# os/arch=dir,... for tools/ocimage; absolute for the tests, which run in tools/ocimage.
IMAGE_BINARIES  := $(subst $(space),$(comma),$(foreach p,$(IMAGE_PLATFORMS),$(p)=$(CURDIR)/$(BIN)/$(subst /,_,$(p))))

image: $(IMAGE_BUILDS)
	cd tools/ocimage && $(GO) build -o $(CURDIR)/$(TOOLS_BIN)/ ./cmd/ocimage
	$(TOOLS_BIN)/ocimage --binaries '$(IMAGE_BINARIES)' --version '$(VERSION)' --revision '$(REVISION)' \
	  --source-date-epoch '$(SOURCE_DATE_EPOCH)' --out $(IMAGE_DIR)

# One platform's commands (not .PHONY: make skips pattern rules for phony targets; no file of
# that name ever exists, so it always runs, and the go command's cache makes a rerun cheap).
# The image holds the two servers only: kubectl-emptydir runs on the user's machine
# (plugin-release), and a cluster's pods have no use for it.
IMAGE_COMMANDS  := ./cmd/emptydir-exporter ./cmd/emptydir-remediator
image-build-%:
	CGO_ENABLED=0 GOOS=$(word 1,$(subst _, ,$*)) GOARCH=$(word 2,$(subst _, ,$*)) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/$*/ $(IMAGE_COMMANDS)

# tools/ocimage's tests on `make image`'s builds (without OCIMAGE_TEST_BINARIES they build their
# own, about a minute more): reproducibility, contents, SBOM referrers, flag checks.
# test-ocimage runs them on the builds already there: make test builds the image first, for the
# real-cluster suite, and does not rewrite it while the suite reads it.
test-image: image test-ocimage
test-ocimage:
	cd tools/ocimage && $(GO) vet ./... && \
	  OCIMAGE_TEST_BINARIES='$(IMAGE_BINARIES)' OCIMAGE_TEST_VERSION='$(VERSION)' $(GOTEST) -count=1 ./...

# Publishing (docs/release.md): the release workflow (.github/workflows/release.yml) runs these on
# a tag against the real registries, and the real-cluster test TestReleaseFromRegistry runs the
# same targets against a registry of its own (REGISTRY_PLAIN_HTTP=1), then installs from it.
#   make release REGISTRY=ghcr.io/emptydir-guard
# pushes the image index (make image) as $(IMAGE_REPO):$(VERSION) with its SBOMs, the chart
# (make chart) as $(CHART_REPO)/emptydir-guard:$(CHART_VERSION), signs both by digest with cosign
# and verifies what a user would pull: every platform of IMAGE_PLATFORMS with its SBOM, and both
# signatures. COSIGN_SIGN_FLAGS/COSIGN_VERIFY_FLAGS choose the signing: by default keyless (the
# forge's OIDC token, Fulcio and Rekor), verified against COSIGN_IDENTITY; with a key,
# COSIGN_SIGN_FLAGS='--key cosign.key' COSIGN_VERIFY_FLAGS='--key cosign.pub'.
REGISTRY      ?= ghcr.io/emptydir-guard
IMAGE_REPO    ?= $(REGISTRY)/emptydir-guard
CHART_REPO    ?= oci://$(REGISTRY)/charts
CHART_NAME    := emptydir-guard
CHART_DIR     := $(BIN)/chart
CHART_PACKAGE := $(CHART_DIR)/$(CHART_NAME)-$(CHART_VERSION).tgz
# Where push-image and push-chart write the digests they pushed, for sign.
RELEASE_DIR   ?= $(BIN)/release
# Non-empty: the registry speaks plain HTTP (a test's registry on loopback).
REGISTRY_PLAIN_HTTP ?=
COSIGN_IDENTITY ?= https://github.com/emptydir-guard/emptydir-guard/.github/workflows/release.yml@refs/tags/$(VERSION)
COSIGN_SIGN_FLAGS   ?= --yes
COSIGN_VERIFY_FLAGS ?= --certificate-identity '$(COSIGN_IDENTITY)' --certificate-oidc-issuer https://token.actions.githubusercontent.com
HELM    := $(TOOLS_BIN)/helm
COSIGN  := $(TOOLS_BIN)/cosign
OCIREL  := $(TOOLS_BIN)/ocirelease
# Helm's and ocirelease's flag for a plain-HTTP registry, and cosign's.
plain_http        = $(if $(REGISTRY_PLAIN_HTTP),--plain-http)
plain_http_cosign = $(if $(REGISTRY_PLAIN_HTTP),--allow-http-registry)
# The chart's repository as cosign names it (no oci://).
CHART_REPO_REF = $(patsubst oci://%,%,$(CHART_REPO))

# The pinned release tools into $(TOOLS_BIN): Helm (test/helm/go.mod), cosign (tools/cosign) and
# ocirelease (tools/ocimage).
release-tools:
	cd test/helm && $(GO) build -o $(CURDIR)/$(TOOLS_BIN)/ helm.sh/helm/v4/cmd/helm
	cd tools/cosign && $(GO) build -o $(CURDIR)/$(TOOLS_BIN)/ github.com/sigstore/cosign/v2/cmd/cosign
	cd tools/ocimage && $(GO) build -o $(CURDIR)/$(TOOLS_BIN)/ ./cmd/ocirelease

# The chart package: version and appVersion $(CHART_VERSION), so its default image tag is $(VERSION).
chart: release-tools
	rm -rf $(CHART_DIR) && mkdir -p $(CHART_DIR)
	$(HELM) package deploy/helm/$(CHART_NAME) --version '$(CHART_VERSION)' --app-version '$(CHART_VERSION)' -d $(CHART_DIR)

push-image: image release-tools
	mkdir -p $(RELEASE_DIR)
	$(OCIREL) push $(plain_http) --layout $(IMAGE_DIR) --repository '$(IMAGE_REPO)' > $(RELEASE_DIR)/image.ref
	@cat $(RELEASE_DIR)/image.ref

push-chart: chart
	mkdir -p $(RELEASE_DIR)
	$(HELM) push $(plain_http) $(CHART_PACKAGE) '$(CHART_REPO)' > $(RELEASE_DIR)/chart.push 2>&1 || \
	  { cat $(RELEASE_DIR)/chart.push >&2; exit 1; }
	@cat $(RELEASE_DIR)/chart.push
	@digest=$$(awk '$$1 == "Digest:" {print $$2}' $(RELEASE_DIR)/chart.push); \
	  test -n "$$digest" || { echo "helm push printed no digest" >&2; exit 1; }; \
	  echo "$(CHART_REPO_REF)/$(CHART_NAME)@$$digest" > $(RELEASE_DIR)/chart.ref
	@cat $(RELEASE_DIR)/chart.ref

# Signs what push-image and push-chart pushed, by digest (a tag can be moved, a digest not).
sign: release-tools
	@test -s $(RELEASE_DIR)/image.ref -a -s $(RELEASE_DIR)/chart.ref || { echo "sign: run push-image and push-chart first" >&2; exit 1; }
	$(COSIGN) sign $(plain_http_cosign) $(COSIGN_SIGN_FLAGS) "$$(cat $(RELEASE_DIR)/image.ref)"
	$(COSIGN) sign $(plain_http_cosign) $(COSIGN_SIGN_FLAGS) "$$(cat $(RELEASE_DIR)/chart.ref)"

# What a user pulls, by tag: the image index for every platform with its SBOMs, and its signature;
# the chart and its signature.
verify-release: verify-image verify-chart
verify-image: release-tools
	$(OCIREL) check $(plain_http) --image '$(IMAGE_REPO):$(VERSION)' --platforms '$(IMAGE_PLATFORMS)'
	$(COSIGN) verify $(plain_http_cosign) $(COSIGN_VERIFY_FLAGS) '$(IMAGE_REPO):$(VERSION)' >/dev/null
verify-chart: release-tools
	$(COSIGN) verify $(plain_http_cosign) $(COSIGN_VERIFY_FLAGS) '$(CHART_REPO_REF)/$(CHART_NAME):$(CHART_VERSION)' >/dev/null

release: push-image push-chart
	$(MAKE) sign verify-release

# Credentials for REGISTRY's host, the password read from standard input: cosign login writes
# them where ocirelease and cosign read them (the Docker config), helm registry login where Helm
# does. REGISTRY_USER names the account.
REGISTRY_HOST = $(firstword $(subst /, ,$(REGISTRY)))
registry-login: release-tools
	@test -n '$(REGISTRY_USER)' || { echo "registry-login: set REGISTRY_USER; the password is read from standard input" >&2; exit 1; }
	@IFS= read -r pw; \
	  printf '%s\n' "$$pw" | $(COSIGN) login '$(REGISTRY_HOST)' -u '$(REGISTRY_USER)' --password-stdin && \
	  printf '%s\n' "$$pw" | $(HELM) registry login $(plain_http) '$(REGISTRY_HOST)' -u '$(REGISTRY_USER)' --password-stdin

# kubectl-emptydir for a release (docs/kubectl-plugin.md): built as `build` builds it (LDFLAGS)
# for each of PLUGIN_PLATFORMS into $(PLUGIN_DIR)/<os>_<arch>/, then hack/pluginrelease writes
# into $(PLUGIN_RELEASE_DIR) one tar.gz per platform (the binary and LICENSE, every timestamp
# SOURCE_DATE_EPOCH: the same commit and toolchain give the same sha256), SHA256SUMS and the
# krew manifest emptydir.yaml naming each archive by its release download URL and sha256, and
# validates the manifest against the archives (as internal/krew's tests do). github-release
# uploads them; the manifest goes to the krew index by hand (docs/release.md).
PLUGIN_PLATFORMS   ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64
PLUGIN_DIR         := $(BIN)/plugin
PLUGIN_RELEASE_DIR := $(RELEASE_DIR)/plugin
PLUGIN_URL_BASE    ?= https://github.com/emptydir-guard/emptydir-guard/releases/download/$(VERSION)
PLUGIN_BUILDS      := $(addprefix plugin-build-,$(subst /,_,$(PLUGIN_PLATFORMS)))

plugin-release: $(PLUGIN_BUILDS)
	rm -rf $(PLUGIN_RELEASE_DIR)
	$(GO) run ./hack/pluginrelease --version '$(VERSION)' --builds $(PLUGIN_DIR) --out $(PLUGIN_RELEASE_DIR) \
	  --platforms '$(PLUGIN_PLATFORMS)' --source-date-epoch '$(SOURCE_DATE_EPOCH)' --url-base '$(PLUGIN_URL_BASE)'

# One platform's plugin (not .PHONY, as image-build-%).
plugin-build-%:
	CGO_ENABLED=0 GOOS=$(word 1,$(subst _, ,$*)) GOARCH=$(word 2,$(subst _, ,$*)) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(PLUGIN_DIR)/$*/ ./cmd/kubectl-emptydir

# The forge's release of the tag (gh, on its runners): the chart package and the plugin's
# archives, SHA256SUMS and krew manifest (plugin-release), with the CHANGELOG's
# section of this version as notes; a pre-release for a version with a pre-release part.
github-release: chart plugin-release
	mkdir -p $(RELEASE_DIR)
	awk -v v='[$(CHART_VERSION)]' '/^## /{p = index($$0, v) > 0; next} p' CHANGELOG.md > $(RELEASE_DIR)/notes.md
	@test -s $(RELEASE_DIR)/notes.md || { echo "github-release: CHANGELOG.md has no section [$(CHART_VERSION)]" >&2; exit 1; }
	gh release create '$(VERSION)' $(CHART_PACKAGE) $(PLUGIN_RELEASE_DIR)/* --verify-tag --title '$(VERSION)' --notes-file $(RELEASE_DIR)/notes.md \
	  $(if $(findstring -,$(VERSION)),--prerelease)

version:
	@echo $(VERSION)

chart-version:
	@echo $(CHART_VERSION)

deps:
	./hack/install-deps.sh

k8s-binaries:
	./test/k8sbin/build.sh kube-apiserver kubelet kubectl

# CRI-O (test/crio: crio, pinns, its image copier), which TestCRIONode runs the node on; cached
# like the Kubernetes components.
crio-binaries:
	./test/crio/build.sh

# The pinned Prometheus Operator, its CRDs (test/promoperator) and the Prometheus it configures
# (test/prometheus), which the operator-path install test runs against the cluster; cached
# like the Kubernetes components.
prometheus-operator:
	./test/promoperator/build.sh

# vet also checks that the product builds on other systems. Its system calls live in the
# *_linux.go files of internal/fswalk and internal/podcgroup, with stubs for !linux: the
# product's one platform split. Those two packages are vetted for windows (the farthest from
# linux), their exported API is the same on linux, windows and darwin (TestStubsKeepTheAPI, in
# make unit), and no other package imports golang.org/x/sys/unix outside a Linux file: so every
# package that builds on Linux builds elsewhere, without vetting the whole product for windows
# (every dependency compiled once more: 9 minutes cold). test/ holds Linux-only suites.
SPLIT_PACKAGES := ./internal/fswalk/... ./internal/podcgroup
vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	@other="$$(git ls-files '*.go' | grep -v '^test/' | xargs grep -h '^//go:build' | grep -vx -e '//go:build linux' -e '//go:build !linux' | sort -u)"; \
	  test -z "$$other" || { echo "vet: build constraints other than linux/!linux ($$other): vet those platforms too"; exit 1; }
	@split="$$($(GO) list $(SPLIT_PACKAGES))"; unix="$$(GOOS=windows $(GO) list -f '{{.ImportPath}}: {{join .Imports " "}}' $$($(GO) list ./... | grep -v '/test/') | \
	  grep -w 'golang.org/x/sys/unix' | grep -v -F "$$split")"; \
	  test -z "$$unix" || { echo "vet: golang.org/x/sys/unix imported outside a Linux file, not in the platform split ($(SPLIT_PACKAGES)):"; echo "$$unix"; exit 1; }
	GOOS=windows $(GO) vet $(SPLIT_PACKAGES)

# Every generated file, sources first: the dashboards (Go code in dashboards/generator), the
# monitoring mixin's copies of them and of the rules (mixin/rules.json, mixin/dashboards) and
# the PrometheusRule (from rules/emptydir-guard.rules.yml); then test/helm's gen-deploy, which
# copies the dashboards and the PrometheusRule into the chart, renders the kustomize base
# (deploy/) from the chart and writes the chart README's values table from values.yaml; the
# plots of docs/performance.md (below); last the flag tables of docs/flags.md, which the
# commands' TestFlagsDoc rewrites when stale (failing once, hence the second run).
# Test-tool modules kept at the product's versions of what both compile (tools/alignmodules);
# after a colon, the module path prefixes a pinned tool cannot build with at the product's
# versions (Prometheus 3.5's Kubernetes discovery predates client-go 0.34's API).
ALIGNED_MODULES := test/k8sbin test/helm test/bench test/promoperator \
  test/prometheus:k8s.io/,sigs.k8s.io/,github.com/google/gnostic-models
# The plots of docs/performance.md, drawn from its generated tables by test/bench/cmd/benchplot:
# every bench target that writes a plotted section redraws them (`make bench-plots` alone too),
# and so does `make generate`, so that check-generated finds a plot older than its table.
BENCH_PLOTS := docs/img/bench-walk.svg docs/img/bench-detect.svg docs/img/bench-prometheus.svg docs/img/bench-node-cpu.svg
BENCH_PLOT := cd test/bench && $(GO) run ./cmd/benchplot -doc ../../docs/performance.md -out ../../docs/img
# The pictures of the dashboards in docs/dashboards.md, drawn by test/bench/cmd/dashplot from each
# dashboard and the data a real run's Prometheus answered (DASHBOARD_DATA, make dashboard-data):
# `make dashboard-pictures` redraws them, and so does `make generate`, so that check-generated
# finds a picture older than its dashboard or its data.
DASHBOARD_DATA     := docs/img/dashboards/data.json
DASHBOARD_PICTURES := $(patsubst dashboards/%.json,docs/img/dashboards/%.svg,$(wildcard dashboards/*.json))
DASHBOARD_PLOT     := cd test/bench && $(GO) run ./cmd/dashplot -dashboards ../../dashboards -data ../../$(DASHBOARD_DATA) -out ../../docs/img/dashboards
GENERATED := dashboards/*.json mixin/rules.json mixin/dashboards rules/prometheusrule.yaml deploy/exporter.yaml deploy/remediator.yaml \
  deploy/networkpolicy.yaml deploy/components deploy/helm/emptydir-guard/files \
  deploy/helm/emptydir-guard/README.md docs/flags.md $(BENCH_PLOTS) $(DASHBOARD_PICTURES) \
  $(foreach m,$(ALIGNED_MODULES),$(firstword $(subst :, ,$(m)))/go.mod $(firstword $(subst :, ,$(m)))/go.sum)
FLAGS_DOC_TEST := $(GO) test -count=1 -run '^TestFlagsDoc$$' ./cmd/emptydir-exporter ./cmd/emptydir-remediator ./cmd/kubectl-emptydir
generate:
	cd dashboards/generator && $(GO) run . >/dev/null && $(GO) run ./cmd/gen-prometheusrule
	cd test/helm && $(GO) run ./cmd/gen-deploy
	$(BENCH_PLOT)
	$(DASHBOARD_PLOT)
	$(FLAGS_DOC_TEST) >/dev/null 2>&1 || $(FLAGS_DOC_TEST)
	cd tools && $(GO) run ./alignmodules .. $(addprefix ../,$(ALIGNED_MODULES))

# Fails, naming the files, when `make generate` changes a generated file.
check-generated:
	MAKE="$(MAKE)" ./hack/check-generated.sh $(GENERATED)

# The pinned vulnerability checker (tools/go.mod), built into $(TOOLS_BIN).
tools:
	cd tools && $(GO) build -o $(CURDIR)/$(TOOLS_BIN)/ golang.org/x/vuln/cmd/govulncheck

# golangci-lint (pinned in tools/golangci-lint/go.mod) with .golangci.yml, staticcheck included.
# --allow-serial-runners: another run on the machine (its lock is global) is waited for, not an error.
lint:
	cd tools/golangci-lint && $(GO) build -o $(CURDIR)/$(TOOLS_BIN)/ github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	@status=0; for m in $(LINT_MODULES); do echo "golangci-lint $$m"; (cd $$m && $(CURDIR)/$(TOOLS_BIN)/golangci-lint run --allow-serial-runners --config $(CURDIR)/.golangci.yml ./...) || status=1; done; exit $$status

# Against a local copy of the Go vulnerability database; see docs/security.md.
vulncheck: tools
	GO=$(GO) ./hack/vulncheck.sh $(TOOLS_BIN)/govulncheck $(GO_MODULES)

# The tests that run the commands (internal/testbin) run make build's, instead of a build of
# their own in yet another configuration.
unit: build
	CGO_ENABLED=1 EMPTYDIR_GUARD_BIN_DIR=$(CURDIR)/$(BIN) $(GOTEST) -race -count=1 ./...
	cd tools && $(GOTEST) -count=1 ./alignmodules/

# Every fuzz target for FUZZTIME inputs; a crasher lands in <package>/testdata/fuzz/ to be committed.
fuzz:
	GO=$(GO) ./hack/fuzz.sh $(FUZZTIME)

# The tests that need kernel features this host may lack (XFS and ext4 project quotas), inside
# a VM booting a pinned stock Debian kernel under QEMU (docs/kernel-lane.md), and the change
# signal's cgroup v2 tests (internal/podcgroup) in a v2-only boot of it, and the signal and the
# calibration on the pods of a real standalone kubelet (its binary from test/k8sbin) on
# containerd in another v2 boot, under systemd as PID 1, with the cgroupfs driver then the
# systemd one (a blank disk each); a skip there fails.
# Where the host kernel has the features, `make unit` runs them natively too.
KERNEL_LANE_TESTS ?= ProjectQuota
# make test runs both parts once the tools (the kubelet) are built, beside the other stages; the
# project-quota tests of three packages share one boot (a boot under emulation is about half a
# minute of a core).
.PHONY: test-kernel-lane test-kernel-lane-host test-kernel-lane-kubelet
test-kernel-lane: test-kernel-lane-host test-kernel-lane-kubelet
test-kernel-lane-host: deps
	GO=$(GO) ./test/kernellane/lane.sh './internal/fswalk ./exporter ./remediator' -test.run '$(KERNEL_LANE_TESTS)'
	GO=$(GO) KERNEL_LANE_CGROUP2=1 KERNEL_LANE_SCRATCH=2 ./test/kernellane/lane.sh ./internal/podcgroup -test.run 'V2' -test.parallel 3
test-kernel-lane-kubelet: deps
	kubelet="$$(./test/k8sbin/build.sh kubelet)/kubelet" && GO=$(GO) KERNEL_LANE_CGROUP2=1 KERNEL_LANE_INIT=systemd KERNEL_LANE_SCRATCH=2 KERNEL_LANE_ENV="KERNEL_LANE_KUBELET=$$kubelet" \
	  KERNEL_LANE_PROGRAMS="$$kubelet containerd containerd-shim-runc-v2 runc ctr" ./test/kernellane/lane.sh ./test/kernellane/kubeletv2 -test.run 'KubeletV2'

test-rules:
	./rules/test.sh

test-dashboards:
	cd dashboards/generator && $(GOTEST) -count=1 ./...

# The figures' tools in test/bench (svgplot, benchplot, dashplot): layout, units, golden
# pictures. Only those packages: the rest of the module builds k8s.io/kubernetes.
FIGURE_PACKAGES := ./svgplot ./cmd/benchplot ./cmd/dashplot
.PHONY: test-figures
test-figures:
	cd test/bench && $(GO) vet $(FIGURE_PACKAGES) && $(GOTEST) -count=1 $(FIGURE_PACKAGES)

# The Helm chart: helm lint and helm template (Helm pinned in test/helm/go.mod), the generated
# kustomize base and chart files being current. Also builds the Helm tool the chart's
# real-cluster test runs (go tool helm).
test-helm:
	cd test/helm && $(GO) vet ./... && $(GOTEST) -count=1 ./... && $(GO) tool helm version

# The suite runs as E2E_SHARDS go test processes at once, each with clusters of its own
# (hack/e2e.sh); one with RECORD=1, whose tests rewrite docs/reliability.md.
E2E_SHARDS ?= $(if $(RECORD),1,2)
# Real kube-apiserver + etcd + kubelet + containerd; needs root. EMPTYDIR_GUARD_CLUSTER=1 turns
# a missing part into a failure with a clear message instead of a skip. The release tools and the
# image are built first: TestReleaseFromRegistry runs `make release` inside the cluster's network
# namespace, which has no route to a module proxy.
test-cluster: deps k8s-binaries prometheus-operator crio-binaries build release-tools image
	EMPTYDIR_GUARD_CLUSTER=1 EMPTYDIR_GUARD_BIN_DIR=$(CURDIR)/$(BIN) K8S_BIN_DIR="$$(./test/k8sbin/build.sh kube-apiserver kubelet kubectl)" \
	  PROM_OPERATOR_DIR="$$(./test/promoperator/build.sh)" CRIO_DIR="$$(./test/crio/build.sh)" GO='$(GO)' \
	  ./hack/e2e.sh $(E2E_SHARDS) -timeout 40m -v

# RECORD=1 lets the real-cluster suites write their figures into docs/reliability.md
# (`RECORD=1 make test-cluster`); without it they only log them, and a green `make test`
# leaves the tree as it found it.
export RECORD
# make test runs as root: a unit test that needs root (fswalktest.RequireRoot, mounting a tmpfs)
# fails there instead of skipping, as it does under plain go test.
# The stages run through hack/test-stages.sh, which prints a table of their times at the end:
# the cheap ones that find most mistakes first; after vet (whose compiles the test tools reuse)
# the test-tool builds (&: in the background, niced, taking the CPU the foreground stages leave
# idle). Once they are built, the real-cluster suite and the kernel lane start (@...<test-tools:
# in the background at normal priority, the later stages niced): both wait on a cluster or an
# emulated VM most of the time, so the CPU-bound stages go on beside them, and none of those
# writes what they read (bin/'s commands and image). The lane started before the tools are built
# takes the CPU the niced builds live on (measured cold at 05c643f, CONTRIBUTING.md).
TEST_STAGES := deps vet &test-tools test-rules test-dashboards test-figures check-generated build image \
  @test-cluster<test-tools @test-kernel-lane<test-tools unit test-ocimage lint vulncheck fuzz test-helm wait
.PHONY: test-tools
test-tools: k8s-binaries prometheus-operator crio-binaries release-tools
test: export EMPTYDIR_GUARD_REQUIRE_ROOT := 1
test:
	MAKE="$(MAKE)" GO="$(GO)" ./hack/test-stages.sh $(foreach s,$(TEST_STAGES),'$(s)')

# Benchmarks against the peers an operator would otherwise use; each writes its tables into
# docs/performance.md. Not part of `make test`.
.PHONY: bench
bench: bench-walk

# The plots of docs/performance.md (BENCH_PLOTS, next to GENERATED), redrawn from its tables.
.PHONY: bench-plots
bench-plots:
	$(BENCH_PLOT)

# The dashboards' pictures (DASHBOARD_PICTURES, next to GENERATED), redrawn from the committed data.
.PHONY: dashboard-pictures
dashboard-pictures:
	$(DASHBOARD_PLOT)

# The data of those pictures from a real cluster (root, about 4 minutes): the seed scenario of
# TestSeedScenario on the shared cluster, then every panel target over its window
# (test/e2e/dashcapture_test.go) into $(DASHBOARD_DATA); then the pictures again. Not part of
# `make test`.
.PHONY: dashboard-data
dashboard-data: deps k8s-binaries build
	EMPTYDIR_GUARD_CLUSTER=1 EMPTYDIR_GUARD_BIN_DIR=$(CURDIR)/$(BIN) K8S_BIN_DIR="$$(./test/k8sbin/build.sh kube-apiserver kubelet)" \
	  EMPTYDIR_GUARD_DASHBOARD_CAPTURE=$(CURDIR)/$(DASHBOARD_DATA) \
	  $(GO) test -count=1 -timeout 20m -v -run '^TestSeedScenario$$/^isolation=false$$' ./test/e2e/
	$(DASHBOARD_PLOT)

# The walk against GNU du and the kubelet's fs.DiskUsage on generated trees (kept in
# /var/tmp/emptydir-guard-bench). Bigger runs: WALK_BENCH_FLAGS='-sizes 10000,100000,1000000
# -cold-max-entries 1000000 -rounds 5'; see `cd test/bench && go run ./cmd/walkbench -h`.
WALK_BENCH_FLAGS ?=
.PHONY: bench-walk
bench-walk: deps
	cd test/bench && $(GO) build -o $(CURDIR)/$(BIN)/bench/ ./cmd/walkbench ./cmd/walk-ours ./cmd/walk-du ./cmd/walk-kubelet
	$(BIN)/bench/walkbench -doc docs/performance.md $(WALK_BENCH_FLAGS)
	$(BENCH_PLOT)

demo: deps k8s-binaries build
	./hack/demo.sh

clean:
	rm -rf $(BIN)

# The detect → evict distribution on a real cluster (about 8 minutes): emptyDir guard against
# the kubelet at its defaults; writes its tables into docs/performance.md (section detect).
.PHONY: bench-detect
bench: bench-detect
bench-detect: deps k8s-binaries build
	EMPTYDIR_GUARD_CLUSTER=1 EMPTYDIR_GUARD_BIN_DIR=$(CURDIR)/$(BIN) K8S_BIN_DIR="$$(./test/k8sbin/build.sh kube-apiserver kubelet)" \
	  $(GO) test -count=1 -timeout 30m -v -run '^$$' -bench '^BenchmarkDetectEvict$$' -benchtime=1x ./test/e2e/
	$(BENCH_PLOT)

# Every race the kubelet also runs, on a real cluster whose kubelet enforces: a limit on
# another container, a limited sidecar, rotated logs, fallocate, O_DIRECT, a log
# burst, an ephemeral debug container, a copy-up by chmod, and the kubelet's own six-pod
# scenario, each per round in a namespace both enforce and one the kubelet enforces alone;
# prints each case's timeline beside the kubelet's eviction and writes docs/performance.md,
# section race. About a minute a round (5 rounds: 6 minutes with the cluster); EMPTYDIR_GUARD_RACE_SAMPLES rounds (default 5; more
# need BENCH_RACE_TIMEOUT above 8 minutes a round plus 10).
BENCH_RACE_TIMEOUT ?= 60m
.PHONY: bench-race
bench: bench-race
bench-race: deps k8s-binaries build
	EMPTYDIR_GUARD_CLUSTER=1 EMPTYDIR_GUARD_BIN_DIR=$(CURDIR)/$(BIN) K8S_BIN_DIR="$$(./test/k8sbin/build.sh kube-apiserver kubelet)" \
	  $(GO) test -count=1 -timeout $(BENCH_RACE_TIMEOUT) -v -run '^$$' -bench '^BenchmarkRace$$' -benchtime=1x ./test/e2e/

# One busy node (110 pods × 3 emptyDirs, a container's writable layer, logs and etc-hosts each;
# 1M files, cached under /var/tmp/emptydir-guard-bench): ours at the defaults against the
# exporter's every-part-every-cycle schedule and the kubelet's and containerd's walks, and with
# the change signal at 0, 10, 50 and 100 % of the pods writing; writes docs/performance.md,
# section node. About 40 minutes (the first run also generates the tree, a few more).
.PHONY: bench-node
bench: bench-node
bench-node:
	cd test/bench && $(GO) test -count=1 -run '^$$' -bench '^BenchmarkNode$$' -benchtime=1x -timeout 75m -v ./node/
	$(BENCH_PLOT)

# BenchmarkNode's node with every emptyDir under a project quota (pods with hostUsers: false),
# its cycles measured in the kernel lane against the same node walked, and natively walked
# here: writes docs/performance.md, section node-quota. Root; about 30 minutes (the first run
# also generates the 16 GiB sparse XFS image, kept under /var/tmp/emptydir-guard-bench).
# What reading one pod's change mark costs against the cheapest walk it spares (a directory of one
# file), on this host's cgroups: docs/change-signal.md, "What it costs". Needs root.
.PHONY: bench-change-signal
bench: bench-change-signal
bench-change-signal:
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkMarkAgainstWalk$$' -benchtime=20000x ./internal/podcgroup/

.PHONY: bench-node-quota
bench: bench-node-quota
bench-node-quota: deps
	cd test/bench && GO=$(GO) $(GO) test -count=1 -run '^$$' -bench '^BenchmarkNodeQuota$$' -benchtime=1x -timeout 150m -v ./node/

# What a real Prometheus (Debian's /usr/bin/prometheus) pays per node, for the exporter as
# installed before its fast/slow split (with the rules shipped then), the defaults and the
# large-cluster profile (the shipped rules): simulated nodes of 110 pods, each a real exporter
# on its own loopback listener, every profile at N/2 and N nodes; writes docs/performance.md,
# section prometheus-bill. About 40 minutes. PROMBILL_FLAGS: e.g.
# -prombill.nodes=100 (the default) on a quiet machine; fewer where scrapes start failing.
.PHONY: bench-prometheus
bench: bench-prometheus
bench-prometheus: deps
	cd test/bench && $(GO) test -count=1 -run '^$$' -bench '^BenchmarkPrometheusBill$$' -benchtime=1x -timeout 90m -v ./prombill/ -args $(PROMBILL_FLAGS)
	$(BENCH_PLOT)

# The chart beside the real Prometheus Operator alone (TestOperatorInstallEvicts, docs/e2e.md;
# make test-cluster runs it with the others).
test-operator-path: deps k8s-binaries prometheus-operator build
	EMPTYDIR_GUARD_CLUSTER=1 EMPTYDIR_GUARD_BIN_DIR=$(CURDIR)/$(BIN) K8S_BIN_DIR="$$(./test/k8sbin/build.sh kube-apiserver kubelet)" \
	  PROM_OPERATOR_DIR="$$(./test/promoperator/build.sh)" \
	  $(GO) test -count=1 -timeout 20m -v -run '^TestOperatorInstallEvicts$$' ./test/e2e/
