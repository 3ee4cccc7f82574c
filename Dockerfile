# syntax=docker/dockerfile:1
# Building the image of emptyDir guard yourself, with Docker (or another BuildKit builder): one
# image with both commands,
#   /usr/local/bin/emptydir-exporter    (the default entrypoint; DaemonSet)
#   /usr/local/bin/emptydir-remediator  (select it with the container's `command`; Deployment)
# Build: docker build --build-arg VERSION=$(make -s version) \
#          --build-arg REVISION=$(git rev-parse HEAD) -t emptydir-guard:dev .
# The build flags are the Makefile's `build` target's, VERSION its version (the git tag vX.Y.Z,
# CONTRIBUTING.md). This file is not the release path: released images are built without
# Docker by `make image` (tools/ocimage, docs/deploy.md#image); keep the two alike.

ARG GO_VERSION=1.27.3

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build
# The golang image pins its own Go (GOTOOLCHAIN=local); auto lets the go command switch to
# go.mod's toolchain line whenever that is newer, so the image never builds on an older Go
# than `make` does, even if GO_VERSION above falls behind.
ENV GOTOOLCHAIN=auto
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=v0.0.0-dev
ARG REVISION=unknown
ARG BRANCH=main
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath \
      -ldflags "-s -w -X github.com/prometheus/common/version.Version=${VERSION} -X github.com/prometheus/common/version.Revision=${REVISION} -X github.com/prometheus/common/version.Branch=${BRANCH}" \
      -o /out/ ./cmd/emptydir-exporter ./cmd/emptydir-remediator

# Static binaries only: no shell, no package manager, user nonroot (65532).
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=v0.0.0-dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="emptydir-guard" \
      org.opencontainers.image.description="Prometheus exporter of emptyDir usage and sizeLimit, and an Alertmanager-driven remediator that evicts pods over their limit through the Eviction API" \
      org.opencontainers.image.source="https://github.com/emptydir-guard/emptydir-guard" \
      org.opencontainers.image.url="https://github.com/emptydir-guard/emptydir-guard" \
      org.opencontainers.image.documentation="https://github.com/emptydir-guard/emptydir-guard/blob/main/docs/deploy.md" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="gcr.io/distroless/static-debian12:nonroot"
COPY --from=build /out/emptydir-exporter /out/emptydir-remediator /usr/local/bin/
USER 65532:65532
EXPOSE 9731 9732
ENTRYPOINT ["/usr/local/bin/emptydir-exporter"]
