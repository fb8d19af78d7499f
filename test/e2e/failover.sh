#!/usr/bin/env bash
#
# Failover of PostgreSQL under running transfers.  A primary with a
# synchronous streaming standby (synchronous_commit = on,
# synchronous_standby_names), remora preloaded on both.  The primary's
# background workers and remora-worker (connected with a multi-host
# conninfo) run jobs: small ones that finish first, large ones from a slow
# source (1 MB/s) that are mid-transfer, with a validated checkpoint, and
# waiting ones held back by remora.max_active_leases.  The
# primary is stopped at once (immediate: a crash) and the standby
# promoted.  Its launcher starts, its reconcile rebuilds the queue and the
# leases (unlogged: empty after promotion), its workers finish every job,
# and remora-worker reconnects to it and carries on.
#
# No committed result is lost (the jobs that had succeeded keep the same
# result and manifest), no job has two results, every attempt that was
# running on the old primary was committed exactly once or replaced with a
# greater fencing token (resuming from its checkpoint), and every member
# read back from the store has the SHA-256 the result records.
#
. "$(dirname "$0")/../lib/e2e.sh"
stack_up failover

PRIMARY=$T/pg
STANDBY=$T/standby
STANDBY_PORT=$(free_port)
e2e_at_exit "cp '$STANDBY/server.log' '/tmp/failover-standby-server.log' 2>/dev/null"

# four permits: the large jobs take them all, the waiting ones stay queued
q "ALTER SYSTEM SET remora.max_active_leases = 4" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null

# a database the launcher does not serve: there only this script runs
# reconcile, so what promotion leaves of the coordination state can be seen
psql -X -q -c "CREATE DATABASE remora_side" >/dev/null
side() { E2E_DB=remora_side q "$1"; }
side "CREATE EXTENSION remora" >/dev/null
side "SELECT count(remora_submit('$SRC/side-' || g || '.bin')) FROM generate_series(1, 3) g" >/dev/null
side "SELECT count(*) FROM remora.claim('33333333-3333-3333-3333-333333333333', 2)" >/dev/null
side "SELECT remora.checkpoint(current_attempt, fencing_token, '{\"state\": {\"upload_key\": \"k\", \"upload_id\": \"u\", \"parts\": [{\"size\": 7, \"etag\": \"e\"}]}, \"bytes_done\": 7}')
	FROM remora.jobs WHERE state = 'running'" >/dev/null
side_running=$(side "SELECT string_agg(current_attempt::text, ',' ORDER BY job_id) FROM remora.jobs WHERE state = 'running'")

check "a streaming standby is made from the primary (pg_basebackup -R)" \
	cluster_standby "$PRIMARY" "$STANDBY" "$STANDBY_PORT" </dev/null
check "the standby is synchronous" cluster_sync "$PRIMARY"
check_eq "the primary commits synchronously" \
	"$(q "SELECT current_setting('synchronous_commit') || '/' || current_setting('synchronous_standby_names')")" \
	"on/standby"

# ---- an external worker, and jobs on the primary ----
# The primary's background workers wait (remora.max_workers = 0, in the
# primary's own configuration: the standby keeps 2) while remora-worker,
# connected through a multi-host conninfo that finds the server taking
# writes, takes the first jobs.
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
bgworkers() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = "$1" ]; }
check "the primary's background workers wait" wait_for 20 bgworkers 0
q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw" >/dev/null
e2e_at_exit "cp '$T/we.log' /tmp/failover-we.log 2>/dev/null"
start_remora_worker we --label we --concurrency 2 \
	"host=127.0.0.1,127.0.0.1 port=$PG_PORT,$STANDBY_PORT dbname=postgres user=rw target_session_attrs=read-write"
live_we() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = 'we' AND stopped_at IS NULL")" = 1 ]; }
check "remora-worker connects to the primary" wait_for 20 live_we

for i in 1 2 3 4 5; do make_file "small$i.bin" 300000; done
for i in 1 2; do make_file "large$i.bin" 30000000; done # 5 MB parts, at 1 MB/s: 30 s
for i in 3 4; do make_file "large$i.bin" 12000000; done
for i in 1 2 3; do make_file "later$i.bin" 6000000; done

# two large jobs fill remora-worker, then the background workers start and
# run the small jobs and two more large ones
large=$(q "SELECT string_agg(remora_submit('$SRC/slow/large' || g || '.bin')::text, ' ') FROM generate_series(1, 2) g")
external_runs() { [ "$(q "SELECT count(*) FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt JOIN remora.incarnations i ON i.incarnation = a.incarnation WHERE j.state = 'running' AND i.label = 'we'")" = 2 ]; }
check "remora-worker runs two large jobs" wait_for 20 external_runs
q "ALTER SYSTEM SET remora.max_workers = 2" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
check "then the primary's background workers start" wait_for 20 bgworkers 2
small=$(q "SELECT string_agg(remora_submit('$SRC/small' || g || '.bin')::text, ' ') FROM generate_series(1, 5) g")
done_small() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE state = 'succeeded'")" = 5 ]; }
check "the small jobs succeed on the primary" wait_for 60 done_small
large="$large $(q "SELECT string_agg(remora_submit('$SRC/slow/large' || g || '.bin')::text, ' ') FROM generate_series(3, 4) g")"
later=$(q "SELECT string_agg(remora_submit('$SRC/later' || g || '.bin')::text, ' ') FROM generate_series(1, 3) g")
all_jobs="$small $large $later"
mid_transfer() {
	[ "$(q "SELECT count(*) FROM remora.jobs j JOIN remora.checkpoints c USING (job_id)
		WHERE j.state = 'running' AND c.attempt_id = j.current_attempt AND c.bytes_done >= 5000000")" = 4 ]
}
check "the large jobs are mid-transfer, each with a validated checkpoint" wait_for 60 mid_transfer
check_eq "the waiting jobs are held back by the lease limit" \
	"$(q "SELECT count(*) FROM remora.jobs WHERE state = 'queued'")" 3

