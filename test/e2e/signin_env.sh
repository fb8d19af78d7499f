#!/usr/bin/env bash
#
# Sign-in to the HTTP API proves the password it was given, and nothing
# the server's OS user has: libpq ignores an empty password and would
# take PGPASSWORD, a password file (PGPASSFILE, ~/.pgpass) or a service
# file of the server's environment instead.  The server is started twice,
# once with PGPASSWORD naming erin's password in its environment, once
# with PGPASSFILE pointing at a password file with bob's line (pg_hba:
# scram-sha-256 on TCP); an empty password, as a JSON sign-in and as HTTP
# Basic "user:", is refused (401) both times, counts as a failed sign-in
# (the throttle answers 429 past the limit), and the right password still
# signs in.
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/http.sh"
e2e_begin signin_env
curl() { command curl --max-time 30 "$@"; }

e2e_cluster </dev/null
q "CREATE EXTENSION remora" >/dev/null
http_up <<CONF
remora.http_login_max_failures = 3
remora.http_login_lockout = '60s'
CONF

# restart_with VAR=VALUE...: the server again, with libpq's variables in
# the environment of its processes (remora http's included)
restart_with() {
	cluster_stop "$T/pg" fast
	runuser -u postgres -- env "$@" "$PGBIN/pg_ctl" -D "$T/pg/data" -l "$T/pg/server.log" \
		-w -t 60 start >/dev/null || { tail -n 30 "$T/pg/server.log"; return 1; }
	wait_for 30 http_serving
}
sign_in() {	# sign_in USER PASSWORD: the status of a JSON sign-in
	curl -s -o "$T/body" -w '%{http_code}' -X POST "$H/api/session" \
		-H 'Content-Type: application/json' \
		-d "$(jq -cn --arg u "$1" --arg p "$2" '{user: $u, password: $p}')"
}
basic() {	# basic USER:PASSWORD: the status of GET /api/jobs with HTTP Basic
	curl -s -o "$T/body" -w '%{http_code}' -u "$1" "$H/api/jobs"
}

# --- PGPASSWORD in the server's environment ------------------------------------
check "the server starts with PGPASSWORD=erin-pw in its environment" \
	restart_with PGPASSWORD=erin-pw
check "  the postmaster has it" grep -qz '^PGPASSWORD=erin-pw$' "/proc/$(head -1 "$T/pg/data/postmaster.pid")/environ"
check_eq "an empty password for erin (JSON sign-in): 401" "$(sign_in erin '')" 401
check_eq "  with the message of a wrong password" "$(jq -r .error "$T/body")" "invalid user name or password"
check_eq "an empty password for erin (Basic erin:): 401" "$(basic erin:)" 401
check_eq "erin's right password still signs in" "$(sign_in erin erin-pw)" 200

# --- a password file named by PGPASSFILE ---------------------------------------
printf '*:*:*:bob:bob-pw\n*:*:*:alice:alice-pw\n' >"$T/pgpass"
chown postgres: "$T/pgpass"
chmod 600 "$T/pgpass"
check "the server starts with PGPASSFILE naming a file with bob's and alice's passwords" \
	restart_with PGPASSFILE="$T/pgpass"
check_eq "an empty password for bob (JSON sign-in): 401" "$(sign_in bob '')" 401
check_eq "an empty password for bob (Basic bob:): 401" "$(basic bob:)" 401
check_eq "bob's right password still signs in" "$(basic bob:bob-pw)" 200
# empty passwords are failed sign-ins: alice's third one reaches the limit
for i in 1 2 3; do sign_in alice '' >"$T/code$i"; done
check_eq "three empty passwords for alice: 401 each" "$(cat "$T/code1") $(cat "$T/code2") $(cat "$T/code3")" "401 401 401"
check_eq "  and they count as failures: the next sign-in is throttled (429)" "$(sign_in alice alice-pw)" 429

e2e_finish
