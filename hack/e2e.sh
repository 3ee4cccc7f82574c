#!/usr/bin/env bash
# Runs the real-cluster suite (test/e2e) as N go test processes at once, each starting clusters
# of its own (test/cluster runs concurrent clusters, each in its network namespace). The suite
# waits on its clusters most of the time, a third of a core each, so N shards take about 1/N of
# its time. Every test the package lists runs in exactly one shard: dealt longest first to the
# shard with the least work so far, by its seconds in test/e2e/durations.txt (60 when not
# listed). Each shard's output goes to $E2E_LOG_DIR/e2e-<i>.log and is printed when all have
# ended; the shards' test times are written to $E2E_LOG_DIR/e2e-durations.txt.
#   hack/e2e.sh <shards> [go test flags]
set -euo pipefail
shards=${1:?usage: e2e.sh <shards> [go test flags]}
shift
go=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
logdir=${E2E_LOG_DIR:-$root/bin/stages}
mkdir -p "$logdir"
cd "$root"

tests=$("$go" test -list '^Test' ./test/e2e/ | grep '^Test' || true)
[ -n "$tests" ] || { echo "e2e: go test -list found no tests in ./test/e2e" >&2; exit 1; }
# One line per shard: the names of its tests, separated by "|".
plan=$(awk -v shards="$shards" '
  NR == FNR { if ($1 !~ /^#/ && NF == 2) secs[$1] = $2; next }
  { name[++n] = $1; s[n] = ($1 in secs) ? secs[$1] : 60 }
  END {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
      if (s[j] > s[i]) { t = s[i]; s[i] = s[j]; s[j] = t; t = name[i]; name[i] = name[j]; name[j] = t }
    for (i = 1; i <= n; i++) {
      best = 1
      for (k = 2; k <= shards; k++) if (load[k] < load[best]) best = k
      load[best] += s[i]
      list[best] = list[best] (list[best] == "" ? "" : "|") name[i]
    }
    for (k = 1; k <= shards; k++) if (list[k] != "") printf "%s %d\n", list[k], load[k]
  }' test/e2e/durations.txt <(printf '%s\n' "$tests"))

pids=()
i=0
while read -r list load; do
  i=$((i + 1))
  echo "e2e: shard $i (about ${load} s): ${list//|/ }"
  "$root/hack/gotest.sh" -count=1 -run "^($list)\$" "$@" ./test/e2e/ >"$logdir/e2e-$i.log" 2>&1 &
  pids+=($!)
done <<<"$plan"
# Stopped, stop every shard: the whole process group, whose test binaries stop their clusters.
trap 'trap - INT TERM; kill 0; wait' INT TERM
status=0
for j in "${!pids[@]}"; do
  wait "${pids[$j]}" || status=1
done
for j in $(seq 1 "$i"); do
  echo "=== e2e shard $j of $i ($logdir/e2e-$j.log)"
  cat "$logdir/e2e-$j.log"
done
sed -nE 's/^--- (PASS|FAIL): (Test[^ ]*) \(([0-9.]+)s\)$/\2 \3/p' "$logdir"/e2e-*.log | sort -k2 -rn >"$logdir/e2e-durations.txt"
exit $status
