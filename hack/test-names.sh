#!/usr/bin/env bash
# Lists the tests a run ran, from the go test -json events hack/gotest.sh kept in a folder:
# one "<outcome> <package> <test>" per line (pass, fail or skip; the module's path left out of
# the package), sorted. With a second argument, a list written so earlier, it also says which
# tests passed then but did not pass now, so that a change to the runner shows it proves no
# less (CONTRIBUTING.md, "The test stages").
#   hack/test-names.sh <json folder> [<earlier list>]  >  list
set -euo pipefail
dir=${1:?usage: test-names.sh <json folder> [<earlier list>]}
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
  [ -z "$gone" ] || sed 's/^/  not passed here: /' <<<"$gone"
} >&2
