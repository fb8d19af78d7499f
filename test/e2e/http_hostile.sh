#!/usr/bin/env bash
#
# The HTTP API against hostile clients (doc/user-guide.md "The HTTP API",
# doc/security.md "The web client and API"), with real clients (curl,
# Python sockets) on loopback only:
#   - slow clients: one address (127.0.0.1) opens more connections than
#     the server serves and trickles a header byte (or a body byte) a
#     second; another address (127.0.0.2) is still answered from the
#     reserve, the first gets at most its share, and every trickling
#     connection is cut at remora.http_client_timeout however busy it
#     keeps itself;
#   - event streams end with their credentials: a stream opened with HTTP
#     Basic ends after ALTER ROLE ... NOLOGIN, and after a password change
#     (even when the new password has signed in since), within 75 s; one
#     whose credentials still work goes on; a session's stream ends at
#     sign-out;
#   - malformed and oversized headers, bodies, cookies, Basic strings and
#     JSON: each gets a 4xx with the JSON error shape (or, where HTTP
#     itself is broken, a closed connection), never a 500, a hang or a
#     crash, and the server answers afterwards.
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/http.sh"
e2e_begin http_hostile

e2e_cluster <<CONF
remora.default_bucket = 'target'
CONF
q "CREATE EXTENSION remora" >/dev/null
curl() { command curl --max-time 30 "$@"; }
http_up <<CONF
remora.http_client_timeout = '10s'
remora.http_max_connections = 20
# the hostile cases fail many sign-ins from one address
remora.http_login_max_failures = 1000
CONF
check "the worker serves" http_running
HTTP_PID0=$(http_pid)
PORT=$HTTP_PORT
B=$T/body
# call METHOD PATH [curl args]: the status, the body in $B
call() {
	local m=$1 p=$2
	shift 2
	curl -s -o "$B" -w '%{http_code}' -X "$m" "$@" "$H$p"
}
field() { jq -r "$1" "$B" 2>/dev/null; }
alive() { [ "$(call GET /api/session -u erin:erin-pw)" = 200 ]; }

# --- event streams and their credentials (in the background) ---------------
# alice's role loses LOGIN, bob's password changes, carol's stays valid,
# erin's session signs out
stream() { # stream NAME CURL-ARGS...: curl on /api/events into $T/ev.NAME
	local name=$1
	shift
	# from 127.0.0.2: the slow clients of 127.0.0.1 below get their full share
	command curl -s -N --max-time 150 --interface 127.0.0.2 "$@" "$H/api/events" >"$T/ev.$name" 2>/dev/null &
	eval "EV_$name=$!"
}
started() { grep -q '^retry:' "$T/ev.$1"; }
ended() { ! kill -0 "$(eval echo "\$EV_$1")" 2>/dev/null; }
stream alice -u alice:alice-pw
stream bob -u bob:bob-pw
stream carol -u carol:carol-pw
call POST /api/session -c "$T/jar" -d '{"user":"erin","password":"erin-pw"}' >/dev/null
CSRF=$(field .csrf)
stream erin -b "$T/jar"
for s in alice bob carol erin; do
	check "a stream opens for $s" wait_for 20 started $s
done
q "ALTER ROLE alice NOLOGIN; ALTER ROLE bob PASSWORD 'bob-new'" >/dev/null
REVOKED=$(date +%s)
check_eq "bob's new password signs in by Basic" "$(call GET /api/session -u bob:bob-new)" 200
check_eq "erin signs out" "$(call DELETE /api/session -b "$T/jar" -H "X-CSRF-Token: $CSRF")" 200
check "erin's session stream ends at sign-out" wait_for 10 ended erin
check "  saying signed-out" grep -q '^event: signed-out' "$T/ev.erin"