# what the clients have seen committed, and what was running
results_of() { q "SELECT string_agg(job_id || ':' || attempt_id || ':' || fencing_token || ':' || manifest_key || ':' || manifest_sha256, ',' ORDER BY job_id) FROM remora.results WHERE job_id IN ($1)"; }
committed_before=$(results_of "${small// /,}")
running_before=$(q "SELECT string_agg(format('(%L::uuid, %s::bigint)', attempt_id, fencing_token), ',' ORDER BY job_id) FROM remora.attempts WHERE state = 'running'")
incarnations_before=$(q "SELECT string_agg(quote_literal(incarnation), ',') FROM remora.incarnations WHERE kind = 'worker' AND stopped_at IS NULL")
jobs_before=$(q "SELECT count(*) FROM remora.jobs")

# ---- failover ----
promoted_at=$(q "SELECT now()")
check "the primary is stopped at once and the standby promoted" \
	cluster_promote "$PRIMARY" "$STANDBY"
export PGHOST=$STANDBY PGPORT=$STANDBY_PORT
LOG=$STANDBY/server.log

check_eq "in the database nobody reconciles, promotion left the queue, the leases and the coordination marker empty (unlogged)" \
	"$(side "SELECT (SELECT count(*) FROM remora.queue) || '/' || (SELECT count(*) FROM remora.leases) || '/' || (SELECT count(*) FROM remora.coordination)")" \
	"0/0/0"
check_eq "reconcile rebuilds two leases and one queue entry there" "$(side "SELECT remora.reconcile()")" 3
check_eq "the rebuilt leases are exactly the running attempts" \
	"$(side "SELECT string_agg(attempt_id::text, ',' ORDER BY job_id) FROM remora.leases")" "$side_running"
check_eq "the running attempts keep their authority on the promoted server" \
	"$(side "SELECT bool_and(r.ok) FROM remora.jobs j, LATERAL remora.renew(j.current_attempt, j.fencing_token) r WHERE j.state = 'running'")" "t"
check_eq "their checkpoints survived the promotion" \
	"$(side "SELECT count(*) FROM remora.checkpoints WHERE bytes_done = 7")" 2
check_eq "the queue holds the waiting job, and the marker is back" \
	"$(side "SELECT (SELECT count(*) FROM remora.queue) || '/' || (SELECT count(*) FROM remora.coordination)")" "1/1"

launcher_runs() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora launcher'")" = 1 ]; }
check "the launcher starts on the promoted standby" wait_for 30 launcher_runs
workers_run() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 2 ]; }
check "so do its background workers" wait_for 30 workers_run
check_eq "no job was lost in the failover" "$(q "SELECT count(*) FROM remora.jobs")" "$jobs_before"
check_eq "the old primary's worker incarnations are recorded as stopped" \
	"$(q "SELECT count(*) FROM remora.incarnations WHERE incarnation IN ($incarnations_before) AND stopped_at IS NULL")" 0

all_succeeded() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE state <> 'succeeded'")" = 0 ]; }
if ! check "the promoted server's workers finish every job" wait_for 120 all_succeeded; then
	q "SELECT job_id, state, last_error FROM remora.jobs WHERE state <> 'succeeded'" | sed 's/^/# /'
fi
check_eq "the coordination marker is back in the served database" \
	"$(q "SELECT count(*) FROM remora.coordination")" 1

