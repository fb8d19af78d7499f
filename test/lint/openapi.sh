#!/usr/bin/env bash
#
# The OpenAPI document of the HTTP API (web/api/openapi.json) against the
# server's routes, without running it:
#   - it is valid OpenAPI 3.1 (test/openapi/check.js document);
#   - the routes are read from the router and the resources (src/http/
#     api*.c): the paths api.c compares against, the sub-paths each
#     resource compares its rest against, and the methods each answers (the
#     Allow of its 405); every one is an operation of the document, and
#     every operation of the document is one of them.
# The answers themselves are checked against the document by
# test/e2e/http.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
DOC=web/api/openapi.json
if [ ! -d test/openapi/node_modules/@seriousme/openapi-schema-validator ]; then
	(cd test/openapi && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
failed=0
if out=$(node test/openapi/check.js document "$DOC" 2>&1); then
	echo "ok - $DOC is valid OpenAPI 3.1"
else
	echo "not ok - $DOC is valid OpenAPI 3.1: $out"
	failed=1
fi

# routes: "FUNCTION PATH" from api.c's dispatch (a prefix ending in "/"
# takes an id: {id}, or the role for role-limits), then the methods of
# each resource function from its own Allow lists and sub-paths
routes=()
allow_of() { # FILE FUNCTION [REST] [DEPTH]: the Allow of that function (and
	# rest), or of a helper of the same file it hands the request to
	# (admin_view, and admin_get below it), three calls deep at most
	local f=$1 fn=$2 rest=${3:-} depth=${4:-0} allow helper
	allow=$(allow_in "$f" "$fn" "$rest")
	if [ -z "$allow" ] && [ -z "$rest" ] && [ "$depth" -lt 3 ]; then
		for helper in $(sed -n "/^$fn(/,/^}/p" "$f" | grep -o '[a-z_]\+(req' | sed 's/(req$//'); do
			[ "$helper" != "$fn" ] && grep -q "^$helper(" "$f" &&
				allow=$(allow_of "$f" "$helper" "" $((depth + 1))) && [ -n "$allow" ] && break
		done
	fi
	echo "$allow"
}
allow_in() {
	local f=$1 fn=$2 rest=${3:-}
	awk -v fn="$fn" -v rest="$rest" '
		$0 ~ "^" fn "\\(" { infn = 1 }
		infn && /^}/ { infn = 0 }
		infn && rest != "" && index($0, "\"" rest "\"") { inrest = 1 }
		infn && (rest == "" || inrest) && match($0, /method_not_allowed\(req, "[A-Z, ]+"\)/) {
			s = substr($0, RSTART, RLENGTH); sub(/.*, "/, "", s); sub(/"\)$/, "", s)
			print s; exit }' "$f"
}
add() { # PATH METHODS
	local m
	[ -n "$2" ] || routes+=("? $1")
	for m in ${2//,/ }; do routes+=("$m $1"); done
}
# the router's table: each path api.c compares, and the function it calls
while read -r path fn; do
	case $fn in
	remora_api_job) ;; # below, with its sub-paths
	remora_api_export) ;;
	openapi_document) add "$path" "$(allow_of src/http/api.c "$fn")" ;;
	remora_api_role_limit) add "$path{role}" "$(allow_of src/http/api_admin.c "$fn")" ;;
	*) add "$path" "$(allow_of "$(grep -l "^$fn(" src/http/api_*.c)" "$fn")" ;;
	esac
done < <(awk '/strn?cmp\(path, "\/api\//, /remora_api_[a-z_]+\(|openapi_document\(/ {
		if (match($0, /"\/api\/[^"]*"/)) p = substr($0, RSTART + 1, RLENGTH - 2)
		if (match($0, /(remora_api_[a-z_]+|openapi_document)\(/)) {
			f = substr($0, RSTART, RLENGTH - 1)
			if (p != "") print p, f; p = "" } }' src/http/api.c)
# one job, one export: the id's own methods, then each sub-path's
add "/api/jobs/{id}" "$(allow_of src/http/api_jobs.c remora_api_job)"
for rest in $(grep -o 'strcmp(rest, "/[a-z/]*")' src/http/api_jobs.c | cut -d'"' -f2); do
	if [ "$rest" = /export ]; then
		add "/api/jobs/{id}$rest" POST # api_exports.c's, after the POST check here
	else
		add "/api/jobs/{id}$rest" "$(allow_of src/http/api_jobs.c remora_api_job "$rest")"
	fi
done
add "/api/exports/{id}" "$(allow_of src/http/api_exports.c remora_api_export)"
for rest in $(grep -o 'strcmp(rest, "/[a-z/]*")' src/http/api_exports.c | cut -d'"' -f2); do
	add "/api/exports/{id}$rest" "$(allow_of src/http/api_exports.c remora_api_export "$rest")"
done
# a resource whose methods the script could not read is a failure of its
# own, not a route quietly left out
bad=$(printf '%s\n' "${routes[@]}" | grep -v '^[A-Z]\+ /api/' || true)
if [ ${#routes[@]} -lt 20 ] || [ -n "$bad" ]; then
	echo "not ok - the routes are read from src/http/api*.c (${#routes[@]} read; unreadable: $bad)"
	failed=1
elif out=$(node test/openapi/check.js routes "$DOC" "${routes[@]}" 2>&1); then
	echo "ok - the document has each of the server's ${#routes[@]} routes, and no other"
else
	echo "not ok - the document and the server's routes differ: $out"
	failed=1
fi
exit $failed
