#!/usr/bin/env bash
# hack/fuzz.sh [FUZZTIME] — runs every fuzz target of the main module for a bounded time each
# (default 20s), one after the other. Targets are found in the sources, so a new Fuzz function
# is fuzzed in CI without being listed anywhere.
#
# Inputs the fuzzer found earlier stay in the build cache and are tried again first. A failing
# input is written to <package>/testdata/fuzz/<Target>/: commit it, and `go test` replays it as a
# regression test from then on.
set -euo pipefail

fuzztime=${1:-20s}
GO=${GO:-go}
cd "$(dirname "$0")/.."

targets=$(git grep -E '^func Fuzz[A-Za-z0-9_]*\(' -- '*_test.go' ':!tools/' ':!dashboards/' ':!test/k8sbin/' |
	sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort)
[[ -n $targets ]] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }

while read -r pkg target; do
	echo "fuzz: $target in ./$pkg for $fuzztime"
	$GO test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" "./$pkg"
done <<<"$targets"
