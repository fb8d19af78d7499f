--
-- Mirrors: options.reuse_from is validated at submit and resolved to a job
-- id ("latest": the caller's newest succeeded job with the same source and
-- bucket); a worker's lookup of earlier members finds that job's result;
-- a member recorded as copied from it says so in remora_result and in
-- remora_jobs.bytes_reused, and only when it names that very job.
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

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SET remora.default_bucket = 'target';
SET remora.default_prefix = 'remora';
SET client_min_messages = error;

CREATE ROLE regress_mir_ann LOGIN;
CREATE ROLE regress_mir_ben LOGIN;
GRANT remora_user TO regress_mir_ann, regress_mir_ben;
SELECT remora.grant_source('regress_mir_ann', 'src', 'data/*');
SELECT remora.grant_source('regress_mir_ben', 'src', 'data/*');
SELECT remora.grant_target('regress_mir_ann', 'other', '*');

-- a result of ann's: two members, driven through the protocol
SET ROLE regress_mir_ann;
SELECT remora_submit('s3://src/data/') AS first \gset
RESET ROLE;
SELECT attempt_id AS att, fencing_token AS tok
  FROM remora.claim('44444444-4444-4444-4444-444444444444') WHERE job_id = :first \gset
SELECT remora.checkpoint(:'att', :tok, jsonb_build_object('members', jsonb_build_array(
	jsonb_build_object('path', 'a.bin', 'bucket', 'target',
		'key', 'remora/' || :first || '/' || :'att' || '/data/a.bin', 'size', 3,
		'sha256', repeat('a', 64), 'etag', '"e-a"', 'source', '{"etag": "\"s-a\""}'::jsonb),
	jsonb_build_object('path', 'b.bin', 'bucket', 'target',
		'key', 'remora/' || :first || '/' || :'att' || '/data/b.bin', 'size', 4,
		'sha256', repeat('b', 64), 'etag', '"e-b"', 'source', '{"etag": "\"s-b\""}'::jsonb))));
SELECT remora.commit(:'att', :tok, jsonb_build_object(
	'key', 'remora/' || :first || '/' || :'att' || '/manifest.json', 'etag', '"m"',
	'sha256', repeat('c', 64), 'members', 2, 'bytes', 7));
-- what it downloaded itself
SELECT path, reused_from_job, action FROM remora_result(:first);

