#!/usr/bin/env bash
# Builds the pinned Prometheus Operator (go.mod in this folder) and copies its CRDs beside it,
# for the install tests that run the operator against the test cluster. Prints the output
# folder: operator (the binary) and crds/ (monitoring.coreos.com CustomResourceDefinitions of
# the same version). The Go build cache and the output folder make later runs instant.
set -euo pipefail
# A test tool, never shipped: built with the machine's own Go, like test/k8sbin.
export GOTOOLCHAIN=local
here=$(cd "$(dirname "$0")" && pwd)
mod=github.com/prometheus-operator/prometheus-operator
version=$(awk -v m="$mod" '$1==m {print $2} $1=="require" && $2==m {print $3}' "$here/go.mod")
out=${PROM_OPERATOR_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/emptydir-guard/prometheus-operator-$version}
mkdir -p "$out"
if ! [ -x "$out/operator" ] || ! [ "$out/operator" -nt "$here/go.mod" ]; then
  echo "building the Prometheus Operator $version into $out (first time: a few minutes)" >&2
  (cd "$here" && go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${version#v}" \
    -o "$out/operator.tmp" "$mod/cmd/operator")
  mv "$out/operator.tmp" "$out/operator"
fi
if ! [ -d "$out/crds" ]; then
  src=$(cd "$here" && go list -m -f '{{.Dir}}' "$mod")
  mkdir -p "$out/crds.tmp"
  cp "$src"/example/prometheus-operator-crd/monitoring.coreos.com_*.yaml "$out/crds.tmp/"
  chmod 644 "$out"/crds.tmp/*.yaml
  mv "$out/crds.tmp" "$out/crds"
fi
echo "$out"
