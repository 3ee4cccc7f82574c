#!/usr/bin/env bash
# Runs `make generate` and fails, naming them, when it changed any of the generated files
# (the paths given): they were stale, or edited by hand. Compares contents before and after,
# so uncommitted work elsewhere in the tree does not matter.
set -euo pipefail
snapshot() { git ls-files --cached --others --exclude-standard -- "$@" | sort -u | xargs -r sha256sum; }
before=$(snapshot "$@")
"${MAKE:-make}" --no-print-directory generate >/dev/null
after=$(snapshot "$@")
if [ "$before" != "$after" ]; then
	echo "check-generated: these generated files were stale (or edited by hand):"
	diff <(printf '%s\n' "$before") <(printf '%s\n' "$after") | sed -n 's/^[<>] [0-9a-f]*  //p' | sort -u | sed 's/^/  /'
	echo "make generate has rewritten them from their sources: review and commit them (git diff)."
	echo "Edit the sources, never the generated files: the chart and its values.yaml,"
	echo "rules/emptydir-guard.rules.yml, dashboards/generator, the commands' flags, the bench tables"
	echo "of docs/performance.md (the plots in docs/img are drawn from them)."
	exit 1
fi
echo "check-generated: every generated file is current"
