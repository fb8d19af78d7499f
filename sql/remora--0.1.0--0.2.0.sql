-- remora 0.1.0 -> 0.2.0: presigned URLs, hard delete by workers,
-- retention, checkpoint-writer statistics, target grants, and source URLs
-- whose query string is kept out of what users can read.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION remora UPDATE TO '0.2.0'" to load this file. \quit

ALTER TABLE remora.jobs
	ADD COLUMN delete_failures integer NOT NULL DEFAULT 0,
	ADD COLUMN delete_after timestamptz,
	ADD COLUMN pruned_at timestamptz;

-- The whole source URL of a job whose URL has a query string (which may
-- carry a signature or a token).  Users see the URL without it in
-- remora.jobs; only the extension's functions read this table, to hand the
-- URL to a worker.
CREATE TABLE remora.source_urls (
	job_id			bigint PRIMARY KEY REFERENCES remora.jobs ON DELETE CASCADE,
	url				text NOT NULL
);

-- Which roles may write to which buckets and prefixes, beyond the
-- defaults.  A pattern is a prefix, or a prefix ending in '*' (any
-- continuation); '*' alone allows every prefix of the bucket.
CREATE TABLE remora.target_grants (
	grantee			oid NOT NULL,
	bucket			text NOT NULL,
	prefix_pattern	text NOT NULL DEFAULT '*',
	granted_by		oid NOT NULL,
	granted_at		timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (grantee, bucket, prefix_pattern)
);

SELECT pg_catalog.pg_extension_config_dump('remora.source_urls', '');
SELECT pg_catalog.pg_extension_config_dump('remora.target_grants', '');
ALTER TABLE remora.source_urls ENABLE ROW LEVEL SECURITY;
ALTER TABLE remora.target_grants ENABLE ROW LEVEL SECURITY;
CREATE POLICY target_grants_admin ON remora.target_grants FOR SELECT
	USING (pg_catalog.pg_has_role(current_user, 'remora_admin', 'USAGE'));
GRANT SELECT ON remora.target_grants TO remora_admin;

-- existing jobs: their query strings move out of sight
INSERT INTO remora.source_urls (job_id, url)
SELECT job_id, source FROM remora.jobs WHERE source_kind = 'http' AND source LIKE '%?%';
UPDATE remora.jobs
   SET source = split_part(source, '?', 1),
	   spec = jsonb_set(spec, '{source,uri}', to_jsonb(split_part(source, '?', 1)))
 WHERE source_kind = 'http' AND source LIKE '%?%';

