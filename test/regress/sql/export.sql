--
-- Export to stable keys: remora_export validates and records before
-- dispatch; exports run through the jobs' protocol (claim, checkpoint,
-- commit, fail, cancel, reconcile); an ambiguous outcome is
-- outcome_unknown and never retried; remora_export_resolve verifies (owner
-- or admin), retries or fails (admin only).  Row-level security as jobs.
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

CREATE ROLE regress_exp_ann LOGIN;
CREATE ROLE regress_exp_ben LOGIN;
CREATE ROLE regress_exp_admin LOGIN;
GRANT remora_user TO regress_exp_ann, regress_exp_ben;
GRANT remora_admin, remora_user TO regress_exp_admin;
GRANT remora_worker TO regress_exp_admin;
SELECT remora.grant_target('regress_exp_ann', 'stable', 'models/*');
SELECT remora.grant_source('regress_exp_ann', 'src', 'data/*');

-- a committed job of ann with two members, driven through the protocol
SET ROLE regress_exp_ann;
SELECT remora_submit('s3://src/data/', options => '{"max_attempts": 2}') AS job \gset
SELECT remora_submit('https://example.com/never.bin') AS queued_job \gset
RESET ROLE;
SELECT attempt_id AS att, fencing_token AS tok
  FROM remora.claim('22222222-2222-2222-2222-222222222222') WHERE job_id = :job \gset
SELECT remora.checkpoint(:'att', :tok, jsonb_build_object('members', jsonb_build_array(
	jsonb_build_object('path', 'a.bin', 'bucket', 'target',
		'key', 'remora/' || :job || '/' || :'att' || '/data/a.bin', 'size', 3,
		'sha256', repeat('a', 64), 'etag', '"e-a"'),
	jsonb_build_object('path', 'sub/b.bin', 'bucket', 'target',
		'key', 'remora/' || :job || '/' || :'att' || '/data/sub/b.bin', 'size', 4,
		'sha256', repeat('b', 64), 'etag', '"e-b"'))));
SELECT remora.commit(:'att', :tok, jsonb_build_object(
	'key', 'remora/' || :job || '/' || :'att' || '/manifest.json', 'etag', '"m"',
	'sha256', repeat('c', 64), 'members', 2, 'bytes', 7));

-- validation: every bad argument is 22023 naming it, nulls are 22004
SET ROLE regress_exp_ann;
SELECT pg_temp.try($$SELECT remora_export(NULL, 'stable', 'models/x')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'Bad_Bucket', 'models/x')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', NULL)$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', '/abs')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/../x')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/x', '[]')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/x', '{"colour": 1}')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/x', '{"if_exists": "replace"}')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/x', '{"if_exists": 1}')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/x', '{"max_attempts": 0}')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/x', '{"priority": 1.5}')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/x', '{"max_attempts": 2.0}')$$);
SELECT pg_temp.try(format($$SELECT remora_export(1, 'stable', 'models/x', %L)$$,
	jsonb_build_object('label', repeat('x', 257))));
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/x', '{"label": 7}')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/x', '{"label": "a\u001bb"}')$$);
SELECT pg_temp.try(format($$SELECT remora_export(1, 'stable', 'models/x', %L)$$,
	jsonb_build_object('label', repeat('é', 129))));
SELECT pg_temp.try($$SELECT remora_export_resolve(NULL, 'verify')$$);
SELECT pg_temp.try($$SELECT remora_export(1, 'stable', 'models/x', '{}', '')$$);
-- P0002: a job that does not exist, is not succeeded
SELECT pg_temp.try($$SELECT remora_export(999, 'stable', 'models/x')$$);
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/x')$$, :queued_job));
-- 42501: no target grant; the area of Remora's own jobs
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'other', 'models/x')$$, :job));
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'elsewhere')$$, :job));
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'target', 'remora/%s')$$, :job, :job));
RESET ROLE;
SELECT count(*) AS exports_after_errors FROM remora.exports;