# --- slow clients ----------------------------------------------------------
# 20 connections at most: 127.0.0.1 may hold 15, 5 stay for the others
python3 test/e2e/http_slow.py "$PORT" 30 25 "$T/slow" >"$T/slow.out" &
SLOW=$!
held() { [ -f "$T/slow" ] && [ "$(cut -d' ' -f2 "$T/slow")" -ge 15 ]; }
check "the slow client holds its connections" wait_for 10 held
echo "# $(cat "$T/slow")"
other() {
	local i
	for i in 1 2 3; do
		[ "$(command curl -s -o /dev/null -w '%{http_code}' --max-time 10 \
			--interface 127.0.0.2 -u carol:carol-pw "$H/api/jobs")" = 200 ] || return 1
	done
}
check "meanwhile another address (127.0.0.2) is answered" other
check "  while the slow client still held its share" held
wait "$SLOW"
read -r _ accepted _ closed _ longest <"$T/slow.out"
echo "# slow clients: $(cat "$T/slow.out")"
check_eq "every trickling connection was closed by the server" "$closed" "$accepted"
check "  none outlived remora.http_client_timeout by much ($longest s)" test "$longest" -le 16
python3 test/e2e/http_slow.py "$PORT" 3 25 "$T/slowb" body >"$T/slowb.out"
read -r _ accepted _ closed _ longest <"$T/slowb.out"
check "a body trickled a byte a second is cut off too ($(cat "$T/slowb.out"))" \
	test "$closed" = "$accepted" -a "$longest" -le 16
check "the server answers afterwards" alive

# --- hostile input ------------------------------------------------------------
# api_case NAME CURL-ARGS...: a clean 4xx with the JSON error shape
api_case() {
	local name=$1 code
	shift
	code=$(curl -s -o "$B" -w '%{http_code}' "$@" || echo "curl-failed")
	# 505: libmicrohttpd's own answer to an unknown HTTP version
	if [[ "$code" =~ ^4[0-9][0-9]$ || ("$kind" = http && "$code" = 505) ]] && jq -e '(.error | type) == "string" and (.sqlstate | test("^[0-9A-Z]{5}$"))' "$B" >/dev/null 2>&1; then
		ok "$name: $code $(jq -r .sqlstate "$B")"
	else
		not_ok "$name: $code $(head -c 200 "$B" | tr -d '\0')"
	fi
}
# raw_case NAME json|http < REQUEST: sent as it is; "json": the answer must
# be a 4xx with the JSON error shape; "http" (HTTP itself is broken): a
# 4xx, or the connection closed
raw_case() {
	local name=$1 kind=$2 code
	code=$(python3 test/e2e/http_raw.py "$PORT" "$B")
	# 505: libmicrohttpd's own answer to an unknown HTTP version
	if [[ "$code" =~ ^4[0-9][0-9]$ || ("$kind" = http && "$code" = 505) ]] &&
		{ [ "$kind" = http ] || jq -e '(.error | type) == "string" and (.sqlstate | type) == "string"' "$B" >/dev/null 2>&1; }; then
		ok "$name: $code"
	elif [ "$kind" = http ] && [ "$code" = closed ]; then
		ok "$name: connection closed"
	else
		not_ok "$name: $code $(head -c 200 "$B" | tr -d '\0')"
	fi
	alive || not_ok "  the server no longer answers after: $name"
}
AUTH="Authorization: Basic $(printf erin:erin-pw | base64 -w0)"
b64() { printf '%s' "$1" | base64 -w0; }
req() { printf '%s\r\n' "$@"; printf '\r\n'; }	# request lines, then the blank line
long() { head -c "$1" /dev/zero | tr '\0' "${2:-a}"; }

# headers
req "GET /api/jobs HTTP/1.1" "Host: x" "X-Long: $(long 100000)" | raw_case "a 100 kB header line" http
{ printf 'GET /api/jobs HTTP/1.1\r\nHost: x\r\n'; for i in $(seq 3000); do printf 'X-H%d: v\r\n' "$i"; done; printf '\r\n'; } |
	raw_case "3000 headers" http
