#!/usr/bin/env bash
#
# GET /metrics (doc/operator-guide.md, "Metrics"), end to end
# with curl and promtool against a real cluster, workers, nginx and the
# S3 server:
#   - on the web server: 401 without credentials or with a wrong password,
#     403 for a remora_user and for a role with no Remora role, 200 for a
#     remora_admin (HTTP Basic, and a session cookie); remora.metrics_text()
#     itself is refused to a remora_user (42501);
#   - the text passes `promtool check metrics` (format and naming lints);
#   - it shows the jobs that ran: a job that succeeds and one that fails
#     (a 404 at the source) move the jobs by state, the attempts, the
#     failures by class, the committed bytes and the claim-wait histogram;
#   - the loopback listener remora.metrics_listen (worker "remora
#     metrics") serves the same text without credentials, 404 elsewhere,
#     405 for POST, answers many clients at once, and 503 (logged) when
#     the reading fails;
#   - hostile input: a remora-worker whose --label holds quotes,
#     backslashes, a line feed, a carriage return and a would-be sample,
#     and an error class just as odd, leave the text valid (promtool) with
#     the values escaped and no sample injected;
#   - doc/grafana-dashboard.json is valid JSON whose every expr names only
#     metrics that /metrics exports;
#   - a non-loopback remora.metrics_listen is refused (logged), and the
#     server runs on.
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/http.sh"
e2e_begin metrics

command -v promtool >/dev/null || { not_ok "promtool is installed (test/lib/deps.sh)"; exit 1; }
stack_up
METRICS_PORT=$(free_port)
M="http://127.0.0.1:$METRICS_PORT"
curl() { command curl --max-time 30 "$@"; }
http_up <<CONF
remora.metrics_listen = '127.0.0.1:$METRICS_PORT'
CONF

B=$T/body
# get URL [curl args]: the status, the body in $B
get() { local u=$1; shift; curl -s -o "$B" -D "$T/headers" -w '%{http_code}' "$@" "$u"; }
# scrape FILE: the admin's scrape of the web server into FILE (ok or not)
scrape() { get "$H/metrics" -u carol:carol-pw >/dev/null && cp "$B" "$1"; }
# value FILE SERIES: the value of one sample (the series as written)
value() { grep -F "$2 " "$1" | grep -F -v '#' | awk -v s="$2" '$1 == s { print $2 }'; }
promtool_ok() { promtool check metrics <"$1" >"$T/promtool.out" 2>&1 || { cat "$T/promtool.out"; return 1; }; }

metrics_running() {
	[ -n "$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora metrics'")" ]
}
check "the loopback listener runs as 'remora metrics'" wait_for 30 metrics_running

# --- who may read ---------------------------------------------------------
check_eq "no credentials: 401" "$(get "$H/metrics")" 401
check_eq "  sqlstate 28000" "$(jq -r .sqlstate "$B")" 28000
check_eq "a wrong password: 401" "$(get "$H/metrics" -u carol:nope)" 401
check_eq "a remora_user: 403" "$(get "$H/metrics" -u alice:alice-pw)" 403
check_eq "  sqlstate 42501" "$(jq -r .sqlstate "$B")" 42501
check_eq "a role with no Remora role: 403" "$(get "$H/metrics" -u dave:dave-pw)" 403
check_eq "POST: 405" "$(get "$H/metrics" -X POST -u carol:carol-pw)" 405
err=$(PGPASSWORD=alice-pw psql -X -q -t -A -h "$T/pg" -p "$PG_PORT" -U alice -d postgres \
	-v VERBOSITY=verbose -c "SELECT remora.metrics_text()" 2>&1 || true)
check "remora.metrics_text() is refused to a remora_user (42501)" grep -q 42501 <<<"$err"
check_eq "a remora_admin: 200" "$(get "$H/metrics" -u carol:carol-pw)" 200
check "  in the text format 0.0.4" \
	grep -qi '^content-type: text/plain; version=0.0.4; charset=utf-8' "$T/headers"
