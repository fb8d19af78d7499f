--
-- The worker protocol: claim, renew, checkpoint, commit, fail, cancel,
-- delete, reconcile.  The test cluster runs no workers and has
-- remora.max_active_leases = 3.
--
CREATE FUNCTION pg_temp.try(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st	text;
	msg text;
	det text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL;
	RETURN st || ': ' || msg || coalesce(' (' || nullif(det, '') || ')', '');
END
$$;
-- a descriptor for attempt a of job j: key under its staging prefix
CREATE FUNCTION pg_temp.manifest(a uuid, extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
	SELECT jsonb_build_object(
		'key', remora._staging_prefix(j.prefix, j.job_id, a) || 'manifest.json',
		'etag', '"0123abcd"', 'sha256', repeat('ab', 32),
		'members', 1, 'bytes', 42) || extra
	  FROM remora.attempts t JOIN remora.jobs j USING (job_id)
	 WHERE t.attempt_id = a
$$;
-- let a retrying job's backoff pass without waiting for it
CREATE FUNCTION pg_temp.skip_backoff(job bigint) RETURNS void
LANGUAGE sql AS $$
	UPDATE remora.queue SET not_before = now() - interval '1 second' WHERE job_id = job;
	UPDATE remora.jobs SET not_before = now() - interval '1 second' WHERE job_id = job;
$$;

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SET remora.default_bucket = 'target';
SHOW remora.max_active_leases;

\set w1 '''11111111-1111-1111-1111-111111111111'''
\set w2 '''22222222-2222-2222-2222-222222222222'''

-- claim: argument checks
SELECT pg_temp.try($$SELECT * FROM remora.claim(NULL)$$);
SELECT pg_temp.try($$SELECT * FROM remora.claim('11111111-1111-1111-1111-111111111111', 0)$$);
SELECT pg_temp.try($$SELECT * FROM remora.claim('11111111-1111-1111-1111-111111111111', 1001)$$);
SELECT pg_temp.try($$SELECT * FROM remora.claim('11111111-1111-1111-1111-111111111111', NULL)$$);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT pg_temp.try($$SELECT * FROM remora.claim('11111111-1111-1111-1111-111111111111')$$);
ROLLBACK;
-- nothing queued: nothing claimed, but the incarnation is now known
SELECT count(*) FROM remora.claim(:w1, 5);
SELECT count(*) AS incarnations FROM remora.incarnations;

-- claim order: priority, then age
SELECT remora_submit('https://example.com/a.bin') AS a \gset
SELECT remora_submit('https://example.com/b.bin', options => '{"priority": 5}') AS b \gset
SELECT remora_submit('https://example.com/c.bin') AS c \gset
SELECT remora_submit('https://example.com/d.bin') AS d \gset
SELECT job_id, fencing_token, spec ->> 'staging_prefix' = 'remora/' || job_id || '/' || attempt_id || '/' AS staged,
	   spec ->> 'attempt_no' AS attempt_no, resume, lease_expires_at > now() AS leased
  FROM remora.claim(:w1, 2);
SELECT job_id, state, attempts_used, fencing_token, current_attempt IS NOT NULL AS has_attempt
  FROM remora.jobs ORDER BY job_id;
-- the recovery ledger was recorded before the attempt runs
SELECT a.attempt_no, a.fencing_token, a.state, a.incarnation = :w1 AS by_w1,
	   a.definition_hash = j.definition_hash AND a.request_hash = j.request_hash
	   AND a.access_digest = j.access_digest AND a.provenance = j.provenance AS ledger
  FROM remora.attempts a JOIN remora.jobs j USING (job_id) ORDER BY a.job_id;
SELECT count(*) AS queue_rows FROM remora.queue;

-- the lease limit (3): one more claim fits, then none
SELECT job_id FROM remora.claim(:w2, 10);
SELECT count(*) AS claimed_past_limit FROM remora.claim(:w2, 10);
SELECT count(*) AS leases FROM remora.leases;
-- from here on, each claim below has exactly one claimable job
SELECT remora_cancel(:d);

SELECT attempt_id AS att_a, fencing_token AS tok_a FROM remora.attempts WHERE job_id = :a \gset
SELECT attempt_id AS att_b, fencing_token AS tok_b FROM remora.attempts WHERE job_id = :b \gset
SELECT attempt_id AS att_c, fencing_token AS tok_c FROM remora.attempts WHERE job_id = :c \gset

-- renew: only the current attempt with its token
SELECT ok, cancel_requested, lease_expires_at > now() AS extended FROM remora.renew(:'att_a', :tok_a);
SELECT * FROM remora.renew(:'att_a', :tok_a + 1);
SELECT * FROM remora.renew('99999999-9999-9999-9999-999999999999', 1);
SELECT * FROM remora.renew(:'att_a', NULL);

-- checkpoint
SELECT remora.checkpoint(:'att_a', :tok_a, '{"state": {"upload_key": "k", "upload_id": "u1", "parts": [{"size": 50, "etag": "a"}, {"size": 50, "etag": "b"}]}, "bytes_done": 100, "bytes_total": 1000}');
SELECT remora.checkpoint(:'att_a', :tok_a + 1, '{"state": {}}') AS stale_checkpoint;
SELECT remora.checkpoint(:'att_a', :tok_a, '{"state": {"upload_key": "k", "upload_id": "u1", "parts": [{"size": 50, "etag": "a"}, {"size": 50, "etag": "b"}, {"size": 50, "etag": "c"}]}, "bytes_done": 150, "bytes_total": 1000}');
SELECT bytes_done, bytes_total, writes, state FROM remora.checkpoints WHERE job_id = :a;
SELECT job_id, bytes_done, bytes_total FROM remora_jobs WHERE job_id = :a;
SELECT pg_temp.try($$SELECT remora.checkpoint('$$ || :'att_a' || $$', 1, '[1]')$$);
SELECT pg_temp.try($$SELECT remora.checkpoint('$$ || :'att_a' || $$', 1, NULL)$$);
SELECT pg_temp.try($$SELECT remora.checkpoint('$$ || :'att_a' || $$', 1, '{"members": [{"path": "x"}]}')$$);
SELECT pg_temp.try($$SELECT remora.checkpoint('$$ || :'att_a' || $$', 1, '{"members": {"path": "x"}}')$$);
-- members recorded by checkpoint; the same member again is a no-op, a
-- different one under the same path is an error
SELECT remora.checkpoint(:'att_a', :tok_a, jsonb_build_object('members', jsonb_build_array(
	jsonb_build_object('path', 'a.bin', 'bucket', 'target', 'key', 'remora/' || :a || '/' || :'att_a' || '/a.bin',
					   'size', 42, 'sha256', repeat('CD', 32), 'etag', '"e1"'))));
SELECT remora.checkpoint(:'att_a', :tok_a, jsonb_build_object('members', jsonb_build_array(
	jsonb_build_object('path', 'a.bin', 'bucket', 'target', 'key', 'remora/' || :a || '/' || :'att_a' || '/a.bin',
					   'size', 42, 'sha256', repeat('cd', 32), 'etag', '"e1"'))));
SELECT pg_temp.try(format($$SELECT remora.checkpoint(%L, %s, '{"members": [{"path": "a.bin", "bucket": "target", "key": "k", "size": 41, "sha256": "%s", "etag": "x"}]}')$$,
	:'att_a', :tok_a, repeat('cd', 32)));
SELECT path, size, sha256 = repeat('cd', 32) AS sha_lowered FROM remora.members WHERE attempt_id = :'att_a';

-- commit: descriptor checks are errors
SELECT pg_temp.try(format('SELECT remora.commit(%L, %s, %L)', :'att_a', :tok_a, '[]'));
SELECT pg_temp.try(format('SELECT remora.commit(%L, %s, %L)', :'att_a', :tok_a, pg_temp.manifest(:'att_a') - 'key'));
SELECT pg_temp.try(format('SELECT remora.commit(%L, %s, %L)', :'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"etag": 5}')));
SELECT pg_temp.try(format('SELECT remora.commit(%L, %s, %L)', :'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"sha256": "abc"}')));
SELECT pg_temp.try(format('SELECT remora.commit(%L, %s, %L)', :'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"members": -1}')));
SELECT pg_temp.try(format('SELECT remora.commit(%L, %s, %L)', :'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"bytes": 1.5}')));
SELECT pg_temp.try(format('SELECT remora.commit(%L, %s, %L)', :'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"members": 2.0}')));
SELECT pg_temp.try(format('SELECT remora.commit(%L, %s, %L)', :'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"bytes": 9223372036854775808}')));
SELECT pg_temp.try(format('SELECT remora.commit(%L, %s, %L)', :'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"entries": [{"path": 1}]}')));
-- refusals are false and change nothing
SELECT remora.commit(:'att_a', :tok_a + 1, pg_temp.manifest(:'att_a')) AS wrong_token;
SELECT remora.commit(:'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"key": "remora/elsewhere/manifest.json"}')) AS outside_staging;
SELECT remora.commit(:'att_a', :tok_a, pg_temp.manifest(:'att_a',
	jsonb_build_object('key', 'remora/' || :a || '/' || :'att_b' || '/manifest.json'))) AS other_attempts_staging;