-- a good export: recorded before dispatch, queued like a job
SET ROLE regress_exp_ann;
SELECT remora_export(:job, 'stable', 'models/llama/', '{"if_exists": "overwrite"}', 'k1') AS ex \gset
SELECT remora_export(:job, 'stable', 'models/llama', '{"if_exists": "overwrite"}', 'k1') = :ex AS replay_same;
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/other', '{}', 'k1')$$, :job));
SELECT pg_temp.try(format($$SELECT remora_submit('https://example.com/x', idempotency_key => 'k1')$$));
SELECT export_id = :ex AS id, job_id = :job AS job, owner, bucket, prefix, state,
	   output_digest = repeat('c', 64) AS output_digest,
	   length(publication_digest) AS pub_len, length(source_digest) AS src_len,
	   members, bytes, members_done, "references", if_exists, verifying
  FROM remora_exports;
-- exports are not jobs in the job views
SELECT count(*) AS jobs_listed FROM remora_jobs;
SELECT queued AS jobs_queued FROM remora_stats;
RESET ROLE;

-- ben sees neither the export nor can he act on it
SET ROLE regress_exp_ben;
SELECT count(*) AS ben_sees FROM remora_exports;
SELECT pg_temp.try(format($$SELECT remora_export_resolve(%s, 'verify')$$, :ex));
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/x')$$, :job));
RESET ROLE;

-- the worker's claim says what to publish, not the members themselves:
-- the worker reads them a page at a time (remora.export_members, keyset by
-- path); checkpoints record conclusive answers; a lost attempt is
-- outcome_unknown, never retried
SELECT job_id = :ex AS is_export, spec #>> '{source,kind}' AS kind,
	   spec -> 'export' AS xspec, attempt_id AS xatt, fencing_token AS xtok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :ex \gset
SELECT :'is_export', :'kind', :'xspec'::jsonb - 'output_digest' AS export_spec,
	   :'xspec'::jsonb ->> 'output_digest' = repeat('c', 64) AS output_digest,
	   :'xspec'::jsonb ? 'members' AS spec_holds_members;
SELECT path, bucket, key LIKE 'remora/' || :job || '/%/data/' || path AS member_key,
	   size, sha256 = repeat(left(path, 1), 64) AS sha256, etag, ref_etag
  FROM remora.export_members(:'xatt', :xtok, NULL, 1);
SELECT path FROM remora.export_members(:'xatt', :xtok, 'a.bin', 1);
SELECT count(*) AS after_the_last FROM remora.export_members(:'xatt', :xtok, 'sub/b.bin');
SELECT string_agg(path, ',') AS whole_page FROM remora.export_members(:'xatt', :xtok);
-- a stale token gets no rows (as its checkpoint and commit would be refused);
-- max_rows is bounded; only a worker may read them
SELECT count(*) AS stale_token FROM remora.export_members(:'xatt', :xtok + 1);
SELECT count(*) AS not_an_export FROM remora.export_members(:'att', :tok);
SELECT pg_temp.try(format($$SELECT * FROM remora.export_members(%L, %s, NULL, 0)$$, :'xatt', :xtok));
SELECT pg_temp.try(format($$SELECT * FROM remora.export_members(%L, %s, NULL, 10001)$$, :'xatt', :xtok));
SET ROLE regress_exp_ann;
SELECT pg_temp.try(format($$SELECT * FROM remora.export_members(%L, %s)$$, :'xatt', :xtok));
-- replaying the key while the export runs returns it
SELECT remora_export(:job, 'stable', 'models/llama', '{"if_exists": "overwrite"}', 'k1') = :ex
	AS replay_running;