check "  never cached" grep -qi '^cache-control: no-store' "$T/headers"
check "  promtool check metrics passes" promtool_ok "$B"
cookie=$(curl -s -D - -o /dev/null -d '{"user":"carol","password":"carol-pw"}' "$H/api/session" |
	grep -i '^set-cookie:' | sed 's/^[^:]*: //; s/;.*//')
check_eq "a remora_admin's session cookie: 200" "$(get "$H/metrics" -b "$cookie")" 200

# --- the jobs it shows -------------------------------------------------------
scrape "$T/before"
make_file ok.bin 2000000
submit() {	# submit SOURCE: the job id, submitted by alice over the API
	curl -s -u alice:alice-pw -H 'Content-Type: application/json' \
		-d "{\"source\":\"$1\"}" "$H/api/jobs" | jq -r .job_id
}
GOOD=$(submit "$SRC/ok.bin")
BAD=$(submit "$SRC/no-such-file.bin")
check "the job succeeds" wait_for 120 is_state "$GOOD" succeeded
check "the job of a missing file fails" wait_for 120 is_state "$BAD" failed
scrape "$T/after"
check "the text after the jobs passes promtool" promtool_ok "$T/after"
delta() {	# delta SERIES: after - before
	echo $(($(value "$T/after" "$1") - $(value "$T/before" "$1")))
}
check_eq "remora_jobs{state=\"succeeded\"} went up by one" "$(delta 'remora_jobs{state="succeeded"}')" 1
check_eq "remora_jobs{state=\"failed\"} went up by one" "$(delta 'remora_jobs{state="failed"}')" 1
check_eq "  and equals remora_stats" "$(value "$T/after" 'remora_jobs{state="failed"}')" \
	"$(q "SELECT failed FROM remora_stats")"
check_eq "remora_attempts_total went up by two" "$(delta remora_attempts_total)" 2
class=$(q "SELECT error->>'class' FROM remora.attempts WHERE job_id = $BAD")
check "the failure is counted under its class ($class)" \
	test "$(value "$T/after" "remora_attempt_failures_total{class=\"$class\"}")" -ge 1
check_eq "remora_committed_bytes_total went up by the file's size" \
	"$(delta remora_committed_bytes_total)" 2000000
check_eq "the claim-wait histogram counts both first attempts" \
	"$(delta remora_claim_wait_seconds_count)" 2
check_eq "  and its +Inf bucket equals its count" \
	"$(value "$T/after" 'remora_claim_wait_seconds_bucket{le="+Inf"}')" \
	"$(value "$T/after" remora_claim_wait_seconds_count)"
check_eq "remora_leases_limit is remora.max_active_leases" \
	"$(value "$T/after" remora_leases_limit)" "$(q "SHOW remora.max_active_leases")"
check_eq "remora_workers counts the background workers" \
	"$(value "$T/after" 'remora_workers{kind="worker"}')" \
	"$(q "SELECT count(*) FROM remora.incarnations WHERE kind = 'worker' AND stopped_at IS NULL")"
worker_bytes=$(grep '^remora_worker_committed_bytes_total{' "$T/after" | awk '{ s += $2 } END { print s + 0 }')
check "the workers' committed bytes include the job's" test "$worker_bytes" -ge 2000000
check "the checkpoint writer's figures are there" \
	grep -q '^remora_checkpoint_transactions_total [0-9]' "$T/after"

# --- the loopback listener ---------------------------------------------------
check_eq "the listener serves /metrics without credentials" "$(get "$M/metrics")" 200
check "  promtool check metrics passes" promtool_ok "$B"
check_eq "  the same jobs as the web server shows" \
	"$(value "$B" 'remora_jobs{state="succeeded"}')" "$(value "$T/after" 'remora_jobs{state="succeeded"}')"
check_eq "  HEAD: 200" "$(get "$M/metrics" -I)" 200
check_eq "  another path: 404" "$(get "$M/")" 404
check_eq "  /metrics%00 is another path: 404" "$(get "$M/metrics%00")" 404
check_eq "  POST: 405" "$(get "$M/metrics" -X POST)" 405
pids=()
for i in $(seq 16); do
	curl -s -o /dev/null -w '%{http_code}\n' "$M/metrics" >"$T/many.$i" &
	pids+=($!)
