--
-- Roles and row-level security: a user sees, cancels and deletes only
-- their own jobs; an admin sees all; only the extension's functions write
-- the tables; worker functions are not for users.
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
ALTER DATABASE contrib_regression SET remora.default_bucket = 'target';
SET remora.default_bucket = 'target';

CREATE ROLE regress_alice LOGIN;
CREATE ROLE regress_bob LOGIN;
CREATE ROLE regress_carol LOGIN;		-- an administrator
CREATE ROLE regress_mallory LOGIN;		-- not a remora user at all
GRANT remora_user TO regress_alice, regress_bob;
GRANT remora_admin TO regress_carol;

SET ROLE regress_alice;
SELECT remora_submit('https://example.com/alice.bin', idempotency_key => 'nightly') AS alice_job \gset
SELECT remora_submit('https://example.com/alice2.bin') AS alice_job2 \gset
SELECT job_id = :alice_job AS mine, owner, state FROM remora_jobs ORDER BY job_id LIMIT 1;
RESET ROLE;
-- a worker starts on alice's first job
SELECT job_id = :alice_job AS claimed_alices FROM remora.claim('55555555-5555-4555-8555-555555555555', 1);
SET ROLE regress_alice;
SELECT count(*) AS alice_sees_attempts FROM remora_attempts;
SELECT count(*) AS alice_sees_leases FROM remora.leases;
RESET ROLE;

SET ROLE regress_bob;
SELECT remora_submit('https://example.com/bob.bin') AS bob_job \gset
-- bob sees only his own job, in every view and table
SELECT count(*) AS jobs_seen, min(owner) AS owner FROM remora_jobs;
SELECT count(*) AS rows_in_table FROM remora.jobs;
SELECT count(*) AS attempts_seen FROM remora_attempts;
SELECT count(*) AS leases_seen FROM remora.leases;
SELECT succeeded + queued AS stats_count FROM remora_stats;
-- alice's job does not exist for bob: reported like a missing one
SELECT pg_temp.try(format('SELECT remora_cancel(%s)', :alice_job));
SELECT pg_temp.try(format('SELECT remora_delete(%s)', :alice_job));
SELECT pg_temp.try(format('SELECT remora_delete(%s, true)', :alice_job));
SELECT pg_temp.try(format('SELECT * FROM remora_result(%s)', :alice_job));
-- the same idempotency key is bob's own namespace: a new job
SELECT remora_submit('https://example.com/other.bin', idempotency_key => 'nightly') <> :alice_job AS separate_job;
-- writing the tables directly, or calling the internals, is refused
SELECT pg_temp.try($$INSERT INTO remora.jobs (owner, source, source_kind, bucket, prefix, spec, priority, max_attempts, request_hash, definition_hash, access_digest, provenance) VALUES (0, 'x', 'http', 'b', '', '{}', 0, 1, '', '', '', '{}')$$);
SELECT pg_temp.try(format('UPDATE remora.jobs SET state = %L', 'succeeded'));
SELECT pg_temp.try('DELETE FROM remora.jobs');
SELECT pg_temp.try('TRUNCATE remora.queue');
SELECT pg_temp.try('DELETE FROM remora.leases');
SELECT pg_temp.try('SELECT * FROM remora.source_endpoints');
SELECT pg_temp.try(format('SELECT remora._cancel(%s, %s)', (SELECT oid FROM pg_roles WHERE rolname = 'regress_alice'), :alice_job));
SELECT pg_temp.try($$SELECT remora._submit(10, '{}', '{}', NULL, NULL)$$);
SELECT pg_temp.try('SELECT * FROM remora.source_urls');
SELECT pg_temp.try('SELECT * FROM remora.target_grants');
SELECT pg_temp.try($$SELECT remora.grant_target('regress_bob', 'anything')$$);
-- the worker protocol is for remora_worker
SELECT pg_temp.try($$SELECT * FROM remora.claim('11111111-1111-1111-1111-111111111111')$$);
SELECT pg_temp.try($$SELECT * FROM remora.renew('11111111-1111-1111-1111-111111111111', 1)$$);
SELECT pg_temp.try($$SELECT remora.checkpoint('11111111-1111-1111-1111-111111111111', 1, '{}')$$);
SELECT pg_temp.try($$SELECT remora.commit('11111111-1111-1111-1111-111111111111', 1, '{}')$$);
SELECT pg_temp.try($$SELECT remora.fail('11111111-1111-1111-1111-111111111111', 1, '{}', true)$$);
SELECT pg_temp.try('SELECT remora.reconcile()');
SELECT pg_temp.try('SELECT * FROM remora_workers');
-- the settings of external workers (secrets included) are for remora_worker
SELECT pg_temp.try('SELECT * FROM remora.worker_settings()');
-- a target setting that is not for users
SELECT pg_temp.try('SHOW remora.s3_secret_access_key');
SELECT pg_temp.try($$SET remora.default_bucket = 'elsewhere'$$);
SELECT pg_temp.try($$SET remora.max_active_leases = 1000$$);
RESET ROLE;