SELECT remora.commit(:'att_a', :tok_a, pg_temp.manifest(:'att_a',
	jsonb_build_object('key', 'remora/' || :a || '/' || :'att_a' || '/'))) AS staging_prefix_itself;
SELECT remora.commit(:'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"members": 2}')) AS member_count_mismatch;
SELECT remora.commit(:'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"bytes": 43}')) AS bytes_mismatch;
SELECT remora.commit('99999999-9999-9999-9999-999999999999', 1, pg_temp.manifest(:'att_a')) AS unknown_attempt;
-- a member outside the staging prefix, in another bucket, or that is the
-- manifest itself, is refused
SELECT remora.commit(:'att_c', :tok_c, pg_temp.manifest(:'att_c', jsonb_build_object('entries', jsonb_build_array(
	jsonb_build_object('path', 'c.bin', 'bucket', 'target', 'key', 'remora/elsewhere/c.bin',
					   'size', 42, 'sha256', repeat('ef', 32), 'etag', '"e3"'))))) AS member_outside_staging;
SELECT remora.commit(:'att_c', :tok_c, pg_temp.manifest(:'att_c', jsonb_build_object('entries', jsonb_build_array(
	jsonb_build_object('path', 'c.bin', 'bucket', 'other', 'key', 'remora/' || :c || '/' || :'att_c' || '/data/c.bin',
					   'size', 42, 'sha256', repeat('ef', 32), 'etag', '"e3"'))))) AS member_other_bucket;
