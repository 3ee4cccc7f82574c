#!/usr/bin/env bash
# hack/vulncheck.sh GOVULNCHECK MODULE_DIR... — runs govulncheck on each module against a local copy
# of the Go vulnerability database, with no access to the internet.
#
# The database is the golang.org/x/vulndb module at a pinned version, fetched through the Go
# module proxy into the module cache (verified against the checksum database and against the
# hash below). Its data/osv directory holds one OSV file per report, named <ID>.json; govulncheck's
# file:// client reads such a flat directory directly (it builds the index in memory when the
# directory has no index/modules.json), so nothing is generated and nothing needs caching beyond
# the module cache.
#
# Every way of not reading the database fails loudly: a missing or altered module, a directory
# with too few entries, and a canary module (tools/vulncanary) with a known vulnerability
# that must be reported.
set -euo pipefail

VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018
VULNDB_SUM=h1:mfngRv0Yoh0VApsXKEN82CjD99kl7mtparN3bs3JnqI=
CANARY_ID=GO-2021-0113
MIN_ENTRIES=1000

die() { echo "vulncheck: $*" >&2; exit 1; }

[[ $# -ge 2 ]] || die "usage: $0 GOVULNCHECK MODULE_DIR..."
govulncheck=$(realpath "$1")
shift
tools=$(cd "$(dirname "$0")/../tools" && pwd)
GO=${GO:-go}

info=$(cd "$tools" && $GO mod download -json "golang.org/x/vulndb@$VULNDB_VERSION") ||
	die "cannot fetch golang.org/x/vulndb@$VULNDB_VERSION through the Go module proxy: $info"
field() { sed -n "s/^\t\"$1\": \"\(.*\)\",\{0,1\}$/\1/p" <<<"$info"; }
sum=$(field Sum)
dir=$(field Dir)
[[ $sum == "$VULNDB_SUM" ]] || die "golang.org/x/vulndb@$VULNDB_VERSION has hash '$sum', want $VULNDB_SUM"
db=$dir/data/osv
entries=$(find "$db" -maxdepth 1 -name 'GO-*.json' | wc -l)
((entries >= MIN_ENTRIES)) || die "$db holds $entries OSV entries, want at least $MIN_ENTRIES: the module's layout changed"
echo "vulncheck: database golang.org/x/vulndb@$VULNDB_VERSION, $entries entries"

canary=$(cd "$tools/vulncanary" && "$govulncheck" -db "file://$db" -scan module -format json) ||
	die "govulncheck failed on the canary module: $canary"
grep -q "\"$CANARY_ID\"" <<<"$canary" ||
	die "govulncheck did not report $CANARY_ID in tools/vulncanary: it is not reading $db"

status=0
for m in "$@"; do
	echo "vulncheck: govulncheck $m"
	(cd "$m" && "$govulncheck" -db "file://$db" ./...) || status=1
done
exit $status