RESET ROLE;
SELECT cleaned_at IS NOT NULL AS nothing_to_clean FROM remora.attempts WHERE job_id = :ex;
SELECT remora.checkpoint(:'xatt', :xtok, '{"references": [{"path": "a.bin", "key": "models/llama/a.bin", "etag": "\"e-a\"", "version_id": "v1", "size": 3, "outcome": "copied"}]}');
SELECT pg_temp.try(format($$SELECT remora.checkpoint(%L, %s, '{"references": [{"path": "a.bin", "etag": 1}]}')$$, :'xatt', :xtok));
SELECT pg_temp.try(format($$SELECT remora.checkpoint(%L, %s, '{"references": {"path": "a.bin"}}')$$, :'xatt', :xtok));
SELECT members_done, "references" FROM remora_exports;
-- the page now carries the recorded answer
SELECT path, ref_etag FROM remora.export_members(:'xatt', :xtok);
-- a descriptor that is not one of an export's
SELECT pg_temp.try(format($$SELECT remora.commit(%L, %s, '{"references": []}')$$, :'xatt', :xtok));
SELECT pg_temp.try(format($$SELECT remora.commit(%L, %s, '[]')$$, :'xatt', :xtok));
SELECT pg_temp.try(format($$SELECT remora.commit(%L, %s, '{"sha256": "c"}')$$, :'xatt', :xtok));
-- a commit without every member's answer is refused
SELECT remora.commit(:'xatt', :xtok, jsonb_build_object('sha256', repeat('c', 64)));
-- and so is it in a batch, where an export's descriptor is its own
SELECT committed AS batched FROM remora.commit_many(ARRAY[:'xatt']::uuid[], ARRAY[:xtok]::bigint[],
	ARRAY[jsonb_build_object('sha256', repeat('c', 64))]);
SELECT remora.commit(:'xatt', :xtok, jsonb_build_object('sha256', repeat('d', 64),
	'references', '[{"path": "sub/b.bin", "key": "models/llama/sub/b.bin", "etag": "\"e-b\"", "size": 4}]'::jsonb));
-- lease lapses: lost mid-dispatch
UPDATE remora.leases SET expires_at = now() - interval '1 second';
SELECT remora.reconcile() > 0 AS repaired;
SELECT state, attempts_used FROM remora_exports;
SELECT count(*) AS claimed_again FROM remora.claim('33333333-3333-3333-3333-333333333333', 5);
SET ROLE regress_exp_ann;
SELECT remora_export(:job, 'stable', 'models/llama', '{"if_exists": "overwrite"}', 'k1') = :ex
	AS replay_outcome_unknown;
RESET ROLE;

-- the worker says a copy went out without a conclusive answer
SET ROLE regress_exp_ann;
SELECT remora_export(:job, 'stable', 'models/two', '{"if_exists": "fail"}') AS ex2 \gset
RESET ROLE;
SELECT attempt_id AS x2att, fencing_token AS x2tok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :ex2 \gset
SELECT remora.fail(:'x2att', :x2tok, '{"class": "outcome_unknown", "message": "copy of a.bin: timeout after sending"}', true);
SELECT count(*) AS claimed_again FROM remora.claim('33333333-3333-3333-3333-333333333333', 5);

