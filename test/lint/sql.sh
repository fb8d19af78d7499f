#!/usr/bin/env bash
#
# Each SQL function is written once (sql/README.md): the install script is
# sql/schema/ then sql/functions/, an upgrade its catalog changes
# (sql/upgrade/FROM--TO/) then the same sql/functions/.  So
#   - sql/functions/ holds only what can run again on an installed
#     catalog: every function, trigger and view is CREATE OR REPLACE, and
#     no table, index, policy, row or schema is made there;
#   - sql/schema/ and the upgrade parts define no function, trigger or
#     view (they would be a second copy of one in sql/functions/);
#   - no function or view is created in two files of sql/functions/.
# A tree planted with one fault of each kind must give each finding, so
# that a checker that finds nothing cannot pass.  TAP lines on standard
# output.  test/lint/sql.sh [SQLDIR] checks SQLDIR (default sql) alone.
#
set -uo pipefail
cd "$(dirname "$0")/../.."

ok() { echo "ok - $1"; }
nok() { echo "not ok - $1"; shift; [ $# -eq 0 ] || printf '  %s\n' "$@"; }

# findings DIR: one line a fault, "FILE:LINE: what"
findings() {
	local dir=$1 f
	# statements begin at the start of a line in every part; what a DO
	# block creates is indented, and judged by its block (the constraint
	# trigger that PostgreSQL cannot replace)
	for f in "$dir"/functions/*.sql; do
		[ -e "$f" ] || continue
		grep -nE '^CREATE +(FUNCTION|VIEW|TRIGGER|PROCEDURE|AGGREGATE)' "$f" |
			sed "s|^|$f:|; s|\$| (not OR REPLACE)|"
		grep -nE '^(CREATE +(UNLOGGED +)?TABLE|CREATE +(UNIQUE +)?INDEX|CREATE +POLICY|CREATE +SCHEMA|CREATE +ROLE|CREATE +TYPE|CREATE +SEQUENCE|ALTER +TABLE|INSERT|UPDATE|DELETE|DROP|TRUNCATE)' "$f" |
			sed "s|^|$f:|; s|\$| (catalog: sql/schema/ and the upgrade parts)|"
	done
	for f in "$dir"/schema/*.sql "$dir"/upgrade/*/*.sql; do
		[ -e "$f" ] || continue
		grep -niE '^[[:space:]]*CREATE +(OR +REPLACE +)?(CONSTRAINT +)?(FUNCTION|VIEW|TRIGGER|PROCEDURE)' "$f" |
			sed "s|^|$f:|; s|\$| (a function, trigger or view: sql/functions/)|"
	done
	# a name created in two files (overloads in one file are one function's)
	grep -oiE '^CREATE +OR +REPLACE +(FUNCTION|VIEW|PROCEDURE) +[A-Za-z_.]+' \
		"$dir"/functions/*.sql 2>/dev/null |
		awk -F: '{ n = tolower($2); sub(/.* /, "", n); if (!(n in f)) f[n] = $1;
			else if (index(" " f[n] " ", " " $1 " ") == 0) f[n] = f[n] " " $1 }
			END { for (n in f) if (split(f[n], a, " ") > 1) print n ": in " f[n] }' | sort
}

# the planted tree: one fault of each kind, in copies of real parts
T=$(mktemp -d /tmp/remora-sql-lint.XXXXXX)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/schema" "$T/functions" "$T/upgrade/a--b"
cp sql/functions/20_helpers.sql sql/functions/30_submit.sql "$T/functions/"
sed -i '0,/^CREATE OR REPLACE FUNCTION/s//CREATE FUNCTION/' "$T/functions/20_helpers.sql"
echo 'CREATE INDEX planted_idx ON remora.jobs (label);' >>"$T/functions/30_submit.sql"
grep -m1 -A3 '^CREATE OR REPLACE FUNCTION' sql/functions/30_submit.sql >>"$T/functions/20_helpers.sql"
printf 'CREATE TABLE remora.planted (x int);\nCREATE FUNCTION remora.planted() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n' >"$T/schema/10_planted.sql"
printf '  create or replace view remora_planted AS SELECT 1;\n' >"$T/upgrade/a--b/10_planted.sql"
n=$(findings "$T" | grep -c .)
if [ "$n" = 5 ]; then
	ok "test/lint/sql.sh finds the 5 faults of a tree made to have them"
else
	nok "test/lint/sql.sh finds the 5 faults of a tree made to have them" "found $n:" "$(findings "$T")"
fi

dir=${1:-sql}
if [ -z "$(ls "$dir"/functions/*.sql 2>/dev/null)" ]; then
	nok "$dir/functions/ holds the functions"
	exit 1
fi
found=$(findings "$dir")
if [ -z "$found" ]; then
	ok "each SQL function, trigger and view is written once, in $dir/functions/, and can be run again"
else
	nok "each SQL function, trigger and view is written once, in $dir/functions/, and can be run again" "$found"
fi