SELECT remora.commit(:'att_c', :tok_c, pg_temp.manifest(:'att_c', jsonb_build_object('entries', jsonb_build_array(
	jsonb_build_object('path', 'manifest.json', 'bucket', 'target', 'key', 'remora/' || :c || '/' || :'att_c' || '/manifest.json',
					   'size', 42, 'sha256', repeat('ef', 32), 'etag', '"e3"'))))) AS member_is_manifest;
SELECT count(*) AS members_recorded FROM remora.members WHERE attempt_id = :'att_c';
SELECT count(*) AS results, (SELECT state FROM remora.jobs WHERE job_id = :a) AS state FROM remora.results;
-- the compare-and-swap, then its exact repeat
SELECT remora.commit(:'att_a', :tok_a, pg_temp.manifest(:'att_a')) AS committed;
SELECT remora.commit(:'att_a', :tok_a, pg_temp.manifest(:'att_a')) AS repeated;
SELECT remora.commit(:'att_a', :tok_a, pg_temp.manifest(:'att_a', '{"etag": "other"}')) AS repeated_other_manifest;
SELECT remora.commit(:'att_a', :tok_a + 1, pg_temp.manifest(:'att_a')) AS repeated_other_token;
SELECT j.state, j.finished_at IS NOT NULL AS finished, a.state AS attempt_state,
	   r.members, r.bytes, r.manifest_sha256 = repeat('ab', 32) AS sha,
	   (SELECT count(*) FROM remora.leases l WHERE l.job_id = :a) AS leases,
	   (SELECT count(*) FROM remora.checkpoints c WHERE c.job_id = :a) AS checkpoints
  FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt
  JOIN remora.results r ON r.job_id = j.job_id
 WHERE j.job_id = :a;