-- resolve: owner may verify, not retry or fail; bad action; wrong state
SET ROLE regress_exp_ann;
SELECT pg_temp.try(format($$SELECT remora_export_resolve(%s, 'retry')$$, :ex2));
SELECT pg_temp.try(format($$SELECT remora_export_resolve(%s, 'fail')$$, :ex2));
SELECT pg_temp.try(format($$SELECT remora_export_resolve(%s, 'guess')$$, :ex2));
SELECT pg_temp.try(format($$SELECT remora_export_resolve(%s, NULL)$$, :ex2));
SELECT pg_temp.try(format($$SELECT remora_export_resolve(%s, 'verify')$$, 999));
SELECT pg_temp.try(format($$SELECT remora_export_resolve(%s, 'verify')$$, :job));
SELECT remora_export_resolve(:ex2, 'verify');
SELECT pg_temp.try(format($$SELECT remora_export_resolve(%s, 'verify')$$, :ex2));
RESET ROLE;
-- the verify attempt finds a member that differs: outcome_unknown again
SELECT attempt_id AS vatt, fencing_token AS vtok, spec #>> '{export,mode}' AS mode
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :ex2 \gset
SELECT :'mode' AS mode, :vtok > :x2tok AS greater_token;
SELECT remora.fail(:'vatt', :vtok, '{"class": "verify_mismatch", "message": "sub/b.bin is missing"}', true);
-- verify again, and this time every member is there
SET ROLE regress_exp_ann;
SELECT remora_export_resolve(:ex2, 'verify');
RESET ROLE;
SELECT attempt_id AS vatt, fencing_token AS vtok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :ex2 \gset
SELECT remora.commit(:'vatt', :vtok, jsonb_build_object('sha256', repeat('c', 64),
	'references', '[{"path": "a.bin", "key": "models/two/a.bin", "etag": "\"e-a\"", "size": 3, "outcome": "present"},
				   {"path": "sub/b.bin", "key": "models/two/sub/b.bin", "etag": "\"e-b\"", "size": 4, "outcome": "present"}]'::jsonb));
SELECT remora.commit(:'vatt', :vtok, jsonb_build_object('sha256', repeat('c', 64))) AS repeat_commit;
SET ROLE regress_exp_ann;
SELECT export_id = :ex2 AS ex2, state, members_done, jsonb_array_length(decisions) AS decisions,
	   decisions -> 0 ->> 'action' AS first, decisions -> 0 ->> 'by' AS by
  FROM remora_exports WHERE export_id = :ex2;
-- each attempt's ledger: what it was to publish, and who queued it
SELECT state, error ->> 'class' AS class, ledger ->> 'mode' AS mode,
	   ledger ->> 'output_digest' = repeat('c', 64) AS output_digest,
	   ledger ->> 'members' AS members, ledger #>> '{decision,action}' AS decision,
	   ledger #>> '{decision,by}' AS decided_by
  FROM remora_export_attempts WHERE export_id = :ex2 ORDER BY attempt_no;
RESET ROLE;

-- an administrator retries or fails the first export
SET ROLE regress_exp_admin;
SELECT remora_export_resolve(:ex, 'retry');
RESET ROLE;
SELECT attempt_id AS ratt, fencing_token AS rtok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :ex \gset
-- the replacement reads the answer the lost attempt recorded; the zombie
-- reads nothing any more
SELECT path, ref_etag AS earlier_ref FROM remora.export_members(:'ratt', :rtok);
SELECT count(*) AS zombie_reads FROM remora.export_members(:'xatt', :xtok);
-- the lost first attempt, back like a zombie, commits: refused (stale token)
SELECT remora.commit(:'xatt', :xtok, jsonb_build_object('sha256', repeat('c', 64),
	'references', '[{"path": "sub/b.bin", "key": "models/llama/sub/b.bin", "etag": "\"e-b\"", "size": 4}]'::jsonb))
	AS zombie_commit, :rtok > :xtok AS greater_token;
-- cancel wins over a commit that comes after it
SET ROLE regress_exp_ann;
SELECT remora_cancel(:ex);
RESET ROLE;
SELECT remora.commit(:'ratt', :rtok, jsonb_build_object('sha256', repeat('c', 64),
	'references', '[{"path": "sub/b.bin", "key": "models/llama/sub/b.bin", "etag": "\"e-b\"", "size": 4}]'::jsonb));
SELECT state FROM remora_exports WHERE export_id = :ex;
SET ROLE regress_exp_ann;
SELECT remora_export(:job, 'stable', 'models/llama', '{"if_exists": "overwrite"}', 'k1') = :ex
	AS replay_cancelled;
RESET ROLE;
SET ROLE regress_exp_admin;
SELECT pg_temp.try(format($$SELECT remora_export_resolve(%s, 'fail')$$, :ex));
RESET ROLE;

-- an admin's fail of an outcome_unknown export is recorded
SET ROLE regress_exp_ann;
SELECT remora_export(:job, 'stable', 'models/three') AS ex3 \gset
RESET ROLE;
SELECT attempt_id AS x3att, fencing_token AS x3tok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :ex3 \gset
SELECT remora.fail(:'x3att', :x3tok, '{"class": "outcome_unknown", "message": "reset after sending"}', false);
SET ROLE regress_exp_admin;
SELECT remora_export_resolve(:ex3, 'fail');
SELECT state, last_error ->> 'class' AS class, last_error ->> 'message' AS message,
	   decisions -> 0 ->> 'by' AS by
  FROM remora_exports WHERE export_id = :ex3;
RESET ROLE;

-- a stopping worker hands an export back: outcome_unknown, not retrying
SET ROLE regress_exp_ann;
SELECT remora_export(:job, 'stable', 'models/stop') AS ex5 \gset
RESET ROLE;
SELECT attempt_id AS x5att, fencing_token AS x5tok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :ex5 \gset
SELECT remora.fail(:'x5att', :x5tok, '{"class": "worker", "message": "the worker was stopped"}', true);

-- a conclusive refusal is retried under the budget, then fails
SET ROLE regress_exp_ann;
SELECT remora_export(:job, 'stable', 'models/four', '{"max_attempts": 1}') AS ex4 \gset
RESET ROLE;
SELECT attempt_id AS x4att, fencing_token AS x4tok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :ex4 \gset
SELECT remora.fail(:'x4att', :x4tok, '{"class": "exists", "message": "models/four/a.bin exists"}', false);

-- the same idempotency key replayed while retrying and once failed
SET ROLE regress_exp_ann;
SELECT remora_export(:job, 'stable', 'models/six', '{"max_attempts": 2}', 'k6') AS ex6 \gset
RESET ROLE;
SELECT attempt_id AS x6att, fencing_token AS x6tok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :ex6 \gset
SELECT remora.fail(:'x6att', :x6tok, '{"class": "s3", "message": "503 SlowDown"}', true);
SET ROLE regress_exp_ann;
SELECT state, remora_export(:job, 'stable', 'models/six', '{"max_attempts": 2}', 'k6') = :ex6
	AS replay_retrying
  FROM remora_exports WHERE export_id = :ex6;
RESET ROLE;
UPDATE remora.queue SET not_before = now() WHERE job_id = :ex6;	-- the backoff passed
SELECT attempt_id AS x6att, fencing_token AS x6tok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :ex6 \gset
SELECT remora.fail(:'x6att', :x6tok, '{"class": "s3", "message": "403 AccessDenied"}', false);
SET ROLE regress_exp_ann;
SELECT state, attempts_used, remora_export(:job, 'stable', 'models/six', '{"max_attempts": 2}', 'k6') = :ex6
	AS replay_failed
  FROM remora_exports WHERE export_id = :ex6;
SELECT count(*) > 0 AS ann_sees_her_attempts FROM remora_export_attempts;
RESET ROLE;
-- nobody else reads an export's attempts
SET ROLE regress_exp_ben;
SELECT count(*) AS ben_sees_attempts FROM remora_export_attempts;
RESET ROLE;

-- A key is its publisher's.  ann published models/llama/a.bin (the
-- "copied" answer checkpointed above): ben's export onto it is refused at
-- remora_export, 42501 naming the key, whatever if_exists says; a key
-- whose export published nothing (models/two, found "present") binds no
-- one; ben's new export reserves its keys, so ann cannot export onto them
-- while it runs; the worker is told per member what the owner may
-- overwrite; ann exports onto her own key again; an administrator exports
-- onto anyone's.
SELECT remora.grant_target('regress_exp_ben', 'stable', 'models/*');
SELECT remora.grant_source('regress_exp_ben', 'src', 'data/*');
SET ROLE regress_exp_ben;
SELECT remora_submit('s3://src/data/') AS bjob \gset
RESET ROLE;
SELECT attempt_id AS batt, fencing_token AS btok
  FROM remora.claim('22222222-2222-2222-2222-222222222222', 5) WHERE job_id = :bjob \gset
