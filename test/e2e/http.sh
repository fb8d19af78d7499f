#!/usr/bin/env bash
#
# The web server "remora http" and its JSON API (doc/user-guide.md, "The
# HTTP API"; doc/security.md, "The web client and API"), end to end
# with curl against a real cluster, workers, nginx and the S3 server:
#   - the worker shows in pg_stat_activity, serves the web client, and is
#     restarted after it is terminated;
#   - sign-in by PostgreSQL authentication (pg_hba.conf: scram-sha-256):
#     right and wrong passwords, a role whose pg_hba line is trust is
#     refused (no password was checked), the cookie is HttpOnly and
#     SameSite=Strict, a fresh session id at every sign-in, sign-out,
#     idle expiry (changed by a reload), throttling after failures;
#   - HTTP Basic on /api/; CSRF: a cookie-authenticated change without the
#     token, or from another Origin, is refused;
#   - every endpoint, and every status mapping: 201, 200, 204, 304 (ETag),
#     400 (bad JSON, unknown field, 22023 with the field, bad ids),
#     401, 403 (42501, RM001, CSRF, admin-only), 404 (P0002, 42704, unknown
#     path),
#     409 (23505), 413, 405, 429 (53400: a role at its max_queued);
#   - row-level security: a remora_user sees only their own jobs, an
#     admin sees everyone's (the list, events, the last hour's figures:
#     GET /api/throughput);
#   - limits per role: an admin reads, sets and resets them (a role named
#     with quotes too), a remora_user gets 403, hostile bodies 400;
#   - exports: POST /api/jobs/{id}/export publishes a member the AWS CLI
#     reads back; an idempotency key replayed, reused (409); bad JSON, a
#     bad if_exists, an unknown field, no prefix, no target grant (403),
#     another user's job (404), no CSRF token (403); GET /api/exports with
#     its state and job filters and keyset paging, GET /api/exports/{id};
#     an export left outcome_unknown (a copy answered 500 at the proxy):
#     a remora_user's retry or fail is 403, the owner's verify names the
#     missing member, an admin's retry publishes it, resolving it again
#     is 409;
#   - a download submitted over the API finishes, its member read through
#     the presigned link has the file's SHA-256; Server-Sent Events report
#     its progress;
#   - hostile input: huge bodies (declared and chunked), bad cookies, path
#     traversal on static files, a slow client, 100 concurrent clients;
#   - GET /api/openapi.json, open to anyone, is web/api/openapi.json and
#     valid OpenAPI 3.1; every answer of this script (status, body, the
#     Allow of a 405) is one the document gives (test/openapi/check.js);
#   - without TLS a non-loopback address is refused (logged); with
#     remora.http_tls_cert_file/key_file it serves HTTPS.
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/http.sh"
e2e_begin http

stack_up
check "remora.http_listen is empty by default: no web server" \
	test -z "$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora http'")"
# no request of this test may hang it (a later --max-time wins)
curl() { command curl --max-time 30 "$@"; }
restart() { cluster_stop "$T/pg" fast; cluster_start "$T/pg"; }
http_up <<CONF
remora.http_client_timeout = '2s'
remora.http_max_body = '64kB'
remora.http_login_max_failures = 3
remora.http_login_lockout = '3s'
CONF
check "the worker shows in pg_stat_activity as 'remora http'" http_running

B=$T/body
HDR=$T/headers
# call METHOD PATH [curl args]: the status; body in $B, headers in $HDR.
# Every answer is also kept in $ANSWERS (an index line, copies of the body
# and headers: two forks, as some checks below race a 2 s timeout) and
# checked against the OpenAPI document at the end (test/openapi/check.js).
ANSWERS=$T/answers
mkdir -p "$ANSWERS"
call() {
	local m=$1 p=$2 code a
	shift 2
	: >"$B" # curl leaves the file as it was when there is no body (304)
	code=$(curl -s -o "$B" -D "$HDR" -w '%{http_code}' -X "$m" "$@" "$H$p") || true
	if [ "$code" != 000 ]; then
		a=$ANSWERS/$EPOCHREALTIME.$BASHPID
		cp "$B" "$a.body"
		cp "$HDR" "$a.headers"
		printf '%s %s %s %s\n' "$a" "$code" "$m" "$p" >>"$ANSWERS/index"
	fi
	echo "$code"
}
body() { cat "$B"; }
field() { jq -r "$1" "$B"; }
header() { grep -i "^$1:" "$HDR" | head -1 | cut -d' ' -f2- | tr -d '\r'; }
as() { local who=$1; shift; call "$@" -u "$who:$who-pw"; }

# --- static files and traversal ---------------------------------------------
check_eq "GET / serves the web client" "$(call GET /)" 200
check "the page has a Content-Security-Policy without inline scripts" \
	grep -qi "^content-security-policy: default-src 'self'; script-src 'self';" "$HDR"
check "the page says nosniff and DENY framing" \
	grep -qi '^x-frame-options: DENY' "$HDR"
check_eq "the client's script is served" "$(call GET /app.js)" 200
check_eq "its type is JavaScript" "$(header Content-Type)" "text/javascript; charset=utf-8"
for p in '/../../../../etc/passwd' '/%2e%2e/%2e%2e/etc/passwd' '/..%2f..%2fetc%2fpasswd' \
	'/web/index.html' '/index.html/..' '/%00' '//etc/passwd' '/app.js%00.html'; do
	code=$(curl -s --path-as-is -o "$B" -w '%{http_code}' "$H$p")
	if [ "$code" = 404 ] || [ "$code" = 400 ]; then
		if grep -q 'root:' "$B"; then not_ok "static path $p leaks a file"; else ok "static path $p: $code"; fi
	else
		not_ok "static path $p answered $code"
	fi
done

# --- not signed in, sign-in ----------------------------------------------------
check_eq "GET /api/jobs without credentials: 401" "$(call GET /api/jobs)" 401
check_eq "  with sqlstate 28000" "$(field .sqlstate)" 28000
check_eq "a wrong password: 401" \
	"$(call POST /api/session -H 'Content-Type: application/json' -d '{"user":"alice","password":"nope"}')" 401
check "  with no Set-Cookie" bash -c "! grep -qi '^set-cookie' '$HDR'"
check_eq "a role that pg_hba lets in without password cannot sign in (401)" \
	"$(call POST /api/session -d '{"user":"trusty","password":"anything"}')" 401
check "  and the answer says why" grep -q 'did not ask for a password' "$B"
check_eq "a body that is not JSON: 400" "$(call POST /api/session -d '{user:')" 400
check_eq "  sqlstate 22P02" "$(field .sqlstate)" 22P02
check_eq "no password field: 400" "$(call POST /api/session -d '{"user":"alice"}')" 400

signin() {	# signin USER: sets COOKIE and CSRF
	call POST /api/session -H 'Content-Type: application/json' \
		-d "{\"user\":\"$1\",\"password\":\"$1-pw\"}" >/dev/null
	COOKIE=$(header Set-Cookie | sed 's/;.*//')
	CSRF=$(field .csrf)
}
check_eq "the right password: 200" \
	"$(call POST /api/session -d '{"user":"alice","password":"alice-pw"}')" 200
