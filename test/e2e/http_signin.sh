#!/usr/bin/env bash
#
# Sign-in throttling and the session table of "remora http", with curl
# against a real cluster (doc/security.md, "The web client and API"):
#   - 60 wrong passwords sent at once: at most
#     remora.http_login_max_failures of them reach PostgreSQL (counted in
#     its log: log_connections), the others are answered 429;
#   - failures are counted per (role, address): failures with made-up names
#     from one address do not stop a role signing in from another, nor a
#     role at an address it signed in from before; a role's failures from
#     one address do not lock it out elsewhere; the address limit still
#     holds for names new at that address;
#   - remora.http_trusted_proxies: X-Forwarded-For is believed only from
#     those peers, and only its right-most untrusted entry; from any other
#     peer a spoofed header does not escape the throttle; bad values of the
#     setting are refused;
#   - one role signing in more often than its session cap ends only its
#     own oldest session: another role's session still works.
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/http.sh"
e2e_begin http_signin

# no request of this test may hang it
curl() { command curl --max-time 30 "$@"; }

e2e_cluster </dev/null
q "CREATE EXTENSION remora" >/dev/null
# the test's client is 127.0.0.1 (a trusted proxy: the "clients" differ by
# X-Forwarded-For) or 127.0.0.2 (not trusted)
http_up <<CONF
log_connections = on
remora.http_login_max_failures = 5
remora.http_login_lockout = '10min'
remora.http_trusted_proxies = '127.0.0.1/32'
CONF

B=$T/body
# signin USER PASSWORD [FORWARDED-FOR [curl args]]: the status of POST
# /api/session, with that X-Forwarded-For header (none if empty)
signin() {
	local u=$1 p=$2 fwd=${3:-}
	local args=(-s -o "$B" -w '%{http_code}' -X POST)
	shift 2
	[ $# -gt 0 ] && shift
	[ -n "$fwd" ] && args+=(-H "X-Forwarded-For: $fwd")
	curl "${args[@]}" "$@" -d "{\"user\":\"$u\",\"password\":\"$p\"}" \
		"$H/api/session"
}
# auth_failures ROLE: sign-in failures PostgreSQL logged for ROLE
auth_failures() { grep -c "password authentication failed for user \"$1\"" "$LOG" || true; }

# --- sessions: one role cannot sign another out --------------------------------------
# cookie: the session id of the last sign-in's answer
signin_cookie() {
	curl -s -D - -o /dev/null -X POST -H 'X-Forwarded-For: 198.51.100.200' \
		-d "{\"user\":\"$1\",\"password\":\"$1-pw\"}" "$H/api/session" |
		sed -n 's/^[Ss]et-[Cc]ookie: remora_session=\([0-9a-f]*\);.*/\1/p'
}
uses() { curl -s -o /dev/null -w '%{http_code}' -b "remora_session=$1" "$H/api/jobs"; }
bob_session=$(signin_cookie bob)
first=$(signin_cookie alice)
second=$(signin_cookie alice)
for i in $(seq 99); do last=$(signin_cookie alice); done
check "alice signed in 101 times" test -n "$first" -a -n "$second" -a -n "$last"
check_eq "bob's session still works" "$(uses "$bob_session")" 200
check_eq "alice's oldest session has ended (100 per role): 401" "$(uses "$first")" 401
check_eq "  her second one still works" "$(uses "$second")" 200
check_eq "  her newest one works" "$(uses "$last")" 200

# --- 60 wrong passwords at once ----------------------------------------------
before=$(auth_failures erin)
# one curl, 60 transfers opened at once (-Z --parallel-immediate)
urls=()
for i in $(seq 60); do urls+=(-o /dev/null "$H/api/session"); done
curl -s -Z --parallel-immediate --parallel-max 60 2>/dev/null \
	-w '%{http_code}\n' -H 'X-Forwarded-For: 198.51.100.3' \
	-d '{"user":"erin","password":"wrong"}' "${urls[@]}" >"$T/par"
codes=$(sort "$T/par" | uniq -c | tr -s ' \n' ' ')
refused=$(grep -c '^401$' "$T/par" || true)
throttled=$(grep -c '^429$' "$T/par" || true)
logged() { [ "$(auth_failures erin)" -ge $((before + refused)) ]; }
wait_for 10 logged || true
echo "# 60 concurrent wrong passwords: $codes; PostgreSQL logged $(($(auth_failures erin) - before)) failures"
check_eq "60 concurrent wrong passwords are all answered 401 or 429" \
	$((refused + throttled)) 60
check "  at most 5 (remora.http_login_max_failures) were refused by the server" \
	test "$refused" -ge 1 -a "$refused" -le 5
check "  at most 5 reached PostgreSQL (its log)" \
	test $(($(auth_failures erin) - before)) -le 5
check_eq "  then the right password from there waits: 429" \
	"$(signin erin erin-pw 198.51.100.3)" 429
# Retry-After says how long the lockout (10 min) has left, not a
# fixed few seconds
retry=$(signin erin erin-pw 198.51.100.3 -D "$T/h" >/dev/null
	tr -d '\r' <"$T/h" | sed -n 's/^Retry-After: //Ip')
check "  its Retry-After is the lockout's time left (got '$retry')" \
	test "${retry:-0}" -gt 60 -a "${retry:-0}" -le 600
check_eq "  and from another address it signs in" \
	"$(signin erin erin-pw 198.51.100.4)" 200

# --- one address does not lock out everyone at it --------------------------------
check_eq "bob signs in from 203.0.113.7" "$(signin bob bob-pw 203.0.113.7)" 200
for i in $(seq 20); do
	signin "nobody$i" guess 203.0.113.7 >/dev/null
done
check_eq "after 20 failures with made-up names from 203.0.113.7, a 21st name waits: 429" \
	"$(signin nobody21 guess 203.0.113.7)" 429
check_eq "  alice signs in from another address" \
	"$(signin alice alice-pw 203.0.113.8)" 200
check_eq "  bob, who signed in from 203.0.113.7 before, still signs in from there" \
	"$(signin bob bob-pw 203.0.113.7)" 200
check_eq "  a role new at 203.0.113.7 waits out the lockout there: 429" \
	"$(signin carol carol-pw 203.0.113.7)" 429
for i in $(seq 5); do signin alice wrong 203.0.113.9 >/dev/null; done
check_eq "after 5 wrong passwords for alice from 203.0.113.9, alice waits there: 429" \
	"$(signin alice alice-pw 203.0.113.9)" 429
check_eq "  and signs in from 203.0.113.10" \
	"$(signin alice alice-pw 203.0.113.10)" 200

# --- X-Forwarded-For is believed only from trusted proxies ---------------------
untrusted=(--interface 127.0.0.2)
for i in $(seq 20); do
	signin "spoof$i" guess "192.0.2.$i" "${untrusted[@]}" >/dev/null
done
check_eq "from an untrusted peer, a new X-Forwarded-For does not escape the address limit: 429" \
	"$(signin spoof21 guess 192.0.2.99 "${untrusted[@]}")" 429
check_eq "  nor does a right password of a role new there" \
	"$(signin dave dave-pw 192.0.2.100 "${untrusted[@]}")" 429
for i in $(seq 20); do
	signin "left$i" guess "10.9.9.$i, 198.51.100.77" >/dev/null
done
check_eq "through a trusted proxy, only the right-most address counts: a new left part waits: 429" \
	"$(signin left21 guess "10.9.9.99, 198.51.100.77")" 429
check_eq "  a second X-Forwarded-For line is read after the first: 429" \
	"$(signin left22 guess 10.9.9.98 -H 'X-Forwarded-For: 198.51.100.77')" 429
check_eq "  a trusted proxy in the chain is skipped: 429" \
	"$(signin left23 guess "198.51.100.77, 127.0.0.1")" 429
check_eq "  junk in the header ends the walk: what is left of it is not believed (401 at the proxy's address)" \
	"$(signin left24 guess "198.51.100.77, not-an-address")" 401

# --- the known places outlive a restart of remora http ------------------------------
# (the failure counts do not: a restart forgives them)
http_pid=$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora http'")
kill "$http_pid"
restarted() {
	[ -n "$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora http' AND pid <> $http_pid")" ] &&
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$H/api/openapi.json")" = 200 ]
}
check "remora http restarts" wait_for 30 restarted
for i in $(seq 21 40); do
	signin "again$i" guess 203.0.113.7 >/dev/null
