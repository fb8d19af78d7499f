--
-- Dry runs (options.dry_run): the option is a boolean; a dry run's members
-- are plans (no key, ETag or SHA-256, an action), which only a dry run may
-- record and commit; its result cannot be exported, presigned, or reused
-- from, and "latest" passes over it.
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

CREATE ROLE regress_dry_ann LOGIN;
GRANT remora_user TO regress_dry_ann;
SELECT remora.grant_source('regress_dry_ann', 'src', 'data/*');
SELECT remora.grant_target('regress_dry_ann', 'out', '*');

-- the option's own form: true or false, else 22023
SET ROLE regress_dry_ann;
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"dry_run": "yes"}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"dry_run": 1}')$$);
SELECT pg_temp.try($$SELECT remora_submit('s3://src/data/', options => '{"dry_run": null}')$$);
SELECT remora_submit('s3://src/data/', options => '{"dry_run": false}') AS not_dry \gset
RESET ROLE;
SELECT spec -> 'options' AS not_dry_options FROM remora.jobs WHERE job_id = :not_dry;
SELECT remora_cancel(:not_dry);

-- a written result of ann's, driven through the protocol
SET ROLE regress_dry_ann;
SELECT remora_submit('s3://src/data/') AS first \gset
RESET ROLE;
SELECT attempt_id AS att, fencing_token AS tok
  FROM remora.claim('55555555-5555-5555-5555-555555555555') WHERE job_id = :first \gset
SELECT remora.commit(:'att', :tok, jsonb_build_object(
	'key', 'remora/' || :first || '/' || :'att' || '/manifest.json', 'etag', '"m"',
	'sha256', repeat('c', 64), 'members', 1, 'bytes', 3,
	'entries', jsonb_build_array(jsonb_build_object('path', 'a.bin', 'bucket', 'target',
		'key', 'remora/' || :first || '/' || :'att' || '/data/a.bin', 'size', 3,
		'sha256', repeat('a', 64), 'etag', '"e-a"', 'source', '{"etag": "\"s-a\""}'::jsonb))));

-- a dry run that reuses from it
SET ROLE regress_dry_ann;
SELECT remora_submit('s3://src/data/', options => '{"dry_run": true, "reuse_from": "latest"}') AS dry \gset
RESET ROLE;
SELECT spec -> 'options' @> jsonb_build_object('dry_run', true, 'reuse_from', :first) AS dry_options
  FROM remora.jobs WHERE job_id = :dry;
SELECT attempt_id AS datt, fencing_token AS dtok
  FROM remora.claim('55555555-5555-5555-5555-555555555555') WHERE job_id = :dry \gset
-- a plan is all or nothing of key, etag and sha256
SELECT pg_temp.try(format($$SELECT remora.checkpoint(%L, %s, '{"members": [{"path": "x", "bucket": "target", "size": 1, "key": "k"}]}')$$, :'datt', :dtok));
SELECT pg_temp.try(format($$SELECT remora.checkpoint(%L, %s, '{"members": [{"path": "x", "bucket": "target", "size": 1, "sha256": null}]}')$$, :'datt', :dtok));
-- a written member in a dry run: the commit is refused
SELECT remora.commit(:'datt', :dtok, jsonb_build_object(
	'key', 'remora/' || :dry || '/' || :'datt' || '/manifest.json', 'etag', '"d"',
	'sha256', repeat('d', 64), 'members', 1, 'bytes', 3,
	'entries', jsonb_build_array(jsonb_build_object('path', 'a.bin', 'bucket', 'target',
		'key', 'remora/' || :dry || '/' || :'datt' || '/data/a.bin', 'size', 3,
		'sha256', repeat('a', 64), 'etag', '"e-a"'))));
-- its plans: one checkpointed, one in the commit
SELECT remora.checkpoint(:'datt', :dtok, jsonb_build_object('members', jsonb_build_array(
	jsonb_build_object('path', 'a.bin', 'bucket', 'target', 'size', 3, 'action', 'reuse',
		'reused_from_job', :first, 'source', '{"etag": "\"s-a\""}'::jsonb))));
SELECT remora.commit(:'datt', :dtok, jsonb_build_object(
	'key', 'remora/' || :dry || '/' || :'datt' || '/manifest.json', 'etag', '"d"',
	'sha256', repeat('d', 64), 'members', 2, 'bytes', 8,
	'entries', jsonb_build_array(jsonb_build_object('path', 'new.bin', 'bucket', 'target',
		'size', 5, 'action', 'download', 'source', '{"etag": "\"s-n\""}'::jsonb))));
SELECT state FROM remora_jobs WHERE job_id = :dry;
SELECT path, key, size, sha256, etag, reused_from_job = :first AS from_first, action
  FROM remora_result(:dry);

-- nothing to export, presign, or reuse from
SET ROLE regress_dry_ann;
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'out', 'x')$$, :dry));
SELECT pg_temp.try(format($$SELECT remora_presign(%s, 'new.bin', '1 hour')$$, :dry));
SELECT pg_temp.try(format($$SELECT remora_submit('s3://src/data/', options => '{"reuse_from": %s}')$$, :dry));
-- "latest" passes over the dry run, to the written result
SELECT remora_submit('s3://src/data/', options => '{"reuse_from": "latest"}') AS next \gset
RESET ROLE;
SELECT spec #> '{options,reuse_from}' = to_jsonb(:first) AS from_first FROM remora.jobs WHERE job_id = :next;

-- a plan in a job that is not a dry run: the commit is refused
SELECT attempt_id AS natt, fencing_token AS ntok
  FROM remora.claim('55555555-5555-5555-5555-555555555555') WHERE job_id = :next \gset
SELECT remora.commit(:'natt', :ntok, jsonb_build_object(
	'key', 'remora/' || :next || '/' || :'natt' || '/manifest.json', 'etag', '"n"',
	'sha256', repeat('e', 64), 'members', 1, 'bytes', 5,
	'entries', jsonb_build_array(jsonb_build_object('path', 'new.bin', 'bucket', 'target',
		'size', 5, 'action', 'download'))));
SELECT state FROM remora_jobs WHERE job_id = :next;
-- a dry run's plans are never offered as earlier members (to a second
-- attempt of it): a.bin is the written one of the job it reuses from
SELECT path, key LIKE 'remora/' || :first || '/%' AS first_key, from_job = :first AS from_first
  FROM remora.earlier_members(:dry, gen_random_uuid(), ARRAY['a.bin', 'new.bin']);

DROP OWNED BY regress_dry_ann;
DROP ROLE regress_dry_ann;
