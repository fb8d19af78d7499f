#!/usr/bin/env bash
#
# Attempts that finish in the same round commit together: one call of
# remora.commit_many, one transaction, for several results.  Forty small
# objects go to one background worker that runs sixteen attempts at once,
# then forty more to remora-worker (the external worker) with the same
# concurrency.  The store's proxy holds the answers to the first sixteen
# manifest uploads until all sixteen were sent, then lets them go at once,
# so that those attempts end in the same round, as a worker's do when many
# small jobs finish together.  For each:
#   - every job succeeds with one attempt, and each result's SHA-256 is
#     its file's (two are read back with the AWS CLI as well);
#   - the server's function statistics (track_functions, read once the
#     worker has exited, so that they are whole) count remora.commit_many
#     calls, and fewer commit calls of either kind than jobs.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin batch_commit
stack_up
# the server's and remora-worker's logs are kept as /tmp/batch_commit-*.log
e2e_at_exit 'cp "$LOG" /tmp/batch_commit-server.log; cp "$T/w1.log" /tmp/batch_commit-w1.log 2>/dev/null || true'

JOBS=40
for setting in "track_functions = 'pl'" "remora.max_workers = 1" "remora.worker_concurrency = 16"; do
	q "ALTER SYSTEM SET $setting" >/dev/null
done
q "SELECT pg_reload_conf()" >/dev/null
for i in $(seq 1 $((2 * JOBS))); do make_file "small$i.bin" $((1024 + i)); done

# submit JOBS files from FIRST on, in one statement, with the answers to
# the first 16 manifest uploads held (release_together lets them go)
submit() {
	# (a spent rule still counts hits: one rule of that match at a time)
	curl -s "http://127.0.0.1:$S3_PROXY/__reset" >/dev/null
	HELD_BEFORE=$(hits "$S3_PROXY" manifest)
	rule "$S3_PROXY" "match=manifest&method=PUT&action=holdanswer&count=16"
	q "SELECT count(remora_submit('$SRC/small' || g || '.bin'))
	     FROM generate_series($1, $(($1 + JOBS - 1))) g" >/dev/null
}
sixteen_held() { [ "$(hits "$S3_PROXY" manifest)" -ge $((HELD_BEFORE + 16)) ]; }
release() { curl -s "http://127.0.0.1:$S3_PROXY/__release" >/dev/null; }
release_together() {	# release_together WHO
	check "$1: sixteen manifest uploads wait for their answers" wait_for 60 sixteen_held
	release
}
# an upload counts when it reaches the proxy, but its answer is held only
# once the store has given it: one that came after the release is let go
# by the next (the rule holds sixteen, then no more)
succeeded_releasing() { release; all_succeeded "$1"; }
all_succeeded() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE state = 'succeeded'")" = "$1" ]; }
calls() {	# calls FUNCTION: its calls in the function statistics
	q "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions
	    WHERE schemaname = 'remora' AND funcname = '$1'"
}
results_intact() {	# results_intact FIRST LAST: each result's SHA-256 is its file's
	local i want bad=0
	for i in $(seq "$1" "$2"); do
		want=$(sha256sum "$WWW/small$i.bin" | cut -d' ' -f1)
		# one statement submitted them in order: job i fetched small<i>
		[ "$(q "SELECT sha256 FROM remora_result($i)")" = "$want" ] || bad=$((bad + 1))
	done
	[ "$bad" = 0 ]
}
commits_batched() {	# commits_batched WHO
	local many one
	many=$(calls commit_many)
	one=$(calls commit)
	echo "# $1: remora.commit_many $many calls, remora.commit $one, for $JOBS jobs"
	check "$1: results were committed by remora.commit_many" [ "$many" -ge 1 ]
	check "$1: fewer commit calls of either kind than jobs" [ $((many + one)) -lt "$JOBS" ]
}

# --- the background worker
submit 1
release_together "background worker"
check "background worker: $JOBS small jobs succeed" wait_for 90 succeeded_releasing "$JOBS"
check_eq "background worker: each with one attempt" \
	"$(q "SELECT count(*) FROM remora.attempts")" "$JOBS"
check "background worker: every result has its file's SHA-256" results_intact 1 "$JOBS"
verify 1 small1.bin
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
no_bgworker() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 0 ]; }
check "background worker: it exits at remora.max_workers = 0" wait_for 30 no_bgworker
commits_batched "background worker"

# --- remora-worker
q "SELECT pg_stat_reset()" >/dev/null
submit $((JOBS + 1))
start_remora_worker w1 --concurrency 16 "host=$T/pg port=$PG_PORT dbname=postgres user=postgres"
release_together "remora-worker"
check "remora-worker: $JOBS more small jobs succeed" wait_for 90 succeeded_releasing $((2 * JOBS))
check_eq "remora-worker: each with one attempt" \
	"$(q "SELECT count(*) FROM remora.attempts")" $((2 * JOBS))
check "remora-worker: every result has its file's SHA-256" results_intact $((JOBS + 1)) $((2 * JOBS))
verify $((2 * JOBS)) "small$((2 * JOBS)).bin"
kill -TERM "$REMORA_WORKER_PID"
worker_gone() {
	! kill -0 "$REMORA_WORKER_PID" 2>/dev/null &&
		[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'remora-worker'")" = 0 ]
}
check "remora-worker: it exits at SIGTERM, and its session ends" wait_for 30 worker_gone
commits_batched "remora-worker"

e2e_finish
