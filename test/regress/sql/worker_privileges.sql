--
-- The worker protocol is closed in SQL: remora_worker holds EXECUTE on the
-- functions a worker calls and no privilege on any table, sequence or view
-- of the extension.  A role granted remora_worker runs a job's whole life
-- through those functions, and cannot read or write a table.
--
CREATE FUNCTION pg_temp.try(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st	text;
	msg text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
	RETURN st || ': ' || msg;
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.try(text) TO PUBLIC;

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SET remora.default_bucket = 'target';

-- every relation of the extension: those in schema remora, and the views
-- it installs in the schema of its choice
CREATE TEMP VIEW ext_relations AS
SELECT c.oid, c.relname, c.relkind
  FROM pg_class c
 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
   AND (c.relnamespace = 'remora'::regnamespace
		OR c.oid IN (SELECT d.objid FROM pg_depend d
					  WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'
						AND d.refclassid = 'pg_extension'::regclass
						AND d.refobjid = (SELECT e.oid FROM pg_extension e
										   WHERE e.extname = 'remora')));
SELECT count(*) FILTER (WHERE relkind <> 'S') > 20 AS many_relations,
	   count(*) FILTER (WHERE relkind = 'S') > 0 AS some_sequences
  FROM ext_relations;

-- no table or view privilege, on the table or on any column: no rows
SELECT r.relname, p.priv
  FROM ext_relations r
 CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE',
						 'REFERENCES', 'TRIGGER']) p(priv)
 WHERE r.relkind <> 'S' AND has_table_privilege('remora_worker', r.oid, p.priv)
UNION ALL
SELECT r.relname, 'column ' || p.priv
  FROM ext_relations r
 CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'REFERENCES']) p(priv)
 WHERE r.relkind <> 'S'
   AND has_any_column_privilege('remora_worker', r.oid, p.priv)
UNION ALL
SELECT r.relname, 'sequence ' || p.priv
  FROM ext_relations r
 CROSS JOIN unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) p(priv)
 WHERE r.relkind = 'S' AND has_sequence_privilege('remora_worker', r.oid, p.priv)
ORDER BY 1, 2;
-- and no policy names it
SELECT tablename, policyname FROM pg_policies
 WHERE schemaname = 'remora' AND 'remora_worker' = ANY (roles);

-- the functions remora_worker may execute, all of them: the protocol and
-- what a worker records and reads besides
SELECT p.oid::regprocedure AS executable
  FROM pg_proc p
 WHERE p.pronamespace = 'remora'::regnamespace
   AND has_function_privilege('remora_worker', p.oid, 'EXECUTE')
 ORDER BY 1::text;
