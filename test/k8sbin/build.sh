#!/usr/bin/env bash
# Builds the real Kubernetes components the cluster tests run, from the pinned
# k8s.io/kubernetes module in this directory. The first build takes ~7 minutes on
# 2 cores; the Go build cache and the output directory make later runs instant.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Built with the product's toolchain and its one configuration (CGO off, -trimpath), as
# k0s ships them (static, CGO_ENABLED=0): the packages the product also uses (client-go and its
# family, at the versions hack/align-modules.sh keeps equal) then come from the same build-cache
# entries, once in a cold `make test` instead of twice.
export GOTOOLCHAIN=${GOTOOLCHAIN:-$(awk '$1 == "toolchain" {print $2}' "$here/../../go.mod")}
export CGO_ENABLED=0
version=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$version" | cut -d. -f2)
out=${K8S_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/emptydir-guard/kubernetes-$version}
mkdir -p "$out"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
# A binary is current when it was built from this go.mod and go.sum: their content, not their
# time, which a fresh clone sets to now.
pins=$({ cat "$here/go.mod" "$here/go.sum"; go version; } | sha256sum | cut -d' ' -f1)
missing=()
for cmd in "$@"; do
  if [ -x "$out/$cmd" ] && [ "$(cat "$out/$cmd.pins" 2>/dev/null)" = "$pins" ]; then continue; fi
  missing+=("$cmd")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "building ${missing[*]} $version into $out (first time: several minutes)" >&2
  # One go build for all of them: each link (single-threaded, a minute for the largest) overlaps
  # the other commands' compiles instead of leaving a core idle.
  tmp=$(mktemp -d "$out/.build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$here" && go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${missing[@]/#/k8s.io/kubernetes/cmd/}")
  for cmd in "${missing[@]}"; do
    mv "$tmp/$cmd" "$out/$cmd"
    echo "$pins" > "$out/$cmd.pins"
  done
fi
echo "$out"
