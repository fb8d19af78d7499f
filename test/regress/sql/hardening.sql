--
-- Protocol hardening: commits are exact, a malformed checkpoint
-- is refused, a late failure report never raises, a hard delete deletes
-- only its own job's attempt prefixes, canonical requests ignore explicit
-- defaults, a default prefix may end in '/', and provenance trusts only
-- pg_cron's own run table.
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
GRANT EXECUTE ON FUNCTION pg_temp.try(text) TO PUBLIC;
-- claim exactly this job
CREATE FUNCTION pg_temp.claim(job bigint) RETURNS TABLE (attempt_id uuid, fencing_token bigint, staging text)
LANGUAGE sql AS $$
	UPDATE remora.queue SET priority = CASE WHEN job_id = job THEN 1000 ELSE -1000 END;
	SELECT c.attempt_id, c.fencing_token, c.spec ->> 'staging_prefix'
	  FROM remora.claim('11111111-1111-1111-1111-111111111111') c
$$;
-- a descriptor with entries of the given sizes
CREATE FUNCTION pg_temp.descriptor(staging text, members bigint, bytes bigint,
								   sizes bigint[] DEFAULT '{}') RETURNS jsonb
LANGUAGE sql AS $$
	SELECT jsonb_build_object('key', staging || 'manifest.jsonl', 'etag', 'e',
		'sha256', repeat('a', 64), 'members', members, 'bytes', bytes,
		'entries', coalesce((SELECT jsonb_agg(jsonb_build_object(
			'path', 'f' || n, 'bucket', 'target', 'key', staging || 'data/f' || n,
			'size', s, 'sha256', repeat('b', 64), 'etag', 'x'))
			FROM unnest(sizes) WITH ORDINALITY AS u(s, n)), '[]'))
$$;

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SET remora.default_bucket = 'target';

--
-- commit is exact: the descriptor's counts must equal the members recorded
-- plus its entries, also when both are empty
--
SELECT remora_submit('https://example.com/exact.bin') AS e1 \gset
SELECT attempt_id AS a1, fencing_token AS t1, staging AS s1 FROM pg_temp.claim(:e1) \gset
-- members: 3 and nothing recorded would publish an empty result
SELECT remora.commit(:'a1', :t1, pg_temp.descriptor(:'s1', 3, 300)) AS three_claimed_none_recorded;
SELECT remora.commit(:'a1', :t1, pg_temp.descriptor(:'s1', 0, 10)) AS bytes_without_members;
SELECT remora.commit(:'a1', :t1, pg_temp.descriptor(:'s1', 2, 30, '{10}')) AS one_entry_two_claimed;
SELECT remora.commit(:'a1', :t1, pg_temp.descriptor(:'s1', 1, 11, '{10}')) AS bytes_off_by_one;
-- a recorded member counts: the descriptor must include it
SELECT remora.checkpoint(:'a1', :t1, jsonb_build_object('members', jsonb_build_array(jsonb_build_object(
	'path', 'r', 'bucket', 'target', 'key', :'s1' || 'data/r', 'size', 5,
	'sha256', repeat('c', 64), 'etag', 'y')))) AS recorded;
SELECT remora.commit(:'a1', :t1, pg_temp.descriptor(:'s1', 0, 0)) AS empty_but_one_recorded;
SELECT remora.commit(:'a1', :t1, pg_temp.descriptor(:'s1', 1, 10, '{10}')) AS entry_without_recorded;
SELECT count(*) AS results, (SELECT state FROM remora.jobs WHERE job_id = :e1) AS state FROM remora.results;
SELECT remora.commit(:'a1', :t1, pg_temp.descriptor(:'s1', 2, 15, '{10}')) AS exact;
SELECT path, size FROM remora_result(:e1);
-- an empty result is fine when it is exactly empty
SELECT remora_submit('https://example.com/empty.bin') AS e2 \gset
SELECT attempt_id AS a2, fencing_token AS t2, staging AS s2 FROM pg_temp.claim(:e2) \gset
SELECT remora.commit(:'a2', :t2, pg_temp.descriptor(:'s2', 0, 0)) AS exactly_empty;

