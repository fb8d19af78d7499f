--
-- remora.commit_many: several commits in one call decide each item as
-- remora.commit decides it.  One batch of every kind of item is run twice
-- in one transaction (so now() is the same), once through remora.commit
-- item by item and once through remora.commit_many, and the two end
-- states must be equal.  Then its argument checks.  The test cluster has
-- remora.max_active_leases = 3: the jobs are claimed three at a time, and
-- the lease rows of the earlier ones deleted (a missing lease row revokes
-- nothing, and while remora.coordination has its row the limit counts
-- lease rows).
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
-- a descriptor for attempt a: key under its staging prefix, one member of
-- 42 bytes, recorded or in its entries
CREATE FUNCTION pg_temp.manifest(a uuid, extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
	SELECT jsonb_build_object(
		'key', remora._staging_prefix(j.prefix, j.job_id, a) || 'manifest.json',
		'etag', '"0123abcd"', 'sha256', repeat('AB', 32),
		'members', 1, 'bytes', 42) || extra
	  FROM remora.attempts t JOIN remora.jobs j USING (job_id)
	 WHERE t.attempt_id = a
$$;
CREATE FUNCTION pg_temp.entry(a uuid, path text, size integer DEFAULT 42) RETURNS jsonb
LANGUAGE sql AS $$
	SELECT jsonb_build_object('entries', jsonb_build_array(jsonb_build_object(
		'path', path, 'bucket', 'target', 'size', size,
		'key', remora._staging_prefix(j.prefix, j.job_id, a) || path,
		'sha256', repeat('EF', 32), 'etag', '"e"')))
	  FROM remora.attempts t JOIN remora.jobs j USING (job_id)
	 WHERE t.attempt_id = a
$$;
-- what a commit can change, timestamps included (one transaction: one now())
CREATE FUNCTION pg_temp.snapshot() RETURNS text
LANGUAGE sql AS $$
	SELECT concat_ws(E'\n',
		(SELECT string_agg(concat_ws(' ', job_id, state, finished_at, last_error ->> 'class',
									 not_before IS NOT NULL), E'\n' ORDER BY job_id)
		   FROM remora.jobs),
		(SELECT string_agg(concat_ws(' ', job_id, attempt_no, state, finished_at, cleaned_at,
									 error ->> 'class'), E'\n' ORDER BY job_id, attempt_no)
		   FROM remora.attempts),
		(SELECT string_agg(concat_ws(' ', job_id, attempt_id, fencing_token, descriptor, committed_at),
						   E'\n' ORDER BY job_id) FROM remora.results),
		(SELECT string_agg(concat_ws(' ', attempt_id, path, key, size, sha256, etag),
						   E'\n' ORDER BY attempt_id, path) FROM remora.members),
		(SELECT string_agg(concat_ws(' ', 'lease', job_id, expires_at), E'\n' ORDER BY job_id)
		   FROM remora.leases),
		(SELECT string_agg(concat_ws(' ', 'checkpoint', job_id), E'\n' ORDER BY job_id)
		   FROM remora.checkpoints),
		(SELECT string_agg(concat_ws(' ', 'queued', job_id), E'\n' ORDER BY job_id)
		   FROM remora.queue))
$$;

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SELECT remora.reconcile() >= 0 AS coordination_whole;
SET remora.default_bucket = 'target';

\set w '''11111111-1111-1111-1111-111111111111'''
CREATE TEMP TABLE att (name text PRIMARY KEY, job bigint, a uuid, t bigint);
-- nine jobs, claimed three at a time
SELECT count(remora_submit('https://example.com/' || g || '.bin')) FROM generate_series(1, 9) g;
INSERT INTO att SELECT (ARRAY['clean', 'checkpointed', 'committed'])[row_number() OVER (ORDER BY job_id)],
					   job_id, attempt_id, fencing_token FROM remora.claim(:w, 3);
DELETE FROM remora.leases;
INSERT INTO att SELECT (ARRAY['stale', 'outside', 'miscounted'])[row_number() OVER (ORDER BY job_id)],
					   job_id, attempt_id, fencing_token FROM remora.claim(:w, 3);
DELETE FROM remora.leases;
INSERT INTO att SELECT (ARRAY['lapsed', 'cancelled', 'leased'])[row_number() OVER (ORDER BY job_id)],
					   job_id, attempt_id, fencing_token FROM remora.claim(:w, 3);
SELECT name, job FROM att ORDER BY job;

-- a member recorded by checkpoint; a result committed before the batch;
-- a lease lapsed; a cancel requested
SELECT remora.checkpoint(a, t, jsonb_build_object('members', pg_temp.entry(a, 'cp.bin') -> 'entries'))
  FROM att WHERE name = 'checkpointed';
SELECT remora.commit(a, t, pg_temp.manifest(a, pg_temp.entry(a, 'done.bin'))) AS committed_before
  FROM att WHERE name = 'committed';
UPDATE remora.leases SET expires_at = now() - interval '1 second'
 WHERE job_id = (SELECT job FROM att WHERE name = 'lapsed');
SELECT remora_cancel(job) FROM att WHERE name = 'cancelled';

-- the batch, in no particular order: every kind of item, a duplicate, an
-- attempt nobody knows and a NULL
CREATE TEMP TABLE batch AS
SELECT row_number() OVER () AS i, b.*
  FROM (SELECT a, t, pg_temp.manifest(a, pg_temp.entry(a, 'x.bin')) AS m FROM att WHERE name = 'leased'
		UNION ALL SELECT a, t + 1, pg_temp.manifest(a, pg_temp.entry(a, 'x.bin')) FROM att WHERE name = 'stale'
		UNION ALL SELECT a, t, pg_temp.manifest(a) FROM att WHERE name = 'checkpointed'
		UNION ALL SELECT a, t, pg_temp.manifest(a, pg_temp.entry(a, 'x.bin')) FROM att WHERE name = 'lapsed'
		UNION ALL SELECT a, t, pg_temp.manifest(a, pg_temp.entry(a, 'x.bin')) FROM att WHERE name = 'clean'
		UNION ALL SELECT a, t, pg_temp.manifest(a, pg_temp.entry(a, 'done.bin')) FROM att WHERE name = 'committed'
		UNION ALL SELECT a, t, pg_temp.manifest(a, pg_temp.entry(a, 'x.bin') || '{"key": "remora/elsewhere/manifest.json"}')
					FROM att WHERE name = 'outside'
		UNION ALL SELECT a, t, pg_temp.manifest(a, pg_temp.entry(a, 'x.bin') || '{"bytes": 43}') FROM att WHERE name = 'miscounted'
		UNION ALL SELECT a, t, pg_temp.manifest(a, pg_temp.entry(a, 'x.bin')) FROM att WHERE name = 'cancelled'
		UNION ALL SELECT a, t, pg_temp.manifest(a, pg_temp.entry(a, 'x.bin')) FROM att WHERE name = 'clean'
		UNION ALL SELECT '99999999-9999-9999-9999-999999999999', 1, m FROM (SELECT pg_temp.manifest(a) AS m FROM att WHERE name = 'clean') s
		UNION ALL SELECT NULL, 1, m FROM (SELECT pg_temp.manifest(a) AS m FROM att WHERE name = 'clean') s) b;
SELECT count(*) AS items FROM batch;

SET client_min_messages = error;
BEGIN;
SAVEPOINT before;
-- one by one
SELECT string_agg(coalesce(name, '(none)') || ' ' || remora.commit(b.a, b.t, b.m), ', ' ORDER BY i) AS one_by_one
  FROM batch b LEFT JOIN att USING (a) \gset
SELECT pg_temp.snapshot() AS after_one_by_one \gset
ROLLBACK TO before;
-- in one call; the items that pass every check (the leased and the
-- checkpointed one: the duplicate "clean" does not) do not go through
-- remora.commit, the other ten do
SET LOCAL track_functions = 'pl';
SELECT coalesce(sum(calls), 0) AS calls_before FROM pg_stat_xact_user_functions
 WHERE schemaname = 'remora' AND funcname = 'commit' \gset
SELECT string_agg(coalesce(name, '(none)') || ' ' || c.committed, ', ' ORDER BY c.ord) AS batched
  FROM remora.commit_many((SELECT array_agg(a ORDER BY i) FROM batch),
						  (SELECT array_agg(t ORDER BY i) FROM batch),
						  (SELECT array_agg(m ORDER BY i) FROM batch)) WITH ORDINALITY c(attempt_id, committed, ord)
  LEFT JOIN att ON att.a = c.attempt_id \gset
SELECT coalesce(sum(calls), 0) - :calls_before AS one_by_one_in_batch
  FROM pg_stat_xact_user_functions WHERE schemaname = 'remora' AND funcname = 'commit';
SELECT pg_temp.snapshot() AS after_batch \gset
COMMIT;
RESET client_min_messages;
SELECT :'one_by_one' AS one_by_one;
SELECT :'batched' = :'one_by_one' AS same_answers, :'after_batch' = :'after_one_by_one' AS same_state;
-- what the batch did
SELECT name, j.state, a.state AS attempt_state, r.job_id IS NOT NULL AS has_result,
	   (SELECT count(*) FROM remora.leases l WHERE l.job_id = j.job_id) AS leases
  FROM att JOIN remora.jobs j ON j.job_id = att.job JOIN remora.attempts a ON a.attempt_id = att.a
  LEFT JOIN remora.results r ON r.attempt_id = att.a ORDER BY att.job;
SELECT path, size FROM remora_result((SELECT job FROM att WHERE name = 'checkpointed'));
SELECT path, size FROM remora_result((SELECT job FROM att WHERE name = 'clean'));
SELECT descriptor ->> 'sha256' = repeat('ab', 32) AS sha_lowered
  FROM remora.results WHERE job_id = (SELECT job FROM att WHERE name = 'leased');

-- a member recorded with other content raises, as in remora.commit, and
-- the batch commits nothing
SELECT remora_submit('https://example.com/clash.bin') AS clash_job \gset
SELECT remora_submit('https://example.com/fine.bin') AS fine_job \gset
DELETE FROM remora.leases;
SELECT attempt_id AS ca, fencing_token AS ct FROM remora.claim(:w, 2) WHERE job_id = :clash_job \gset
SELECT attempt_id AS fa, fencing_token AS ft FROM remora.attempts WHERE job_id = :fine_job \gset
SELECT remora.checkpoint(:'ca', :ct, jsonb_build_object('members', pg_temp.entry(:'ca', 'c.bin') -> 'entries'));
SELECT pg_temp.try(format('SELECT * FROM remora.commit_many(%L, %L, %L)',
	ARRAY[:'fa', :'ca']::uuid[], ARRAY[:ft, :ct]::bigint[],
	ARRAY[pg_temp.manifest(:'fa', pg_temp.entry(:'fa', 'f.bin')),
		  pg_temp.manifest(:'ca', jsonb_build_object('entries', jsonb_build_array(
			  pg_temp.entry(:'ca', 'c.bin') #> '{entries,0}' || jsonb_build_object('sha256', repeat('0', 64)))))]));
SELECT job_id, state FROM remora.jobs WHERE job_id IN (:clash_job, :fine_job) ORDER BY job_id;

-- argument checks: nothing is changed by a call that raises
SELECT pg_temp.try($$SELECT * FROM remora.commit_many(NULL, '{1}', '{}')$$);
SELECT pg_temp.try($$SELECT * FROM remora.commit_many('{}', NULL, '{}')$$);
SELECT pg_temp.try($$SELECT * FROM remora.commit_many('{}', '{}', NULL)$$);
SELECT pg_temp.try(format('SELECT * FROM remora.commit_many(%L, %L, %L)',
	ARRAY[:'fa']::uuid[], ARRAY[:ft, 2]::bigint[], ARRAY['{}']::jsonb[]));
SELECT pg_temp.try(format('SELECT * FROM remora.commit_many(%L, %L, %L)',
	ARRAY[[:'fa']]::uuid[], ARRAY[[:ft]]::bigint[], ARRAY[['{}']]::jsonb[]));
SELECT pg_temp.try(format('SELECT * FROM remora.commit_many(%L, %L, %L)',
	(SELECT array_agg(:'fa'::uuid) FROM generate_series(1, 1001)),
	(SELECT array_agg(:ft::bigint) FROM generate_series(1, 1001)),
	(SELECT array_agg('{}'::jsonb) FROM generate_series(1, 1001))));
-- an invalid descriptor names its item
SELECT pg_temp.try(format('SELECT * FROM remora.commit_many(%L, %L, %L)',
	ARRAY[:'fa', :'ca']::uuid[], ARRAY[:ft, :ct]::bigint[],
	ARRAY[pg_temp.manifest(:'fa', pg_temp.entry(:'fa', 'f.bin')), pg_temp.manifest(:'ca') - 'etag']));
SELECT pg_temp.try(format('SELECT * FROM remora.commit_many(%L, %L, %L)',
	ARRAY[:'fa']::uuid[], ARRAY[:ft]::bigint[], ARRAY[NULL]::jsonb[]));
SELECT count(*) AS nothing_from_an_empty_batch FROM remora.commit_many('{}', '{}', '{}');
SELECT job_id, state FROM remora.jobs WHERE job_id IN (:clash_job, :fine_job) ORDER BY job_id;
-- a descriptor that does not add up is refused alone: the other commits
SELECT c.attempt_id = :'fa' AS fine, c.committed
  FROM remora.commit_many(ARRAY[:'fa', :'ca']::uuid[], ARRAY[:ft, :ct]::bigint[],
	ARRAY[pg_temp.manifest(:'fa', pg_temp.entry(:'fa', 'f.bin')),
		  pg_temp.manifest(:'ca', pg_temp.entry(:'ca', 'c.bin', 41))]) c;
SELECT job_id, state FROM remora.jobs WHERE job_id IN (:clash_job, :fine_job) ORDER BY job_id;
-- only a worker may call it
CREATE ROLE regress_cm_user LOGIN;
GRANT remora_user TO regress_cm_user;
SET ROLE regress_cm_user;
SELECT pg_temp.try($$SELECT * FROM remora.commit_many('{}', '{}', '{}')$$);
RESET ROLE;
DROP ROLE regress_cm_user;
