#!/usr/bin/env bash
# Checks and unit-tests the Prometheus rules and validates the Alertmanager example.
# Needs promtool (Debian package "prometheus") and amtool ("prometheus-alertmanager"):
# `make deps` installs both.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

find_tool() { # name debian-package
  local t
  if t="$(command -v "$1")"; then echo "$t"; return; fi
  if [ -x "/usr/bin/$1" ]; then echo "/usr/bin/$1"; return; fi
  echo "rules/test.sh: $1 not found (Debian package $2); run 'make deps'" >&2
  return 1
}
promtool="$(find_tool promtool prometheus)"
amtool="$(find_tool amtool prometheus-alertmanager)"

shopt -s nullglob
rule_files=(rules/*.rules.yml)
test_files=(rules/tests/*.yml)
am_files=(deploy/alertmanager/*.yml)
[ ${#rule_files[@]} -gt 0 ] || { echo "rules/test.sh: no rules/*.rules.yml" >&2; exit 1; }
[ ${#test_files[@]} -gt 0 ] || { echo "rules/test.sh: no rules/tests/*.yml" >&2; exit 1; }
[ ${#am_files[@]} -gt 0 ] || { echo "rules/test.sh: no deploy/alertmanager/*.yml" >&2; exit 1; }

echo "== promtool check rules"
"$promtool" check rules "${rule_files[@]}"
echo "== promtool test rules"
"$promtool" test rules "${test_files[@]}"
am_main=deploy/alertmanager/alertmanager.yml
# The remediator's webhook `timeout` needs Alertmanager >= 0.28; older ones (Debian's 0.25,
# which the tests run) reject the field. The shipped example must set it
# (deploy/deploy_test.go checks its value); older amtools check a copy without that line.
grep -Eq '^ +timeout: ' "$am_main" || { echo "rules/test.sh: $am_main sets no webhook timeout" >&2; exit 1; }
am_version="$("$amtool" --version 2>&1 | awk '/version/ {print $3; exit}')"
if [ "$(printf '%s\n' "$am_version" 0.28.0 | sort -V | head -n1)" != 0.28.0 ]; then
  am_tmp="$(mktemp -d)"
  trap 'rm -rf "$am_tmp"' EXIT
  for f in "${am_files[@]}"; do
    grep -Ev '^ +timeout: ' "$f" > "$am_tmp/$(basename "$f")"
  done
  echo "== amtool $am_version < 0.28: checking without the webhook timeout"
  am_files=("$am_tmp"/*.yml)
  am_main="$am_tmp/$(basename "$am_main")"
fi
echo "== amtool check-config"
"$amtool" check-config "${am_files[@]}"
echo "== amtool config routes test"
route_test() { # expected-receivers labels...
  local want="$1"; shift
  "$amtool" config routes test --config.file="$am_main" --verify.receivers="$want" "$@" 2>/dev/null >/dev/null || {
    echo "rules/test.sh: alert {$*} is not routed to '$want':" >&2
    "$amtool" config routes test --config.file="$am_main" "$@" >&2 || true
    exit 1
  }
  echo "  {$*} -> $want"
}
route_test emptydir-remediator,human alertname=EmptyDirOverLimit remediation=evict severity=critical \
  namespace=default pod=empty-test1 uid=5cf142d1 volume=empty node=node-1
route_test emptydir-remediator,human alertname=PodEphemeralStorageOverLimit remediation=evict severity=critical \
  check=pod namespace=default pod=p uid=u node=node-1
route_test emptydir-remediator,human alertname=ContainerEphemeralStorageOverLimit remediation=evict severity=critical \
  check=container namespace=default pod=p uid=u container=c node=node-1
route_test human alertname=EmptyDirNearLimit severity=warning namespace=default pod=p uid=u volume=v
route_test human alertname=PodEphemeralStorageNearLimit severity=warning namespace=default pod=p uid=u
route_test human alertname=ContainerEphemeralStorageFillingUp severity=warning horizon=1h namespace=default pod=p uid=u container=c
route_test human alertname=ContainerEphemeralStorageLayerUnlocated severity=warning namespace=default pod=p uid=u container=c reason=no_rootfs_mount node=node-1
route_test human alertname=EmptyDirExporterDown severity=warning
route_test human alertname=EmptyDirGrowingWithoutLimit severity=info namespace=logs workload_kind=StatefulSet workload=spool volume=spool
# Acted on by the remediator only with --policy.evict-incomplete-after and a route of its own.
route_test human alertname=EmptyDirMeasurementIncomplete remediation=evict_incomplete severity=warning \
  namespace=default pod=p uid=u volume=v node=node-1