--
-- a malformed checkpoint is refused with 22023 and records nothing
--
SELECT remora_submit('https://example.com/cp.bin') AS e3 \gset
SELECT attempt_id AS a3, fencing_token AS t3, staging AS s3 FROM pg_temp.claim(:e3) \gset
SELECT pg_temp.try(format('SELECT remora.checkpoint(%L, %s, %L)', :'a3', :t3, v))
  FROM unnest(ARRAY[
	'{"state": "not an object"}',
	'{"state": null}',
	'{"state": [1, 2]}',
	'{"bytes_done": "12"}',
	'{"bytes_done": -1}',
	'{"bytes_total": 1.5}',
	'{"bytes_total": 2.0}',
	'{"restart_reason": 7}',
	'{"state": {"etag": 5}}',
	'{"state": {"size": "big"}}',
	'{"state": {"members_done": -3}}',
	'{"state": {"parts": {"size": 5}}}',
	'{"state": {"upload_key": "k", "upload_id": "u", "parts": [{"etag": "e"}]}}',
	'{"state": {"upload_key": "k", "upload_id": "u", "parts": [{"size": 5}]}}',
	'{"state": {"upload_key": "k", "upload_id": "u", "parts": [7]}}',
	'{"state": {"parts": [{"size": 5, "etag": "e"}]}}',
	'{"state": {"upload_key": "k", "upload_id": 9, "parts": []}}',
	'{"members": [{"path": "p", "bucket": "target", "key": "k", "etag": "e", "sha256": "' || repeat('a', 64) || '"}]}',
	'{"members": [{"path": "p", "bucket": "target", "key": "k", "etag": "e", "size": 2.0, "sha256": "' || repeat('a', 64) || '"}]}'
  ]) AS v;
SELECT count(*) AS checkpoints FROM remora.checkpoints WHERE job_id = :e3;
-- what the workers write is accepted
SELECT remora.checkpoint(:'a3', :t3, '{"bytes_done": 10, "bytes_total": 20,
	"state": {"etag": "\"e\"", "last_modified": "x", "size": 20, "sha256_state": "s",
			  "upload_key": "k", "upload_id": "u",
			  "parts": [{"size": 10, "etag": "\"p\""}]}}') AS well_formed;
SELECT remora.checkpoint(:'a3', :t3, '{"bytes_done": 0, "state": {"members_done": 0, "members_total": 4}, "members": []}') AS set_progress;

--
-- a failure report for an attempt that no longer exists (pruned) returns
--
SELECT remora.fail(:'a3', :t3, '{"class": "http"}', false) AS failed;
DELETE FROM remora.attempts WHERE attempt_id = :'a3';
SELECT remora.fail(:'a3', :t3, '{"class": "http"}', true) IS NULL AS pruned_attempt_fail;

--
-- hard delete deletes only the job's own attempt prefixes: job B whose
-- prefix is <A's prefix>/<A's id> survives remora_delete(A, true)
--
SELECT remora_submit('https://example.com/a.bin') AS ja \gset
SELECT attempt_id AS aa, fencing_token AS ta, staging AS sa FROM pg_temp.claim(:ja) \gset
SELECT remora.fail(:'aa', :ta, '{"class": "http"}', true) AS a_retrying;
UPDATE remora.queue SET not_before = now() - interval '1 second' WHERE job_id = :ja;
SELECT attempt_id AS aa2, fencing_token AS ta2, staging AS sa2 FROM pg_temp.claim(:ja) \gset
SELECT remora.commit(:'aa2', :ta2, pg_temp.descriptor(:'sa2', 1, 10, '{10}')) AS a_committed;
SELECT remora_submit('https://example.com/b.bin', 'target', 'remora/' || :ja) AS jb \gset
SELECT attempt_id AS ab, fencing_token AS tb, staging AS sb FROM pg_temp.claim(:jb) \gset
SELECT :'sb' LIKE 'remora/' || :ja || '/' || :jb || '/%' AS b_lives_under_a;
SELECT remora_delete(:ja, true);
-- one lease later, the worker is handed A's attempt prefixes, never A's
-- whole job prefix
UPDATE remora.jobs SET finished_at = now() - interval '1 hour' WHERE job_id = :ja;
CREATE TEMP TABLE handed AS SELECT * FROM remora.staging_to_clean(100) WHERE job_id = :ja;
SELECT attempt_id IS NULL AS last, prefix = :'sa' AS failed_attempt, prefix = :'sa2' AS committed_attempt
  FROM handed ORDER BY last;
SELECT count(*) FILTER (WHERE left(:'sb', length(prefix)) = prefix) AS prefixes_covering_b,
	   bool_and(prefix ~ ('^remora/' || :ja || '/[0-9a-f-]{36}/$')) AS attempt_prefixes_only
  FROM handed;
-- the worker records each: the job is deleted when the committed attempt's
-- prefix is gone
SELECT remora.staging_cleaned(attempt_id) FROM handed WHERE attempt_id IS NOT NULL;
SELECT attempt_id IS NULL AS last, prefix = :'sa2' AS committed_attempt
  FROM remora.staging_to_clean(100) WHERE job_id = :ja;