SELECT path, bucket, key = 'remora/' || :a || '/' || :'att_a' || '/a.bin' AS staged_key, size, etag FROM remora_result(:a);
-- a finished job: renew, checkpoint and fail change nothing
SELECT * FROM remora.renew(:'att_a', :tok_a);
SELECT remora.checkpoint(:'att_a', :tok_a, '{"state": {}}');
SELECT remora.fail(:'att_a', :tok_a, '{"class": "late"}', true);
-- commit with inline entries (no checkpointed members)
SELECT remora.commit(:'att_c', :tok_c, pg_temp.manifest(:'att_c', jsonb_build_object('entries', jsonb_build_array(
	jsonb_build_object('path', 'c.bin', 'bucket', 'target', 'key', 'remora/' || :c || '/' || :'att_c' || '/c.bin',
					   'size', 42, 'sha256', repeat('ef', 32), 'etag', '"e3"'))))) AS committed_with_entries;
SELECT path, size FROM remora_result(:c);

-- fail: retryable with budget left -> retrying with backoff; not claimable
-- until the backoff passes
SELECT pg_temp.try(format('SELECT remora.fail(%L, %s, NULL, true)', :'att_b', :tok_b));
SELECT pg_temp.try(format('SELECT remora.fail(%L, %s, %L, true)', :'att_b', :tok_b, '"503"'));
SELECT pg_temp.try(format('SELECT remora.fail(%L, %s, %L, NULL)', :'att_b', :tok_b, '{}'));
-- a report from an attempt that does not exist (pruned) is no error
SELECT remora.fail('99999999-9999-9999-9999-999999999999', 1, '{}', true) IS NULL AS unknown_attempt_fail;
SELECT remora.fail(:'att_b', :tok_b, '{"class": "http", "http_status": 503, "message": "Service Unavailable"}', true);
SELECT remora.fail(:'att_b', :tok_b, '{"class": "http", "http_status": 503}', true) AS repeated_fail;
SELECT state, attempts_used, next_attempt_at > now() AS backing_off,
	   last_error - 'at' - 'attempt_id' AS last_error
  FROM remora_jobs WHERE job_id = :b;
SELECT count(*) AS claimable_during_backoff FROM remora.claim(:w1, 10);
-- Retry-After is honoured: the wait is at least what the source asked for
SELECT remora_submit('https://example.com/e.bin', options => '{"max_attempts": 2}') AS e \gset
SELECT job_id, attempt_id AS att_e, fencing_token AS tok_e FROM remora.claim(:w1, 1) WHERE job_id = :e \gset
SELECT remora.fail(:'att_e', :tok_e, '{"class": "http", "http_status": 429, "retry_after": 3600}', true);
SELECT next_attempt_at >= now() + interval '3599 seconds' AS waits_for_retry_after FROM remora_jobs WHERE job_id = :e;
-- the replacement attempt: new id, greater token, budget consumed
SELECT pg_temp.skip_backoff(:b);
SELECT job_id, attempt_id AS att_b2, fencing_token AS tok_b2 FROM remora.claim(:w1, 1) WHERE job_id = :b \gset
SELECT :'att_b2' <> :'att_b' AS new_attempt, :tok_b2 > :tok_b AS greater_token,
	   (SELECT attempt_no FROM remora.attempts WHERE attempt_id = :'att_b2') AS attempt_no;