SELECT remora.checkpoint(:'batt', :btok, jsonb_build_object('members', jsonb_build_array(
	jsonb_build_object('path', 'a.bin', 'bucket', 'target',
		'key', 'remora/' || :bjob || '/' || :'batt' || '/data/a.bin', 'size', 3,
		'sha256', repeat('a', 64), 'etag', '"e-a2"'),
	jsonb_build_object('path', 'sub/b.bin', 'bucket', 'target',
		'key', 'remora/' || :bjob || '/' || :'batt' || '/data/sub/b.bin', 'size', 4,
		'sha256', repeat('b', 64), 'etag', '"e-b2"'))));
SELECT remora.commit(:'batt', :btok, jsonb_build_object(
	'key', 'remora/' || :bjob || '/' || :'batt' || '/manifest.json', 'etag', '"m"',
	'sha256', repeat('e', 64), 'members', 2, 'bytes', 7));
SELECT bucket, key, pg_get_userbyid(owner) AS owner, published
  FROM remora.export_keys ORDER BY bucket, key;
SET ROLE regress_exp_ben;
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/llama', '{"if_exists": "overwrite"}')$$, :bjob));
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/llama/', '{"if_exists": "skip_identical"}')$$, :bjob));
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/llama')$$, :bjob));
SELECT remora_export(:bjob, 'stable', 'models/two', '{"if_exists": "overwrite"}') AS bex \gset
RESET ROLE;
-- the refused ones left no export behind
SELECT count(*) AS bens_exports FROM remora.exports e
  JOIN remora.jobs j ON j.job_id = e.export_id
 WHERE j.owner = 'regress_exp_ben'::regrole;
