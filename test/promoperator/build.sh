#!/usr/bin/env bash
# Builds the pinned Prometheus Operator (go.mod in this directory) and the Prometheus it
# configures (test/prometheus/go.mod) and copies the operator's CRDs beside them, for the install tests that run the
# operator against the test cluster. Prints the output directory: operator and prometheus (the
# binaries) and crds/ (monitoring.coreos.com CustomResourceDefinitions of the operator's
# version). Debian's Prometheus is built without Kubernetes service discovery, which every
# configuration the operator generates needs. The Go build cache and the output directory make
# later runs instant.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# Built with the product's toolchain and configuration (CGO off, -trimpath), like test/k8sbin:
# the standard library and the modules at the product's versions come from its build cache.
export GOTOOLCHAIN=${GOTOOLCHAIN:-$(awk '$1 == "toolchain" {print $2}' "$here/../../go.mod")}
export CGO_ENABLED=0
mod=github.com/prometheus-operator/prometheus-operator
version=$(awk -v m="$mod" '$1==m {print $2} $1=="require" && $2==m {print $3}' "$here/go.mod")
out=${PROM_OPERATOR_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/emptydir-guard/prometheus-operator-$version}
mkdir -p "$out"
# build_pinned NAME MODULE_DIR PACKAGE VERSION LABEL builds PACKAGE of the module in
# MODULE_DIR into $out/NAME, stamped with VERSION, unless it is current: built from the same
# go.mod and go.sum content (not their time, which a fresh clone sets to now).
build_pinned() {
  local name=$1 dir=$2 pkg=$3 ver=$4 label=$5 pins
  pins=$({ cat "$dir/go.mod" "$dir/go.sum"; go version; } | sha256sum | cut -d' ' -f1)
  if [ -x "$out/$name" ] && [ "$(cat "$out/$name.pins" 2>/dev/null)" = "$pins" ]; then return; fi
  echo "building $label into $out (first time: several minutes)" >&2
  (cd "$dir" && go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=$ver" \
    -o "$out/$name.tmp" "$pkg")
  mv "$out/$name.tmp" "$out/$name"
  echo "$pins" > "$out/$name.pins"
}
build_pinned operator "$here" "$mod/cmd/operator" "${version#v}" "the Prometheus Operator $version"
prom=github.com/prometheus/prometheus
prom_mod=$here/../prometheus
prom_version=$(awk -v m="$prom" '$1==m {print $2} $1=="require" && $2==m {print $3}' "$prom_mod/go.mod")
# The module's v0.MMM.P is Prometheus 3.MMM/100 . MMM%100 . P (v0.305.0 is 3.5.0).
minor=${prom_version#v0.}; patch=${minor#*.}; minor=${minor%%.*}
prom_release="$((minor / 100)).$((minor % 100)).$patch"
# Prometheus with only the service discoveries the operator's configurations use: Kubernetes,
# besides file and HTTP, which are always in. Upstream chooses them in plugins/plugins.go
# (generated from its plugins.yml); this build writes that file into a vendored copy of the
# module, leaving out the cloud providers' SDKs: about 40 % less source to compile, a binary of
# about half the size.
build_prometheus() {
  local pins plugins=github.com/prometheus/prometheus/discovery/kubernetes
  pins=$({ cat "$prom_mod/go.mod" "$prom_mod/go.sum"; echo "$plugins"; go version; } | sha256sum | cut -d' ' -f1)
  if [ -x "$out/prometheus" ] && [ "$(cat "$out/prometheus.pins" 2>/dev/null)" = "$pins" ]; then return; fi
  echo "building Prometheus $prom_release (service discovery: $plugins) into $out (first time: minutes)" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp "$prom_mod/go.mod" "$prom_mod/go.sum" "$prom_mod/tools.go" "$tmp/"
  (cd "$tmp" && go mod vendor)
  printf '// Written by test/promoperator/build.sh: the service discoveries built in.\npackage plugins\n\nimport _ "%s"\n' \
    "$plugins" >"$tmp/vendor/$prom/plugins/plugins.go"
  (cd "$tmp" && go build -mod=vendor -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=$prom_release" \
    -o "$out/prometheus.tmp" "$prom/cmd/prometheus")
  rm -rf "$tmp"
  mv "$out/prometheus.tmp" "$out/prometheus"
  echo "$pins" >"$out/prometheus.pins"
}
build_prometheus
echo "v$prom_release" > "$out/prometheus.version"
if ! [ -d "$out/crds" ]; then
  src=$(cd "$here" && go list -m -f '{{.Dir}}' "$mod")
  mkdir -p "$out/crds.tmp"
  cp "$src"/example/prometheus-operator-crd/monitoring.coreos.com_*.yaml "$out/crds.tmp/"
  chmod 644 "$out"/crds.tmp/*.yaml
  mv "$out/crds.tmp" "$out/crds"
fi
echo "$out"