-- the old attempt can no longer commit, renew or fail
SELECT remora.commit(:'att_b', :tok_b, pg_temp.manifest(:'att_b')) AS stale_commit;
SELECT ok FROM remora.renew(:'att_b', :tok_b);
SELECT remora.fail(:'att_b', :tok_b, '{"class": "zombie"}', false) AS stale_fail;
-- non-retryable failure ends the job at once
SELECT remora.fail(:'att_b2', :tok_b2, '{"class": "http", "http_status": 404, "message": "Not Found"}', false);
SELECT state, attempts_used, finished_at IS NOT NULL AS finished,
	   jsonb_array_length(error_history) AS errors,
	   (SELECT jsonb_agg(e -> 'http_status') FROM jsonb_array_elements(error_history) e) AS statuses
  FROM remora_jobs WHERE job_id = :b;

-- budget: the last allowed attempt failing retryably fails the job
SELECT pg_temp.skip_backoff(:e);
SELECT job_id, attempt_id AS att_e2, fencing_token AS tok_e2 FROM remora.claim(:w1, 1) WHERE job_id = :e \gset
SELECT remora.fail(:'att_e2', :tok_e2, '{"class": "network", "curl_code": 56}', true);
SELECT state, attempts_used, max_attempts, jsonb_array_length(error_history) AS errors FROM remora_jobs WHERE job_id = :e;

-- lease expiry: renew after expiry finds the attempt lost
SELECT remora_submit('https://example.com/f.bin', options => '{"max_attempts": 2}') AS f \gset
SELECT job_id, attempt_id AS att_f, fencing_token AS tok_f FROM remora.claim(:w1, 1) WHERE job_id = :f \gset
UPDATE remora.leases SET expires_at = now() - interval '1 second' WHERE attempt_id = :'att_f';
SELECT * FROM remora.renew(:'att_f', :tok_f);
SELECT a.state, a.error ->> 'class' AS class, j.state AS job_state, j.attempts_used
  FROM remora.attempts a JOIN remora.jobs j USING (job_id) WHERE a.attempt_id = :'att_f';
-- ... and reconcile finds the next one lost; with the budget spent, failed
SELECT pg_temp.skip_backoff(:f);
SELECT job_id, attempt_id AS att_f2, fencing_token AS tok_f2 FROM remora.claim(:w1, 1) WHERE job_id = :f \gset
UPDATE remora.leases SET expires_at = now() - interval '1 second' WHERE attempt_id = :'att_f2';
SELECT remora.reconcile() AS repairs;
SELECT remora.reconcile() AS repairs_again;
SELECT state, attempts_used, jsonb_array_length(error_history) AS errors,
	   last_error ->> 'class' AS last_class FROM remora_jobs WHERE job_id = :f;
SELECT remora.commit(:'att_f2', :tok_f2, pg_temp.manifest(:'att_f2')) AS lost_attempt_commit;
-- a missing lease row is lost coordination, not expiry: authority stays
SELECT remora_submit('https://example.com/g.bin') AS g \gset
SELECT job_id, attempt_id AS att_g, fencing_token AS tok_g FROM remora.claim(:w1, 1) WHERE job_id = :g \gset
DELETE FROM remora.leases WHERE attempt_id = :'att_g';
SELECT ok FROM remora.renew(:'att_g', :tok_g);
SELECT count(*) AS lease_restored FROM remora.leases WHERE attempt_id = :'att_g';

-- cancel: a queued job ends at once; a running one when its attempt next
-- calls in; a finished one is unchanged
SELECT remora_submit('https://example.com/h.bin') AS h \gset
SELECT remora_cancel(:h);
SELECT remora_cancel(:h) AS again;
SELECT state, cancel_requested, (SELECT count(*) FROM remora.queue WHERE job_id = :h) AS queued FROM remora_jobs WHERE job_id = :h;
SELECT remora_cancel(:g) AS running_job;
SELECT state, cancel_requested FROM remora_jobs WHERE job_id = :g;
SELECT * FROM remora.renew(:'att_g', :tok_g);
SELECT j.state, a.state AS attempt_state, j.finished_at IS NOT NULL AS finished,
	   (SELECT count(*) FROM remora.leases WHERE attempt_id = :'att_g') AS leases
  FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt WHERE j.job_id = :g;