done
check_eq "after the restart, 20 new failures from 203.0.113.7 lock a name new there out: 429" \
	"$(signin again41 guess 203.0.113.7)" 429
check_eq "  bob, who signed in from 203.0.113.7 before the restart, still signs in from there" \
	"$(signin bob bob-pw 203.0.113.7)" 200
check "  the known places are in the data directory, for the server's OS user alone" \
	test "$(stat -c %a "$T/pg/data/remora_http_places" 2>/dev/null)" = 600

# --- bad settings ------------------------------------------------------------------
for v in 'not-a-network' '10.0.0.0/33' '192.0.2.1/' '10.0.0.0/8;1.2.3.4'; do
	out=$(q "ALTER SYSTEM SET remora.http_trusted_proxies = '$v'" 2>&1 || true)
	if echo "$out" | grep -q 'invalid value for parameter "remora.http_trusted_proxies"'; then
		ok "remora.http_trusted_proxies = '$v' is refused"
	else
		not_ok "remora.http_trusted_proxies = '$v' is refused (got: $out)"
	fi
done
out=$(q "ALTER SYSTEM SET remora.http_trusted_proxies = 'not-a-network'" 2>&1 || true)
check "  the message names the bad entry" grep -q '"not-a-network" is not an IP address or CIDR network' <<<"$out"
check "a list of addresses and networks is taken" \
	q "ALTER SYSTEM SET remora.http_trusted_proxies = '127.0.0.1/32, 10.0.0.0/8, ::1'"
q "ALTER SYSTEM RESET remora.http_trusted_proxies" >/dev/null

# a reload that empties the list: the header from 127.0.0.1 is ignored
# too.  carol, held back at 203.0.113.7 above, then signs in as 127.0.0.1
# (which has no failures), once the server has read the new setting.
q "ALTER SYSTEM SET remora.http_trusted_proxies = ''" && q "SELECT pg_reload_conf()" >/dev/null
carol_in() { [ "$(signin carol carol-pw 203.0.113.7)" = 200 ]; }
check "after a reload that empties remora.http_trusted_proxies, X-Forwarded-For from 127.0.0.1 is ignored" \
	wait_for 10 carol_in

e2e_finish
