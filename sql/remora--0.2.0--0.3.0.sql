-- remora 0.2.0 -> 0.3.0: tenant isolation (source grants, exact commits,
-- locks no user can take) and hardening of the worker protocol.  Each
-- section below repeats what sql/remora.sql now says; test/e2e/upgrade.sh
-- checks that an upgraded catalog equals a fresh install.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION remora UPDATE TO '0.3.0'" to load this file. \quit

/* ------------------------------------------------------------------------
 * Source grants and Remora's own area, exact commits,
 * a lease lock no user can take, leases counted by running jobs, stricter
 * checkpoints, late failure reports, hard delete by attempt prefixes,
 * canonical requests, pg_cron provenance from pg_cron's own table.
 * Existing s3:// jobs keep running: grants are checked at submit.
 * ------------------------------------------------------------------------ */

-- Which roles may read which s3:// sources.  endpoint NULL is the target
-- store itself, a name is that registered source endpoint (the grant goes
-- when the endpoint is dropped).  A pattern is a key, or a key prefix
-- ending in '*'; '*' alone allows the whole bucket.
CREATE TABLE remora.source_grants (
	grantee			oid NOT NULL,
	bucket			text NOT NULL,
	prefix_pattern	text NOT NULL DEFAULT '*',
	endpoint		text REFERENCES remora.source_endpoints ON DELETE CASCADE,
	granted_by		oid NOT NULL,
	granted_at		timestamptz NOT NULL DEFAULT now(),
	UNIQUE NULLS NOT DISTINCT (grantee, bucket, prefix_pattern, endpoint)
);

-- The lock that claimers, and renew and reconcile when they re-create a
-- lost lease, hold while they count leases against
-- remora.max_active_leases: this one row, locked FOR UPDATE.  No role but
-- the extension's owner may lock it (an advisory lock, anyone could hold).
CREATE TABLE remora.lease_lock (
	id				boolean PRIMARY KEY DEFAULT true CHECK (id)
);
INSERT INTO remora.lease_lock VALUES (true);

SELECT pg_catalog.pg_extension_config_dump('remora.source_grants', '');
ALTER TABLE remora.source_grants ENABLE ROW LEVEL SECURITY;
CREATE POLICY source_grants_admin ON remora.source_grants FOR SELECT
	USING (pg_catalog.pg_has_role(current_user, 'remora_admin', 'USAGE'));
GRANT SELECT ON remora.source_grants TO remora_admin;

