--
-- Losing coordination state (the unlogged queue and leases) changes no
-- durable row; remora.reconcile rebuilds it, and every job is recovered
-- exactly once.  (test/e2e/restart_recovery.sh does the same through an
-- immediate server restart.)
--
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SET remora.default_bucket = 'target';

-- a digest of every durable row
CREATE FUNCTION pg_temp.durable() RETURNS text LANGUAGE sql AS $$
	SELECT md5(string_agg(t, '|' ORDER BY t)) FROM (
		SELECT 'j' || row(j.*)::text AS t FROM remora.jobs j
		UNION ALL SELECT 'a' || row(a.*)::text FROM remora.attempts a
		UNION ALL SELECT 'c' || row(c.*)::text FROM remora.checkpoints c
		UNION ALL SELECT 'm' || row(m.*)::text FROM remora.members m
		UNION ALL SELECT 'r' || row(r.*)::text FROM remora.results r
		UNION ALL SELECT 'i' || row(i.*)::text FROM remora.incarnations i) s
$$;

-- six jobs: three will be running (the lease limit), one retrying, two queued
SELECT count(remora_submit('https://example.com/' || g || '.bin')) FROM generate_series(1, 6) g;
SELECT count(*) AS claimed FROM remora.claim('11111111-1111-1111-1111-111111111111', 3);
SELECT attempt_id AS att, fencing_token AS tok FROM remora.attempts ORDER BY job_id LIMIT 1 \gset
SELECT remora.fail(:'att', :tok, '{"class": "http", "http_status": 500}', true);
SELECT count(*) AS claimed FROM remora.claim('11111111-1111-1111-1111-111111111111', 1);
SELECT state, count(*) FROM remora.jobs GROUP BY state ORDER BY state;

SELECT pg_temp.durable() AS before \gset
SELECT count(*) AS queue_rows, (SELECT count(*) FROM remora.leases) AS leases FROM remora.queue;

-- throw coordination state away
TRUNCATE remora.queue, remora.leases;
SELECT count(*) AS claimable_without_queue FROM remora.claim('11111111-1111-1111-1111-111111111111', 10);
SELECT remora.reconcile() AS repairs;
SELECT remora.reconcile() AS repairs_again;
SELECT pg_temp.durable() = :'before' AS durable_unchanged;

-- the queue holds exactly the waiting jobs, the leases exactly the running
-- attempts, each once
SELECT (SELECT array_agg(job_id ORDER BY job_id) FROM remora.queue) =
	   (SELECT array_agg(job_id ORDER BY job_id) FROM remora.jobs WHERE state IN ('queued', 'retrying')) AS queue_exact,
	   (SELECT array_agg(attempt_id ORDER BY attempt_id) FROM remora.leases) =
	   (SELECT array_agg(current_attempt ORDER BY current_attempt) FROM remora.jobs WHERE state = 'running') AS leases_exact;
-- running attempts keep their authority across the loss
SELECT bool_and(r.ok) AS running_attempts_renew
  FROM remora.jobs j, LATERAL remora.renew(j.current_attempt, j.fencing_token) r
 WHERE j.state = 'running';

-- every job is claimed exactly once from here: free the lease slots, let
-- the backoff pass, and claim everything
UPDATE remora.queue SET not_before = now() - interval '1 second';
SELECT count(*) FILTER (WHERE remora.commit(a.attempt_id, a.fencing_token, jsonb_build_object(
		'key', remora._staging_prefix(j.prefix, j.job_id, a.attempt_id) || 'manifest.json',
		'etag', 'e', 'sha256', repeat('0', 64), 'members', 0, 'bytes', 0))) AS committed
  FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt
 WHERE j.state = 'running';
CREATE TEMP TABLE claimed AS
	SELECT job_id FROM remora.claim('11111111-1111-1111-1111-111111111111', 10);
SELECT count(*) AS claimed, count(DISTINCT job_id) AS distinct_jobs FROM claimed;
SELECT count(*) AS claimed_again FROM remora.claim('11111111-1111-1111-1111-111111111111', 10);
SELECT state, count(*) FROM remora.jobs GROUP BY state ORDER BY state;

-- reconcile marks coordination state whole, and rebuilds the queue only
-- when that mark is gone: a truncate of the leases alone removes it too
SELECT count(remora_submit('https://example.com/late' || g || '.bin', 'target')) AS submitted
  FROM generate_series(1, 3) g;
SELECT remora.reconcile() >= 0 AS reconciled, (SELECT count(*) FROM remora.coordination) AS intact;
DELETE FROM remora.queue WHERE job_id = (SELECT max(job_id) FROM remora.jobs);
SELECT remora.reconcile() AS repairs_while_intact;
SELECT count(*) AS queue_rows FROM remora.queue;
TRUNCATE remora.leases;
SELECT count(*) AS intact_after_truncate FROM remora.coordination;
SELECT remora.reconcile() > 0 AS repaired;
SELECT (SELECT count(*) FROM remora.queue) AS queue_rows,
	   (SELECT count(*) FROM remora.coordination) AS intact;

-- the lease limit holds while the lease rows are lost: until reconcile has
-- re-created them, claim counts the running jobs instead of the rows
SELECT count(remora_submit('https://example.com/limit' || g || '.bin', 'target')) AS submitted
  FROM generate_series(1, 4) g;
SELECT remora.reconcile() >= 0 AS reconciled;
SELECT count(*) >= 0 AS claimed_to_the_limit FROM remora.claim('11111111-1111-1111-1111-111111111111', 10);
SELECT count(*) AS running FROM remora.jobs WHERE state = 'running';
SELECT count(*) > 0 AS some_still_queued FROM remora.queue;
TRUNCATE remora.leases;
SELECT count(*) AS claimed_without_lease_rows FROM remora.claim('11111111-1111-1111-1111-111111111111', 10);
SELECT remora.reconcile() > 0 AS repaired;
SELECT count(*) AS claimed_after_reconcile FROM remora.claim('11111111-1111-1111-1111-111111111111', 10);
SELECT (SELECT count(*) FROM remora.leases) AS leases,
	   (SELECT count(*) FROM remora.jobs WHERE state = 'running') AS running;

-- a claim's leases are reserved until its transaction ends: a prepared
-- transaction would keep them out of sight, so it is refused
SELECT count(remora_submit('https://example.com/prepared.bin', 'target')) AS submitted;
SELECT j.job_id AS run_job, j.current_attempt AS run_att, j.fencing_token AS run_tok
  FROM remora.jobs j WHERE j.state = 'running' ORDER BY j.job_id LIMIT 1 \gset
SELECT remora.fail(:'run_att', :run_tok, '{"class": "network"}', false) AS room_made;
BEGIN;
SELECT count(*) AS claimed_in_transaction FROM remora.claim('11111111-1111-1111-1111-111111111111', 1);
PREPARE TRANSACTION 'remora_claim';
SELECT count(*) AS prepared FROM pg_prepared_xacts;
-- the refused transaction took nothing, and its reservation is gone
SELECT count(*) AS claimed_after FROM remora.claim('11111111-1111-1111-1111-111111111111', 1);