req "GET /api/jobs HTTP/1.1" "Host: x" "NoColonHere" | raw_case "a header without a colon" http
# libmicrohttpd ends a header's value at a NUL; the request goes on
printf 'GET /api/jobs HTTP/1.1\r\nHost: x\r\nX-Nul: a\0b\r\n\r\n' | raw_case "a NUL byte in a header" json
printf 'GET /api/j\0obs HTTP/1.1\r\nHost: x\r\n\r\n' | raw_case "a NUL byte in the request line" http
# ambiguous_case NAME < REQUEST: a request a proxy could read another way
# (RFC 9112, 6.3), followed on the same connection by a good one: one
# answer, 400, and the connection closed (the good one is never answered)
ambiguous_case() {
	local name=$1
	check_eq "$name: 400, and the connection closed" \
		"$(cat - <(req "GET /api/openapi.json HTTP/1.1" "Host: x") | python3 test/e2e/http_answers.py "$PORT")" \
		"400 closed"
	alive || not_ok "  the server no longer answers after: $name"
}
printf 'GET /api/j\0obs HTTP/1.1\r\nHost: x\r\n\r\n' | ambiguous_case "a NUL byte in the request line"
req "POST /api/session HTTP/1.1" "Host: x" "Content-Length: 12" "Content-Length: 12" | { cat; printf '{"user":"x"}'; } |
	ambiguous_case "two equal Content-Length headers"
req "POST /api/session HTTP/1.1" "Host: x" "Content-Length: 12" "Transfer-Encoding: chunked" |
	{ cat; printf 'c\r\n{"user":"x"}\r\n0\r\n\r\n'; } | ambiguous_case "Content-Length with Transfer-Encoding"
req "GET /api/jobs HTTP/1.1" "Host: x" "Authorization: Basic $(b64 "alice:alice-pw")"$'\r' | raw_case "a stray CR in a header" http
req "GARBAGE" | raw_case "a request line that is not HTTP" http
req "GET /api/jobs HTTP/9.9" "Host: x" | raw_case "an unknown HTTP version" http
req "GET /api/session HTTP/1.1" "Host: x" " folded: continuation" | raw_case "a folded first header" http

# bodies
req "POST /api/session HTTP/1.1" "Host: x" "Content-Type: application/json" "Content-Length: 5" "Connection: close" |
	{ cat; printf '{"user":"alice","password":"alice-pw"}'; } | raw_case "a declared length shorter than the body" json
req "POST /api/session HTTP/1.1" "Host: x" "Content-Length: 12" "Content-Length: 30" | { cat; printf '{"user":"x"}'; } |
	raw_case "two different Content-Length headers" http
req "POST /api/session HTTP/1.1" "Host: x" "Content-Length: -1" | raw_case "a negative Content-Length" http
req "POST /api/session HTTP/1.1" "Host: x" "Content-Length: 12abc" | raw_case "a Content-Length that is not a number" http
req "POST /api/session HTTP/1.1" "Host: x" "Content-Length: 99999999999999999999999" | raw_case "a Content-Length past 64 bits" http
req "POST /api/session HTTP/1.1" "Host: x" "Transfer-Encoding: chunked" | { cat; printf 'ZZZ\r\nhello\r\n0\r\n\r\n'; } |
	raw_case "a chunked body with a bad chunk size" http
req "POST /api/session HTTP/1.1" "Host: x" "Transfer-Encoding: chunked" | { cat; printf 'ffffffffffffffffff\r\nab\r\n'; } |
	raw_case "a chunk size past 64 bits" http
req "POST /api/session HTTP/1.1" "Host: x" "Transfer-Encoding: chunked" "Content-Length: 3" | { cat; printf '3\r\nabc\r\n0\r\n\r\n'; } |
	raw_case "chunked and a Content-Length together" http
