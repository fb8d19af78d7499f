--
-- One verdict for a commit: remora.commit and remora.commit_many decide
-- through remora._commit_verdict.  A table of cases, each an (attempt,
-- token, descriptor) in a state the case sets up, is run three ways:
-- through remora.commit, through remora.commit_many as a batch of one, and
-- through remora.commit_many in a batch with a commit that succeeds and one
-- that is refused.  Each run is undone afterwards (one transaction, so
-- now() is the same for all).  The three must give the same answer (the
-- result, or the SQLSTATE of the error) and leave the case's job,
-- attempts, result, members, lease and checkpoint in the same state.
-- The test cluster has remora.max_active_leases = 3: jobs are claimed
-- three at a time and the earlier lease rows deleted (a missing lease
-- row revokes nothing).
--
-- a descriptor for attempt a: manifest under its staging prefix, one
-- member of 42 bytes, recorded or among the entries
CREATE FUNCTION pg_temp.manifest(a uuid, extra jsonb DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
	SELECT jsonb_build_object(
		'key', remora._staging_prefix(j.prefix, j.job_id, a) || 'manifest.json',
		'etag', '"m"', 'sha256', repeat('ab', 32), 'members', 1, 'bytes', 42) || extra
	  FROM remora.attempts t JOIN remora.jobs j USING (job_id)
	 WHERE t.attempt_id = a
$$;
CREATE FUNCTION pg_temp.entry(a uuid, path text, size integer DEFAULT 42) RETURNS jsonb
LANGUAGE sql AS $$
	SELECT jsonb_build_object('entries', jsonb_build_array(jsonb_build_object(
		'path', path, 'bucket', 'target', 'size', size,
		'key', remora._staging_prefix(j.prefix, j.job_id, a) || path,
		'sha256', repeat('ef', 32), 'etag', '"e"')))
	  FROM remora.attempts t JOIN remora.jobs j USING (job_id)
	 WHERE t.attempt_id = a
$$;
-- what a commit can change for one job (not_before is random backoff)
CREATE FUNCTION pg_temp.state(job bigint) RETURNS text
LANGUAGE sql AS $$
	SELECT concat_ws(' | ',
		(SELECT concat_ws(' ', j.state, j.finished_at IS NOT NULL, j.last_error ->> 'class',
						  j.not_before IS NOT NULL, j.cancel_requested_at IS NOT NULL)
		   FROM remora.jobs j WHERE j.job_id = job),
		(SELECT string_agg(concat_ws(' ', a.attempt_no, a.state, a.finished_at IS NOT NULL,
									 a.cleaned_at IS NOT NULL, a.error ->> 'class'),
						   ', ' ORDER BY a.attempt_no)
		   FROM remora.attempts a WHERE a.job_id = job),
		(SELECT concat_ws(' ', 'result', r.fencing_token, r.members, r.bytes, r.descriptor)
		   FROM remora.results r WHERE r.job_id = job),
		(SELECT string_agg(concat_ws(' ', 'member', m.path, m.size), ', ' ORDER BY m.path)
		   FROM remora.members m JOIN remora.attempts a USING (attempt_id) WHERE a.job_id = job),
		(SELECT 'lease' || CASE WHEN l.expires_at < now() THEN ' lapsed' ELSE '' END FROM remora.leases l WHERE l.job_id = job),
		(SELECT 'checkpoint' FROM remora.checkpoints c WHERE c.job_id = job),
		(SELECT string_agg(concat_ws(' ', 'export', x.committed_attempt IS NOT NULL,
									 (SELECT count(*) FROM remora.export_refs f
									   WHERE f.export_id = x.export_id)), ', ')
		   FROM remora.exports x WHERE x.export_id = job))
$$;
-- run q (one text value) and undo it: its answer (the value, or the
-- SQLSTATE it raised), its error message, and the state of job after it
CREATE TYPE pg_temp.outcome AS (answer text, message text, after text);
CREATE FUNCTION pg_temp.run(q text, job bigint) RETURNS pg_temp.outcome
LANGUAGE plpgsql AS $$
DECLARE
	answer	text;
	message	text;
	after	text;
BEGIN
	BEGIN
		EXECUTE q INTO answer;
		after := pg_temp.state(job);
		RAISE EXCEPTION USING ERRCODE = 'RV001', MESSAGE = answer, DETAIL = after;
	EXCEPTION
		WHEN SQLSTATE 'RV001' THEN
			GET STACKED DIAGNOSTICS answer = MESSAGE_TEXT, after = PG_EXCEPTION_DETAIL;
		WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS answer = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
			after := pg_temp.state(job);
	END;
	RETURN (answer, message, after);
END
$$;

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SELECT remora.reconcile() >= 0 AS coordination_whole;
SET remora.default_bucket = 'target';
SET remora.default_prefix = 'remora';
\set w '''11111111-1111-1111-1111-111111111111'''

-- the job an export publishes, committed with one member
SELECT remora_submit('https://example.com/source.bin') AS source_job \gset
SELECT attempt_id AS sa, fencing_token AS st FROM remora.claim(:w) \gset
SELECT remora.commit(:'sa', :st, pg_temp.manifest(:'sa', pg_temp.entry(:'sa', 'x.bin'))) AS source_committed;
SELECT remora_export(:source_job, 'stable', 'models/x') AS export_job \gset

-- one job for each case (the lapsed one last, so that its lease row is
-- there), each claimed
CREATE TEMP TABLE att (name text PRIMARY KEY, job bigint, a uuid, t bigint);
INSERT INTO att (name, job)
SELECT n, remora_submit('https://example.com/' || n || '.bin')
  FROM unnest(ARRAY['succeeds', 'repeated', 'stale', 'cancelled', 'miscounted',
					'unrecorded', 'outside', 'foreign', 'clash', 'wrong_kind',
					'invalid', 'good', 'bad', 'lapsed']) WITH ORDINALITY u(n, o)
 ORDER BY o;
INSERT INTO att (name, job) VALUES ('export', :export_job);
-- (a claim's room is reserved until its transaction ends: one claim a
-- transaction)
CREATE FUNCTION pg_temp.claim_three() RETURNS bigint
LANGUAGE sql AS $$
	DELETE FROM remora.leases;
	WITH c AS (SELECT * FROM remora.claim('11111111-1111-1111-1111-111111111111', 3)),
		 u AS (UPDATE att SET a = c.attempt_id, t = c.fencing_token
				 FROM c WHERE c.job_id = att.job RETURNING 1)
	SELECT count(*) FROM u
$$;
SELECT 'SELECT pg_temp.claim_three() AS claimed' FROM generate_series(1, 5) \gexec
SELECT name, j.state, l.job_id IS NOT NULL AS leased
  FROM att JOIN remora.jobs j ON j.job_id = att.job
  LEFT JOIN remora.leases l ON l.job_id = att.job ORDER BY att.job;

-- the states the cases need: a result committed before, a member
-- recorded by a checkpoint, a cancel requested (and, below, a lease
-- lapsed)
SELECT remora.commit(a, t, pg_temp.manifest(a, pg_temp.entry(a, 'x.bin'))) AS committed_before
  FROM att WHERE name = 'repeated';
SELECT remora.checkpoint(a, t, jsonb_build_object('members', pg_temp.entry(a, 'x.bin') -> 'entries'))
  FROM att WHERE name = 'clash';
SELECT remora_cancel(job) FROM att WHERE name = 'cancelled';

-- the cases: attempt, token and descriptor
CREATE TEMP TABLE cases (n serial, name text, job bigint, a uuid, t bigint, m jsonb);
INSERT INTO cases (name, job, a, t, m)
SELECT c.name, att.job, att.a, att.t + c.dt, c.m
  FROM att CROSS JOIN LATERAL (VALUES
	(1, 'succeeds', 'succeeds', 0, pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin'))),
	(2, 'repeat of a commit', 'repeated', 0, pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin'))),
	(3, 'repeat, other descriptor', 'repeated', 0,
	 pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin') || '{"etag": "\"n\""}')),
	(4, 'repeat, other token', 'repeated', 1, pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin'))),
	(5, 'stale token', 'stale', 1, pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin'))),
	(6, 'no token', 'stale', NULL, pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin'))),
	(7, 'lapsed lease', 'lapsed', 0, pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin'))),
	(8, 'cancel requested', 'cancelled', 0, pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin'))),
	(9, 'bytes do not add up', 'miscounted', 0,
	 pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin') || '{"bytes": 43}')),
	(10, 'members do not add up', 'miscounted', 0,
	 pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin') || '{"members": 2}')),
	(11, 'members nobody recorded', 'unrecorded', 0, pg_temp.manifest(att.a)),
	(12, 'manifest outside the staging', 'outside', 0,
	 pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin') || '{"key": "remora/elsewhere/manifest.json"}')),
	(13, 'manifest is the staging prefix', 'outside', 0,
	 pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin'))
	 || jsonb_build_object('key', remora._staging_prefix('remora', att.job, att.a))),
	(14, 'member in another bucket', 'foreign', 0,
	 pg_temp.manifest(att.a, jsonb_build_object('entries', jsonb_build_array(
		 pg_temp.entry(att.a, 'x.bin') #> '{entries,0}' || '{"bucket": "other"}')))),
	(15, 'member is the manifest', 'foreign', 0,
	 pg_temp.manifest(att.a, jsonb_build_object('entries', jsonb_build_array(
		 pg_temp.entry(att.a, 'x.bin') #> '{entries,0}'
		 || jsonb_build_object('key', remora._staging_prefix('remora', att.job, att.a) || 'manifest.json'))))),
	(16, 'member recorded otherwise', 'clash', 0,
	 pg_temp.manifest(att.a, jsonb_build_object('entries', jsonb_build_array(
		 pg_temp.entry(att.a, 'x.bin') #> '{entries,0}' || jsonb_build_object('sha256', repeat('0', 64)))))),
	(17, 'member recorded, listed again', 'clash', 0, pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin'))),
	(18, 'an export''s descriptor for a job', 'wrong_kind', 0,
	 jsonb_build_object('sha256', repeat('ab', 32), 'references', '[]'::jsonb)),
	(19, 'descriptor without etag', 'invalid', 0, pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin')) - 'etag'),
	(20, 'no descriptor', 'invalid', 0, NULL::jsonb),
	(21, 'export publishes', 'export', 0,
	 jsonb_build_object('sha256', repeat('ab', 32), 'references', jsonb_build_array(jsonb_build_object(
		 'path', 'x.bin', 'key', 'models/x/x.bin', 'etag', '"e"', 'size', 42, 'outcome', 'copied')))),
	(22, 'export without every answer', 'export', 0, jsonb_build_object('sha256', repeat('ab', 32))),
	(23, 'export of another output', 'export', 0,
	 jsonb_build_object('sha256', repeat('cd', 32), 'references', jsonb_build_array(jsonb_build_object(
		 'path', 'x.bin', 'key', 'models/x/x.bin', 'etag', '"e"', 'size', 42, 'outcome', 'copied')))),
	(24, 'a job''s descriptor for an export', 'export', 0, pg_temp.manifest(att.a, pg_temp.entry(att.a, 'x.bin'))),
	(25, 'export, stale token', 'export', 1, jsonb_build_object('sha256', repeat('ab', 32)))
	) c(o, name, job_name, dt, m)
 WHERE att.name = c.job_name
 ORDER BY c.o;
INSERT INTO cases (name, job, a, t, m)
SELECT 'unknown attempt', 0, '99999999-9999-9999-9999-999999999999', 1, m
  FROM cases WHERE name = 'succeeds';
INSERT INTO cases (name, job, a, t, m)
SELECT 'no attempt', 0, NULL, 1, m FROM cases WHERE name = 'succeeds';

-- the companions of the mixed batch: one that commits, one refused
SELECT a AS ga, t AS gt, pg_temp.manifest(a, pg_temp.entry(a, 'g.bin')) AS gm
  FROM att WHERE name = 'good' \gset
SELECT a AS ba, t + 1 AS bt, pg_temp.manifest(a, pg_temp.entry(a, 'b.bin')) AS bm
  FROM att WHERE name = 'bad' \gset

SET client_min_messages = error;
BEGIN;
-- lapsed in this transaction, so that nothing settles it before the runs
UPDATE remora.leases SET expires_at = now() - interval '1 second'
 WHERE job_id = (SELECT job FROM att WHERE name = 'lapsed');
CREATE TEMP TABLE runs AS
SELECT c.n, c.name,
	   (pg_temp.run(format('SELECT verdict FROM remora._commit_verdict(%L, %L, %s)', c.a, c.t,
						   CASE WHEN c.job = :export_job THEN 'NULL'
								ELSE format('remora._check_manifest(%L)', c.m) END),
					c.job)).answer AS verdict,
	   pg_temp.run(format('SELECT remora.commit(%L, %L, %L)::text', c.a, c.t, c.m), c.job) AS one,
	   pg_temp.run(format('SELECT committed::text FROM remora.commit_many(%L, %L, %L)',
						  ARRAY[c.a], ARRAY[c.t], ARRAY[c.m]), c.job) AS batch_of_one,
	   pg_temp.run(format($q$
			SELECT CASE WHEN r[1] AND r[3] IS FALSE THEN r[2]::text
						ELSE 'the others were decided wrongly: ' || r::text END
			  FROM (SELECT array_agg(committed ORDER BY o) AS r
					  FROM remora.commit_many(%L, %L, %L) WITH ORDINALITY b(a, committed, o)) s$q$,
			ARRAY[:'ga', c.a, :'ba']::uuid[], ARRAY[:gt, c.t, :bt]::bigint[],
			ARRAY[:'gm', c.m, :'bm']::jsonb[]), c.job) AS mixed,
	   pg_temp.state(c.job) AS before
  FROM cases c;
COMMIT;
RESET client_min_messages;

-- the answer of each case, and whether the three ways agree on it and on
-- the state it leaves
SELECT n, name, verdict, (one).answer,
	   (batch_of_one).answer = (one).answer AND (mixed).answer = (one).answer AS same_answer,
	   (batch_of_one).after = (one).after AND (mixed).after = (one).after AS same_state,
	   (one).after IS DISTINCT FROM before AS changed
  FROM runs ORDER BY n;
-- an error's message, through remora.commit and remora.commit_many
SELECT name, (one).message, (batch_of_one).message AS batched
  FROM runs WHERE (one).message IS NOT NULL ORDER BY n;
-- the state each case leaves
SELECT name, regexp_replace((one).after, ' \{"key".*\}', ' {descriptor}') AS after
  FROM runs ORDER BY n;
-- nothing was left behind: every run was undone
SELECT count(*) AS results, (SELECT count(*) FROM remora.jobs WHERE state = 'succeeded') AS succeeded
  FROM remora.results;