-- A target prefix as the directory its jobs' areas are in: '' or 'p/'.
CREATE OR REPLACE FUNCTION remora._prefix_dir(prefix text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN rtrim(prefix, '/') = '' THEN '' ELSE rtrim(prefix, '/') || '/' END $$;

-- May caller write where spec says?  The configured defaults always;
-- anything else needs a target grant (or remora_admin).
CREATE OR REPLACE FUNCTION remora._may_write(caller oid, spec jsonb) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT (spec ->> 'bucket' = current_setting('remora.default_bucket')
			AND spec ->> 'prefix' = rtrim(current_setting('remora.default_prefix'), '/'))
		OR pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE')
		OR EXISTS (SELECT 1 FROM remora.target_grants g
					WHERE g.bucket = spec ->> 'bucket'
					  AND spec ->> 'prefix' LIKE remora._glob_like(g.prefix_pattern)
					  AND pg_catalog.pg_has_role(caller, g.grantee, 'USAGE'))
$$;

-- May caller read the s3:// source of spec?  remora_admin reads
-- everything; anyone else needs a source grant for the bucket, the key or
-- prefix, and the endpoint (none: the target store).  An object's key must
-- match the pattern; a prefix source lists every key under it, so its
-- pattern must end in '*' and its stem must begin the prefix.
CREATE OR REPLACE FUNCTION remora._may_read(caller oid, spec jsonb) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT spec #>> '{source,kind}' NOT IN ('s3_object', 's3_prefix')
		OR pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE')
		OR EXISTS (SELECT 1 FROM remora.source_grants g
					WHERE g.bucket = spec #>> '{source,bucket}'
					  AND g.endpoint IS NOT DISTINCT FROM spec #>> '{options,endpoint}'
					  AND spec #>> '{source,key}' LIKE remora._glob_like(g.prefix_pattern)
					  AND (spec #>> '{source,kind}' = 's3_object'
						   OR right(g.prefix_pattern, 1) = '*')
					  AND pg_catalog.pg_has_role(caller, g.grantee, 'USAGE'))
$$;

-- Does an s3:// source on the target store reach into the staging and
-- result area of Remora's own jobs?  Every object a job writes is under
-- <prefix>/<job id>/<attempt id>/.  Refused: a key or prefix inside such
-- an area (by its shape, or under a job's <prefix>/<digits>/), and a
-- prefix whose listing could return keys of an area, now or later: a
-- parent of the directory of the default target, of an existing job's
-- prefix or of an exact target grant, and anything that overlaps a target
-- grant ending in '*' (jobs may be created anywhere under it).  Returns the
-- area reached (as '<dir><job id>/' or '<dir>…/<job id>/'), or NULL.
CREATE OR REPLACE FUNCTION remora._job_area_reached(spec jsonb) RETURNS text
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	WITH src AS (
		SELECT $1 #>> '{source,bucket}' AS bucket,
			   $1 #>> '{source,key}' AS path,
			   $1 #>> '{source,kind}' = 's3_prefix' AS listing
		 WHERE $1 #>> '{source,kind}' IN ('s3_object', 's3_prefix')
		   AND ($1 #>> '{options,endpoint}' IS NULL
				OR EXISTS (SELECT 1 FROM remora.source_endpoints e
							WHERE e.name = $1 #>> '{options,endpoint}'
							  AND rtrim(e.url, '/') = rtrim(current_setting('remora.s3_endpoint'), '/')))),
	dirs AS (
		SELECT remora._prefix_dir(current_setting('remora.default_prefix')) AS dir,
			   false AS wild
		  FROM src WHERE src.bucket = current_setting('remora.default_bucket')
		UNION
		SELECT remora._prefix_dir(j.prefix), false
		  FROM src JOIN remora.jobs j ON j.bucket = src.bucket
		UNION
		SELECT CASE WHEN right(g.prefix_pattern, 1) = '*'
					THEN rtrim(g.prefix_pattern, '*')
					ELSE remora._prefix_dir(g.prefix_pattern) END,
			   right(g.prefix_pattern, 1) = '*'
		  FROM src JOIN remora.target_grants g ON g.bucket = src.bucket)
	SELECT coalesce(
		(SELECT d.dir || CASE WHEN d.wild THEN '…/<job id>/' ELSE '<job id>/' END
		   FROM src, dirs d
		  WHERE (src.listing AND left(d.dir, length(src.path)) = src.path)
			 OR (src.listing AND d.wild AND left(src.path, length(d.dir)) = d.dir)
			 OR (NOT d.wild AND left(src.path, length(d.dir)) = d.dir
				 AND substr(src.path, length(d.dir) + 1) ~ '^[0-9]+/')
		  ORDER BY d.wild, d.dir DESC LIMIT 1),
		(SELECT '<prefix>/<job id>/<attempt id>/' FROM src
		  WHERE src.path ~ '(^|/)[0-9]+/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/'))
$$;

-- Record a validated job.  spec is the canonical definition with defaults
-- applied (its source without a query string); request is the canonical
-- request the idempotency key stands for; source_url is the whole URL when
-- it has a query string.
CREATE OR REPLACE FUNCTION remora._submit(caller oid, spec jsonb, request jsonb,
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
	area		text;
	cron_runs	oid;
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

	IF NOT remora._may_read(caller, spec) THEN
		RAISE EXCEPTION 'permission denied for source bucket "%" %', spec #>> '{source,bucket}',
			CASE WHEN spec #>> '{source,kind}' = 's3_prefix'
				 AND coalesce(spec #>> '{source,key}', '') = '' THEN '(the whole bucket)'
				 WHEN spec #>> '{source,kind}' = 's3_prefix'
				 THEN format('prefix "%s"', spec #>> '{source,key}')
				 ELSE format('key "%s"', spec #>> '{source,key}') END
			|| CASE WHEN endpoint IS NULL THEN '' ELSE format(' on endpoint "%s"', endpoint) END
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Reading an s3:// source needs a source grant for its bucket, key or prefix and endpoint.',
				  HINT = 'An administrator grants sources with remora.grant_source().';
	END IF;
	IF NOT pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE') THEN
		area := remora._job_area_reached(spec);
		IF area IS NOT NULL THEN
			RAISE EXCEPTION 'permission denied for source bucket "%" %', spec #>> '{source,bucket}',
				CASE WHEN spec #>> '{source,kind}' = 's3_prefix'
					 AND coalesce(spec #>> '{source,key}', '') = '' THEN '(the whole bucket)'
					 WHEN spec #>> '{source,kind}' = 's3_prefix'
					 THEN format('prefix "%s"', spec #>> '{source,key}')
					 ELSE format('key "%s"', spec #>> '{source,key}') END
				USING ERRCODE = 'insufficient_privilege',
					  DETAIL = format('The source reaches "%s", where Remora keeps the staging objects and results of jobs.', area),
					  HINT = 'Read a job''s result with remora_result() and remora_presign(); a prefix source must not contain the areas of Remora''s jobs.';
		END IF;
	END IF;

	-- Provenance: who, from where, and the pg_cron job when pg_cron runs us.
	-- Only the installed pg_cron extension's own run table is believed: a
	-- look-alike cron.job_run_details that a user created would forge it.
	SELECT c.oid INTO cron_runs
	  FROM pg_catalog.pg_extension x
	  JOIN pg_catalog.pg_depend d
		ON d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
	   AND d.refobjid = x.oid AND d.deptype = 'e'
	   AND d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
	  JOIN pg_catalog.pg_class c ON c.oid = d.objid
	  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	 WHERE x.extname = 'pg_cron' AND c.relname = 'job_run_details'
	   AND n.nspname = 'cron';
	IF cron_runs IS NOT NULL THEN
		EXECUTE format('SELECT jobid, runid FROM %s
						 WHERE job_pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
						   AND status OPERATOR(pg_catalog.=) ANY (ARRAY[''starting'', ''running''])
						 ORDER BY runid DESC LIMIT 1', cron_runs::pg_catalog.regclass)
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

-- Delete: tombstone (the job leaves the default views; objects stay).  An
-- unfinished job is cancelled first.  hard also records the request to
-- delete the job's objects, which the workers carry out.
CREATE OR REPLACE FUNCTION remora._delete(caller oid, job bigint, hard boolean)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	j	remora.jobs := remora._job_for(caller, job);
BEGIN
	IF j.state IN ('queued', 'retrying', 'running') THEN
		PERFORM remora._cancel(caller, job);
	END IF;
	UPDATE remora.jobs
	   SET deleted_at = coalesce(deleted_at, now()),
		   hard_delete_requested_at = CASE WHEN hard
			   THEN coalesce(hard_delete_requested_at, now())
			   ELSE hard_delete_requested_at END
	 WHERE job_id = job;
	-- a job that never ran wrote nothing: its hard delete is done
	IF hard AND NOT EXISTS (SELECT 1 FROM remora.attempts a WHERE a.job_id = job) THEN
		UPDATE remora.jobs SET hard_deleted_at = coalesce(hard_deleted_at, now())
		 WHERE job_id = job;
	END IF;
END
$$;

-- Administration of source grants (remora_admin): who may read which
-- s3:// sources.  endpoint NULL is the target store, a name is a
-- registered source endpoint.
CREATE OR REPLACE FUNCTION remora.grant_source(role name, bucket text,
									prefix text DEFAULT '*',
									endpoint text DEFAULT NULL)
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
	IF $3 IS NULL OR $3 ~ '(^/|//|(^|/)\.\.?(/|$)|[[:cntrl:]\\])' OR length($3) > 1024
		OR position('*' IN rtrim($3, '*')) > 0 THEN
		RAISE EXCEPTION 'invalid prefix pattern' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'A pattern is a key, or a key prefix ending in ''*''; no leading ''/'', ''.'' or ''..'' segments, or control characters.';
	END IF;
	IF $4 IS NOT NULL AND NOT EXISTS (SELECT 1 FROM remora.source_endpoints e WHERE e.name = $4) THEN
		RAISE EXCEPTION 'source endpoint "%" does not exist', $4
			USING ERRCODE = 'undefined_object',
				  HINT = 'Register it first with remora.register_source_endpoint().';
	END IF;
	INSERT INTO remora.source_grants (grantee, bucket, prefix_pattern, endpoint, granted_by)
	VALUES (grantee, $2, $3, $4, coalesce(caller, 0))
	ON CONFLICT DO NOTHING;
END
$$;

CREATE OR REPLACE FUNCTION remora.revoke_source(role name, bucket text,
									 prefix text DEFAULT '*',
									 endpoint text DEFAULT NULL)
RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH gone AS (
		DELETE FROM remora.source_grants g
		 WHERE g.grantee = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = $1)
		   AND g.bucket = $2 AND g.prefix_pattern = $3
		   AND g.endpoint IS NOT DISTINCT FROM $4
		RETURNING 1)
	SELECT count(*) > 0 FROM gone
$$;

-- Take the lease lock (see remora.lease_lock) until the transaction ends.
CREATE OR REPLACE FUNCTION remora._lock_leases() RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM 1 FROM remora.lease_lock FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO remora.lease_lock VALUES (true) ON CONFLICT DO NOTHING;
		PERFORM 1 FROM remora.lease_lock FOR UPDATE;
	END IF;
END
$$;

-- Leases in use, as claim counts them: every running job (its lease may
-- have been lost with coordination state and not be re-created yet) and
-- every lease row.
CREATE OR REPLACE FUNCTION remora._leases_in_use() RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT count(*)
	  FROM (SELECT j.job_id FROM remora.jobs j WHERE j.state = 'running'
			UNION
			SELECT l.job_id FROM remora.leases l) s
$$;

-- Hand out up to max_jobs runnable jobs, by priority then age.  Each claim
-- creates a new attempt with a fencing token greater than any before it
-- for the job, records the recovery ledger, and takes a lease.  Leases in
-- use never exceed remora.max_active_leases: claimers serialise on the
-- lease lock for the count (running jobs count, so a lost lease table does
-- not make room), and skip job rows others hold.  A lease runs from when
-- it is written (clock_timestamp()), not from a transaction start that may
-- have waited on the lock.
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
	expires		timestamptz;
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

	PERFORM remora._lock_leases();
	room := least(max_jobs, lim - remora._leases_in_use());
	expires := clock_timestamp() + remora._setting_interval('remora.lease_duration');

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

-- Extend the lease of the current attempt and token.  ok is false once the
-- attempt has lost authority; cancel_requested tells it to stop.  The new
-- expiry counts from when it is written, so a renewal that waited on the
-- job lock never writes a lease that has already lapsed; a lease lost with
-- coordination state is re-created under the lease lock.
CREATE OR REPLACE FUNCTION remora.renew(attempt_id uuid, fencing_token bigint)
RETURNS TABLE (ok boolean, cancel_requested boolean,
			   lease_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_attempt	uuid := $1;
	p_token		bigint := $2;
	v			record;
	expires		timestamptz;
BEGIN
	v := remora._authorize(p_attempt, p_token);
	IF v.verdict <> 'ok' THEN
		ok := false;
		cancel_requested := coalesce((v.j).cancel_requested_at IS NOT NULL, false);
		lease_expires_at := NULL;
		RETURN NEXT;
		RETURN;
	END IF;

	IF NOT EXISTS (SELECT 1 FROM remora.leases l WHERE l.attempt_id = p_attempt) THEN
		PERFORM remora._lock_leases();
	END IF;
	expires := clock_timestamp() + remora._setting_interval('remora.lease_duration');
	INSERT INTO remora.leases AS l (attempt_id, job_id, fencing_token, incarnation, expires_at)
	VALUES (p_attempt, (v.j).job_id, p_token, (v.a).incarnation, expires)
	ON CONFLICT ON CONSTRAINT leases_pkey
	DO UPDATE SET expires_at = EXCLUDED.expires_at, renewed_at = clock_timestamp();

	ok := true;
	cancel_requested := false;
	lease_expires_at := expires;
	RETURN NEXT;
END
$$;

-- Validate a checkpoint before anything is written: what a later claim
-- offers as resume state must be what the workers can read back.
CREATE OR REPLACE FUNCTION remora._check_checkpoint(cp jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	st		jsonb := cp -> 'state';
	seg		jsonb;
	bad		text;
BEGIN
	IF cp IS NULL OR jsonb_typeof(cp) <> 'object' THEN
		bad := 'A checkpoint must be a JSON object.';
	ELSIF NOT remora._is_count(cp -> 'bytes_done') OR NOT remora._is_count(cp -> 'bytes_total') THEN
		bad := '"bytes_done" and "bytes_total" must be non-negative integers.';
	ELSIF jsonb_typeof(cp -> 'restart_reason') NOT IN ('string', 'null') THEN
		bad := '"restart_reason" must be a string.';
	ELSIF cp ? 'state' AND jsonb_typeof(st) <> 'object' THEN
		bad := '"state" must be a JSON object.';
	ELSIF jsonb_typeof(st -> 'etag') NOT IN ('string', 'null')
		OR jsonb_typeof(st -> 'last_modified') NOT IN ('string', 'null')
		OR jsonb_typeof(st -> 'sha256_state') NOT IN ('string', 'null') THEN
		bad := '"state.etag", "state.last_modified" and "state.sha256_state" must be strings.';
	ELSIF NOT remora._is_count(st -> 'size') OR NOT remora._is_count(st -> 'members_done')
		OR NOT remora._is_count(st -> 'members_total') THEN
		bad := '"state.size", "state.members_done" and "state.members_total" must be non-negative integers.';
	ELSIF st ? 'segments' AND jsonb_typeof(st -> 'segments') <> 'array' THEN
		bad := '"state.segments" must be an array.';
	END IF;
	IF bad IS NULL AND jsonb_typeof(st -> 'segments') = 'array' THEN
		FOR seg IN SELECT value FROM jsonb_array_elements(st -> 'segments') LOOP
			IF jsonb_typeof(seg) <> 'object'
				OR jsonb_typeof(seg -> 'key') IS DISTINCT FROM 'string'
				OR jsonb_typeof(seg -> 'etag') IS DISTINCT FROM 'string'
				OR seg -> 'size' IS NULL OR NOT remora._is_count(seg -> 'size') THEN
				bad := 'Each of "state.segments" needs a string key and etag and a non-negative integer size.';
				EXIT;
			END IF;
		END LOOP;
	END IF;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'invalid checkpoint'
			USING ERRCODE = 'invalid_parameter_value', DETAIL = bad;
	END IF;
END
$$;

-- Is v absent (SQL NULL) or a non-negative integer that fits in a bigint?
CREATE OR REPLACE FUNCTION remora._is_count(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT CASE WHEN v IS NULL THEN true
				WHEN jsonb_typeof(v) <> 'number' THEN false
				ELSE (v #>> '{}')::numeric >= 0
					 AND (v #>> '{}')::numeric = trunc((v #>> '{}')::numeric)
					 AND (v #>> '{}')::numeric <= 9223372036854775807 END
$$;

-- Record validated resume progress and completed members of the current
-- attempt.  checkpoint: {"state": {...}, "bytes_done": n, "bytes_total": n,
-- "members": [{path, bucket, key, size, sha256, etag, source}]}; every key
-- is optional.  Repeating a call records nothing new.
CREATE OR REPLACE FUNCTION remora.checkpoint(attempt_id uuid, fencing_token bigint,
								  checkpoint jsonb)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_attempt	uuid := $1;
	p_token		bigint := $2;
	p_cp		jsonb := $3;
	v		record;
BEGIN
	PERFORM remora._check_checkpoint(p_cp);
	PERFORM remora._check_members(p_cp -> 'members');

	v := remora._authorize(p_attempt, p_token);
	IF v.verdict <> 'ok' THEN
		RETURN false;
	END IF;

	PERFORM remora._record_members(p_attempt, p_cp -> 'members');

	-- the attempt could not use the checkpoint it was offered: say so, and
	-- drop the stale one
	IF jsonb_typeof(p_cp -> 'restart_reason') = 'string' THEN
		UPDATE remora.attempts a
		   SET restart_reason = coalesce(a.restart_reason, p_cp ->> 'restart_reason')
		 WHERE a.attempt_id = p_attempt;
		DELETE FROM remora.checkpoints c
		 WHERE c.job_id = (v.j).job_id AND c.attempt_id <> p_attempt;
	END IF;

	IF p_cp ? 'state' THEN
		INSERT INTO remora.checkpoints AS c
			(job_id, attempt_id, fencing_token, state, bytes_done, bytes_total)
		VALUES ((v.j).job_id, p_attempt, p_token,
				p_cp -> 'state',
				coalesce((p_cp ->> 'bytes_done')::bigint, 0),
				(p_cp ->> 'bytes_total')::bigint)
		ON CONFLICT ON CONSTRAINT checkpoints_pkey DO UPDATE
		   SET attempt_id = EXCLUDED.attempt_id,
			   fencing_token = EXCLUDED.fencing_token,
			   state = EXCLUDED.state,
			   bytes_done = EXCLUDED.bytes_done,
			   bytes_total = EXCLUDED.bytes_total,
			   writes = c.writes + 1,
			   updated_at = now();
	END IF;
	RETURN true;
END
$$;

-- The compare-and-swap that publishes a result.  True only for the current
-- attempt and token of a running job whose cancellation was not requested
-- (or for the exact repeat of the call that succeeded); false otherwise,
-- changing nothing.  The descriptor must name a manifest under the
-- attempt's own staging prefix; its member count and bytes must equal those
-- of the members recorded for the attempt plus its "entries", exactly.
CREATE OR REPLACE FUNCTION remora.commit(attempt_id uuid, fencing_token bigint,
							  manifest jsonb)
RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_attempt	uuid := $1;
	p_token		bigint := $2;
	v			record;
	r			remora.results;
	d			jsonb;
	staging		text;
	n			bigint;
	total		bigint;
BEGIN
	d := remora._check_manifest(manifest);

	v := remora._authorize(p_attempt, p_token);
	IF v.verdict <> 'ok' THEN
		-- the repeat of a successful call (also one that waited for it on the
		-- job lock) is true; everything else is refused
		SELECT * INTO r FROM remora.results res WHERE res.attempt_id = p_attempt;
		RETURN FOUND AND r.fencing_token = p_token AND r.descriptor = d;
	END IF;

	staging := remora._staging_prefix((v.j).prefix, (v.j).job_id, p_attempt);
	IF left(d ->> 'key', length(staging)) <> staging
		OR length(d ->> 'key') = length(staging) THEN
		RAISE WARNING 'commit refused: the manifest key is not under the attempt''s staging prefix';
		RETURN false;
	END IF;

	-- every member must be an object this attempt wrote, in the job's
	-- bucket, and not the manifest itself
	IF EXISTS (SELECT 1
				 FROM (SELECT m.bucket, m.key FROM remora.members m
						WHERE m.attempt_id = p_attempt
					   UNION ALL
					   SELECT e.value ->> 'bucket', e.value ->> 'key'
						 FROM jsonb_array_elements(coalesce(d -> 'entries', '[]')) e) k
				WHERE k.bucket <> (v.j).bucket
				   OR left(k.key, length(staging)) <> staging
				   OR k.key = d ->> 'key') THEN
		RAISE WARNING 'commit refused: a member is not an object of the attempt''s staging prefix, or is the manifest';
		RETURN false;
	END IF;

	-- the member set this commit would publish: recorded members plus the
	-- descriptor's entries.  They must add up exactly to the descriptor's
	-- counts, also when there are none: a descriptor that claims members
	-- nobody recorded would publish an empty result.
	SELECT count(*), coalesce(sum(s.size), 0) INTO n, total
	  FROM (SELECT m.path, m.size FROM remora.members m
			 WHERE m.attempt_id = p_attempt
			UNION
			SELECT e.value ->> 'path', (e.value ->> 'size')::bigint
			  FROM jsonb_array_elements(coalesce(d -> 'entries', '[]')) e) s;
	IF n <> (d ->> 'members')::bigint OR total <> (d ->> 'bytes')::bigint THEN
		RAISE WARNING 'commit refused: the manifest lists % members and % bytes, the attempt recorded % and %',
			d ->> 'members', d ->> 'bytes', n, total;
		RETURN false;
	END IF;
	PERFORM remora._record_members(p_attempt, d -> 'entries');

	INSERT INTO remora.results
		(job_id, attempt_id, fencing_token, manifest_key, manifest_etag,
		 manifest_sha256, members, bytes, descriptor)
	VALUES ((v.j).job_id, p_attempt, p_token, d ->> 'key',
			d ->> 'etag', d ->> 'sha256', (d ->> 'members')::bigint,
			(d ->> 'bytes')::bigint, d);
	UPDATE remora.attempts a SET state = 'succeeded', finished_at = now()
	 WHERE a.attempt_id = p_attempt;
	UPDATE remora.jobs jb SET state = 'succeeded', finished_at = now()
	 WHERE jb.job_id = (v.j).job_id;
	DELETE FROM remora.leases l WHERE l.attempt_id = p_attempt;
	DELETE FROM remora.checkpoints c WHERE c.job_id = (v.j).job_id;
	RETURN true;
END
$$;

-- Report an attempt's failure.  Returns the job's resulting state; a report
-- from an attempt that no longer holds authority changes nothing, and one
-- from an attempt that no longer exists (pruned) returns NULL, so that a
-- late report never wedges the worker that sends it.
CREATE OR REPLACE FUNCTION remora.fail(attempt_id uuid, fencing_token bigint,
							error jsonb, retryable boolean)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_attempt	uuid := $1;
	p_token		bigint := $2;
	v		record;
BEGIN
	IF error IS NULL OR jsonb_typeof(error) <> 'object' THEN
		RAISE EXCEPTION 'invalid error'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'error must be a JSON object such as {"class": "http", "message": "...", "http_status": 503}.';
	END IF;
	IF retryable IS NULL THEN
		RAISE EXCEPTION 'retryable must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;

	v := remora._authorize(p_attempt, p_token);
	IF v.verdict <> 'ok' THEN
		-- unknown (pruned by retention, or never issued): NULL, nothing to do
		RETURN (v.j).state;
	END IF;
	RETURN remora._settle(v.j, v.a, 'failed',
						  jsonb_build_object('class', 'unknown') || error,
						  retryable);
END
$$;

-- Rebuild coordination state from durable state and expire lapsed leases.
-- Returns the number of repairs made.  Safe to run at any time, by any
-- number of callers.
CREATE OR REPLACE FUNCTION remora.reconcile() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	repairs		integer := 0;
	n			integer;
	l			record;
	v			record;
BEGIN
	-- an incarnation known to have stopped holds no live lease
	UPDATE remora.leases le SET expires_at = now() - interval '1 microsecond'
	  FROM remora.incarnations i
	 WHERE i.incarnation = le.incarnation AND i.stopped_at IS NOT NULL
	   AND le.expires_at >= now();

	-- leases that lapsed: the attempt is lost (settled under the job lock).
	-- A job row someone else holds (its worker renewing, its owner
	-- cancelling in an open transaction) is left for the next round, so
	-- that nobody can stall the reconciliation of other jobs.
	FOR l IN SELECT le.attempt_id, le.fencing_token, le.job_id FROM remora.leases le
			  WHERE le.expires_at < now() ORDER BY le.job_id LOOP
		PERFORM 1 FROM remora.jobs j WHERE j.job_id = l.job_id FOR UPDATE SKIP LOCKED;
		CONTINUE WHEN NOT FOUND;
		v := remora._authorize(l.attempt_id, l.fencing_token);
		IF v.verdict IN ('lost', 'cancelled') THEN
			repairs := repairs + 1;
		END IF;
	END LOOP;

	-- leases whose attempt no longer runs
	DELETE FROM remora.leases le
	 WHERE NOT EXISTS (SELECT 1 FROM remora.attempts a
						JOIN remora.jobs j ON j.job_id = a.job_id
					   WHERE a.attempt_id = le.attempt_id AND a.state = 'running'
						 AND j.current_attempt = a.attempt_id);
	GET DIAGNOSTICS n = ROW_COUNT;
	repairs := repairs + n;

	-- running attempts whose lease was lost with coordination state: a
	-- fresh lease, so that a live worker keeps it and a dead one loses it
	-- (under the lease lock: these count against remora.max_active_leases
	-- as running jobs already)
	PERFORM remora._lock_leases();
	INSERT INTO remora.leases (attempt_id, job_id, fencing_token, incarnation, expires_at)
	SELECT a.attempt_id, a.job_id, a.fencing_token, a.incarnation,
		   clock_timestamp() + remora._setting_interval('remora.lease_duration')
	  FROM remora.jobs j
	  JOIN remora.attempts a ON a.attempt_id = j.current_attempt
	 WHERE j.state = 'running' AND a.state = 'running'
	   AND NOT EXISTS (SELECT 1 FROM remora.leases le WHERE le.attempt_id = a.attempt_id)
	ON CONFLICT DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	repairs := repairs + n;

	-- queue entries: exactly the jobs waiting to be claimed
	DELETE FROM remora.queue q
	 WHERE NOT EXISTS (SELECT 1 FROM remora.jobs j
					   WHERE j.job_id = q.job_id AND j.state IN ('queued', 'retrying'));
	GET DIAGNOSTICS n = ROW_COUNT;
	repairs := repairs + n;

	INSERT INTO remora.queue (job_id, priority, not_before)
	SELECT j.job_id, j.priority, j.not_before
	  FROM remora.jobs j
	 WHERE j.state IN ('queued', 'retrying')
	   AND NOT EXISTS (SELECT 1 FROM remora.queue q WHERE q.job_id = j.job_id)
	ON CONFLICT DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	repairs := repairs + n;

	RETURN repairs;
END
$$;

-- Objects a worker should delete, most urgent first:
--  * a hard-deleted job: the staging prefix of each attempt that was not
--    cleaned yet (attempt_id set; the worker records it with
--    remora.staging_cleaned), then, last, the whole staging prefix of the
--    attempt whose result was committed (or of the last attempt) with
--    attempt_id NULL (recorded with remora.job_objects_deleted).  Only the
--    job's own attempt prefixes, <prefix>/<job id>/<attempt id>/: another
--    job whose prefix happens to be <prefix>/<job id> is not touched;
--  * staging: every attempt of a finished job that did not commit (all of
--    its staging prefix), and the segments of the one that did.
-- Attempts of unfinished jobs keep theirs: a replacement may reuse them.
-- Nothing is touched until one lease after the job or attempt ended, so
-- that a zombie that has not yet heard it lost has stopped writing.  (One
-- paused for longer may still write afterwards; commit refuses it, and its
-- objects are left to the store's lifecycle rules.)
CREATE OR REPLACE FUNCTION remora.staging_to_clean(max_rows integer DEFAULT 1)
RETURNS TABLE (attempt_id uuid, job_id bigint, bucket text, prefix text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH doomed AS (
		SELECT j.job_id, j.bucket, j.prefix, j.hard_delete_requested_at,
			   r.attempt_id AS committed
		  FROM remora.jobs j
		  LEFT JOIN remora.results r ON r.job_id = j.job_id
		 WHERE j.hard_delete_requested_at IS NOT NULL AND j.hard_deleted_at IS NULL
		   AND j.state IN ('succeeded', 'failed', 'cancelled')
		   AND (j.delete_after IS NULL OR j.delete_after <= now())
		   AND coalesce(j.finished_at, j.hard_delete_requested_at)
			   <= now() - remora._setting_interval('remora.lease_duration'))
	(SELECT u.attempt_id, u.job_id, u.bucket, u.prefix
	   FROM (SELECT a.attempt_id, d.job_id, d.bucket,
					remora._staging_prefix(d.prefix, d.job_id, a.attempt_id) AS prefix,
					d.hard_delete_requested_at AS since
			   FROM doomed d
			   JOIN remora.attempts a ON a.job_id = d.job_id
			  WHERE a.cleaned_at IS NULL
				AND a.attempt_id IS DISTINCT FROM d.committed
				AND (a.clean_after IS NULL OR a.clean_after <= now())
			 UNION ALL
			 SELECT NULL::uuid, d.job_id, d.bucket,
					remora._staging_prefix(d.prefix, d.job_id, last.attempt_id),
					d.hard_delete_requested_at
			   FROM doomed d
			   CROSS JOIN LATERAL (
					SELECT a.attempt_id FROM remora.attempts a
					 WHERE a.job_id = d.job_id
					 ORDER BY a.attempt_id = d.committed DESC, a.attempt_no DESC
					 LIMIT 1) last
			  WHERE NOT EXISTS (SELECT 1 FROM remora.attempts a
								 WHERE a.job_id = d.job_id AND a.cleaned_at IS NULL
								   AND a.attempt_id IS DISTINCT FROM d.committed)) u
	  ORDER BY u.since, u.job_id, u.attempt_id NULLS LAST
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

CREATE VIEW remora_source_grants WITH (security_invoker = true) AS
SELECT pg_catalog.pg_get_userbyid(g.grantee) AS role,
	   g.bucket,
	   g.prefix_pattern,
	   g.endpoint,
	   pg_catalog.pg_get_userbyid(g.granted_by) AS granted_by,
	   g.granted_at
  FROM remora.source_grants g;

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA remora FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.grant_source(name, text, text, text),
	remora.revoke_source(name, text, text, text) TO remora_admin;
GRANT SELECT ON remora_source_grants TO remora_admin;
REVOKE ALL ON remora_source_grants FROM PUBLIC;

/* ------------------------------------------------------------------------
 * What a dedicated worker role (remora.worker_role, a
 * LOGIN role that is a member of remora_worker) needs besides the protocol
 * functions: the worker records its incarnation and heartbeat, reads the
 * registered endpoint its job names, and looks up members of a job's
 * earlier attempts.  remora_worker can claim any job already; this adds
 * no job it could not see.
 * ------------------------------------------------------------------------ */
GRANT SELECT (incarnation), INSERT (incarnation, pid, kind),
	UPDATE (heartbeat_at, stopped_at) ON remora.incarnations TO remora_worker;
GRANT SELECT ON remora.source_endpoints, remora.jobs, remora.attempts,
	remora.members TO remora_worker;
CREATE POLICY source_endpoints_worker ON remora.source_endpoints FOR SELECT
	TO remora_worker USING (true);
CREATE POLICY jobs_worker ON remora.jobs FOR SELECT
	TO remora_worker USING (true);
CREATE POLICY attempts_worker ON remora.attempts FOR SELECT
	TO remora_worker USING (true);
CREATE POLICY members_worker ON remora.members FOR SELECT
	TO remora_worker USING (true);