req "POST /api/session HTTP/1.1" "Host: x" "Content-Length: 100" | { cat; printf '{"user":'; } |
	raw_case "a body shorter than declared (cut at the deadline)" http
code=$(call GET /api/jobs -u erin:erin-pw --data-binary '{"junk":')
check "a body on a GET is ignored: $code" test "$code" = 200
api_case "a body on DELETE /api/jobs/1 that is not JSON" -X DELETE -u erin:erin-pw -d '{' "$H/api/jobs/999999"

# cookies
api_case "a session id one character short" -b "remora_session=$(long 63 a)" "$H/api/jobs"
api_case "a session id one character long" -b "remora_session=$(long 65 a)" "$H/api/jobs"
api_case "a session id in capitals" -b "remora_session=$(long 64 A)" "$H/api/jobs"
api_case "a session id that is not hex" -b "remora_session=$(long 64 z)" "$H/api/jobs"
api_case "an empty session cookie" -b "remora_session=" "$H/api/jobs"
api_case "a quoted session cookie" -b "remora_session=\"$(long 64 0)\"" "$H/api/jobs"
api_case "a cookie header of separators" -H 'Cookie: =;=;;;==; ;' "$H/api/jobs"
api_case "a cookie without a value" -H 'Cookie: remora_session' "$H/api/jobs"
api_case "two session cookies" -H "Cookie: remora_session=$(long 64 0); remora_session=$(long 64 1)" "$H/api/jobs"
api_case "500 cookies" -H "Cookie: $(for i in $(seq 500); do printf 'c%d=v; ' "$i"; done)remora_session=x" "$H/api/jobs"
api_case "a 30 kB cookie" -b "remora_session=$(long 30000)" "$H/api/jobs"
req "GET /api/jobs HTTP/1.1" "Host: x" "Cookie: remora_session=$(long 70000)" | raw_case "a 70 kB cookie (past the header memory)" http
printf 'GET /api/jobs HTTP/1.1\r\nHost: x\r\nCookie: remora_session=%s\0%s\r\n\r\n' "$(long 20 0)" "$(long 43 0)" |
	raw_case "a NUL inside the session cookie" http

# HTTP Basic
api_case "Basic that is not base64" -H 'Authorization: Basic !!!!****' "$H/api/jobs"
api_case "Basic with padding in the middle" -H 'Authorization: Basic YQ==YWxpY2U=' "$H/api/jobs"
api_case "Basic without a colon" -H "Authorization: Basic $(b64 alice)" "$H/api/jobs"
api_case "Basic with nothing after it" -H 'Authorization: Basic' "$H/api/jobs"
api_case "Basic with blanks only" -H 'Authorization: Basic     ' "$H/api/jobs"
api_case "Basic of 30 kB" -H "Authorization: Basic $(long 30000 Q)" "$H/api/jobs"
api_case "Basic with a 2 kB password" -H "Authorization: Basic $(b64 "alice:$(long 2000)")" "$H/api/jobs"
api_case "Basic with a 200-byte user" -H "Authorization: Basic $(b64 "$(long 200):pw")" "$H/api/jobs"
api_case "Basic with an empty user" -H "Authorization: Basic $(b64 ":alice-pw")" "$H/api/jobs"
api_case "Basic with an empty password" -H "Authorization: Basic $(b64 "alice:")" "$H/api/jobs"
api_case "Basic with a UTF-8 user" -H "Authorization: Basic $(b64 "élise✓:pw")" "$H/api/jobs"
api_case "Basic with invalid UTF-8" -H "Authorization: Basic $(printf 'al\xff\xfeice:pw' | base64 -w0)" "$H/api/jobs"
api_case "Basic with control characters" -H "Authorization: Basic $(printf 'al\x01ice:p\x1bw\n' | base64 -w0)" "$H/api/jobs"
api_case "Basic with a NUL in the password" -H "Authorization: Basic $(printf 'alice:alice-pw\0x' | base64 -w0)" "$H/api/jobs"
api_case "another scheme (Bearer)" -H 'Authorization: Bearer abc' "$H/api/jobs"
api_case "Basic with a libpq conninfo in the user" -H "Authorization: Basic $(b64 "alice' host=10.0.0.1:alice-pw")" "$H/api/jobs"

