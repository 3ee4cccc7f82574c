#!/usr/bin/env bash
# Builds the pinned Prometheus Operator (go.mod in this folder) and the Prometheus it
# configures (test/prometheus/go.mod) and copies the operator's CRDs beside them, for the install tests that run the
# operator against the test cluster. Prints the output folder: operator and prometheus (the
# binaries) and crds/ (monitoring.coreos.com CustomResourceDefinitions of the operator's
# version). Debian's Prometheus is built without Kubernetes service discovery, which every
# configuration the operator generates needs. The Go build cache and the output folder make
# later runs instant.
set -euo pipefail
# A test tool, never shipped: built with the machine's own Go, like test/k8sbin.
export GOTOOLCHAIN=local
here=$(cd "$(dirname "$0")" && pwd)
mod=github.com/prometheus-operator/prometheus-operator
version=$(awk -v m="$mod" '$1==m {print $2} $1=="require" && $2==m {print $3}' "$here/go.mod")
out=${PROM_OPERATOR_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/emptydir-guard/prometheus-operator-$version}
mkdir -p "$out"
# A binary is current when it was built from the same go.mod and go.sum: their content, not
# their time, which a fresh clone sets to now.
pins() { cat "$1/go.mod" "$1/go.sum" | sha256sum | cut -d' ' -f1; }
operator_pins=$(pins "$here")
if ! [ -x "$out/operator" ] || [ "$(cat "$out/operator.pins" 2>/dev/null)" != "$operator_pins" ]; then
  echo "building the Prometheus Operator $version into $out (first time: a few minutes)" >&2
  (cd "$here" && go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=${version#v}" \
    -o "$out/operator.tmp" "$mod/cmd/operator")
  mv "$out/operator.tmp" "$out/operator"
  echo "$operator_pins" > "$out/operator.pins"
fi
prom=github.com/prometheus/prometheus
prom_mod=$here/../prometheus
prom_version=$(awk -v m="$prom" '$1==m {print $2} $1=="require" && $2==m {print $3}' "$prom_mod/go.mod")
# The module's v0.MMM.P is Prometheus 3.MMM/100 . MMM%100 . P (v0.305.0 is 3.5.0).
minor=${prom_version#v0.}; patch=${minor#*.}; minor=${minor%%.*}
prom_release="$((minor / 100)).$((minor % 100)).$patch"
prometheus_pins=$(pins "$prom_mod")
if ! [ -x "$out/prometheus" ] || [ "$(cat "$out/prometheus.pins" 2>/dev/null)" != "$prometheus_pins" ]; then
  echo "building Prometheus $prom_release into $out (first time: several minutes)" >&2
  (cd "$prom_mod" && go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=$prom_release" \
    -o "$out/prometheus.tmp" "$prom/cmd/prometheus")
  mv "$out/prometheus.tmp" "$out/prometheus"
  echo "$prometheus_pins" > "$out/prometheus.pins"
fi
echo "v$prom_release" > "$out/prometheus.version"
if ! [ -d "$out/crds" ]; then
  src=$(cd "$here" && go list -m -f '{{.Dir}}' "$mod")
  mkdir -p "$out/crds.tmp"
  cp "$src"/example/prometheus-operator-crd/monitoring.coreos.com_*.yaml "$out/crds.tmp/"
  chmod 644 "$out"/crds.tmp/*.yaml
  mv "$out/crds.tmp" "$out/crds"
fi
echo "$out"
