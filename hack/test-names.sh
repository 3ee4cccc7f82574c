#!/usr/bin/env bash
# Lists the tests a run ran, from the go test -json events hack/gotest.sh kept in a directory:
# one "<outcome> <package> <test>" per line (pass, fail or skip; the module's path left out of
# the package), sorted. With a second argument, a list written so earlier, it also says which
# tests passed then but did not pass now, so that a change to the runner shows it proves no
# less (CONTRIBUTING.md, "The test stages").
#   hack/test-names.sh <json directory> [<earlier list>]  >  list
set -euo pipefail
dir=${1:?usage: test-names.sh <json directory> [<earlier list>]}
earlier=${2:-}
list=$(cat "$dir"/*.json 2>/dev/null |
  jq -r 'select(.Test != null and (.Action == "pass" or .Action == "fail" or .Action == "skip"))
         | "\(.Action) \(.Package | sub("^github.com/emptydir-guard/emptydir-guard/?"; "") | if . == "" then "." else . end) \(.Test)"' |
  sort -u -k2,3 -k1,1)
printf '%s\n' "$list"
[ -n "$earlier" ] || exit 0
passed() { awk '$1 == "pass" {print $2, $3}' | sort -u; }
then_passed=$(passed <"$earlier")
now_passed=$(printf '%s\n' "$list" | passed)
gone=$(comm -23 <(printf '%s\n' "$then_passed") <(printf '%s\n' "$now_passed"))
new=$(comm -13 <(printf '%s\n' "$then_passed") <(printf '%s\n' "$now_passed"))
{
  echo "test-names: $(printf '%s\n' "$now_passed" | grep -c .) tests passed; vs $earlier: $(printf '%s' "$new" | grep -c . || true) new, $(printf '%s' "$gone" | grep -c . || true) passed there and not here"
  # At most 20 names: a run stopped early would list most of the suite, and its end is read.
  [ -z "$gone" ] || sed 's/^/  not passed here: /' <<<"$gone" | awk 'NR <= 20; END { if (NR > 20) printf "  ... and %d more (%s)\n", NR - 20, "tests-run.txt" }'

} >&2
# The failed tests' own words, last, where a run's log is cut to its end: for each failed test
# without a failed subtest, the last lines it printed (its t.Error and t.Log lines).
cat "$dir"/*.json 2>/dev/null |
  jq -rs '
    (map(select(.Action == "fail" and .Test != null) | "\(.Package) \(.Test)") | unique) as $failed
    | [ $failed[] as $f | select(all($failed[]; startswith($f + "/") | not)) | $f ] as $leaves
    | reduce (.[] | select(.Action == "output" and .Test != null)) as $e ({};
        ("\($e.Package) \($e.Test)") as $k
        | if ($leaves | index($k)) then .[$k] += [$e.Output | rtrimstr("\n")] else . end)
    | to_entries[]
    | "  FAIL \(.key | sub("^github.com/emptydir-guard/emptydir-guard/?"; "")):",
      (.value | map(select(test("^\\s*(=== |--- )") | not)) | .[-8:][] | "    " + (.[0:300]))' >&2 || true
