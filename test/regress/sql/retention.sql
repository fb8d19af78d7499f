--
-- Retention: remora.prune removes the history of jobs that ended longer
-- ago than remora.retention (30 days by default), keeping each job's row as
-- a tombstone and the attempt whose result is still offered.
--
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SET remora.default_bucket = 'target';
SHOW remora.retention;

-- job 1 succeeds on its second attempt, job 2 fails, job 3 succeeds and is
-- deleted, job 4 is still running, job 5 succeeded recently
SELECT count(remora_submit('https://example.com/' || g || '.bin', options => '{"max_attempts": 2}'))
  FROM generate_series(1, 5) g;
CREATE FUNCTION pg_temp.run(job bigint, outcome text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	c record;
BEGIN
	UPDATE remora.queue SET not_before = now() - interval '1 second' WHERE job_id = job;
	UPDATE remora.queue SET not_before = now() + interval '1 hour' WHERE job_id <> job;
	SELECT * INTO c FROM remora.claim('11111111-1111-1111-1111-111111111111');
	IF outcome = 'fail' THEN
		PERFORM remora.fail(c.attempt_id, c.fencing_token, '{"class": "http", "http_status": 500}', true);
	ELSIF outcome = 'commit' THEN
		PERFORM remora.commit(c.attempt_id, c.fencing_token, jsonb_build_object(
			'key', (c.spec ->> 'staging_prefix') || 'manifest.jsonl', 'etag', 'e',
			'sha256', repeat('a', 64), 'members', 1, 'bytes', 5,
			'entries', jsonb_build_array(jsonb_build_object('path', 'f', 'bucket', 'target',
				'key', (c.spec ->> 'staging_prefix') || 'data/f', 'size', 5,
				'sha256', repeat('b', 64), 'etag', 'x'))));
	END IF;
END
$$;
SELECT pg_temp.run(1, 'fail'), pg_temp.run(1, 'commit');
SELECT pg_temp.run(2, 'fail'), pg_temp.run(2, 'fail');
SELECT pg_temp.run(3, 'commit'), remora_delete(3);
SELECT pg_temp.run(4, 'run');
SELECT pg_temp.run(5, 'commit');
SELECT job_id, state, attempts_used FROM remora.jobs ORDER BY job_id;

-- nothing is old enough yet
SELECT remora.prune() AS pruned_now;

-- age jobs 1-4 past the retention; their staging has been cleaned
UPDATE remora.jobs SET finished_at = now() - interval '31 days' WHERE job_id <= 4 AND finished_at IS NOT NULL;
UPDATE remora.jobs SET submitted_at = now() - interval '32 days' WHERE job_id <= 4;
-- job 2's staging is not cleaned yet: it waits
UPDATE remora.attempts SET cleaned_at = now() WHERE job_id <> 2;
SELECT remora.prune() AS pruned;
UPDATE remora.attempts SET cleaned_at = now() WHERE job_id = 2;
SELECT remora.prune(1) AS pruned_in_a_batch_of_one;
SELECT remora.prune() AS pruned_again;

-- every job row is still there; only the committed attempts of jobs whose
-- result is offered remain
SELECT j.job_id, j.state, j.pruned_at IS NOT NULL AS pruned,
	   (SELECT count(*) FROM remora.attempts a WHERE a.job_id = j.job_id) AS attempts,
	   (SELECT count(*) FROM remora.results r WHERE r.job_id = j.job_id) AS results,
	   j.last_error IS NOT NULL AS has_last_error, j.deleted_at IS NOT NULL AS tombstone
  FROM remora.jobs j ORDER BY j.job_id;
SELECT path FROM remora_result(1);
-- a pruned job still answers its idempotency key, cancel and delete
SELECT remora_cancel(2);
SELECT remora_delete(1);

-- A role dropped with jobs, grants, limits, a webhook secret and an
-- exported key: prune hands its jobs and key to nobody (role 0, '-', which
-- pg_dump cannot give to another role) and deletes the rest.  Its
-- idempotency key goes with it.
CREATE ROLE regress_gone LOGIN IN ROLE remora_user;
SELECT remora.grant_target('regress_gone', 'target', 'gone/*'),
	   remora.grant_source('regress_gone', 'target', 'in/*'),
	   remora.set_role_limits('regress_gone', weight => 2);
SET ROLE regress_gone;
SELECT remora_submit('https://example.com/gone.bin', 'target', idempotency_key => 'gone-1') AS gone_job \gset
SELECT remora_webhook_secret() IS NOT NULL AS has_secret;
RESET ROLE;
INSERT INTO remora.export_keys VALUES ('target', 'gone/a.bin', 'regress_gone', :gone_job, true);
DROP ROLE regress_gone;
SELECT remora.prune() >= 0 AS pruned;
SELECT owner::text, idempotency_key FROM remora.jobs WHERE job_id = :gone_job;
SELECT owner::text FROM remora.export_keys WHERE key = 'gone/a.bin';
SELECT (SELECT count(*) FROM remora.target_grants WHERE prefix_pattern = 'gone/*') AS target_grants,
	   (SELECT count(*) FROM remora.source_grants WHERE prefix_pattern = 'in/*') AS source_grants,
	   (SELECT count(*) FROM remora.role_limits WHERE role_id::oid NOT IN (SELECT oid FROM pg_roles)) AS limits,
	   (SELECT count(*) FROM remora.webhook_secrets WHERE owner::oid NOT IN (SELECT oid FROM pg_roles)) AS secrets;
-- every other job keeps its owner
SELECT count(*) AS owned_by_nobody FROM remora.jobs WHERE owner::oid = 0;
DELETE FROM remora.export_keys WHERE key = 'gone/a.bin';