SELECT remora.job_objects_deleted(:ja);
SELECT count(*) AS left_to_clean FROM remora.staging_to_clean(100) WHERE job_id = :ja;
SELECT hard_deleted_at IS NOT NULL AS a_deleted FROM remora.jobs WHERE job_id = :ja;
SELECT state, hard_delete_requested_at IS NULL AS b_untouched FROM remora.jobs WHERE job_id = :jb;
-- a job that never ran wrote nothing: its hard delete is done at once
SELECT remora_submit('https://example.com/never.bin') AS jn \gset
SELECT remora_delete(:jn, true);
SELECT hard_deleted_at IS NOT NULL AS never_ran_deleted FROM remora.jobs WHERE job_id = :jn;

--
-- canonical requests: an explicit default is the same request as an
-- omitted one; another value is another request
--
CREATE ROLE regress_dora LOGIN;
GRANT remora_user TO regress_dora;
SET ROLE regress_dora;
SELECT remora_submit('https://example.com/nightly.bin', idempotency_key => 'nightly') AS n1 \gset
SELECT remora_submit('https://example.com/nightly.bin', 'target', 'remora',
					 jsonb_build_object('priority', 0, 'max_attempts', current_setting('remora.max_attempts')::int),
					 'nightly') = :n1 AS explicit_defaults_same_job;
SELECT remora_submit('https://example.com/nightly.bin', 'target', 'remora/', '{}', 'nightly') = :n1 AS trailing_slash_same_job;
SELECT pg_temp.try($$SELECT remora_submit('https://example.com/nightly.bin', options => '{"priority": 1}', idempotency_key => 'nightly')$$);
RESET ROLE;

--
-- a default prefix set with a trailing '/' is the default target
--
SET remora.default_prefix = 'incoming/';
SET ROLE regress_dora;
SELECT remora_submit('https://example.com/slash.bin') AS sl \gset
SELECT bucket, prefix FROM remora_jobs WHERE job_id = :sl;
RESET ROLE;
RESET remora.default_prefix;

--
-- provenance: a look-alike cron.job_run_details that is not pg_cron's own
-- is not believed
--
CREATE SCHEMA cron;
CREATE TABLE cron.job_run_details (jobid bigint, runid bigint, job_pid integer, status text);
INSERT INTO cron.job_run_details VALUES (42, 7, pg_backend_pid(), 'running');
SELECT remora_submit('https://example.com/cron.bin') AS cr \gset
SELECT provenance ? 'cron_job_id' AS forged_cron_job, provenance ->> 'role' AS role
  FROM remora.jobs WHERE job_id = :cr;
DROP SCHEMA cron CASCADE;

--
-- the worker settings (the target's secret, the Hub token, proxy
-- credentials) are answered over a Unix socket and from a loopback
-- address; a plain TCP connection from another host is refused (shown by
-- test/e2e/worker_transport.sh, which has such a host)
--
CREATE ROLE regress_wsw LOGIN IN ROLE remora_worker;
SET ROLE regress_wsw;
SELECT inet_client_addr() IS NULL AS unix_socket,
	   (SELECT count(*) FROM remora.worker_settings()) AS settings;
RESET ROLE;
\getenv regress_socket PGHOST
\c contrib_regression regress_wsw 127.0.0.1
SELECT host(inet_client_addr()) AS client, ssl
  FROM pg_stat_ssl WHERE pid = pg_backend_pid();
SELECT count(*) AS settings FROM remora.worker_settings();
\c contrib_regression postgres :regress_socket
DROP ROLE regress_wsw;

-- Remora's own store, endpoints and listeners are never a source nor a
-- webhook's destination (RM001), whatever the networks allowed: here a
-- registered endpoint's host and port, as written, in any case, with its
-- scheme's port written or not; the workers judge the addresses reached
-- (test/e2e/egress.sh)
SET remora.default_bucket = 'target';
SELECT remora.register_source_endpoint('partner', 'https://s3.partner.example');
SELECT remora._blocked_origins();
\set VERBOSITY default
SELECT remora_submit('https://S3.Partner.Example/bucket/key.bin');
SELECT remora_submit('https://s3.partner.example:443/bucket/key.bin');
SELECT remora_submit('https://www.partner.example/key.bin',
					 options => '{"notify_url": "https://s3.partner.example/hook"}');
\set VERBOSITY terse
-- another port of the same host is another origin
SELECT remora_submit('https://s3.partner.example:8443/key.bin') > 0 AS taken;
SELECT remora.drop_source_endpoint('partner');
SELECT remora_submit('https://s3.partner.example/key.bin') > 0 AS taken_once_dropped;

-- clean up
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
DROP ROLE regress_dora;