SELECT remora.commit(:'att_g', :tok_g, pg_temp.manifest(:'att_g')) AS commit_after_cancel;
SELECT remora_cancel(:g) AS cancelled_again;
SELECT remora_cancel(:a) AS succeeded_job;
SELECT pg_temp.try('SELECT remora_cancel(NULL)');
SELECT pg_temp.try('SELECT remora_cancel(424242)');
-- cancel observed through checkpoint and through fail
SELECT remora_submit('https://example.com/i.bin') AS i \gset
SELECT job_id, attempt_id AS att_i, fencing_token AS tok_i FROM remora.claim(:w1, 1) WHERE job_id = :i \gset
SELECT remora_submit('https://example.com/k.bin') AS k \gset
SELECT job_id, attempt_id AS att_k, fencing_token AS tok_k FROM remora.claim(:w1, 1) WHERE job_id = :k \gset
SELECT remora_cancel(:i), remora_cancel(:k);
SELECT remora.checkpoint(:'att_i', :tok_i, '{"state": {}}') AS checkpoint_after_cancel;
SELECT remora.fail(:'att_k', :tok_k, '{"class": "network"}', true) AS fail_after_cancel;
SELECT job_id, state FROM remora_jobs WHERE job_id IN (:i, :k) ORDER BY job_id;
-- cancel observed through lease expiry
SELECT remora_submit('https://example.com/l.bin') AS l \gset
SELECT job_id, attempt_id AS att_l FROM remora.claim(:w1, 1) WHERE job_id = :l \gset
SELECT remora_cancel(:l);
UPDATE remora.leases SET expires_at = now() - interval '1 second' WHERE attempt_id = :'att_l';
SELECT remora.reconcile() AS repairs;
SELECT state FROM remora_jobs WHERE job_id = :l;

-- delete: a tombstone hides the job; an unfinished job is cancelled first
SELECT remora_delete(:a);
SELECT remora_delete(:a);
SELECT count(*) AS visible FROM remora_jobs WHERE job_id = :a;
SELECT state, deleted_at IS NOT NULL AS tombstone, hard_delete_requested_at IS NULL AS soft
  FROM remora.jobs WHERE job_id = :a;
SELECT count(*) AS members_still_listed FROM remora_result(:a);
SELECT remora_submit('https://example.com/m.bin') AS m \gset
SELECT remora_delete(:m, true);
SELECT state, deleted_at IS NOT NULL AS tombstone, hard_delete_requested_at IS NOT NULL AS hard
  FROM remora.jobs WHERE job_id = :m;
SELECT pg_temp.try('SELECT remora_delete(NULL)');
SELECT pg_temp.try(format('SELECT remora_delete(%s, NULL)', :m));
SELECT pg_temp.try('SELECT remora_delete(424242)');

-- result of a job that has none; of a job that does not exist
SELECT count(*) FROM remora_result(:b);
SELECT pg_temp.try('SELECT * FROM remora_result(424242)');
SELECT pg_temp.try('SELECT * FROM remora_result(NULL)');

-- at most one result per job, and every result by its job's attempt
SELECT count(*) AS results, count(DISTINCT r.job_id) AS jobs,
	   bool_and(a.job_id = r.job_id AND a.state = 'succeeded') AS own_attempts
  FROM remora.results r JOIN remora.attempts a USING (attempt_id);

-- what the indexes rely on, no index naming the jobs' state (remora.jobs):
-- a job is unfinished exactly when finished_at is NULL, and running exactly
-- when its current attempt runs, which is then its only running attempt
SELECT count(*) FILTER (WHERE (j.finished_at IS NULL)
							  <> (j.state IN ('queued', 'running', 'retrying'))) AS unfinished_mismatch,
	   count(*) FILTER (WHERE (j.state = 'running')
							  <> EXISTS (SELECT 1 FROM remora.attempts a
										  WHERE a.attempt_id = j.current_attempt
											AND a.state = 'running')) AS running_mismatch,
	   (SELECT count(*) FROM remora.attempts a JOIN remora.jobs jb USING (job_id)
		 WHERE a.state = 'running'
		   AND (jb.state <> 'running' OR jb.current_attempt <> a.attempt_id)) AS stray_running
  FROM remora.jobs j;