-- a role that is not a remora user cannot submit or look
SET ROLE regress_mallory;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/x.bin')$$);
SELECT pg_temp.try('SELECT * FROM remora_jobs');
SELECT pg_temp.try('SELECT remora_cancel(1)');
RESET ROLE;

-- alice cancels and deletes her own job
SET ROLE regress_alice;
SELECT remora_cancel(:alice_job);
SELECT remora_delete(:alice_job2);
SELECT job_id = :alice_job AS first, state FROM remora_jobs ORDER BY job_id;
RESET ROLE;

-- an administrator sees everyone's jobs and may cancel them
SET ROLE regress_carol;
SELECT owner, count(*) FROM remora_jobs GROUP BY owner ORDER BY owner;
SELECT count(*) AS admin_sees_attempts FROM remora_attempts;
SELECT remora_cancel(:bob_job);
SELECT count(*) AS workers_visible FROM remora_workers;
SELECT remora.reconcile() >= 0 AS reconcile_allowed;
RESET ROLE;

-- the last hour minute by minute (remora_throughput, the web client's
-- charts): a user counts their own jobs, an administrator everyone's
SET ROLE regress_alice;
SELECT count(*) AS minutes, sum(cancelled) AS cancelled,
	   (array_agg(queued ORDER BY minute DESC))[1] AS queued_now FROM remora_throughput;
RESET ROLE;
SET ROLE regress_bob;
SELECT count(*) AS minutes, sum(cancelled) AS cancelled,
	   (array_agg(queued ORDER BY minute DESC))[1] AS queued_now FROM remora_throughput;
RESET ROLE;
SET ROLE regress_carol;
SELECT count(*) AS minutes, sum(cancelled) AS cancelled,
	   (array_agg(queued ORDER BY minute DESC))[1] AS queued_now FROM remora_throughput;
RESET ROLE;
SET ROLE regress_mallory;
SELECT pg_temp.try($$SELECT count(*) FROM remora_throughput$$);
RESET ROLE;

-- target grants: a user may write only to the default target and to the
-- buckets and prefixes granted to their roles
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a.bin', 'team-a')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a.bin', NULL, 'elsewhere')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a.bin', 'target', 'remora')$$);
RESET ROLE;
SET ROLE regress_carol;
SELECT remora.grant_target('regress_alice', 'team-a', 'alice/*');
SELECT remora.grant_target('regress_alice', 'team-a', 'alice/*');
SELECT pg_temp.try($$SELECT remora.grant_target('no_such_role', 'team-a')$$);
SELECT pg_temp.try($$SELECT remora.grant_target('regress_alice', 'Bad_Bucket')$$);
SELECT pg_temp.try($$SELECT remora.grant_target('regress_alice', 'team-a', '../up/*')$$);
SELECT pg_temp.try($$SELECT remora.grant_target('regress_alice', 'team-a', 'a*b')$$);
SELECT role, bucket, prefix_pattern, granted_by FROM remora_target_grants;
RESET ROLE;
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a.bin', 'team-a', 'alice/models')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a.bin', 'team-a', 'alice')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a.bin', 'team-a', 'bob/x')$$);
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a.bin', 'team-b', 'alice/x')$$);
SELECT pg_temp.try('SELECT * FROM remora_target_grants');
RESET ROLE;
-- bob is not alice: her grant is not his
SET ROLE regress_bob;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a.bin', 'team-a', 'alice/models')$$);
RESET ROLE;
-- a grant to a role counts for its members
SET ROLE regress_carol;
SELECT remora.grant_target('remora_user', 'shared', '*');
RESET ROLE;
SET ROLE regress_bob;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a.bin', 'shared', 'any/where')$$);
RESET ROLE;
SET ROLE regress_carol;
SELECT remora.revoke_target('regress_alice', 'team-a', 'alice/*') AS revoked,
	   remora.revoke_target('regress_alice', 'team-a', 'alice/*') AS revoked_again,
	   remora.revoke_target('remora_user', 'shared') AS revoked_shared;