SETC=$(header Set-Cookie)
check "the cookie is HttpOnly and SameSite=Strict" \
	bash -c "[[ '$SETC' == remora_session=*HttpOnly* && '$SETC' == *SameSite=Strict* ]]"
check_eq "the body names the user" "$(field .user)" alice
check "the body carries a CSRF token" test "$(field .csrf | wc -c)" -gt 60
FIRST=$(echo "$SETC" | sed 's/;.*//')
signin alice
check "a second sign-in gets a new session id" test "$COOKIE" != "$FIRST"
check_eq "GET /api/session with the cookie" "$(call GET /api/session -b "$COOKIE")" 200
check_eq "  is alice" "$(field .user)" alice
check_eq "  not an admin" "$(field .admin)" false

# --- CSRF ----------------------------------------------------------------------
check_eq "a submit by cookie without the CSRF token: 403" \
	"$(call POST /api/jobs -b "$COOKIE" -d "{\"source\":\"$SRC/a.bin\"}")" 403
check "  says CSRF" grep -q CSRF "$B"
check_eq "with a wrong token: 403" \
	"$(call POST /api/jobs -b "$COOKIE" -H 'X-CSRF-Token: 00' -d "{\"source\":\"$SRC/a.bin\"}")" 403
check_eq "with the token but from another Origin: 403" \
	"$(call POST /api/jobs -b "$COOKIE" -H "X-CSRF-Token: $CSRF" -H 'Origin: http://evil.example' -d "{\"source\":\"$SRC/a.bin\"}")" 403
check_eq "sign-out without the token: 403" "$(call DELETE /api/session -b "$COOKIE")" 403

# --- submit and read ---------------------------------------------------------------
make_file a.bin 3000000
make_file big.bin 40000000
ja() { call "$@" -b "$COOKIE" -H "X-CSRF-Token: $CSRF"; }
check_eq "POST /api/jobs with cookie and token: 201" \
	"$(ja POST /api/jobs -H 'Content-Type: application/json' -d "{\"source\":\"$SRC/a.bin\",\"options\":{\"label\":\"<b>first</b>\"}}")" 201
JOB=$(field .job_id)
check "  returns the job id" test "$JOB" -gt 0
check_eq "  and Location" "$(header Location)" "/api/jobs/$JOB"
wait_job() {	# wait_job JOB STATE: through the API
	[ "$(as alice GET "/api/jobs/$1")" = 200 ] && [ "$(field .state)" = "$2" ]
}
check "the download finishes (seen through the API)" wait_for 60 wait_job "$JOB" succeeded
check_eq "GET /api/jobs/$JOB: 200" "$(ja GET "/api/jobs/$JOB")" 200
check_eq "  job_id" "$(field .job_id)" "$JOB"
check_eq "  the label comes back as JSON text" "$(field .label)" "<b>first</b>"
check "  with its attempts" test "$(field '.attempts | length')" -ge 1
ETAG=$(header ETag)
check "  with an ETag" test -n "$ETAG"
check_eq "If-None-Match with the ETag: 304" "$(ja GET "/api/jobs/$JOB" -H "If-None-Match: $ETAG")" 304
check_eq "GET /api/jobs/$JOB/result: 200" "$(ja GET "/api/jobs/$JOB/result")" 200
check_eq "  one member" "$(field '.members | length')" 1
check_eq "  with the file's SHA-256" "$(field '.members[0].sha256')" "$(sha256sum "$WWW/a.bin" | cut -d' ' -f1)"
check_eq "GET .../result/url?path=a.bin: 200" "$(ja GET "/api/jobs/$JOB/result/url?path=a.bin&ttl=300")" 200
URL=$(field .url)
check_eq "  the presigned link gives the file" \
	"$(curl -s "$URL" | sha256sum | cut -d' ' -f1)" "$(sha256sum "$WWW/a.bin" | cut -d' ' -f1)"
check_eq "  a path that is not a member: 404" "$(ja GET "/api/jobs/$JOB/result/url?path=nope")" 404
check_eq "  no path: 400" "$(ja GET "/api/jobs/$JOB/result/url")" 400
check_eq "  a bad ttl: 400" "$(ja GET "/api/jobs/$JOB/result/url?path=a.bin&ttl=soon")" 400

# --- errors ------------------------------------------------------------------------
check_eq "bad JSON: 400" "$(ja POST /api/jobs -d '{"source":')" 400
check_eq "  sqlstate 22P02" "$(field .sqlstate)" 22P02
check_eq "an unknown field: 400" "$(ja POST /api/jobs -d '{"source":"x","color":1}')" 400
check_eq "source not a string: 400" "$(ja POST /api/jobs -d '{"source":5}')" 400
check_eq "  the field is named" "$(field .field)" source
check_eq "an invalid option (22023): 400" \
	"$(ja POST /api/jobs -d "{\"source\":\"$SRC/a.bin\",\"options\":{\"priority\":\"high\"}}")" 400
check_eq "  sqlstate 22023" "$(field .sqlstate)" 22023
check_eq "  field options.priority" "$(field .field)" options.priority
check_eq "an unknown option: 400 naming it" \
	"$(ja POST /api/jobs -d "{\"source\":\"$SRC/a.bin\",\"options\":{\"colour\":1}}") $(field .field)" "400 options.colour"
check_eq "a bad source: 400" "$(ja POST /api/jobs -d '{"source":"ftp://x/y"}')" 400
check_eq "the metadata address (RM001): 403" \
	"$(ja POST /api/jobs -d '{"source":"http://169.254.169.254/latest"}') $(field .sqlstate)" "403 RM001"
ja POST /api/jobs -d "{\"source\":\"$SRC/a.bin\",\"idempotency_key\":\"k1\"}" >/dev/null
check_eq "an idempotency key reused for another request: 409" \
	"$(ja POST /api/jobs -d "{\"source\":\"$SRC/b.bin\",\"idempotency_key\":\"k1\"}") $(field .sqlstate)" "409 23505"
check_eq "a job that does not exist: 404 P0002" \
	"$(ja GET /api/jobs/999999) $(field .sqlstate)" "404 P0002"
check_eq "a job id that is not a number: 400" "$(ja GET /api/jobs/abc)" 400
check_eq "an unknown API path: 404" "$(ja GET /api/nothing)" 404
check_eq "a wrong method: 405" "$(ja PUT /api/jobs)" 405
check_eq "HEAD of a job: 200, as GET, without a body" \
	"$(curl -s -o /dev/null -I -w '%{http_code} %{size_download}' -b "$COOKIE" "$H/api/jobs/$JOB")" "200 0"