done
wait "${pids[@]}"
cat "$T"/many.* >"$T/many"
check_eq "  16 clients at once all get 200" "$(grep -c '^200$' "$T/many")" 16

# --- hostile labels ------------------------------------------------------------
q "CREATE ROLE rw LOGIN PASSWORD 'rw-pw'; GRANT remora_worker TO rw" >/dev/null
EVIL=$'ev"il\\} 1\nremora_jobs{state="injected"} 99\r\n# TYPE x counter'
start_remora_worker evil --label "$EVIL" \
	"host=$T/pg port=$PG_PORT dbname=postgres user=rw password=rw-pw"
evil_running() { [ "$(q "SELECT count(*) FROM remora.incarnations WHERE label LIKE 'ev%' AND stopped_at IS NULL")" = 1 ]; }
check "a remora-worker with a hostile --label registers" wait_for 30 evil_running
q "UPDATE remora.attempts SET error = error || jsonb_build_object('class', E'odd\"class\\\\\n')
    WHERE job_id = $BAD" >/dev/null
check_eq "the web server's text: 200" "$(get "$H/metrics" -u carol:carol-pw)" 200
cp "$B" "$T/evil"
check "  promtool check metrics passes" promtool_ok "$T/evil"
check "  no sample is injected" bash -c "! grep -q '^remora_jobs{state=\"injected\"}' '$T/evil'"
check "  no line starts a family the label made up" bash -c "! grep -q '^# TYPE x ' '$T/evil'"
check "  the label is escaped: \\\" \\\\ \\n" \
	grep -qF 'worker="ev\"il\\} 1\nremora_jobs{state=\"injected\"} 99' "$T/evil"
check "  the error class too" grep -qF 'remora_attempt_failures_total{class="odd\"class\\\n"} 1' "$T/evil"
check_eq "the listener's text: 200" "$(get "$M/metrics")" 200
check "  promtool check metrics passes" promtool_ok "$B"

# --- a reading that fails -------------------------------------------------------
q "ALTER FUNCTION remora.metrics_text() RENAME TO metrics_text_gone" >/dev/null
check_eq "the listener answers 503 when the metrics cannot be read" "$(get "$M/metrics")" 503
logged() { grep -q 'reading metrics failed' "$T/pg/server.log"; }
check "  and the error is in the server log" wait_for 10 logged
q "ALTER FUNCTION remora.metrics_text_gone() RENAME TO metrics_text" >/dev/null
check_eq "  then 200 again" "$(get "$M/metrics")" 200

# --- the example dashboard ---------------------------------------------------------
dashboard_json() { jq -e .panels doc/grafana-dashboard.json >/dev/null; }
check "doc/grafana-dashboard.json is valid JSON" dashboard_json
jq -r '.. | .expr? // empty' doc/grafana-dashboard.json | grep -oE 'remora_[a-z_]+' | sort -u >"$T/names"
check "  its exprs name metrics" test -s "$T/names"
missing=""
while read -r name; do
	grep -qE "^${name}[{ ]" "$T/after" || missing="$missing $name"
done <"$T/names"
check_eq "  every metric its exprs name is exported" "$missing" ""

# --- a non-loopback address is refused ------------------------------------------
cluster_stop "$T/pg" fast
sed -i "s/^remora.metrics_listen = .*/remora.metrics_listen = '0.0.0.0:$METRICS_PORT'/" "$T/pg/data/postgresql.conf"
cluster_start "$T/pg" || { not_ok "PostgreSQL restarts"; exit 1; }
refused() { grep -q 'remora metrics refuses to listen on "0.0.0.0:' "$T/pg/server.log"; }
check "remora.metrics_listen = '0.0.0.0:...' is refused, with a message in the log" wait_for 30 refused
metrics_gone() { ! metrics_running; }
check "  the worker exits and is not restarted into the same refusal" wait_for 30 metrics_gone
check_eq "  and the server runs on" "$(q "SELECT 1")" 1

e2e_finish