-- each SECURITY DEFINER with search_path pinned, but for worker_settings
-- (C, which reads the settings itself and checks its caller)
SELECT p.oid::regprocedure AS not_definer_pinned
  FROM pg_proc p
 WHERE p.pronamespace = 'remora'::regnamespace
   AND has_function_privilege('remora_worker', p.oid, 'EXECUTE')
   AND NOT (p.prosecdef AND p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'])
 ORDER BY 1::text;

-- a role granted remora_worker runs a job through the functions alone
CREATE ROLE regress_wp_worker LOGIN IN ROLE remora_worker;
SELECT remora_submit('https://example.com/model.bin') AS job \gset
SELECT remora.register_source_endpoint('regress-wp', 'https://store.example.com',
	'eu-1', false, 'AKIDWP', 'wp-secret');

SET ROLE regress_wp_worker;
SELECT remora.start_incarnation('77777777-7777-4777-8777-777777777777', 4242,
	'external', 'host-a', 'label-a', '0.5.0');
SELECT pg_temp.try($$SELECT remora.start_incarnation('77777777-7777-4777-8777-777777777777',
	1, 'external', NULL, NULL, NULL)$$) AS again;
SELECT pg_temp.try($$SELECT remora.start_incarnation('77777777-7777-4777-8777-777777777778',
	1, 'launcher', NULL, NULL, NULL)$$) AS bad_kind;
-- a background worker's incarnation (no host, no label)
SELECT remora.start_incarnation('77777777-7777-4777-8777-777777777778', 4343,
	'worker', NULL, NULL, '0.5.0');
SELECT remora.heartbeat('77777777-7777-4777-8777-777777777777') AS alive;
SELECT job_id = :job AS claimed, attempt_id AS att1, fencing_token AS tok1
  FROM remora.claim('77777777-7777-4777-8777-777777777777', 1) \gset
SELECT :'claimed'::boolean AS claimed;
-- a member staged by the first attempt, which then fails
SELECT remora.checkpoint(:'att1', :tok1, jsonb_build_object('members', jsonb_build_array(
	jsonb_build_object('path', 'model.bin', 'bucket', 'target', 'key', 'k/model.bin',
					   'size', 7, 'sha256', repeat('ab', 32), 'etag', '"e1"'))));
SELECT remora.fail(:'att1', :tok1, '{"class": "network"}', true);
RESET ROLE;
UPDATE remora.queue SET not_before = now() - interval '1 second' WHERE job_id = :job;
UPDATE remora.jobs SET not_before = now() - interval '1 second' WHERE job_id = :job;
SET ROLE regress_wp_worker;
SELECT attempt_id AS att2 FROM remora.claim('77777777-7777-4777-8777-777777777777', 1) \gset
-- the second attempt finds the first one's member (by its place in paths),
-- the first finds none of its own
SELECT pos, path, key, etag, size, sha256 = repeat('ab', 32) AS sha
  FROM remora.earlier_members(:job, :'att2', ARRAY['missing.bin', 'model.bin', 'model.bin']);
SELECT count(*) AS own FROM remora.earlier_members(:job, :'att1', ARRAY['model.bin']);
-- an endpoint's settings, with its secret; none for a name not registered
SELECT * FROM remora.source_endpoint_settings('regress-wp');
SELECT count(*) AS unknown FROM remora.source_endpoint_settings('regress-none');
-- the cleanup sweep
SELECT count(*) >= 0 AS sweep FROM remora.staging_to_clean(1);
SELECT remora.end_incarnation('77777777-7777-4777-8777-777777777777') AS ended;
SELECT remora.end_incarnation('77777777-7777-4777-8777-777777777777') AS ended_again;
SELECT remora.heartbeat('77777777-7777-4777-8777-777777777777') AS alive_after_end;

-- and cannot touch a table, a sequence, or the launcher's function
SELECT pg_temp.try('SELECT count(*) FROM remora.jobs') AS jobs;
SELECT pg_temp.try('SELECT count(*) FROM remora.attempts') AS attempts;
SELECT pg_temp.try('SELECT count(*) FROM remora.members') AS members;
SELECT pg_temp.try('SELECT url FROM remora.source_endpoints') AS endpoints;
SELECT pg_temp.try('SELECT stopped_at FROM remora.incarnations') AS incarnations;
SELECT pg_temp.try($$INSERT INTO remora.incarnations (incarnation)
	VALUES ('77777777-7777-4777-8777-777777777779')$$) AS insert_incarnation;
SELECT pg_temp.try($$UPDATE remora.incarnations SET heartbeat_at = now()$$) AS update_incarnation;
SELECT pg_temp.try(format('SELECT nextval(%L)', pg_get_serial_sequence('remora.jobs', 'job_id'))) AS sequence;
SELECT pg_temp.try('SELECT remora.end_previous_lifetime()') AS end_previous_lifetime;
RESET ROLE;

-- what was recorded
SELECT kind, pid, host, label, version, stopped_at IS NOT NULL AS stopped
  FROM remora.incarnations ORDER BY incarnation;
-- the launcher, at server start: the background workers' incarnations end
SELECT remora.end_previous_lifetime() AS ended_workers;
SELECT kind, stopped_at IS NOT NULL AS stopped FROM remora.incarnations ORDER BY incarnation;

-- remora.next_due, as a worker calls it: milliseconds until the next
-- queued job is due, by the server's clock; 0 when one is due now and none
-- later; NULL when nothing is queued
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SELECT has_function_privilege('remora_user', 'remora.next_due(uuid)', 'EXECUTE') AS user_may,
	   has_function_privilege('public', 'remora.next_due(uuid)', 'EXECUTE') AS public_may;
SET ROLE regress_wp_worker;
SELECT pg_temp.try('SELECT remora.next_due(NULL)') AS null_incarnation;
SELECT pg_temp.try($$SELECT remora.next_due('not-a-uuid')$$) AS bad_incarnation;
SELECT remora.next_due('77777777-7777-4777-8777-777777777777') IS NULL AS nothing_queued;
RESET ROLE;
SELECT remora_submit('https://example.com/due.bin') AS due_job \gset
SET ROLE regress_wp_worker;
-- a submitted job is due at once
SELECT remora.next_due('77777777-7777-4777-8777-777777777777') AS due_now;
-- its retry, after a Retry-After of 30 s, is due in about 30 s (the claim
-- records the incarnation; the backoff is shorter than 30 s)
SELECT attempt_id AS att_d, fencing_token AS tok_d
  FROM remora.claim('77777777-7777-4777-8777-777777777777', 1) \gset
SELECT remora.next_due('77777777-7777-4777-8777-777777777777') IS NULL AS nothing_queued_while_running;
SELECT remora.fail(:'att_d', :tok_d, '{"class": "network", "retry_after": 30}', true) AS retrying;
SELECT remora.next_due('77777777-7777-4777-8777-777777777777') BETWEEN 20000 AND 30000 AS due_in_30s;
SELECT count(*) AS claimable_before_due
  FROM remora.claim('77777777-7777-4777-8777-777777777777', 5);
RESET ROLE;
-- with a job due now as well, the one due later still counts
SELECT remora_submit('https://example.com/due-now.bin') AS now_job \gset
SELECT remora.next_due('77777777-7777-4777-8777-777777777777') BETWEEN 20000 AND 30000 AS later_one_counts;
-- a retry whose time has passed (left by claim, e.g. its owner at its
-- max_running) is due now, not later
UPDATE remora.queue SET enqueued_at = now() - interval '10 seconds',
	   not_before = now() - interval '5 seconds' WHERE job_id = :due_job;
SELECT remora.next_due('77777777-7777-4777-8777-777777777777') AS passed_is_due;
-- one queued for an hour later: about 3,600,000 ms
UPDATE remora.queue SET not_before = now() + interval '1 hour' WHERE job_id = :due_job;
SELECT remora.next_due('77777777-7777-4777-8777-777777777777') BETWEEN 3590000 AND 3600000 AS in_an_hour;
-- a stopped incarnation claims nothing, so nothing is due for it
SELECT remora.end_incarnation('77777777-7777-4777-8777-777777777777') AS ended;
SELECT remora.next_due('77777777-7777-4777-8777-777777777777') IS NULL AS stopped_waits_for_nothing;

-- clean up
SELECT remora.drop_source_endpoint('regress-wp');
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
DROP ROLE regress_wp_worker;