# ---- what must hold ----
check_eq "no committed result was lost: the same attempts, tokens and manifests" \
	"$(results_of "${small// /,}")" "$committed_before"
check_eq "one result per job" \
	"$(q "SELECT count(*) || '/' || count(DISTINCT job_id) FROM remora.results")" "$jobs_before/$jobs_before"
check_eq "at most one succeeded attempt per job, and it is the result's" \
	"$(q "SELECT count(*) FROM (SELECT a.job_id FROM remora.attempts a LEFT JOIN remora.results r USING (job_id)
		WHERE a.state = 'succeeded' GROUP BY a.job_id
		HAVING count(*) > 1 OR bool_or(a.attempt_id IS DISTINCT FROM r.attempt_id)) s")" 0
check_eq "every attempt running on the old primary was committed once or replaced with a greater token" \
	"$(q "SELECT count(*) FILTER (WHERE NOT (
			(a.state = 'succeeded' AND r.attempt_id = a.attempt_id)
			OR (a.state IN ('lost', 'failed') AND r.fencing_token > old.token)))
		|| '/' || count(*)
		FROM (VALUES $running_before) old (attempt_id, token)
		JOIN remora.attempts a USING (attempt_id)
		JOIN remora.results r ON r.job_id = a.job_id")" "0/4"
check_eq "the background workers' attempts were replaced, resuming from their checkpoints" \
	"$(q "SELECT count(*) FILTER (WHERE a.state = 'lost' AND n.resumed_from = a.attempt_id AND n.restart_reason IS NULL)
		|| '/' || count(*)
		FROM (VALUES $running_before) old (attempt_id, token)
		JOIN remora.attempts a USING (attempt_id)
		JOIN remora.incarnations i ON i.incarnation = a.incarnation
		JOIN remora.results r ON r.job_id = a.job_id
		JOIN remora.attempts n ON n.attempt_id = r.attempt_id
		WHERE i.kind = 'worker'")" "2/2"
check_eq "remora-worker's were committed once by it, or replaced from their checkpoints" \
	"$(q "SELECT count(*) FILTER (WHERE (a.state = 'succeeded' AND n.attempt_id = a.attempt_id)
			OR (a.state = 'lost' AND n.resumed_from = a.attempt_id AND n.restart_reason IS NULL))
		|| '/' || count(*)
		FROM (VALUES $running_before) old (attempt_id, token)
		JOIN remora.attempts a USING (attempt_id)
		JOIN remora.incarnations i ON i.incarnation = a.incarnation
		JOIN remora.results r ON r.job_id = a.job_id
		JOIN remora.attempts n ON n.attempt_id = r.attempt_id
		WHERE i.label = 'we'")" "2/2"
q "SELECT a.job_id, a.state, i.label, n.attempt_id = a.attempt_id FROM (VALUES $running_before) old (attempt_id, token)
	JOIN remora.attempts a USING (attempt_id) JOIN remora.incarnations i ON i.incarnation = a.incarnation
	JOIN remora.results r ON r.job_id = a.job_id JOIN remora.attempts n ON n.attempt_id = r.attempt_id" |
	sed 's/^/# running at the failover: job|state|worker|committed itself: /'
check "remora-worker reconnected to the promoted standby (target_session_attrs=read-write)" \
	grep -q "connected to 127.0.0.1:$STANDBY_PORT" "$T/we.log"
check_eq "its incarnation goes on there" \
	"$(q "SELECT count(*) FROM remora_workers WHERE label = 'we' AND stopped_at IS NULL")" 1
check "and it committed jobs on the promoted server" \
	test "$(q "SELECT count(*) FROM remora.results r JOIN remora.attempts a ON a.attempt_id = r.attempt_id
		JOIN remora.incarnations i ON i.incarnation = a.incarnation
		WHERE i.label = 'we' AND r.committed_at > '$promoted_at'")" -gt 0
check "the nginx log shows the resumed ranges" \
	grep -q '"GET /slow/large[1-4].bin HTTP/1.1" 206' "$T/nginx/access.log"

# every member and manifest, read back from the store
bad=0
while IFS='|' read -r job bucket key sha file; do
	got=$(aws_s3 s3 cp "s3://$bucket/$key" - 2>/dev/null | sha256sum | cut -d' ' -f1)
	want=$(sha256sum "$WWW/$file" | cut -d' ' -f1)
	if [ "$got" != "$sha" ] || [ "$sha" != "$want" ]; then
		echo "# job $job: $key has $got, the result says $sha, the source $want"
		bad=$((bad + 1))
	fi
done < <(q "SELECT r.job_id, m.bucket, m.key, m.sha256, regexp_replace(j.source, '^.*/', '')
	FROM remora.results r JOIN remora.members m USING (attempt_id) JOIN remora.jobs j USING (job_id)
	ORDER BY r.job_id")
check_eq "every member's SHA-256 recomputed from the store matches the result and the source" "$bad" 0
bad=0
while IFS='|' read -r job bucket key sha; do
	got=$(aws_s3 s3 cp "s3://$bucket/$key" - 2>/dev/null | sha256sum | cut -d' ' -f1)
	[ "$got" = "$sha" ] || { echo "# job $job: manifest $key has $got, not $sha"; bad=$((bad + 1)); }
done < <(q "SELECT r.job_id, j.bucket, r.manifest_key, r.manifest_sha256
	FROM remora.results r JOIN remora.jobs j USING (job_id) ORDER BY r.job_id")
check_eq "every manifest read back has its committed SHA-256" "$bad" 0
check_eq "members of every job: one" \
	"$(q "SELECT count(*) FROM remora.results r JOIN remora.members m USING (attempt_id)")" "$jobs_before"
cleaned() { [ "$(q "SELECT count(*) FROM remora.attempts WHERE cleaned_at IS NULL")" = 0 ]; }
check "the staging of every attempt is cleaned, the old primary's included" wait_for 60 cleaned

e2e_finish
