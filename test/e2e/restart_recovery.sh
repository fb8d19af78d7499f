#!/usr/bin/env bash
#
# Coordination loss through a crash: with jobs queued, retrying and
# running, stop the server with an immediate shutdown.  Crash recovery
# empties the unlogged queue and leases; no durable row changes; reconcile
# rebuilds both, every job is recovered exactly once, and the running
# attempts keep their authority.  The jobs live in a database the launcher
# does not serve, so that this test alone decides when reconcile runs.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin restart_recovery

e2e_cluster <<CONF
remora.max_workers = 0
remora.max_active_leases = 3
remora.default_bucket = 'target'
CONF

DURABLE="SELECT md5(string_agg(t, '|' ORDER BY t)) FROM (
	SELECT 'j' || row(j.*)::text AS t FROM remora.jobs j
	UNION ALL SELECT 'a' || row(a.*)::text FROM remora.attempts a
	UNION ALL SELECT 'c' || row(c.*)::text FROM remora.checkpoints c
	UNION ALL SELECT 'r' || row(r.*)::text FROM remora.results r
	UNION ALL SELECT 'i' || row(i.*)::text FROM remora.incarnations i) s"

psql -X -q -c "CREATE DATABASE remora_test" >/dev/null
export E2E_DB=remora_test
q "CREATE EXTENSION remora" >/dev/null
q "SELECT count(remora_submit('https://example.com/' || g || '.bin')) FROM generate_series(1, 6) g" >/dev/null
q "SELECT count(*) FROM remora.claim('11111111-1111-1111-1111-111111111111', 3)" >/dev/null
q "SELECT remora.fail(attempt_id, fencing_token, '{\"class\": \"http\"}', true)
     FROM remora.attempts ORDER BY job_id LIMIT 1" >/dev/null
q "SELECT count(*) FROM remora.claim('11111111-1111-1111-1111-111111111111', 1)" >/dev/null
q "SELECT remora.checkpoint(current_attempt, fencing_token, '{\"state\": {\"upload_key\": \"k\", \"upload_id\": \"u\", \"parts\": [{\"size\": 5, \"etag\": \"e\"}]}, \"bytes_done\": 5}')
     FROM remora.jobs WHERE state = 'running'" >/dev/null
check_eq "states before the crash" \
	"$(q "SELECT string_agg(state || '=' || n, ',' ORDER BY state) FROM (SELECT state, count(*) n FROM remora.jobs GROUP BY state) s")" \
	"queued=2,retrying=1,running=3"
before=$(q "$DURABLE")
running_before=$(q "SELECT string_agg(current_attempt::text, ',' ORDER BY job_id) FROM remora.jobs WHERE state = 'running'")

cluster_stop "$T/pg" immediate
cluster_start "$T/pg"

check_eq "crash recovery emptied the queue and the leases" \
	"$(q "SELECT (SELECT count(*) FROM remora.queue) || '/' || (SELECT count(*) FROM remora.leases)")" "0/0"
check_eq "no durable row changed in the crash" "$(q "$DURABLE")" "$before"
check_eq "reconcile repairs three leases and three queue entries" \
	"$(q "SELECT remora.reconcile()")" "6"
check_eq "a second reconcile finds nothing to do" "$(q "SELECT remora.reconcile()")" "0"
check_eq "reconcile changed no durable row" "$(q "$DURABLE")" "$before"
check_eq "the queue holds each waiting job once" \
	"$(q "SELECT count(*) || '/' || count(DISTINCT job_id) FROM remora.queue q JOIN remora.jobs j USING (job_id) WHERE j.state IN ('queued', 'retrying')")" "3/3"
check_eq "the leases are exactly the running attempts" \
	"$(q "SELECT string_agg(l.attempt_id::text, ',' ORDER BY l.job_id) FROM remora.leases l")" "$running_before"
check_eq "running attempts keep their authority" \
	"$(q "SELECT bool_and(r.ok) FROM remora.jobs j, LATERAL remora.renew(j.current_attempt, j.fencing_token) r WHERE j.state = 'running'")" "t"
check_eq "checkpoints survive the crash" \
	"$(q "SELECT count(*) FROM remora.checkpoints WHERE bytes_done = 5")" "3"
check_eq "the rebuilt leases hold every permit: nothing more is claimed" \
	"$(q "SELECT count(*) FROM remora.claim('22222222-2222-2222-2222-222222222222', 10)")" "0"
# finish the running attempts and let the backoff pass: each waiting job is
# then claimed exactly once
q "SELECT count(*) FILTER (WHERE remora.commit(j.current_attempt, j.fencing_token, jsonb_build_object(
	'key', remora._staging_prefix(j.prefix, j.job_id, j.current_attempt) || 'manifest.json',
	'etag', 'e', 'sha256', repeat('0', 64), 'members', 0, 'bytes', 0)))
	FROM remora.jobs j WHERE j.state = 'running'" >/dev/null
q "UPDATE remora.queue SET not_before = now() - interval '1 second'" >/dev/null
check_eq "each waiting job is claimed exactly once" \
	"$(q "SELECT count(*) || '/' || count(DISTINCT job_id) FROM remora.claim('22222222-2222-2222-2222-222222222222', 10)")" "3/3"
check_eq "and none twice" \
	"$(q "SELECT count(*) FROM remora.claim('22222222-2222-2222-2222-222222222222', 10)")" "0"

e2e_finish