SET ROLE regress_exp_ann;
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/two', '{"if_exists": "overwrite"}')$$, :job));
RESET ROLE;
SELECT attempt_id AS bxatt, fencing_token AS bxtok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :bex \gset
SELECT path, key LIKE 'remora/' || :bjob || '/%' AS member_key, may_overwrite
  FROM remora.export_members(:'bxatt', :bxtok);
SELECT remora.commit(:'bxatt', :bxtok, jsonb_build_object('sha256', repeat('e', 64),
	'references', '[{"path": "a.bin", "key": "models/two/a.bin", "etag": "\"e-a2\"", "size": 3, "outcome": "copied"},
				   {"path": "sub/b.bin", "key": "models/two/sub/b.bin", "etag": "\"e-b2\"", "size": 4, "outcome": "copied"}]'::jsonb));
SELECT bucket, key, pg_get_userbyid(owner) AS owner, published, export_id = :bex AS bens
  FROM remora.export_keys WHERE key LIKE 'models/two/%' ORDER BY key;
-- ann's own key again: a.bin she may overwrite, sub/b.bin (never written
-- by her) she may not
SET ROLE regress_exp_ann;
SELECT remora_export(:job, 'stable', 'models/llama', '{"if_exists": "overwrite"}') AS aex \gset
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/two', '{"if_exists": "overwrite"}')$$, :job));
RESET ROLE;
SELECT attempt_id AS axatt, fencing_token AS axtok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :aex \gset
SELECT path, may_overwrite FROM remora.export_members(:'axatt', :axtok);
-- an administrator exports onto ben's keys, may overwrite every member,
-- and publishes them
SET ROLE regress_exp_admin;
SELECT remora_export(:job, 'stable', 'models/two', '{"if_exists": "overwrite"}') AS adex \gset
RESET ROLE;
SELECT attempt_id AS adatt, fencing_token AS adtok
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 5) WHERE job_id = :adex \gset
SELECT path, may_overwrite FROM remora.export_members(:'adatt', :adtok);
SELECT remora.checkpoint(:'adatt', :adtok, '{"references": [{"path": "a.bin", "key": "models/two/a.bin", "etag": "\"e-a\"", "size": 3, "outcome": "copied"}]}');
SELECT key, pg_get_userbyid(owner) AS owner, published
  FROM remora.export_keys WHERE key LIKE 'models/two/%' ORDER BY key;
SET ROLE regress_exp_ben;
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/two', '{"if_exists": "overwrite"}')$$, :bjob));
RESET ROLE;

-- a hard delete of the exported job leaves the exports alone
SET ROLE regress_exp_ann;
SELECT remora_delete(:job, true);
SELECT export_id = :ex2 AS ex2, state FROM remora_exports WHERE export_id = :ex2;
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/five')$$, :job));
RESET ROLE;

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SELECT remora.revoke_target('regress_exp_ann', 'stable', 'models/*');
SELECT remora.revoke_source('regress_exp_ann', 'src', 'data/*');
SELECT remora.revoke_target('regress_exp_ben', 'stable', 'models/*');
SELECT remora.revoke_source('regress_exp_ben', 'src', 'data/*');
TRUNCATE remora.export_keys;
DROP ROLE regress_exp_ann, regress_exp_ben, regress_exp_admin;
