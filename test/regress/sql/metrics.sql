--
-- GET /metrics reads counts kept as the history changes (remora.metric_counts
-- and the changes not yet folded), not the history itself: they match what
-- the history says, whether folded or not, and counting again from the
-- tables gives the same; counters never go down when retention prunes; a
-- deleted job leaves its state's gauge; a TRUNCATE counts again.
--
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SET remora.default_bucket = 'target';
CREATE ROLE regress_metrics_u;
GRANT remora_user TO regress_metrics_u;
SELECT remora.grant_target('regress_metrics_u', 'target', '*') IS NOT NULL AS granted;

-- one sample of the exposition ('' when absent)
CREATE FUNCTION pg_temp.sample(name text) RETURNS text
LANGUAGE sql AS $$
	SELECT coalesce((SELECT split_part(l, ' ', 2)
					   FROM regexp_split_to_table(remora.metrics_text(), E'\n') l
					  WHERE split_part(l, ' ', 1) = name), '')
$$;
-- the samples of the history, as one line
CREATE FUNCTION pg_temp.history() RETURNS text
LANGUAGE sql AS $$
	SELECT string_agg(l, ' ' ORDER BY l)
	  FROM regexp_split_to_table(remora.metrics_text(), E'\n') l
	 WHERE l ~ '^remora_(jobs|exports|attempts_total|attempt_failures_total|committed_bytes_total|claim_wait_seconds_(count|bucket\{le="\+Inf"\}))'
$$;

-- three jobs; two claimed: one fails for good, one commits 5 bytes; the
-- third is cancelled while queued
SET ROLE regress_metrics_u;
SELECT count(remora_submit('https://example.com/m' || g || '.bin')) AS submitted
  FROM generate_series(1, 3) g;
RESET ROLE;
SELECT count(*) AS claimed FROM remora.claim('3e7a0000-0000-4000-8000-000000000001', 2);
SELECT remora.fail(a.attempt_id, a.fencing_token, '{"class": "regress", "message": "x"}', false)
	   AS failed
  FROM remora.attempts a WHERE a.job_id = 1;
SELECT remora.commit(c.attempt_id, c.fencing_token, jsonb_build_object(
			'key', c.prefix || 'manifest.jsonl', 'etag', 'e',
			'sha256', repeat('a', 64), 'members', 1, 'bytes', 5,
			'entries', jsonb_build_array(jsonb_build_object('path', 'f', 'bucket', 'target',
				'key', c.prefix || 'data/f', 'size', 5,
				'sha256', repeat('b', 64), 'etag', 'x')))) AS committed
  FROM (SELECT a.attempt_id, a.fencing_token,
			   remora._staging_prefix(j.prefix, j.job_id, a.attempt_id) AS prefix
		  FROM remora.attempts a JOIN remora.jobs j USING (job_id) WHERE a.job_id = 2) c;
SELECT remora_cancel(3) AS cancelled;
SELECT pg_temp.sample('remora_jobs{state="queued"}') AS queued,
	   pg_temp.sample('remora_jobs{state="succeeded"}') AS succeeded,
	   pg_temp.sample('remora_committed_bytes_total') AS bytes,
	   pg_temp.sample('remora_jobs{state="failed"}') AS failed,
	   pg_temp.sample('remora_jobs{state="cancelled"}') AS cancelled,
	   pg_temp.sample('remora_attempts_total') AS attempts,
	   pg_temp.sample('remora_attempt_failures_total{class="regress"}') AS failures,
	   pg_temp.sample('remora_claim_wait_seconds_count') AS waits,
	   pg_temp.sample('remora_claim_wait_seconds_bucket{le="+Inf"}') AS waits_inf;
-- before a fold (unless the launcher's reconcile just made one), after
-- one, and counted again from the tables: the same
SELECT pg_temp.history() AS unfolded \gset
SELECT remora.reconcile() >= 0 AS reconciled;
SELECT count(*) AS changes_waiting FROM remora.metric_deltas;
SELECT pg_temp.history() = :'unfolded' AS folded_the_same;
SELECT remora._count_again();
SELECT pg_temp.history() = :'unfolded' AS counted_again_the_same;

-- retention prunes the failed job's history: its attempt is gone, the
-- counters stay
UPDATE remora.jobs SET finished_at = now() - interval '400 days',
					   submitted_at = now() - interval '401 days' WHERE job_id = 1;
UPDATE remora.attempts SET cleaned_at = now() WHERE job_id = 1;
UPDATE remora.webhooks SET ended_at = now() WHERE job_id = 1;	-- (a database default's)
SELECT remora.prune() >= 0 AS pruned;
SELECT pruned_at IS NOT NULL AS pruned FROM remora.jobs WHERE job_id = 1;
SELECT count(*) AS attempts_left FROM remora.attempts;
SELECT pg_temp.sample('remora_attempts_total') AS attempts,
	   pg_temp.sample('remora_attempt_failures_total{class="regress"}') AS failures,
	   pg_temp.sample('remora_jobs{state="failed"}') AS failed,
	   pg_temp.sample('remora_committed_bytes_total') AS bytes;

-- a deleted job leaves its state's gauge
SET ROLE regress_metrics_u;
SELECT remora_delete(3) IS NOT NULL AS deleted;
RESET ROLE;
SELECT pg_temp.sample('remora_jobs{state="cancelled"}') AS cancelled;

-- a TRUNCATE of the history counts again
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
SELECT pg_temp.sample('remora_jobs{state="failed"}') AS failed,
	   pg_temp.sample('remora_attempts_total') AS attempts,
	   (SELECT count(*) FROM remora.metric_counts WHERE n <> 0) AS counts_left;

TRUNCATE remora.queue, remora.leases;
DELETE FROM remora.target_grants WHERE grantee = 'regress_metrics_u'::regrole;
DROP ROLE regress_metrics_u;