# JSON
json_case() {	# json_case NAME BODY-FILE: to POST /api/jobs and POST /api/session
	api_case "$1 (POST /api/jobs)" -u erin:erin-pw -H 'Content-Type: application/json' --data-binary @"$2" "$H/api/jobs"
	api_case "$1 (POST /api/session)" -H 'Content-Type: application/json' --data-binary @"$2" "$H/api/session"
}
J=$T/json
{ long 50000 '['; long 50000 ']'; } >"$J"; json_case "arrays nested 50000 deep" "$J"
{ for i in $(seq 5000); do printf '{"a":'; done; printf '1'; long 5000 '}'; } >"$J"; json_case "objects nested 5000 deep" "$J"
printf '{"source":"http://127.0.0.1/x","options":{"max_attempts":1e999999}}' >"$J"; json_case "a number past double" "$J"
printf '{"source":"http://127.0.0.1/x","options":{"max_attempts":123456789012345678901234567890}}' >"$J"; json_case "an integer past 64 bits" "$J"
printf '{"source":"http://127.0.0.1/x","options":{"max_attempts":-0.0000001e-999}}' >"$J"; json_case "a tiny negative fraction" "$J"
printf '{"user":"alice","user":"bob","password":"x","source":1,"source":"y"}' >"$J"; json_case "duplicate keys" "$J"
printf '{"user":"al\xffice","password":"\xc3\x28","source":"http://\xed\xa0\x80/"}' >"$J"; json_case "invalid UTF-8 in strings" "$J"
printf '{"user":"\\ud800","password":"\\udfff","source":"\\u0000"}' >"$J"; json_case "lone surrogates and \\u0000 escapes" "$J"
printf '{"user":5,"password":[],"source":{},"bucket":true}' >"$J"; json_case "wrong types" "$J"
printf '{"user":null,"password":null,"source":null}' >"$J"; json_case "nulls" "$J"
printf '[]' >"$J"; json_case "an array at the top" "$J"
printf '"alice"' >"$J"; json_case "a string at the top" "$J"
printf '{"user":"alice","password":"alice-pw","source":"http://127.0.0.1/x"} trailing' >"$J"; json_case "trailing garbage" "$J"
printf '{"user":"alice","password":"alice-pw","source":"http://127.0.0.1/x"}\0' >"$J"; json_case "a trailing NUL" "$J"
printf '' >"$J"; json_case "an empty body" "$J"
printf '{"user":"alice","password":"alice-pw",}' >"$J"; json_case "a trailing comma" "$J"
printf '{"source":"%s"}' "$(long 60000)" >"$J"; json_case "a 60 kB string" "$J"
{ printf '{'; for i in $(seq 5000); do printf '"k%d":1,' "$i"; done; printf '"source":"x"}'; } >"$J"; json_case "5000 keys" "$J"
check "the server answers after the hostile input" alive
check "  and remora http was never restarted (one pid since the start)" test "$(http_pid)" = "$HTTP_PID0"

# --- the streams, continued --------------------------------------------------
check "alice's Basic stream ends after NOLOGIN (within 75 s)" wait_for $((REVOKED + 75 - $(date +%s))) ended alice
check "  saying signed-out" grep -q '^event: signed-out' "$T/ev.alice"
check "bob's Basic stream with the old password ends (within 75 s)" wait_for $((REVOKED + 75 - $(date +%s))) ended bob
check "  saying signed-out" grep -q '^event: signed-out' "$T/ev.bob"
check "carol's stream, whose password still works, goes on" kill -0 "$EV_carol"
kill "$EV_carol" 2>/dev/null || true
wait 2>/dev/null || true

e2e_finish
