#!/usr/bin/env bash
#
# Every contract the code cites is in the repository's own documents
# (test/lint/refs.py): no citation of a document outside it, every doc/
# file cited exists and every heading cited is one of its headings.  A
# file with three broken citations must give three findings, so that a
# checker that finds nothing cannot pass.  TAP lines on standard output.
#
set -uo pipefail
cd "$(dirname "$0")/../.."
T=$(mktemp -d /tmp/remora-refs.XXXXXX)
trap 'rm -rf "$T"' EXIT

ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; shift; [ $# -eq 0 ] || printf '  %s\n' "$@"; }

cat >"$T/broken.c" <<'C'
/* as DESIGN §4 says; see doc/nowhere.md; and doc/user-guide.md,
 * "A heading nobody wrote" */
C
n=$(echo "$T/broken.c" | python3 test/lint/refs.py | grep -c .)
if [ "$n" = 3 ]; then
	ok "test/lint/refs.py finds the 3 broken citations of a file made to have them"
else
	nok "test/lint/refs.py finds the 3 broken citations of a file made to have them" "found $n"
fi

# the built install script is made of sql/schema/ and sql/functions/, read there; this
# check's own files name broken citations on purpose
if ! files=$(git ls-files | grep -vE '\.(png|json)$|^sql/remora--[0-9.]+\.sql$|^test/lint/refs\.') || [ -z "$files" ]; then
	nok "the repository's citations hold (git ls-files lists nothing)"
	exit 1
fi
cited=$(xargs grep -ohE 'doc/[a-z_-]+\.md' <<<"$files" 2>/dev/null | wc -l)
if out=$(python3 test/lint/refs.py <<<"$files"); then
	ok "every document cited is the repository's own and has the heading cited ($cited citations)"
else
	mapfile -t found <<<"$out"
	nok "every document cited is the repository's own and has the heading cited" "${found[@]}"
fi