RESET ROLE;
SET ROLE regress_alice;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/a.bin', 'team-a', 'alice/models')$$);
-- the query string of a source stays out of what users can read
SELECT remora_submit('https://example.com/signed.bin?X-Amz-Signature=0123456789abcdef&token=s3cr3t',
					 options => '{"priority": 10}') AS signed \gset
SELECT source, position('s3cr3t' IN remora_jobs::text) AS secret_in_view
  FROM remora_jobs WHERE job_id = :signed;
SELECT spec #>> '{source,uri}' AS spec_uri FROM remora.jobs WHERE job_id = :signed;
SELECT position('s3cr3t' IN row(j.*)::text) AS secret_in_table FROM remora.jobs j WHERE job_id = :signed;
RESET ROLE;

-- a worker role may run the protocol
CREATE ROLE regress_worker LOGIN;
GRANT remora_worker TO regress_worker;
-- (claims share between owners: only the signed job is runnable)
UPDATE remora.queue SET not_before = now() + interval '1 hour' WHERE job_id <> :signed;
SET ROLE regress_worker;
SELECT count(*) AS claimed, bool_or(spec #>> '{source,uri}' LIKE '%token=s3cr3t') AS worker_gets_whole_url
  FROM remora.claim('33333333-3333-3333-3333-333333333333', 10);
-- and read the settings an external worker runs with (not shown: secrets)
SELECT s3_region, part_size > 0 AS has_part_size, lease_duration_ms > 0 AS has_lease,
	   s3_secret_access_key IS NOT NULL AS has_secret
  FROM remora.worker_settings();
-- and record an external incarnation with its host, label and version
SELECT remora.start_incarnation('e0e0e0e0-0000-4000-8000-000000000001', 1, 'external',
	'h1', 'l1', '0.4.0');
RESET ROLE;
SELECT kind, host, label, version FROM remora_workers
 WHERE incarnation = 'e0e0e0e0-0000-4000-8000-000000000001';
-- its state: running; silent once its heartbeat is older than a lease;
-- stopped once ended
UPDATE remora.incarnations SET heartbeat_at = now() - interval '1 second'
 WHERE incarnation = 'e0e0e0e0-0000-4000-8000-000000000001';
SELECT state AS beating FROM remora_workers
 WHERE incarnation = 'e0e0e0e0-0000-4000-8000-000000000001';
UPDATE remora.incarnations
   SET heartbeat_at = now() - current_setting('remora.lease_duration')::interval - interval '1 second'
 WHERE incarnation = 'e0e0e0e0-0000-4000-8000-000000000001';
SELECT state AS past_a_lease FROM remora_workers
 WHERE incarnation = 'e0e0e0e0-0000-4000-8000-000000000001';
SELECT remora.end_incarnation('e0e0e0e0-0000-4000-8000-000000000001') AS ended;
SELECT state AS once_ended FROM remora_workers
 WHERE incarnation = 'e0e0e0e0-0000-4000-8000-000000000001';
SELECT provenance ->> 'role' AS submitted_by, state FROM remora.jobs ORDER BY job_id;

-- clean up the roles (they own nothing; jobs and grants reference them by oid)
ALTER DATABASE contrib_regression RESET remora.default_bucket;
TRUNCATE remora.target_grants;
DROP ROLE regress_alice, regress_bob, regress_carol, regress_mallory, regress_worker;
