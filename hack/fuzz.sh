#!/usr/bin/env bash
# hack/fuzz.sh [FUZZTIME] — runs every fuzz target of the main module for a bounded budget each
# (default 20000x: that many inputs), one after the other. Targets are found in the sources, so
# a new Fuzz function is fuzzed in CI without being listed anywhere.
#
# The budget is a count of inputs, not a duration: with a duration, Go 1.26's fuzz coordinator
# can fail a target with a bare "context deadline exceeded" when a starved worker is still busy
# at the deadline (Go issue 75804, fixed in Go 1.27); a count has no such deadline. Minimizing
# each new input is bounded by count for the same reason, and -timeout catches a real hang.
#
# Inputs the fuzzer found earlier stay in the build cache and are tried again first. A failing
# input is written to <package>/testdata/fuzz/<Target>/: commit it, and `go test` replays it as a
# regression test from then on.
set -euo pipefail

fuzztime=${1:-20000x}
GO=${GO:-go}
cd "$(dirname "$0")/.."

targets=$(git grep -E '^func Fuzz[A-Za-z0-9_]*\(' -- '*_test.go' ':!tools/' ':!dashboards/' ':!test/k8sbin/' |
	sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort)
[[ -n $targets ]] || { echo "fuzz: no fuzz targets found" >&2; exit 1; }

while read -r pkg target; do
	echo "fuzz: $target in ./$pkg for $fuzztime"
	$GO test -run '^$' -fuzz "^$target\$" -fuzztime "$fuzztime" -fuzzminimizetime 500x -timeout 10m "./$pkg"
done <<<"$targets"
