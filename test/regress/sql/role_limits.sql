--
-- Limits per role: remora.set_role_limits and remora.reset_role_limits
-- (remora_admin only), the defaults from remora.default_role_*, the view
-- remora_role_limits (a user sees their own row, an admin every role),
-- and max_queued, which refuses a submit or an export with 53400 naming
-- the limit and the count, but never an idempotent re-submit.
--
CREATE FUNCTION pg_temp.try(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st	text;
	msg text;
	det text;
	hnt text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
	RETURN st || ': ' || msg || coalesce(' (' || nullif(det, '') || ')', '')
		|| coalesce(' HINT: ' || nullif(hnt, ''), '');
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.try(text) TO PUBLIC;

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases, remora.role_limits;
SET remora.default_bucket = 'target';
SET remora.default_prefix = 'remora';
SET client_min_messages = error;

CREATE ROLE regress_lim_ann LOGIN;
CREATE ROLE regress_lim_ben LOGIN;
CREATE ROLE regress_lim_admin LOGIN;
GRANT remora_user TO regress_lim_ann, regress_lim_ben;
GRANT remora_admin TO regress_lim_admin;
SELECT remora.grant_target('regress_lim_ann', 'stable', 'models/*');
SELECT remora.grant_source('regress_lim_ann', 'src', 'data/*');

-- the settings, all reloadable, and their defaults
SELECT name, setting, context, min_val, max_val FROM pg_settings
 WHERE name IN ('remora.default_role_weight', 'remora.default_role_max_running',
				'remora.default_role_max_queued',
				'remora.default_role_max_bytes_per_second',
				'remora.max_bytes_per_second')
 ORDER BY name;

-- a user may not set limits, nor reset them: 42501
SET ROLE regress_lim_ann;
SELECT pg_temp.try($$SELECT remora.set_role_limits('regress_lim_ann', max_queued => 100)$$);
SELECT pg_temp.try($$SELECT remora.reset_role_limits('regress_lim_ann')$$);
RESET ROLE;

-- bad arguments: an unknown role is 42704, a null one 22004, a value out
-- of range 22023 naming it
SET ROLE regress_lim_admin;
SELECT pg_temp.try($$SELECT remora.set_role_limits('regress_lim_nobody', weight => 2)$$);
SELECT pg_temp.try($$SELECT remora.reset_role_limits('regress_lim_nobody')$$);
SELECT pg_temp.try($$SELECT remora.set_role_limits(NULL, weight => 2)$$);
SELECT pg_temp.try($$SELECT remora.reset_role_limits(NULL)$$);
SELECT pg_temp.try($$SELECT remora.set_role_limits('regress_lim_ann', weight => 0)$$);
SELECT pg_temp.try($$SELECT remora.set_role_limits('regress_lim_ann', weight => 1001)$$);
SELECT pg_temp.try($$SELECT remora.set_role_limits('regress_lim_ann', max_running => -1)$$);
SELECT pg_temp.try($$SELECT remora.set_role_limits('regress_lim_ann', max_queued => -1)$$);
SELECT pg_temp.try($$SELECT remora.set_role_limits('regress_lim_ann', max_bytes_per_second => -1)$$);
SELECT pg_temp.try($$SELECT remora.set_role_limits('regress_lim_ann', weight => 2, max_queued => -5)$$);
SELECT count(*) AS rows_after_errors FROM remora.role_limits;

-- set, then NULL leaves a limit as it is
SELECT remora.set_role_limits('regress_lim_ann', weight => 3, max_queued => 2);
SELECT remora.set_role_limits('regress_lim_ann', max_running => 4);
SELECT remora.set_role_limits('regress_lim_ann', max_bytes_per_second => 5000000000);
SELECT remora.set_role_limits('regress_lim_ann');
SELECT role_id::regrole, weight, max_running, max_queued, max_bytes_per_second
  FROM remora.role_limits;
-- nothing to set: no row
SELECT remora.set_role_limits('regress_lim_ben');
SELECT count(*) AS ben_rows FROM remora.role_limits
 WHERE role_id = 'regress_lim_ben'::regrole;
RESET ROLE;

-- max_queued: ann may have two jobs waiting
SET ROLE regress_lim_ann;
SELECT remora_submit('s3://src/data/', options => '{"max_attempts": 2}', idempotency_key => 'one') AS job \gset
SELECT remora_submit('https://example.com/two.bin', idempotency_key => 'two') AS two \gset
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/three.bin')$$);
-- a re-submit of a job that exists returns it, limit or not
SELECT remora_submit('https://example.com/two.bin', idempotency_key => 'two') = :two AS same_job;
-- a reused key is still 23505, not the limit
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/other.bin', idempotency_key => 'two')$$);
SELECT count(*) AS ann_jobs FROM remora_jobs;

-- the view: a user sees their own row only, an admin every role with
-- limits or unfinished jobs (and itself)
SELECT * FROM remora_role_limits;
RESET ROLE;
SET ROLE regress_lim_ben;
SELECT * FROM remora_role_limits;
SELECT count(*) AS limits_rows_ben_reads FROM remora.role_limits;
RESET ROLE;
SET ROLE regress_lim_admin;
SELECT * FROM remora_role_limits WHERE role LIKE 'regress_lim%' ORDER BY role;
RESET ROLE;

-- a claimed job is running: it leaves room for one more
SELECT attempt_id AS att, fencing_token AS tok
  FROM remora.claim('33333333-3333-3333-3333-333333333333') WHERE job_id = :job \gset
SET ROLE regress_lim_ann;
SELECT role, running, queued FROM remora_role_limits;
SELECT remora_submit('https://example.com/three.bin') IS NOT NULL AS submitted;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/four.bin')$$);
RESET ROLE;

-- exports count for their owner: the job commits, and its export is refused
-- while ann has two jobs waiting
SELECT remora.checkpoint(:'att', :tok, jsonb_build_object('members', jsonb_build_array(
	jsonb_build_object('path', 'a.bin', 'bucket', 'target',
		'key', 'remora/' || :job || '/' || :'att' || '/data/a.bin', 'size', 3,
		'sha256', repeat('a', 64), 'etag', '"e-a"'))));
SELECT remora.commit(:'att', :tok, jsonb_build_object(
	'key', 'remora/' || :job || '/' || :'att' || '/manifest.json', 'etag', '"m"',
	'sha256', repeat('c', 64), 'members', 1, 'bytes', 3));
SET ROLE regress_lim_ann;
SELECT pg_temp.try(format($$SELECT remora_export(%s, 'stable', 'models/x', idempotency_key => 'x')$$, :job));
RESET ROLE;
SET ROLE regress_lim_admin;
SELECT remora.set_role_limits('regress_lim_ann', max_queued => 3);
RESET ROLE;
SET ROLE regress_lim_ann;
SELECT remora_export(:job, 'stable', 'models/x', idempotency_key => 'x') AS export \gset
SELECT role, running, queued FROM remora_role_limits;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/four.bin')$$);
-- the export's re-submit is not refused either
SELECT remora_export(:job, 'stable', 'models/x', idempotency_key => 'x') = :export AS same_export;
-- a cancelled job makes room
SELECT remora_cancel(:two);
SELECT remora_submit('https://example.com/four.bin') IS NOT NULL AS submitted;
RESET ROLE;

-- the default: remora.default_role_max_queued holds for a role without a
-- limit of its own (ben); ann's own limit holds for ann
\getenv abs_srcdir PG_ABS_SRCDIR
\set lim_wait :abs_srcdir '/sql/role_limits_wait.psql'
ALTER SYSTEM SET remora.default_role_max_queued = 1;
SELECT pg_reload_conf();
SELECT '1' AS lim_want, clock_timestamp() + interval '60 s' AS lim_deadline \gset
\set ECHO none
\i :lim_wait
\set ECHO all
SET ROLE regress_lim_ben;
SELECT remora_submit('https://example.com/b1.bin') IS NOT NULL AS submitted;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/b2.bin')$$);
SELECT role, max_queued, queued FROM remora_role_limits;
RESET ROLE;
-- a role's own 0 is no limit, whatever the default
SET ROLE regress_lim_admin;
SELECT remora.set_role_limits('regress_lim_ben', max_queued => 0);
SET ROLE regress_lim_ben;
SELECT remora_submit('https://example.com/b2.bin') IS NOT NULL AS submitted;
-- back to the default: refused again
SET ROLE regress_lim_admin;
SELECT remora.reset_role_limits('regress_lim_ben');
SET ROLE regress_lim_ben;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/b3.bin')$$);
SELECT role, weight, max_running, max_queued, max_bytes_per_second, queued
  FROM remora_role_limits;
RESET ROLE;
ALTER SYSTEM RESET remora.default_role_max_queued;
SELECT pg_reload_conf();
SELECT '0' AS lim_want, clock_timestamp() + interval '60 s' AS lim_deadline \gset
\set ECHO none
\i :lim_wait
\set ECHO all
SET ROLE regress_lim_ben;
SELECT remora_submit('https://example.com/b3.bin') IS NOT NULL AS submitted;
RESET ROLE;

-- a dropped role's row is not shown, and the next set or reset deletes
-- it, so that no later role with the same oid inherits it
CREATE ROLE regress_lim_gone;
SET ROLE regress_lim_admin;
SELECT remora.set_role_limits('regress_lim_gone', weight => 7);
RESET ROLE;
SELECT 'regress_lim_gone'::regrole::oid AS gone \gset
DROP ROLE regress_lim_gone;
SET ROLE regress_lim_admin;
SELECT count(*) AS gone_shown FROM remora_role_limits WHERE role IS NULL OR role = 'regress_lim_gone';
SELECT count(*) AS gone_rows FROM remora.role_limits WHERE role_id = :gone;
SELECT remora.reset_role_limits('regress_lim_ann');
SELECT count(*) AS gone_rows FROM remora.role_limits WHERE role_id = :gone;
-- reset: back to the defaults, the row is gone
SELECT count(*) AS ann_rows FROM remora.role_limits;
SELECT * FROM remora_role_limits WHERE role = 'regress_lim_ann';
RESET ROLE;

-- clean up
TRUNCATE remora.target_grants, remora.source_grants, remora.role_limits;
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases, remora.export_keys;
DROP ROLE regress_lim_ann, regress_lim_ben, regress_lim_admin;
