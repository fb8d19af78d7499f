#!/usr/bin/env bash
#
# Byte-rate caps, end to end (doc/operator-guide.md, "Limits per role"),
# against nginx on the loopback (far faster than any cap here):
#   - a job with options.max_bytes_per_second = 2 MiB/s moves 16 MiB in no
#     less than 7.2 s (0.9 x size / rate), intact;
#   - a role capped at 4 MiB/s moves 2 x 16 MiB, one job on a background
#     worker and one on a remora-worker at the same time, in no less than
#     7.2 s for both together: the cap is shared across workers and hosts;
#   - a cap lifted while a job runs reaches it without stopping it: the
#     worker logs the change and the job ends with its one attempt.
# Only lower bounds, and a generous deadline: a cap promises no speed.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin rate_caps
stack_up
# the server's and remora-worker's logs are kept as /tmp/rate_caps-*.log
e2e_at_exit 'cp "$LOG" /tmp/rate_caps-server.log; cp "$T/w1.log" /tmp/rate_caps-w1.log 2>/dev/null || true'

MIB=1048576
# one background worker taking one job at a time, so that a remora-worker
# beside it takes the other of two
for setting in "remora.max_workers = 1" "remora.worker_concurrency = 1"; do
	q "ALTER SYSTEM SET $setting" >/dev/null
done
q "SELECT pg_reload_conf()" >/dev/null
one_bgworker() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 1 ]; }
check "one background worker" wait_for 30 one_bgworker
q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw;
   CREATE ROLE bob LOGIN; GRANT remora_user TO bob;
   SELECT remora.grant_target('bob', 'target')" >/dev/null
for f in a b c d; do make_file "$f.bin" $((16 * MIB)); done

# seconds from the first attempt's start to the last job's end, of jobs
took() {	# took JOB...
	local ids
	ids=$(IFS=,; echo "$*")
	q "SELECT round(extract(epoch FROM max(j.finished_at) - min(a.started_at))::numeric, 2)
	     FROM remora.jobs j JOIN remora.attempts a USING (job_id) WHERE j.job_id IN ($ids)"
}
at_least() { [ "$(q "SELECT $1 >= $2")" = t ]; }	# at_least X Y: X >= Y

# --- a job's own cap: 2 MiB/s, 16 MiB
job=$(q "SELECT remora_submit('$SRC/a.bin', options => '{\"max_bytes_per_second\": $((2 * MIB))}')")
check "the capped job succeeds (within 120 s)" wait_state "$job" succeeded 120
t=$(took "$job")
check "a job capped at 2 MiB/s moved 16 MiB in $t s, at least 7.2" at_least "$t" 7.2
check_eq "with one attempt" "$(q "SELECT attempts_used FROM remora.jobs WHERE job_id = $job")" 1
verify "$job" a.bin

# --- a role's cap, shared by a background worker and a remora-worker
q "SELECT remora.set_role_limits('bob', max_bytes_per_second => $((4 * MIB)))" >/dev/null
start_remora_worker w1 --label e2e-rate --concurrency 1 "host=$T/pg port=$PG_PORT dbname=postgres user=rw"
external_live() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = 'e2e-rate' AND heartbeat_at IS NOT NULL AND stopped_at IS NULL")" = 1 ]; }
check "a remora-worker runs beside the background worker" wait_for 30 external_live
read -r b1 b2 < <(psql -X -A -t -q -v ON_ERROR_STOP=1 -d postgres -c "
	SET ROLE bob;
	SELECT string_agg(remora_submit('$SRC/' || f || '.bin')::text, ' ' ORDER BY f)
	  FROM unnest(ARRAY['b', 'c']) f")
both_succeeded() { is_state "$b1" succeeded && is_state "$b2" succeeded; }
check "both of the role's jobs succeed (within 120 s)" wait_for 120 both_succeeded
check_eq "one ran on a background worker, the other on the remora-worker" \
	"$(q "SELECT string_agg(w.kind, ' ' ORDER BY w.kind) FROM remora.attempts a
	        JOIN remora_workers w USING (incarnation) WHERE a.job_id IN ($b1, $b2)")" \
	"external worker"
t=$(took "$b1" "$b2")
check "a role capped at 4 MiB/s moved 2 x 16 MiB on two workers in $t s, at least 7.2" at_least "$t" 7.2
check_eq "each with one attempt" \
	"$(q "SELECT sum(attempts_used) FROM remora.jobs WHERE job_id IN ($b1, $b2)")" 2
verify "$b1" b.bin
verify "$b2" c.bin

# --- a cap lifted while the job runs: applied, never by stopping it
kill "$REMORA_WORKER_PID"
external_gone() { ! kill -0 "$REMORA_WORKER_PID" 2>/dev/null; }
check "the remora-worker stops" wait_for 30 external_gone
q "SELECT remora.set_role_limits('bob', max_bytes_per_second => $((MIB / 2)))" >/dev/null
slow=$(psql -X -A -t -q -v ON_ERROR_STOP=1 -d postgres -c "SET ROLE bob; SELECT remora_submit('$SRC/d.bin')")
check "the job runs, capped at 512 KiB/s" wait_for 60 live_at_least "$slow" $MIB
att=$(q "SELECT current_attempt FROM remora.jobs WHERE job_id = $slow")
q "SELECT remora.set_role_limits('bob', max_bytes_per_second => 0)" >/dev/null
lifted() { grep -q "attempt $att: no byte-rate cap" "$LOG"; }
check "the worker applies the lifted cap to the running attempt" wait_for 30 lifted
check "the job succeeds (within 120 s)" wait_state "$slow" succeeded 120
check_eq "with the one attempt it had" \
	"$(q "SELECT attempts_used || ' ' || (SELECT count(*) FROM remora.attempts WHERE job_id = $slow)
	        FROM remora.jobs WHERE job_id = $slow")" "1 1"
check "its log said the cap first" grep -q "attempt $att: capped at $((MIB / 2)) bytes a second" "$LOG"
verify "$slow" d.bin

e2e_finish