check_eq "hard=maybe: 400" "$(ja DELETE "/api/jobs/$JOB?hard=maybe")" 400
check_eq "limit=0: 400" "$(ja GET '/api/jobs?limit=0')" 400
check_eq "after=x: 400" "$(ja GET '/api/jobs?after=x')" 400
check_eq "a role without remora_user (42501): 403" "$(as dave GET /api/jobs) $(field .sqlstate)" "403 42501"
check_eq "stats for a remora_user: 403" "$(ja GET /api/stats)" 403
check_eq "workers for a remora_user: 403" "$(ja GET /api/workers)" 403
check_eq "stats for an admin: 200" "$(as carol GET /api/stats)" 200
check "  counts the succeeded job" test "$(field .succeeded)" -ge 1
check_eq "workers for an admin: 200" "$(as carol GET /api/workers)" 200
check "  lists the workers" test "$(field '.workers | length')" -ge 1
check_eq "grants for a remora_user: 403" "$(ja GET /api/admin/grants) $(field .sqlstate)" "403 42501"
q "SELECT remora.grant_source('bob', 'srcbucket', 'models/*')" >/dev/null
check_eq "grants for an admin: 200" "$(as carol GET /api/admin/grants)" 200
check_eq "  lists the target grants" \
	"$(field '[.targets[] | select(.bucket == "target") | .role] | sort | join(",")')" "alice,bob"
check_eq "  and the source grants" \
	"$(field '.sources[] | select(.role == "bob") | .bucket + " " + .prefix_pattern')" "srcbucket models/*"
