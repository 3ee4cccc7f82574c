#!/usr/bin/env bash
# `go test` for make's test targets. With TEST_JSON_DIR set (make test sets it) the run goes
# through gotestsum, which prints what go test would and also keeps go test's -json events in
# TEST_JSON_DIR, one file per run, from which hack/test-names.sh lists every test that ran.
set -euo pipefail
go=${GO:-go}
[ -n "${TEST_JSON_DIR:-}" ] || exec "$go" test "$@"

root=$(cd "$(dirname "$0")/.." && pwd)
gotestsum=$root/bin/tools/gotestsum
if [ ! -x "$gotestsum" ]; then
  (cd "$root/tools" && "$go" build -o "$gotestsum" gotest.tools/gotestsum)
fi
format=standard-quiet
for arg in "$@"; do
  case $arg in -v | -v=true) format=standard-verbose ;; esac
done
mkdir -p "$TEST_JSON_DIR"
exec "$gotestsum" --format "$format" --jsonfile "$TEST_JSON_DIR/$(date +%s%N).json" \
  --raw-command -- "$go" test -json "$@"