-- the option's own form: a job id or "latest", else 22023
SET ROLE regress_mir_ann;
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": "yesterday"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": 0}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": -1}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": 1.5}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": 1e3}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": true}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": [1]}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": 99999999999999999999}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": "LATEST"}')$$);
-- a job nobody has, or another's: P0002, as remora_result says
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": 424242}')$$);
RESET ROLE;
SET ROLE regress_mir_ben;
SELECT pg_temp.try(format($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": %s}')$$, :first));
-- "latest" of ben's, who has none: the job downloads everything
SELECT remora_submit('s3://src/data/', options => '{"reuse_from": "latest"}') AS ben_job \gset
RESET ROLE;
SELECT spec -> 'options' AS ben_options FROM remora.jobs WHERE job_id = :ben_job;

SET ROLE regress_mir_ann;
-- one that has not succeeded, or of another source kind: 22023
SELECT remora_submit('https://example.com/never.bin') AS queued \gset
SELECT pg_temp.try(format($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": %s}')$$, :queued));
SELECT pg_temp.try(format($$SELECT remora_submit('s3://src/data/x.bin', options => '{"reuse_from": %s}')$$, :first));
-- "latest": the newest succeeded job of the same source and bucket
SELECT remora_submit('s3://src/data/', options => '{"reuse_from": "latest"}') AS second \gset
SELECT remora_submit('s3://src/data/', 'other', options => '{"reuse_from": "latest"}') AS other_bucket \gset
SELECT remora_submit('s3://src/data/sub/', options => '{"reuse_from": "latest"}') AS other_source \gset
RESET ROLE;
SELECT job_id = :second AS second, job_id = :other_bucket AS other_bucket,
	   job_id = :other_source AS other_source, spec -> 'options' -> 'reuse_from' = to_jsonb(:first) AS reuses_first,
	   spec -> 'options' ? 'reuse_from' AS has_reuse_from
  FROM remora.jobs WHERE job_id IN (:second, :other_bucket, :other_source) ORDER BY job_id;
-- the request keeps what the caller asked: the same request again, with
-- its idempotency key, is the same job
SET ROLE regress_mir_ann;
SELECT remora_submit('s3://src/data/', options => '{"reuse_from": "latest"}', idempotency_key => 'nightly') AS keyed \gset
SELECT remora_submit('s3://src/data/', options => '{"reuse_from": "latest"}', idempotency_key => 'nightly') = :keyed AS same_job;
RESET ROLE;

-- the worker's lookup: the first job's members, from it, for paths it has
DELETE FROM remora.jobs WHERE job_id NOT IN (:first, :second);
SELECT attempt_id AS att2, fencing_token AS tok2
  FROM remora.claim('44444444-4444-4444-4444-444444444444', 3) WHERE job_id = :second \gset
SELECT pos, path, key LIKE 'remora/' || :first || '/%' AS first_key, sha256 = repeat('a', 64) AS sha,
	   source ->> 'etag' AS source_etag, from_job = :first AS from_first
  FROM remora.earlier_members(:second, :'att2', ARRAY['new.bin', 'a.bin', 'b.bin']) ORDER BY pos;

-- a member copied from it (reused_from_job names the job), one downloaded,
-- one that claims another job: recorded as downloaded
SELECT remora.checkpoint(:'att2', :tok2, jsonb_build_object('members', jsonb_build_array(
	jsonb_build_object('path', 'a.bin', 'bucket', 'target',
		'key', 'remora/' || :second || '/' || :'att2' || '/data/a.bin', 'size', 3,
		'sha256', repeat('a', 64), 'etag', '"e-a"', 'reused', true, 'reused_from_job', :first),
	jsonb_build_object('path', 'new.bin', 'bucket', 'target',
		'key', 'remora/' || :second || '/' || :'att2' || '/data/new.bin', 'size', 5,
		'sha256', repeat('d', 64), 'etag', '"e-n"'),
	jsonb_build_object('path', 'b.bin', 'bucket', 'target',
		'key', 'remora/' || :second || '/' || :'att2' || '/data/b.bin', 'size', 4,
		'sha256', repeat('b', 64), 'etag', '"e-b"', 'reused', true, 'reused_from_job', 424242))));
SELECT bytes_reused FROM remora_jobs WHERE job_id = :second;  -- none yet: counted at the commit
SELECT remora.commit(:'att2', :tok2, jsonb_build_object(
	'key', 'remora/' || :second || '/' || :'att2' || '/manifest.json', 'etag', '"m2"',
	'sha256', repeat('e', 64), 'members', 3, 'bytes', 12));
SELECT path, reused_from_job = :first AS from_first, action FROM remora_result(:second);
SELECT bytes_reused FROM remora_jobs WHERE job_id = :second;  -- counted at the commit
SELECT bytes_reused FROM remora_jobs WHERE job_id = :first;

-- the earlier job deleted: nothing of it is offered any more
SET ROLE regress_mir_ann;
SELECT remora_submit('s3://src/data/', options => '{"reuse_from": "latest"}') AS third \gset
RESET ROLE;
SELECT spec -> 'options' -> 'reuse_from' = to_jsonb(:second) AS reuses_second FROM remora.jobs WHERE job_id = :third;
UPDATE remora.jobs SET deleted_at = now() WHERE job_id = :second;
SELECT count(*) FROM remora.earlier_members(:third, gen_random_uuid(), ARRAY['a.bin', 'b.bin', 'new.bin']);

RESET ROLE;
DROP OWNED BY regress_mir_ann, regress_mir_ben;
DROP ROLE regress_mir_ann, regress_mir_ben;