check_eq "grants: a wrong method: 405" "$(as carol PUT /api/admin/grants)" 405
check_eq "an admin grants bob a target: 204" \
	"$(as carol POST /api/admin/grants -H 'Content-Type: application/json' -d '{"kind":"target","role":"bob","bucket":"bobout","prefix":"x/*"}')" 204
check_eq "  which the grants then list" \
	"$(as carol GET /api/admin/grants >/dev/null; field '[.targets[] | select(.role == "bob" and .bucket == "bobout") | .prefix_pattern] | join(",")')" "x/*"
check_eq "  a source grant with its endpoint-less default: 204" \
	"$(as carol POST /api/admin/grants -d '{"kind":"source","role":"bob","bucket":"bobsrc"}')" 204
check_eq "  a remora_user cannot grant: 403" \
	"$(as alice POST /api/admin/grants -d '{"kind":"target","role":"alice","bucket":"mine"}') $(field .sqlstate)" "403 42501"
check_eq "  a kind that is neither: 400 naming it" \
	"$(as carol POST /api/admin/grants -d '{"kind":"both","role":"bob","bucket":"b"}') $(field .field)" "400 kind"
check_eq "  a target grant with an endpoint: 400 naming it" \
	"$(as carol POST /api/admin/grants -d '{"kind":"target","role":"bob","bucket":"b","endpoint":"e"}') $(field .field)" "400 endpoint"
check_eq "  an unknown field: 400" "$(as carol POST /api/admin/grants -d '{"kind":"target","role":"bob","bucket":"b","colour":"x"}')" 400
check_eq "  a role that does not exist: an error, nothing granted" \
	"$(as carol POST /api/admin/grants -d '{"kind":"target","role":"nobody_here","bucket":"b"}' | cut -c1) $(q "SELECT count(*) FROM remora.target_grants WHERE bucket = 'b'")" "4 0"
check_eq "the admin revokes it: 204" "$(as carol DELETE '/api/admin/grants?kind=target&role=bob&bucket=bobout&prefix=x/*')" 204
check_eq "  again: 404, no such grant" "$(as carol DELETE '/api/admin/grants?kind=target&role=bob&bucket=bobout&prefix=x/*')" 404
check_eq "  the source one: 204" "$(as carol DELETE '/api/admin/grants?kind=source&role=bob&bucket=bobsrc')" 204

# --- limits per role ---------------------------------------------------------------
lim() { jq -r --arg r "$1" "[.role_limits[] | select(.role == \$r) | .$2][0] // \"none\"" "$B"; }
check_eq "role limits for a remora_user: 403" "$(ja GET /api/admin/role-limits) $(field .sqlstate)" "403 42501"
check_eq "role limits for an admin: 200" "$(as carol GET /api/admin/role-limits)" 200
check_eq "  the admin's own row, with the default weight" "$(lim carol weight)" 1
check_eq "an admin sets alice's weight and max_running: 204" \
	"$(as carol PUT /api/admin/role-limits/alice -d '{"weight":3,"max_running":4,"max_queued":null}')" 204
as carol GET /api/admin/role-limits >/dev/null
check_eq "  the list shows them" "$(lim alice weight) $(lim alice max_running) $(lim alice max_queued)" "3 4 0"
check_eq "  in remora.role_limits" \
	"$(q "SELECT weight || ' ' || max_running || ' ' || coalesce(max_queued::text, 'null') FROM remora.role_limits WHERE role_id = 'alice'::regrole")" "3 4 null"
check_eq "a remora_user's PUT: 403 (the function's grant)" \
	"$(ja PUT /api/admin/role-limits/alice -d '{"weight":1000}') $(field .sqlstate)" "403 42501"
check_eq "a PUT by cookie without the CSRF token: 403" \
	"$(call PUT /api/admin/role-limits/alice -b "$COOKIE" -d '{"weight":1000}')" 403
check_eq "  alice's weight is still 3" "$(q "SELECT weight FROM remora.role_limits WHERE role_id = 'alice'::regrole")" 3
for bad in '{weight:' '[3]' '"3"' '{"weight":"3"}' '{"weight":1.5}' '{"weight":1e2}' '{"weight":true}' \
	'{"weight":{"a":1}}' '{"weight":99999999999}' '{"max_bytes_per_second":9999999999999999999999}' \
	'{"weight":0}' '{"weight":1001}' '{"max_running":-1}' '{"max_queued":-5}' '{"nope":1}'; do
	check_eq "a hostile body $bad: 400" "$(as carol PUT /api/admin/role-limits/alice -d "$bad")" 400
done
check_eq "  weight 0 names the field (22023 from the function)" "$(as carol PUT /api/admin/role-limits/alice -d '{"weight":0}') $(field .sqlstate) $(field .field)" "400 22023 weight"
check_eq "  a string names the field" "$(as carol PUT /api/admin/role-limits/alice -d '{"max_queued":"7"}') $(field .field)" "400 max_queued"
check_eq "  and nothing changed" \
	"$(q "SELECT weight || ' ' || max_running || ' ' || coalesce(max_queued::text, 'null') FROM remora.role_limits WHERE role_id = 'alice'::regrole")" "3 4 null"
check_eq "an unknown role: 404 42704" "$(as carol PUT /api/admin/role-limits/nobody -d '{"weight":2}') $(field .sqlstate)" "404 42704"
check_eq "a role name above 63 bytes: 400" "$(as carol PUT "/api/admin/role-limits/$(printf 'a%.0s' {1..64})" -d '{"weight":2}')" 400
q "CREATE ROLE \"o'ne \"\"q\"\";--\"" >/dev/null
check_eq "a role whose name has quotes: 204" \
	"$(as carol PUT "/api/admin/role-limits/o%27ne%20%22q%22%3B--" -d '{"max_queued":7}')" 204
check_eq "  its own row, found by its name" \
	"$(q "SELECT max_queued FROM remora.role_limits WHERE role_id = (SELECT oid FROM pg_roles WHERE rolname = 'o''ne \"q\";--')")" 7
check_eq "  reset: 204" "$(as carol DELETE "/api/admin/role-limits/o%27ne%20%22q%22%3B--")" 204
q "DROP ROLE \"o'ne \"\"q\"\";--\"" >/dev/null
check_eq "a remora_user's reset: 403" "$(ja DELETE /api/admin/role-limits/alice)" 403
check_eq "an admin resets alice: 204" "$(as carol DELETE /api/admin/role-limits/alice)" 204
check_eq "  her row is gone from remora.role_limits" "$(q "SELECT count(*) FROM remora.role_limits WHERE role_id = 'alice'::regrole")" 0
as carol GET /api/admin/role-limits >/dev/null
check "  the list shows the defaults, or no row for her" bash -c "[[ '$(lim alice weight) $(lim alice max_running)' =~ ^(1\ 0|none\ none)$ ]]"
check_eq "reset of an unknown role: 404" "$(as carol DELETE /api/admin/role-limits/nobody)" 404
check_eq "role limits: a wrong method: 405" "$(as carol POST /api/admin/role-limits)" 405
check_eq "a role's limits: GET is a wrong method: 405" "$(as carol GET /api/admin/role-limits/alice)" 405

# --- row-level security, Basic -----------------------------------------------------------
check_eq "Basic with a wrong password: 401" "$(call GET /api/jobs -u bob:wrong)" 401
check_eq "bob submits over Basic (no CSRF token needed): 201" \
	"$(as bob POST /api/jobs -d "{\"source\":\"$SRC/slow/big.bin\"}")" 201
BJOB=$(field .job_id)
check_eq "alice does not see bob's job: 404" "$(ja GET "/api/jobs/$BJOB")" 404
check_eq "alice cannot cancel it: 404" "$(ja POST "/api/jobs/$BJOB/cancel")" 404
check_eq "nor delete it: 404" "$(ja DELETE "/api/jobs/$BJOB")" 404
ja GET '/api/jobs?limit=1000' >/dev/null
check_eq "alice's list holds only her jobs" "$(field '[.jobs[].owner] | unique | join(",")')" alice
as bob GET '/api/jobs' >/dev/null
check_eq "bob's list holds only his" "$(field '[.jobs[].owner] | unique | join(",")')" bob
as carol GET '/api/jobs?limit=1000' >/dev/null
check_eq "the admin sees both" "$(field '[.jobs[].owner] | unique | join(",")')" alice,bob
as carol GET "/api/jobs?state=succeeded" >/dev/null
check_eq "state filter" "$(field '[.jobs[].state] | unique | join(",")')" succeeded
as carol GET "/api/jobs?q=slow" >/dev/null
check_eq "search by source" "$(field '[.jobs[].job_id] | join(",")')" "$BJOB"
as carol GET "/api/jobs?q=%3Cb%3Efirst" >/dev/null
check_eq "search by label" "$(field '[.jobs[].job_id] | join(",")')" "$JOB"
as alice GET '/api/jobs?limit=1' >/dev/null
NEXT=$(field .next)
FIRSTID=$(field '.jobs[0].job_id')
as alice GET "/api/jobs?limit=1&after=$NEXT" >/dev/null
check "keyset paging: the next page is older" test "$(field '.jobs[0].job_id')" -lt "$FIRSTID"

# --- Server-Sent Events ---------------------------------------------------------------
curl -s -N --max-time 3 -u bob:bob-pw "$H/api/events" >"$T/events" 2>/dev/null || true
check "GET /api/events streams bob's job" grep -q "\"job_id\" *: *$BJOB" "$T/events"
check "  and nothing of alice's" bash -c "! grep -q '\"job_id\" *: *$JOB,' '$T/events'"
curl -s -N --max-time 3 -b "$COOKIE" -D "$HDR" "$H/api/events" >"$T/events" 2>/dev/null || true
check_eq "  it is text/event-stream" "$(header Content-Type)" "text/event-stream; charset=utf-8"

# --- cancel, delete --------------------------------------------------------------------
check_eq "bob cancels his running job: 200" "$(as bob POST "/api/jobs/$BJOB/cancel")" 200
check "  the answer is the state: running until the worker stops, or cancelled" \
	bash -c "[[ '$(field .state)' =~ ^(running|cancelled)$ ]]"
bob_cancelled() { [ "$(as bob GET "/api/jobs/$BJOB")" = 200 ] && [ "$(field .state)" = cancelled ]; }
check "  the job ends cancelled" wait_for 30 bob_cancelled
check_eq "  cancel again: 200 cancelled (idempotent)" "$(as bob POST "/api/jobs/$BJOB/cancel") $(field .state)" "200 cancelled"
check_eq "bob deletes it: 204" "$(as bob DELETE "/api/jobs/$BJOB?hard=true")" 204
check_eq "  then it is gone: 404" "$(as bob GET "/api/jobs/$BJOB")" 404

# --- the last hour (remora_throughput, the admin page's charts) ------------------------
sums() { jq -r '[.minutes | length, (map(.succeeded) | add), (map(.cancelled) | add)] | join(" ")' "$B"; }
check_eq "GET /api/throughput as bob: 60 minutes, his cancelled job, no success" \
	"$(as bob GET /api/throughput) $(sums)" "200 60 0 1"
read -r _ A_OK A_CANCELLED < <(as alice GET /api/throughput >/dev/null; sums)
check "  as alice: her succeeded jobs ($A_OK), none of bob's cancelled ones" \
	test "$A_OK" -ge 1 -a "$A_CANCELLED" = 0
read -r _ C_OK C_CANCELLED < <(as carol GET /api/throughput >/dev/null; sums)
check "  as an admin: both ($C_OK succeeded, $C_CANCELLED cancelled)" \
	test "$C_OK" -ge "$A_OK" -a "$C_CANCELLED" = 1
check "  bytes moved in the hour" bash -c "jq -e '[.minutes[].bytes_per_second] | add > 0' '$B' >/dev/null"

# --- exports (remora_export over the API) ----------------------------------------------
xa() { ja "$@" -H 'Content-Type: application/json'; }
check_eq "POST /api/jobs/$JOB/export with cookie and token: 201" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"bucket":"target","prefix":"webx","if_exists":"overwrite","idempotency_key":"x1"}')" 201
EX=$(field .export_id)
check "  returns the export id" test "$EX" -gt 0
check_eq "  and Location" "$(header Location)" "/api/exports/$EX"
wait_export() {	# wait_export WHO EXPORT STATE: through the API
	[ "$(as "$1" GET "/api/exports/$2")" = 200 ] && [ "$(field .state)" = "$3" ]
}
check "the export succeeds (seen through the API)" wait_for 60 wait_export alice "$EX" succeeded
check_eq "GET /api/exports/$EX: its job, target, members and reference" \
	"$(field '[.job_id, .bucket, .prefix, .if_exists, .members_done, .members, .references[0].key] | join(" ")')" \
	"$JOB target webx overwrite 1 1 webx/a.bin"
check "  with its attempts and their ledger" test "$(field '.attempts[0].ledger.output_digest | length')" -eq 64
check_eq "the AWS CLI reads webx/a.bin with the file's SHA-256" \
	"$(aws_s3 s3 cp s3://target/webx/a.bin - 2>/dev/null | sha256sum | cut -d' ' -f1)" "$(sha256sum "$WWW/a.bin" | cut -d' ' -f1)"
check_eq "the idempotency key replayed: 201, the same export" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"bucket":"target","prefix":"webx","if_exists":"overwrite","idempotency_key":"x1"}') $(field .export_id)" "201 $EX"
check_eq "the key for another export: 409 23505" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"bucket":"target","prefix":"elsewhere","idempotency_key":"x1"}') $(field .sqlstate)" "409 23505"
check_eq "export: bad JSON: 400 22P02" "$(xa POST "/api/jobs/$JOB/export" -d '{"bucket":')$(field .sqlstate)" "40022P02"
check_eq "export: a JSON array: 400" "$(xa POST "/api/jobs/$JOB/export" -d '["target"]')" 400
check_eq "export: a bad if_exists: 400 naming if_exists" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"prefix":"webx","if_exists":"clobber"}') $(field .sqlstate) $(field .field)" "400 22023 if_exists"
check_eq "export: a bad options.if_exists (SQL's check): 400 naming it" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"prefix":"webx","options":{"if_exists":1}}') $(field .sqlstate) $(field .field)" "400 22023 options.if_exists"
check_eq "export: an unknown field: 400" "$(xa POST "/api/jobs/$JOB/export" -d '{"prefix":"webx","colour":"red"}')" 400
check_eq "export: a bucket that is not a string: 400 naming it" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"bucket":7,"prefix":"webx"}') $(field .field)" "400 bucket"
check_eq "export: no prefix: 400 naming it" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"bucket":"target"}') $(field .sqlstate) $(field .field)" "400 22004 prefix"
check_eq "export: a prefix with .. in it: 400" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"bucket":"target","prefix":"a/../../b"}') $(field .sqlstate)" "400 22023"
check_eq "export: a bucket without a target grant: 403 42501" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"bucket":"elsewhere","prefix":"webx"}') $(field .sqlstate)" "403 42501"
check_eq "export: a job that does not exist: 404 P0002" \
	"$(xa POST /api/jobs/999999/export -d '{"bucket":"target","prefix":"webx"}') $(field .sqlstate)" "404 P0002"
check_eq "export: bob exports alice's job: 404 P0002" \
	"$(as bob POST "/api/jobs/$JOB/export" -d '{"bucket":"target","prefix":"bobx"}') $(field .sqlstate)" "404 P0002"
check_eq "export by cookie without the CSRF token: 403" \
	"$(call POST "/api/jobs/$JOB/export" -b "$COOKIE" -d '{"bucket":"target","prefix":"webx"}')" 403
check "  says CSRF" grep -q CSRF "$B"
check_eq "export with the token from another Origin: 403" \
	"$(xa POST "/api/jobs/$JOB/export" -H 'Origin: http://evil.example' -d '{"bucket":"target","prefix":"webx"}')" 403
check_eq "export: GET is not allowed: 405" "$(ja GET "/api/jobs/$JOB/export")" 405
check_eq "no export was made by a refused request" \
	"$(q "SELECT count(*) FROM remora_exports WHERE job_id = $JOB")" 1

# an export whose outcome is unknown: a copy answered 500 by the proxy
rule "$S3_PROXY" "match=PUT%20/target/webu/a.bin&method=PUT&action=status:500&count=1"
xa POST "/api/jobs/$JOB/export" -d '{"bucket":"target","prefix":"webu","options":{"label":"<i>unknown</i>"}}' >/dev/null
UX=$(field .export_id)
check "a copy answered 500: outcome_unknown (through the API)" wait_for 60 wait_export alice "$UX" outcome_unknown
check_eq "  the label comes back as JSON text" "$(field .label)" "<i>unknown</i>"
ja GET '/api/jobs?limit=1' >/dev/null
check_eq "GET /api/jobs?limit=1, the newest row an export: a full page of one job" \
	"$(field '.jobs | length') $(field '.jobs[0].source_kind != "export"')" "1 true"
check_eq "GET /api/exports: alice's two exports, newest first" \
	"$(ja GET /api/exports) $(field '[.exports[].export_id] | join(",")')" "200 $UX,$EX"
check_eq "  state=outcome_unknown" \
	"$(ja GET '/api/exports?state=outcome_unknown' >/dev/null; field '[.exports[].export_id] | join(",")')" "$UX"
check_eq "  state=succeeded,failed" \
	"$(ja GET '/api/exports?state=succeeded,failed' >/dev/null; field '[.exports[].export_id] | join(",")')" "$EX"
check_eq "  job=$JOB" "$(ja GET "/api/exports?job=$JOB" >/dev/null; field '.exports | length')" 2
ja GET '/api/exports?limit=1' >/dev/null
check_eq "  keyset paging: limit=1 gives the newest and a next" "$(field '.exports[0].export_id') $(field .next)" "$UX $UX"
ja GET "/api/exports?limit=1&after=$UX" >/dev/null
check_eq "  the next page is the older one" "$(field '[.exports[].export_id] | join(",")')" "$EX"
check_eq "  limit=0: 400" "$(ja GET '/api/exports?limit=0')" 400
check_eq "  after=x: 400 naming it" "$(ja GET '/api/exports?after=x') $(field .field)" "400 after"
check_eq "  job=-1: 400 naming it" "$(ja GET '/api/exports?job=-1') $(field .field)" "400 job"
check_eq "  POST /api/exports: 405" "$(ja POST /api/exports -d '{}')" 405
check_eq "bob's list holds none of alice's exports" "$(as bob GET /api/exports) $(field '.exports | length')" "200 0"
check_eq "bob cannot read alice's export: 404" "$(as bob GET "/api/exports/$UX") $(field .sqlstate)" "404 P0002"
check_eq "nor resolve it: 404" "$(as bob POST "/api/exports/$UX/resolve" -d '{"action":"verify"}')" 404
check_eq "an admin sees it" "$(as carol GET '/api/exports?state=outcome_unknown') $(field '[.exports[].export_id] | join(",")')" "200 $UX"
check_eq "an export id that is not a number: 400" "$(ja GET /api/exports/abc)" 400
check_eq "an export that does not exist: 404 P0002" "$(ja GET /api/exports/999999) $(field .sqlstate)" "404 P0002"
check_eq "a job's id is not an export's: 404" "$(ja GET "/api/exports/$JOB")" 404
check_eq "resolve: bad JSON: 400" "$(xa POST "/api/exports/$UX/resolve" -d '{"action"')" 400
check_eq "resolve: no action: 400 naming it" "$(xa POST "/api/exports/$UX/resolve" -d '{}') $(field .field)" "400 action"
check_eq "resolve: an unknown action (SQL's check): 400" \
	"$(xa POST "/api/exports/$UX/resolve" -d '{"action":"shrug"}') $(field .sqlstate) $(field .field)" "400 22023 action"
check_eq "resolve: an unknown field: 400" "$(xa POST "/api/exports/$UX/resolve" -d '{"action":"verify","why":"x"}')" 400
check_eq "resolve without the CSRF token: 403" \
	"$(call POST "/api/exports/$UX/resolve" -b "$COOKIE" -d '{"action":"verify"}')" 403
check_eq "a remora_user's retry: 403 42501" \
	"$(xa POST "/api/exports/$UX/resolve" -d '{"action":"retry"}') $(field .sqlstate)" "403 42501"
check_eq "a remora_user's fail: 403 42501" \
	"$(xa POST "/api/exports/$UX/resolve" -d '{"action":"fail"}') $(field .sqlstate)" "403 42501"
check_eq "the owner's verify: 200 queued" \
	"$(xa POST "/api/exports/$UX/resolve" -d '{"action":"verify"}') $(field .state)" "200 queued"
verified() { wait_export alice "$UX" outcome_unknown && [ "$(field .attempts_used)" = 2 ]; }
check "verify finds the member missing: still outcome_unknown" wait_for 60 verified
check "  and names it" bash -c "jq -r .last_error.message '$B' | grep -q 'webu/a.bin (missing)'"
check_eq "resolve by GET: 405" \
	"$(ja GET "/api/exports/$UX/resolve")" 405
check_eq "an admin's retry: 200 queued" \
	"$(as carol POST "/api/exports/$UX/resolve" -d '{"action":"retry"}') $(field .state)" "200 queued"
check "the retry publishes it" wait_for 60 wait_export alice "$UX" succeeded
check_eq "  the decisions say who: alice verified, carol retried" \
	"$(field '[.decisions[] | .action + ":" + .by] | join(",")')" "verify:alice,retry:carol"
check_eq "resolve of a succeeded export: 409 55000" \
	"$(xa POST "/api/exports/$UX/resolve" -d '{"action":"verify"}') $(field .sqlstate)" "409 55000"
check_eq "cancel of a finished export: 200, still succeeded" \
	"$(ja POST "/api/exports/$UX/cancel") $(field .state)" "200 succeeded"
check_eq "bob cannot cancel it: 404" "$(as bob POST "/api/exports/$UX/cancel")" 404
check_eq "an export to the bucket's root (an empty prefix): 400 22023" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"bucket":"target","prefix":""}') $(field .sqlstate)" "400 22023"
check_eq "  nor with the prefix /" \
	"$(xa POST "/api/jobs/$JOB/export" -d '{"bucket":"target","prefix":"/"}') $(field .sqlstate)" "400 22023"
check_eq "the Idempotency-Key header replays an export as the body's key does" \
	"$(xa POST "/api/jobs/$JOB/export" -H 'Idempotency-Key: x1' -d '{"bucket":"target","prefix":"webx","if_exists":"overwrite"}') $(field .export_id)" "201 $EX"
check_eq "bob cannot delete alice's export: 404" "$(as bob DELETE "/api/exports/$UX")" 404
check_eq "DELETE /api/exports/$UX: 204" "$(ja DELETE "/api/exports/$UX")" 204
check_eq "  then it is gone: 404" "$(ja GET "/api/exports/$UX")" 404
check_eq "  and what it published stays" \
	"$(aws_s3 s3 ls s3://target/webu/a.bin | wc -l)" "1"
curl -s "http://127.0.0.1:$S3_PROXY/__reset" >/dev/null

# --- retry, the Idempotency-Key header, the owner filter --------------------------------
ja POST /api/jobs -d "{\"source\":\"$SRC/nowhere.bin\",\"options\":{\"max_attempts\":1}}" >/dev/null
FJOB=$(field .job_id)
check "a job of a missing file fails (through the API)" wait_for 60 wait_job "$FJOB" failed
check_eq "POST /api/jobs/$FJOB/retry: 201, a new job" \
	"$(ja POST "/api/jobs/$FJOB/retry") $(test "$(field .job_id)" -gt "$FJOB" && echo new)" "201 new"
RJOB=$(field .job_id)
check_eq "  and its Location" "$(header Location)" "/api/jobs/$RJOB"
check_eq "  the same source, queued or on its way" \
	"$(ja GET "/api/jobs/$RJOB" >/dev/null; field .source) $(q "SELECT request_hash = (SELECT request_hash FROM remora.jobs WHERE job_id = $FJOB) FROM remora.jobs WHERE job_id = $RJOB")" \
	"$SRC/nowhere.bin t"
check_eq "retry of a job that succeeded: 400 22023" \
	"$(ja POST "/api/jobs/$JOB/retry") $(field .sqlstate)" "400 22023"
check_eq "bob retries alice's job: 404" "$(as bob POST "/api/jobs/$FJOB/retry")" 404
check_eq "GET .../retry: 405" "$(ja GET "/api/jobs/$FJOB/retry")" 405
check_eq "the Idempotency-Key header on POST /api/jobs: 201" \
	"$(ja POST /api/jobs -H 'Idempotency-Key: hk1' -d "{\"source\":\"$SRC/a.bin\"}")" 201
HJOB=$(field .job_id)
check_eq "  the same key again: the same job" \
	"$(ja POST /api/jobs -H 'Idempotency-Key: hk1' -d "{\"source\":\"$SRC/a.bin\"}") $(field .job_id)" "201 $HJOB"
check_eq "  the body's key the same as the header's: the same job" \
	"$(ja POST /api/jobs -H 'Idempotency-Key: hk1' -d "{\"source\":\"$SRC/a.bin\",\"idempotency_key\":\"hk1\"}") $(field .job_id)" "201 $HJOB"
check_eq "  another key in the body: 400 naming idempotency_key" \
	"$(ja POST /api/jobs -H 'Idempotency-Key: hk1' -d "{\"source\":\"$SRC/a.bin\",\"idempotency_key\":\"hk2\"}") $(field .field)" "400 idempotency_key"
as bob POST /api/jobs -d "{\"source\":\"$SRC/a.bin\"}" >/dev/null
check_eq "GET /api/jobs?owner=bob as an admin: bob's jobs only" \
	"$(as carol GET '/api/jobs?owner=bob&limit=1000') $(field '[.jobs[].owner] | unique | join(",")')" "200 bob"
check_eq "  as alice: none (she sees only her own)" \
	"$(ja GET '/api/jobs?owner=bob') $(field '.jobs | length')" "200 0"
check_eq "  ?owner=alice as alice: her own" \
	"$(ja GET '/api/jobs?owner=alice&limit=1000') $(field '[.jobs[].owner] | unique | join(",")')" "200 alice"

# --- hostile input ----------------------------------------------------------------------
head -c 200000 /dev/zero | tr '\0' 'a' >"$T/big"
check_eq "a body above remora.http_max_body: 413" \
	"$(ja POST /api/jobs --data-binary @"$T/big")" 413
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -b "$COOKIE" -H "X-CSRF-Token: $CSRF" \
	-H 'Transfer-Encoding: chunked' --data-binary @"$T/big" "$H/api/jobs" || true)
check_eq "a chunked body above the limit: 413" "$code" 413
head -c 1000000 /dev/zero | tr '\0' 'a' >"$T/huge" # 15 times the limit
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -b "$COOKIE" -H "X-CSRF-Token: $CSRF" \
	-H 'Transfer-Encoding: chunked' --data-binary @"$T/huge" "$H/api/jobs" || true)
check_eq "a chunked body past eight times the limit: the connection is closed" "$code" 000
check_eq "a huge declared body is refused before it is sent" \
	"$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Length: 10000000000' -H 'Expect:' -X POST "$H/api/session" --max-time 5 || true)" 413
check_eq "a made-up session cookie: 401" "$(call GET /api/jobs -b "remora_session=$(printf '%064d' 0)")" 401
check_eq "a cookie with junk: 401" "$(call GET /api/jobs -b 'remora_session=../../;%00<script>')" 401
LONG=$(head -c 20000 /dev/zero | tr '\0' 'x')
code=$(call GET /api/jobs -b "remora_session=$LONG")
check "a 20 kB cookie is refused, not a crash ($code)" bash -c "[ '$code' -ge 400 ] && [ '$code' -lt 500 ] || [ '$code' = 431 ]"
check_eq "the server still answers" "$(call GET /api/session -b "$COOKIE")" 200
slow_client() {	# a client that sends half a request line and waits
	local t0
	t0=$(date +%s)
	exec 3<>"/dev/tcp/127.0.0.1/$HTTP_PORT"
	printf 'GET /api/jobs HTTP/1.1\r\nHost: x\r\n' >&3
	timeout 20 cat <&3 >/dev/null
	exec 3<&-
	[ $(($(date +%s) - t0)) -le 10 ]
}
check "a slow client is disconnected after remora.http_client_timeout" slow_client
hundred() {
	local i fails=0 pids=()
	for i in $(seq 100); do
		curl -s -o /dev/null -w '%{http_code}\n' --max-time 60 -u alice:alice-pw "$H/api/jobs?limit=5" >"$T/c$i" &
		pids+=($!)
	done
	wait "${pids[@]}"
	for i in $(seq 100); do [ "$(cat "$T/c$i")" = 200 ] || fails=$((fails + 1)); done
	[ "$fails" = 0 ] || { echo "# $fails of 100 failed: $(sort "$T"/c* | uniq -c | tr '\n' ' ')"; return 1; }
}
check "100 concurrent clients are all answered 200" hundred
check "the pool keeps alice's connections bounded (remora.http_pool_size)" \
	test "$(q "SELECT count(*) FROM pg_stat_activity WHERE usename = 'alice' AND application_name = 'remora http'")" -le 4

# --- throttling ------------------------------------------------------------------------
for i in 1 2 3; do call POST /api/session -d '{"user":"erin","password":"bad"}' >/dev/null; done
check_eq "after 3 failures even the right password waits: 429" \
	"$(call POST /api/session -d '{"user":"erin","password":"erin-pw"}')" 429
check "  with Retry-After" test -n "$(header Retry-After)"
erin_in() { [ "$(call POST /api/session -d '{"user":"erin","password":"erin-pw"}')" = 200 ]; }
check "after the lockout the right password works" wait_for 10 erin_in

# --- sign-out, expiry -------------------------------------------------------------------
check_eq "sign-out: 200" "$(ja DELETE /api/session)" 200
check "  clears the cookie" bash -c "grep -qi '^set-cookie: remora_session=;' '$HDR'"
check_eq "  the old cookie no longer works: 401" "$(call GET /api/jobs -b "$COOKIE")" 401
signin alice
IDLE=$COOKIE
signin alice
# the event stream does not count as activity: it ends when the session
# does.  It opens before the timeout is shortened (opened after, a busy
# machine could let the session idle out before the stream's request)
curl -s -N --max-time 40 -b "$IDLE" "$H/api/events" >"$T/events" 2>/dev/null &
EVENTS_PID=$!
stream_open() { grep -q '^retry:' "$T/events"; }
check "  the idle session's event stream is open" wait_for 15 stream_open
echo "remora.http_session_idle_timeout = '2s'" >>"$T/pg/data/postgresql.conf"
q "SELECT pg_reload_conf()" >/dev/null
signed_out() { grep -q '^event: signed-out' "$T/events"; }
check "an idle session expires (remora.http_session_idle_timeout, reloaded)" \
	wait_for 30 signed_out || tail -5 "$T/events"
kill "$EVENTS_PID" 2>/dev/null || true
wait "$EVENTS_PID" 2>/dev/null || true
check_eq "  its cookie then gets 401" "$(call GET /api/session -b "$IDLE")" 401
sed -i '/http_session_idle_timeout/d' "$T/pg/data/postgresql.conf"
echo "remora.http_session_max_age = '3s'" >>"$T/pg/data/postgresql.conf"
q "SELECT pg_reload_conf()" >/dev/null
expired() { [ "$(call GET /api/session -b "$COOKIE")" = 401 ]; }
check "a session in use still ends at remora.http_session_max_age" wait_for 15 expired
sed -i '/http_session_max_age/d' "$T/pg/data/postgresql.conf"
q "SELECT pg_reload_conf()" >/dev/null

# --- a long history --------------------------------------------------------------------
# 100,000 jobs that no worker takes: every page of the list costs the same
echo "remora.max_workers = 0" >>"$T/pg/data/postgresql.conf"
q "SELECT pg_reload_conf()" >/dev/null
no_workers() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 0 ]; }
wait_for 30 no_workers
q "SELECT remora.grant_target('erin', 'target', '*')" >/dev/null
psql -X -q -d postgres -c "SET ROLE erin; SELECT count(remora_submit('$SRC/many/' || g, options => jsonb_build_object('label', 'many ' || g, 'priority', g % 10))) FROM generate_series(1, 100000) g" >/dev/null
q "ANALYZE remora.jobs" >/dev/null
page_time() { curl -s -o /dev/null -w '%{time_total}' -u erin:erin-pw "$H/api/jobs?$1"; }
fast_pages() {
	local t worst=0 u
	for u in 'limit=50' 'limit=50&after=50000' 'limit=50&after=200' 'state=queued&limit=50&after=30000' 'limit=1000&after=90000' \
		'sort=priority&limit=50' 'sort=priority&limit=50&after=5:50000' 'sort=priority&dir=asc&limit=50&after=3:70000' \
		'sort=submitted&dir=asc&limit=50' 'sort=submitted&dir=asc&limit=50&after=60000' 'sort=priority&state=queued&limit=1000&after=1:40000'; do
		page_time "$u" >/dev/null
		t=$(page_time "$u")
		echo "# $u: $t s"
		worst=$(echo "if ($t > $worst) $t else $worst" | bc)
	done
	[ "$(echo "$worst < 0.5" | bc)" = 1 ]
}
check "over 100,000 jobs every page of the list answers in under 0.5 s" fast_pages
code=$(as erin GET '/api/jobs?limit=50&after=50000')
check_eq "  the page after job 50000 starts at the next older job" "$(field '.jobs[0].job_id') $(field '.jobs | length')" \
	"$(q "SELECT max(job_id) FROM remora.jobs WHERE job_id < 50000 AND owner = 'erin'::regrole") 50"
[ "$code" = 200 ] || echo "# $code $(head -c 300 "$B")"
# every order walks its keyset: two pages in a row are the first 100 rows of
# that order, as SQL orders them
two_pages() {
	local ids next
	as erin GET "/api/jobs?limit=50&$1" >/dev/null
	ids=$(field '[.jobs[].job_id] | map(tostring) | join(",")')
	next=$(field .next)
	as erin GET "/api/jobs?limit=50&$1&after=$next" >/dev/null
	echo "$ids,$(field '[.jobs[].job_id] | map(tostring) | join(",")')"
}
first_100() {
	q "SELECT string_agg(job_id::text, ',' ORDER BY $1) FROM (SELECT job_id, priority FROM remora.jobs
	   WHERE owner = 'erin'::regrole AND deleted_at IS NULL ORDER BY $1 LIMIT 100) j"
}
check_eq "sort=priority: the highest priority first, two pages in order" \
	"$(two_pages sort=priority)" "$(first_100 'priority DESC, job_id DESC')"
check_eq "sort=priority&dir=asc: the lowest first, two pages in order" \
	"$(two_pages 'sort=priority&dir=asc')" "$(first_100 'priority, job_id')"
check_eq "sort=submitted&dir=asc: the oldest first, two pages in order" \
	"$(two_pages 'sort=submitted&dir=asc')" "$(first_100 'job_id')"
check_eq "sort=submitted (the default order), two pages in order" \
	"$(two_pages 'sort=submitted&dir=desc')" "$(first_100 'job_id DESC')"
check_eq "sort=bogus: 400 naming the field" "$(as erin GET '/api/jobs?sort=bogus') $(field .field)" "400 sort"
check_eq "dir=up: 400 naming the field" "$(as erin GET '/api/jobs?dir=up') $(field .field)" "400 dir"
check_eq "sort=priority with a job id as the cursor: 400" "$(as erin GET '/api/jobs?sort=priority&after=5') $(field .field)" "400 after"
sse_quick() {
	curl -s -N --max-time 3 -u erin:erin-pw "$H/api/events" >"$T/events" 2>/dev/null || true
	[ "$(grep -c '^event: job' "$T/events")" -le 300 ]
}
check "the event stream does not replay a long queue (at most the newest jobs)" sse_quick
# a role at its max_queued (remora.set_role_limits): 429, to try later
q "SELECT remora.set_role_limits('erin', max_queued => 100000)" >/dev/null
check_eq "a submit over max_queued: 429 53400" \
	"$(as erin POST /api/jobs -H 'Content-Type: application/json' -d "{\"source\":\"$SRC/one-more\"}") $(field .sqlstate)" "429 53400"
check "  naming the limit and the count" grep -q 'has 100000 jobs queued, its limit max_queued is 100000' "$B"
check "  with Retry-After" test -n "$(header Retry-After)"
q "SELECT remora.reset_role_limits('erin')" >/dev/null

# --- the OpenAPI document (web/api/openapi.json) -----------------------------------------
OPENAPI=$(dirname "$0")/../openapi
check_eq "GET /api/openapi.json without credentials: 200" "$(call GET /api/openapi.json)" 200
check "  it is the document of the repository" cmp -s "$B" "$OPENAPI/../../web/api/openapi.json"
cp "$B" "$T/openapi.json"
check "  it is valid OpenAPI 3.1" node "$OPENAPI/check.js" document "$T/openapi.json"
check_eq "  a wrong method: 405" "$(call POST /api/openapi.json)" 405
# each path of the document with a method it lacks: 405, and the check
# below compares its Allow with the document's methods
for p in $(jq -r '.paths | keys[]' "$T/openapi.json"); do
	p=${p//\{id\}/$JOB}
	as carol PATCH "${p//\{role\}/alice}" >/dev/null
done
check "every answer of this test is one the OpenAPI document gives" \
	node "$OPENAPI/check.js" answers "$T/openapi.json" "$ANSWERS/index"

# --- restart, TLS, refusal --------------------------------------------------------------
OLD=$(http_pid)
q "SELECT pg_terminate_backend($OLD)" >/dev/null
restarted() { local p; p=$(http_pid); [ -n "$p" ] && [ "$p" != "$OLD" ] && http_serving; }
check "terminated, the worker is restarted and serves again" wait_for 30 restarted

sed -i '/remora.http_listen/d' "$T/pg/data/postgresql.conf"
echo "remora.http_listen = '0.0.0.0:$HTTP_PORT'" >>"$T/pg/data/postgresql.conf"
restart
refused() { grep -q 'remora http refuses to listen on "0.0.0.0:' "$LOG"; }
check "without TLS a non-loopback address is refused, and logged" wait_for 20 refused
check_eq "  and nothing serves" "$(curl -s -o /dev/null -w '%{http_code}' "$H/" || true)" 000

openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$T/pg/key.pem" -out "$T/pg/cert.pem" >/dev/null 2>&1
chown postgres "$T/pg/key.pem" "$T/pg/cert.pem"
chmod 600 "$T/pg/key.pem"
sed -i '/remora.http_listen/d' "$T/pg/data/postgresql.conf"
cat >>"$T/pg/data/postgresql.conf" <<CONF
remora.http_listen = '127.0.0.1:$HTTP_PORT'
remora.http_tls_cert_file = '$T/pg/cert.pem'
remora.http_tls_key_file = '$T/pg/key.pem'
CONF
restart
tls_up() { curl -s -o /dev/null --cacert "$T/pg/cert.pem" "https://127.0.0.1:$HTTP_PORT/"; }
check "with a certificate and key it serves HTTPS" wait_for 20 tls_up
code=$(curl -s -o "$B" -D "$HDR" -w '%{http_code}' --cacert "$T/pg/cert.pem" \
	-d '{"user":"alice","password":"alice-pw"}' "https://127.0.0.1:$HTTP_PORT/api/session")
check_eq "  sign-in over HTTPS" "$code" 200
check "  the cookie is Secure" bash -c "grep -qi '^set-cookie:.*; Secure' '$HDR'"
check "  and HSTS is sent" bash -c "grep -qi '^strict-transport-security' '$HDR'"
check_eq "  plain HTTP is not answered" "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$H/" || true)" 000

check "no secret in the server log" bash -c "! grep -q 'alice-pw\|bob-pw\|carol-pw' '$LOG'"
e2e_finish