-- A target pattern as a LIKE pattern: '*' is any continuation.
CREATE FUNCTION remora._glob_like(pattern text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT replace(replace(replace(replace(pattern, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%') $$;

-- May caller write where spec says?  The configured defaults always;
-- anything else needs a target grant (or remora_admin).
CREATE FUNCTION remora._may_write(caller oid, spec jsonb) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT (spec ->> 'bucket' = current_setting('remora.default_bucket')
			AND spec ->> 'prefix' = current_setting('remora.default_prefix'))
		OR pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE')
		OR EXISTS (SELECT 1 FROM remora.target_grants g
					WHERE g.bucket = spec ->> 'bucket'
					  AND spec ->> 'prefix' LIKE remora._glob_like(g.prefix_pattern)
					  AND pg_catalog.pg_has_role(caller, g.grantee, 'USAGE'))
$$;

DROP FUNCTION remora._submit(oid, jsonb, jsonb, text);
-- Record a validated job.  spec is the canonical definition with defaults
-- applied (its source without a query string); request is the canonical
-- request the idempotency key stands for; source_url is the whole URL when
-- it has a query string.
CREATE FUNCTION remora._submit(caller oid, spec jsonb, request jsonb,
							   idem_key text, source_url text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	req_hash	text := remora._sha256(request::text);
	existing	record;
	new_id		bigint;
	endpoint	text := spec #>> '{options,endpoint}';
	cron_job	bigint;
	cron_run	bigint;
	prov		jsonb;
BEGIN
	IF idem_key IS NOT NULL THEN
		SELECT job_id, request_hash INTO existing
		  FROM remora.jobs WHERE owner = caller AND idempotency_key = idem_key;
		IF FOUND THEN
			IF existing.request_hash <> req_hash THEN
				RAISE EXCEPTION 'idempotency key "%" was already used for job %', idem_key, existing.job_id
					USING ERRCODE = 'unique_violation',
						  DETAIL = 'The key was reused for another request; the existing job is unchanged.',
						  HINT = 'Use a new idempotency key for a different request.';
			END IF;
			RETURN existing.job_id;
		END IF;
	END IF;

	IF NOT remora._may_write(caller, spec) THEN
		RAISE EXCEPTION 'permission denied for target bucket "%" prefix "%"',
			spec ->> 'bucket', spec ->> 'prefix'
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Only the default bucket and prefix, and the targets granted to your roles, may be written.',
				  HINT = 'An administrator grants targets with remora.grant_target().';
	END IF;

	IF endpoint IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM remora.source_endpoints WHERE name = endpoint) THEN
		RAISE EXCEPTION 'invalid option "endpoint"'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = format('No source endpoint named "%s" is registered.', endpoint),
				  HINT = 'An administrator registers source endpoints.';
	END IF;

	-- Provenance: who, from where, and the pg_cron job when pg_cron runs us.
	IF to_regclass('cron.job_run_details') IS NOT NULL THEN
		EXECUTE 'SELECT jobid, runid FROM cron.job_run_details
				  WHERE job_pid = pg_backend_pid() AND status IN (''starting'', ''running'')
				  ORDER BY runid DESC LIMIT 1'
		   INTO cron_job, cron_run;
	END IF;
	prov := jsonb_strip_nulls(jsonb_build_object(
		'role', pg_get_userbyid(caller),
		'session_user', session_user,
		'application_name', nullif(current_setting('application_name'), ''),
		'client_addr', inet_client_addr()::text,
		'backend_pid', pg_backend_pid(),
		'cron_job_id', cron_job,
		'cron_run_id', cron_run,
		'submitted_at', now()));

	INSERT INTO remora.jobs
		(owner, source, source_kind, bucket, prefix, options, spec, label,
		 priority, max_attempts, idempotency_key, request_hash,
		 definition_hash, access_digest, provenance)
	VALUES
		(caller, spec #>> '{source,uri}', spec #>> '{source,kind}',
		 spec ->> 'bucket', spec ->> 'prefix', spec -> 'options', spec,
		 spec #>> '{options,label}',
		 (spec #>> '{options,priority}')::integer,
		 (spec #>> '{options,max_attempts}')::integer,
		 idem_key, req_hash, remora._sha256(spec::text || coalesce(source_url, '')),
		 remora._sha256(jsonb_build_object(
			'owner', caller, 'role', pg_get_userbyid(caller),
			'bucket', spec ->> 'bucket', 'prefix', spec ->> 'prefix',
			'endpoint', endpoint)::text),
		 prov)
	ON CONFLICT (owner, idempotency_key) DO NOTHING
	RETURNING job_id INTO new_id;

	IF new_id IS NULL THEN
		-- A concurrent submit with the same key won the insert.
		SELECT job_id, request_hash INTO existing
		  FROM remora.jobs WHERE owner = caller AND idempotency_key = idem_key;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'could not serialize access due to concurrent submit'
				USING ERRCODE = 'serialization_failure';
		END IF;
		IF existing.request_hash <> req_hash THEN
			RAISE EXCEPTION 'idempotency key "%" was already used for job %', idem_key, existing.job_id
				USING ERRCODE = 'unique_violation',
					  DETAIL = 'The key was reused for another request; the existing job is unchanged.',
					  HINT = 'Use a new idempotency key for a different request.';
		END IF;
		RETURN existing.job_id;
	END IF;

	IF source_url IS NOT NULL THEN
		INSERT INTO remora.source_urls (job_id, url) VALUES (new_id, source_url);
	END IF;
	INSERT INTO remora.queue (job_id, priority, not_before)
	VALUES (new_id, (spec #>> '{options,priority}')::integer, now());
	RETURN new_id;
END
$$;

CREATE OR REPLACE FUNCTION remora_result(job bigint)
RETURNS TABLE (path text, bucket text, key text, size bigint, sha256 text,
			   etag text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF job IS NULL THEN
		RAISE EXCEPTION 'job must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF NOT EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = job) THEN
		RAISE EXCEPTION 'job % does not exist', job USING ERRCODE = 'no_data_found';
	END IF;
	RETURN QUERY
		SELECT m.path, m.bucket, m.key, m.size, m.sha256, m.etag
		  FROM remora.results r
		  JOIN remora.jobs j ON j.job_id = r.job_id
		  JOIN remora.members m ON m.attempt_id = r.attempt_id
		 WHERE r.job_id = job AND j.hard_delete_requested_at IS NULL
		 ORDER BY m.path;
END
$$;

-- Administration of target grants (remora_admin).
CREATE FUNCTION remora.grant_target(role name, bucket text,
									prefix text DEFAULT '*')
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	grantee oid := (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = $1);
	caller	oid := (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = session_user);
BEGIN
	IF grantee IS NULL THEN
		RAISE EXCEPTION 'role "%" does not exist', $1 USING ERRCODE = 'undefined_object';
	END IF;
	IF $2 IS NULL OR $2 !~ '^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$' OR $2 ~ '\.\.' THEN
		RAISE EXCEPTION 'invalid bucket' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'A bucket name is 3 to 63 lower-case letters, digits, ''.'' and ''-''.';
	END IF;
	IF $3 IS NULL OR $3 ~ '(^/|//|(^|/)\.\.?(/|$)|[[:cntrl:]\\])' OR length($3) > 512
		OR position('*' IN rtrim($3, '*')) > 0 THEN
		RAISE EXCEPTION 'invalid prefix pattern' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'A pattern is a prefix, optionally ending in ''*''; no leading ''/'', ''.'' or ''..'' segments, or control characters.';
	END IF;
	INSERT INTO remora.target_grants (grantee, bucket, prefix_pattern, granted_by)
	VALUES (grantee, $2, $3, coalesce(caller, 0))
	ON CONFLICT DO NOTHING;
END
$$;

CREATE FUNCTION remora.revoke_target(role name, bucket text,
									 prefix text DEFAULT '*')
RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH gone AS (
		DELETE FROM remora.target_grants g
		 WHERE g.grantee = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = $1)
		   AND g.bucket = $2 AND g.prefix_pattern = $3
		RETURNING 1)
	SELECT count(*) > 0 FROM gone
$$;

-- A time-limited GET URL for one member of the committed manifest.
CREATE FUNCTION remora_presign(job bigint, path text,
							   ttl interval DEFAULT '15 minutes')
RETURNS text
AS 'MODULE_PATHNAME', 'remora_presign'
LANGUAGE C VOLATILE;

-- Hand out up to max_jobs runnable jobs, by priority then age.  Each claim
-- creates a new attempt with a fencing token greater than any before it
-- for the job, records the recovery ledger, and takes a lease.  Live leases
-- never exceed remora.max_active_leases: claimers serialise on an advisory
-- lock for the count, and skip job rows others hold.
CREATE OR REPLACE FUNCTION remora.claim(incarnation uuid, max_jobs integer DEFAULT 1)
RETURNS TABLE (job_id bigint, attempt_id uuid, fencing_token bigint,
			   spec jsonb, resume jsonb, lease_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_incarnation uuid := $1;
	lim			integer := current_setting('remora.max_active_leases')::integer;
	room		integer;
	j			remora.jobs;
	cp			remora.checkpoints;
	new_attempt uuid;
	expires		timestamptz := now() + remora._setting_interval('remora.lease_duration');
BEGIN
	IF incarnation IS NULL THEN
		RAISE EXCEPTION 'incarnation must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF max_jobs IS NULL OR max_jobs < 1 OR max_jobs > 1000 THEN
		RAISE EXCEPTION 'invalid max_jobs: %', max_jobs
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'max_jobs must be between 1 and 1000.';
	END IF;
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'remora.claim requires the READ COMMITTED isolation level'
			USING ERRCODE = 'active_sql_transaction';
	END IF;

	-- an incarnation seen for the first time is recorded; one that has been
	-- marked stopped claims nothing
	INSERT INTO remora.incarnations (incarnation) VALUES (p_incarnation)
	ON CONFLICT DO NOTHING;
	IF EXISTS (SELECT 1 FROM remora.incarnations i
				WHERE i.incarnation = p_incarnation AND i.stopped_at IS NOT NULL) THEN
		RETURN;
	END IF;

	PERFORM pg_advisory_xact_lock(hashtext('remora.claim'));
	room := least(max_jobs, lim - (SELECT count(*) FROM remora.leases));

	FOR j IN
		SELECT jb.* FROM remora.queue q
		  JOIN remora.jobs jb ON jb.job_id = q.job_id
		 WHERE q.not_before <= now()
		   AND jb.state IN ('queued', 'retrying')
		   AND jb.cancel_requested_at IS NULL
		   AND jb.attempts_used < jb.max_attempts
		 ORDER BY q.priority DESC, q.job_id
		 LIMIT greatest(room, 0)
		   FOR UPDATE OF jb SKIP LOCKED
	LOOP
		new_attempt := gen_random_uuid();
		SELECT * INTO cp FROM remora.checkpoints c WHERE c.job_id = j.job_id;

		INSERT INTO remora.attempts
			(attempt_id, job_id, attempt_no, fencing_token, incarnation,
			 definition_hash, request_hash, access_digest, provenance,
			 resumed_from)
		VALUES
			(new_attempt, j.job_id, j.attempts_used + 1, j.fencing_token + 1,
			 p_incarnation, j.definition_hash, j.request_hash,
			 j.access_digest, j.provenance, cp.attempt_id);

		UPDATE remora.jobs jb
		   SET state = 'running',
			   attempts_used = jb.attempts_used + 1,
			   fencing_token = jb.fencing_token + 1,
			   current_attempt = new_attempt,
			   started_at = coalesce(jb.started_at, now())
		 WHERE jb.job_id = j.job_id;

		INSERT INTO remora.leases (attempt_id, job_id, fencing_token, incarnation, expires_at)
		VALUES (new_attempt, j.job_id, j.fencing_token + 1, p_incarnation, expires);
		DELETE FROM remora.queue q WHERE q.job_id = j.job_id;

		job_id := j.job_id;
		attempt_id := new_attempt;
		fencing_token := j.fencing_token + 1;
		spec := j.spec || jsonb_build_object(
			'job_id', j.job_id, 'attempt_no', j.attempts_used + 1,
			'owner', j.owner,
			'staging_prefix', remora._staging_prefix(j.prefix, j.job_id, new_attempt));
		-- the worker gets the whole URL, query string included
		spec := coalesce(jsonb_set(spec, '{source,uri}',
								   to_jsonb((SELECT u.url FROM remora.source_urls u
											  WHERE u.job_id = j.job_id))),
						 spec);
		resume := CASE WHEN cp.job_id IS NULL THEN NULL
					   ELSE jsonb_build_object('attempt_id', cp.attempt_id,
											   'fencing_token', cp.fencing_token,
											   'bytes_done', cp.bytes_done,
											   'state', cp.state) END;
		lease_expires_at := expires;
		RETURN NEXT;
	END LOOP;
END
$$;

DROP FUNCTION remora.staging_to_clean(integer);

-- Objects a worker should delete, most urgent first:
--  * a hard-deleted job: everything under <prefix>/<job id>/ (attempt_id
--    NULL in the result);
--  * staging: every attempt of a finished job that did not commit (all of
--    its staging prefix), and the segments of the one that did.
-- Attempts of unfinished jobs keep theirs: a replacement may reuse them.
-- Nothing is touched until one lease after the job or attempt ended, so
-- that a zombie that has not yet heard it lost has stopped writing.  (One
-- paused for longer may still write afterwards; commit refuses it, and its
-- objects are left to the store's lifecycle rules.)
CREATE FUNCTION remora.staging_to_clean(max_rows integer DEFAULT 1)
RETURNS TABLE (attempt_id uuid, job_id bigint, bucket text, prefix text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	(SELECT NULL::uuid, j.job_id, j.bucket,
			CASE WHEN j.prefix = '' THEN '' ELSE j.prefix || '/' END
			|| j.job_id::text || '/'
	   FROM remora.jobs j
	  WHERE j.hard_delete_requested_at IS NOT NULL AND j.hard_deleted_at IS NULL
		AND j.state IN ('succeeded', 'failed', 'cancelled')
		AND (j.delete_after IS NULL OR j.delete_after <= now())
		AND coalesce(j.finished_at, j.hard_delete_requested_at)
			<= now() - remora._setting_interval('remora.lease_duration')
	  ORDER BY j.hard_delete_requested_at
	  LIMIT greatest(max_rows, 0))
	UNION ALL
	(SELECT a.attempt_id, a.job_id, j.bucket,
			remora._staging_prefix(j.prefix, j.job_id, a.attempt_id)
			|| CASE WHEN r.attempt_id IS NULL THEN '' ELSE 'segments/' END
	   FROM remora.attempts a
	   JOIN remora.jobs j ON j.job_id = a.job_id
	   LEFT JOIN remora.results r ON r.attempt_id = a.attempt_id
	  WHERE a.cleaned_at IS NULL
		AND j.hard_delete_requested_at IS NULL
		AND j.state IN ('succeeded', 'failed', 'cancelled')
		AND (a.clean_after IS NULL OR a.clean_after <= now())
		AND coalesce(a.finished_at, j.finished_at)
			<= now() - remora._setting_interval('remora.lease_duration')
	  ORDER BY a.finished_at NULLS FIRST, a.attempt_id
	  LIMIT greatest(max_rows, 0))
	LIMIT greatest(max_rows, 0)
$$;

-- Record a hard delete's objects gone (or a failed try, retried after a
-- backoff that doubles up to an hour).  The job row stays as a tombstone.
CREATE FUNCTION remora.job_objects_deleted(job_id bigint, ok boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF ok THEN
		UPDATE remora.jobs j SET hard_deleted_at = coalesce(j.hard_deleted_at, now())
		 WHERE j.job_id = $1 AND j.hard_delete_requested_at IS NOT NULL;
		UPDATE remora.attempts a SET cleaned_at = coalesce(a.cleaned_at, now())
		 WHERE a.job_id = $1;
	ELSE
		UPDATE remora.jobs j
		   SET delete_failures = j.delete_failures + 1,
			   delete_after = now() + make_interval(secs => least(3600, power(2, least(j.delete_failures, 12))))
		 WHERE j.job_id = $1 AND j.hard_deleted_at IS NULL;
	END IF;
END
$$;

-- Retention: the history of jobs that ended more than remora.retention ago
-- is pruned, a batch at a time (the launcher calls this every minute).  The
-- job row stays as a tombstone (its state, owner, idempotency key, last
-- error); the attempts go, except the one whose result is still offered.
-- A job whose staging or hard delete is not finished waits.
CREATE FUNCTION remora.prune(max_jobs integer DEFAULT 100) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	keep	interval := remora._setting_interval('remora.retention');
	n		integer := 0;
	j		record;
BEGIN
	IF keep <= interval '0' THEN
		RETURN 0;
	END IF;
	FOR j IN
		SELECT jb.job_id,
			   (jb.deleted_at IS NOT NULL OR jb.hard_deleted_at IS NOT NULL) AS gone
		  FROM remora.jobs jb
		 WHERE jb.state IN ('succeeded', 'failed', 'cancelled')
		   AND jb.pruned_at IS NULL
		   AND jb.finished_at < now() - keep
		   AND (jb.hard_delete_requested_at IS NULL OR jb.hard_deleted_at IS NOT NULL)
		   AND NOT EXISTS (SELECT 1 FROM remora.attempts a
							WHERE a.job_id = jb.job_id AND a.cleaned_at IS NULL)
		 ORDER BY jb.finished_at
		 LIMIT greatest(max_jobs, 0)
		   FOR UPDATE SKIP LOCKED
	LOOP
		DELETE FROM remora.checkpoints c WHERE c.job_id = j.job_id;
		DELETE FROM remora.source_urls u WHERE u.job_id = j.job_id;
		IF j.gone THEN
			DELETE FROM remora.results r WHERE r.job_id = j.job_id;
		END IF;
		DELETE FROM remora.attempts a
		 WHERE a.job_id = j.job_id
		   AND NOT EXISTS (SELECT 1 FROM remora.results r WHERE r.attempt_id = a.attempt_id);
		UPDATE remora.jobs jb SET pruned_at = now() WHERE jb.job_id = j.job_id;
		n := n + 1;
	END LOOP;
	RETURN n;
END
$$;

-- Checkpoint-writer statistics since the server started, from shared memory.
CREATE FUNCTION remora._checkpoint_stats()
RETURNS TABLE (transactions bigint, checkpoints bigint, max_batch bigint,
			   commit_ms_total double precision, commit_ms_max double precision,
			   refusals bigint)
AS 'MODULE_PATHNAME', 'remora_checkpoint_stats'
LANGUAGE C VOLATILE;

DROP VIEW remora_stats;
CREATE VIEW remora_stats WITH (security_invoker = true) AS
SELECT count(*) FILTER (WHERE state = 'queued') AS queued,
	   count(*) FILTER (WHERE state = 'running') AS running,
	   count(*) FILTER (WHERE state = 'retrying') AS retrying,
	   count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
	   count(*) FILTER (WHERE state = 'failed') AS failed,
	   count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
	   (SELECT coalesce(sum(r.bytes), 0) FROM remora.results r) AS bytes_committed,
	   (SELECT coalesce(sum(p.bytes_done), 0) FROM remora_progress p) AS bytes_in_flight,
	   (SELECT coalesce(sum(p.bytes_per_second), 0) FROM remora_progress p)
		   AS bytes_per_second,
	   (SELECT coalesce(jsonb_object_agg(f.class, f.n), '{}')
		  FROM (SELECT a.error ->> 'class' AS class, count(*) AS n
				  FROM remora.attempts a
				 WHERE a.error IS NOT NULL
				 GROUP BY 1) f) AS failures_by_class,
	   (SELECT count(*) FROM remora.leases) AS active_leases,
	   current_setting('remora.max_active_leases')::integer AS max_active_leases
  FROM remora.jobs
 WHERE deleted_at IS NULL;

CREATE VIEW remora_target_grants WITH (security_invoker = true) AS
SELECT pg_catalog.pg_get_userbyid(g.grantee) AS role,
	   g.bucket,
	   g.prefix_pattern,
	   pg_catalog.pg_get_userbyid(g.granted_by) AS granted_by,
	   g.granted_at
  FROM remora.target_grants g;

CREATE VIEW remora_checkpoint_stats WITH (security_invoker = true) AS
SELECT s.transactions,
	   s.checkpoints,
	   round(s.checkpoints::numeric / nullif(s.transactions, 0), 2) AS mean_batch,
	   s.max_batch,
	   round((s.commit_ms_total / nullif(s.transactions, 0))::numeric, 3) AS mean_commit_ms,
	   round(s.commit_ms_max::numeric, 3) AS max_commit_ms,
	   s.refusals
  FROM remora._checkpoint_stats() s;

REVOKE ALL ON FUNCTION remora_presign(bigint, text, interval),
	remora._glob_like(text), remora._may_write(oid, jsonb),
	remora._submit(oid, jsonb, jsonb, text, text),
	remora.grant_target(name, text, text), remora.revoke_target(name, text, text),
	remora.staging_to_clean(integer), remora.job_objects_deleted(bigint, boolean),
	remora.prune(integer), remora._checkpoint_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora_presign(bigint, text, interval) TO remora_user;
GRANT EXECUTE ON FUNCTION remora.staging_to_clean(integer),
	remora.job_objects_deleted(bigint, boolean) TO remora_worker;
GRANT EXECUTE ON FUNCTION remora._checkpoint_stats(), remora.prune(integer),
	remora.grant_target(name, text, text), remora.revoke_target(name, text, text)
	TO remora_admin;
GRANT SELECT ON remora_stats TO remora_user;
GRANT SELECT ON remora_checkpoint_stats, remora_target_grants TO remora_admin;
REVOKE ALL ON remora_stats, remora_checkpoint_stats, remora_target_grants FROM PUBLIC;

-- 0.2.0: many-member sources (s3 prefixes, Hugging Face snapshots)
CREATE OR REPLACE VIEW remora_jobs WITH (security_invoker = true) AS
SELECT j.job_id,
	   pg_catalog.pg_get_userbyid(j.owner) AS owner,
	   j.source,
	   j.source_kind,
	   j.bucket,
	   j.prefix,
	   j.label,
	   j.state,
	   j.priority,
	   j.attempts_used,
	   j.max_attempts,
	   j.current_attempt AS current_attempt_id,
	   j.fencing_token,
	   j.cancel_requested_at IS NOT NULL AS cancel_requested,
	   j.idempotency_key,
	   j.submitted_at,
	   j.started_at,
	   j.finished_at,
	   CASE WHEN j.state = 'retrying' THEN j.not_before END AS next_attempt_at,
	   -- validated durable progress plus the current attempt's live progress
	   coalesce(greatest(p.bytes_done, cp.bytes_done), cp.bytes_done,
				CASE WHEN j.state = 'succeeded' THEN r.bytes END) AS bytes_done,
	   cp.bytes_done AS bytes_validated,
	   coalesce(p.bytes_total, cp.bytes_total,
				CASE WHEN j.state = 'succeeded' THEN r.bytes END) AS bytes_total,
	   p.rate AS bytes_per_second,
	   -- a later attempt that could not (or was not offered to) resume
	   (ca.attempt_no > 1 AND (ca.resumed_from IS NULL OR ca.restart_reason IS NOT NULL))
		   AS restarted_from_zero,
	   ca.restart_reason,
	   j.last_error,
	   (SELECT jsonb_agg(a.error ORDER BY a.attempt_no)
		  FROM remora.attempts a
		 WHERE a.job_id = j.job_id AND a.error IS NOT NULL) AS error_history,
	   r.manifest_key AS result_manifest_key,
	   r.manifest_etag AS result_manifest_etag,
	   r.manifest_sha256 AS result_manifest_sha256,
	   r.members AS result_members,
	   r.bytes AS result_bytes,
	   r.committed_at,
	   j.hard_delete_requested_at IS NOT NULL AS hard_delete_requested,
	   -- many-member sources: members recorded by the current attempt
	   CASE WHEN j.state = 'succeeded' THEN r.members
			WHEN j.source_kind <> 'http' THEN
				(SELECT count(*) FROM remora.members m
				  WHERE m.attempt_id = j.current_attempt) END AS members_done,
	   CASE WHEN j.state = 'succeeded' THEN r.members
			WHEN j.source_kind <> 'http' THEN
				(cp.state ->> 'members_total')::bigint END AS members_total
  FROM remora.jobs j
  LEFT JOIN remora.results r ON r.job_id = j.job_id
  LEFT JOIN remora.checkpoints cp ON cp.job_id = j.job_id
  LEFT JOIN remora.attempts ca ON ca.attempt_id = j.current_attempt
  LEFT JOIN remora._progress() p
		 ON p.attempt_id = j.current_attempt AND p.fencing_token = j.fencing_token
			AND j.state = 'running'
 WHERE j.deleted_at IS NULL;

-- Register (or change) an S3-compatible store that s3:// sources may name
-- with options.endpoint.  Its credentials are readable only by the
-- extension's own functions and the workers: no view shows them.
CREATE FUNCTION remora.register_source_endpoint(name text, url text,
		region text DEFAULT 'us-east-1', path_style boolean DEFAULT true,
		access_key_id text DEFAULT NULL, secret_access_key text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF $1 IS NULL OR $1 !~ '^[a-z][a-z0-9_-]{0,62}$' THEN
		RAISE EXCEPTION 'invalid endpoint name' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'An endpoint name is 1 to 63 lower-case letters, digits, ''_'' and ''-'', starting with a letter.';
	END IF;
	IF $2 IS NULL OR $2 !~ '^https?://[^/?#@[:space:][:cntrl:]]+/?$' OR length($2) > 2048 THEN
		RAISE EXCEPTION 'invalid endpoint url' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'The URL is http:// or https:// with a host and optional port, and nothing else (no user information, path or query).';
	END IF;
	IF $3 IS NULL OR $3 !~ '^[a-z0-9-]{1,64}$' THEN
		RAISE EXCEPTION 'invalid endpoint region' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'A region is 1 to 64 lower-case letters, digits and ''-''.';
	END IF;
	IF $4 IS NULL OR ($5 IS NULL) <> ($6 IS NULL)
		OR $5 ~ '[[:cntrl:][:space:]]' OR $6 ~ '[[:cntrl:][:space:]]'
		OR length($5) > 256 OR length($6) > 256 THEN
		RAISE EXCEPTION 'invalid endpoint credentials' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'Give both an access key id and a secret access key (printable, at most 256 characters each), or neither; path_style may not be null.';
	END IF;
	INSERT INTO remora.source_endpoints AS e
		(name, url, region, path_style, access_key_id, secret_access_key)
	VALUES ($1, rtrim($2, '/'), $3, $4, $5, $6)
	ON CONFLICT ON CONSTRAINT source_endpoints_pkey DO UPDATE
	   SET url = EXCLUDED.url, region = EXCLUDED.region,
		   path_style = EXCLUDED.path_style,
		   access_key_id = EXCLUDED.access_key_id,
		   secret_access_key = EXCLUDED.secret_access_key;
END
$$;

-- Forget a source endpoint; jobs that name it fail when next claimed.
CREATE FUNCTION remora.drop_source_endpoint(name text)
RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH gone AS (DELETE FROM remora.source_endpoints e WHERE e.name = $1 RETURNING 1)
	SELECT count(*) > 0 FROM gone
$$;

-- The registered endpoints without their credentials.
CREATE FUNCTION remora._source_endpoints()
RETURNS TABLE(name text, url text, region text, path_style boolean,
			  has_credentials boolean, created_at timestamptz)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT e.name, e.url, e.region, e.path_style,
		   e.access_key_id IS NOT NULL, e.created_at
	  FROM remora.source_endpoints e
$$;

CREATE VIEW remora_source_endpoints WITH (security_invoker = true) AS
SELECT * FROM remora._source_endpoints();

REVOKE ALL ON FUNCTION remora.register_source_endpoint(text, text, text, boolean, text, text),
	remora.drop_source_endpoint(text), remora._source_endpoints() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.register_source_endpoint(text, text, text, boolean, text, text),
	remora.drop_source_endpoint(text), remora._source_endpoints() TO remora_admin;
GRANT SELECT ON remora_source_endpoints TO remora_admin;
REVOKE ALL ON remora_source_endpoints FROM PUBLIC;
