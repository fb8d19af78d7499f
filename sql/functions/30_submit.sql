/* ------------------------------------------------------------------------
 * User surface (the C entry points validate, then call these as the owner)
 * ------------------------------------------------------------------------ */

-- A target pattern as a LIKE pattern: '*' is any continuation.
CREATE OR REPLACE FUNCTION remora._glob_like(pattern text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT replace(replace(replace(replace(pattern, '\', '\\'), '%', '\%'), '_', '\_'), '*', '%') $$;

-- May caller write where spec says?  The configured defaults always;
-- anything else needs a target grant (or remora_admin).  Only
-- remora._submit calls it, with search_path pinned: no SET clause of its
-- own, which cost every submit a save and restore of the setting.
CREATE OR REPLACE FUNCTION remora._may_write(caller oid, spec jsonb) RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
BEGIN
	-- the defaults first, alone: a simple expression, planned once
	IF spec ->> 'bucket' = current_setting('remora.default_bucket')
		AND spec ->> 'prefix' = rtrim(current_setting('remora.default_prefix'), '/') THEN
		RETURN true;
	END IF;
	RETURN pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE')
		OR EXISTS (SELECT 1 FROM remora.target_grants g
					WHERE g.bucket = spec ->> 'bucket'
					  AND spec ->> 'prefix' LIKE remora._glob_like(g.prefix_pattern)
					  AND pg_catalog.pg_has_role(caller, g.grantee, 'USAGE'));
END
$$;

-- Where caller may write, said in a refusal: the default bucket and
-- prefix, then each target grant of its roles as bucket/pattern.
CREATE OR REPLACE FUNCTION remora._writable_by(caller oid) RETURNS text
LANGUAGE sql STABLE
AS $$
	SELECT format('%s/%s (the default)', current_setting('remora.default_bucket'),
				  rtrim(current_setting('remora.default_prefix'), '/'))
		   || coalesce(', ' || string_agg(DISTINCT g.bucket || '/' || g.prefix_pattern, ', '
								 ORDER BY g.bucket || '/' || g.prefix_pattern), '')
	  FROM remora.target_grants g
	 WHERE pg_catalog.pg_has_role(caller, g.grantee, 'USAGE')
$$;

-- A target prefix as the directory its jobs' areas are in: '' or 'p/'.
CREATE OR REPLACE FUNCTION remora._prefix_dir(prefix text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN rtrim(prefix, '/') = '' THEN '' ELSE rtrim(prefix, '/') || '/' END $$;

-- May caller read the s3:// or hf:// source of spec?  remora_admin reads
-- everything.  For an s3:// source anyone else needs a source grant for
-- the bucket, the key or prefix, and the endpoint (none: the target
-- store).  An object's key must match the pattern; a prefix source lists
-- every key under it, so its pattern must end in '*' and its stem must
-- begin the prefix.  An hf:// source is read with the deployment's token
-- when one is set, which opens every private and gated repository the
-- token can read: then it needs a hub grant ('models' or 'datasets', the
-- pattern over owner/name); without a token only public repositories can
-- be read, and they need none.  Other sources need no grant.
--
-- remora.hf_token is superuser-only: this is called by remora._submit,
-- which runs as the extension's owner.
CREATE OR REPLACE FUNCTION remora._may_read(caller oid, spec jsonb) RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	RETURN CASE
		WHEN spec #>> '{source,kind}' IN ('s3_object', 's3_prefix') THEN
			pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE')
			OR EXISTS (SELECT 1 FROM remora.source_grants g
						WHERE NOT g.hub
						  AND g.bucket = spec #>> '{source,bucket}'
						  AND g.endpoint IS NOT DISTINCT FROM spec #>> '{options,endpoint}'
						  AND spec #>> '{source,key}' LIKE remora._glob_like(g.prefix_pattern)
						  AND (spec #>> '{source,kind}' = 's3_object'
							   OR right(g.prefix_pattern, 1) = '*')
						  AND pg_catalog.pg_has_role(caller, g.grantee, 'USAGE'))
		WHEN spec #>> '{source,kind}' = 'hf' THEN
			coalesce(pg_catalog.current_setting('remora.hf_token', true), '') = ''
			OR pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE')
			OR EXISTS (SELECT 1 FROM remora.source_grants g
						WHERE g.hub
						  AND g.bucket = (spec #>> '{source,repo_type}') || 's'
						  AND spec #>> '{source,repo}' LIKE remora._glob_like(g.prefix_pattern)
						  AND pg_catalog.pg_has_role(caller, g.grantee, 'USAGE'))
		ELSE true
	END;
END
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
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	RETURN (WITH src AS (
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
		 WHERE j.source_kind <> 'export'
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
		  WHERE src.path ~ '(^|/)[0-9]+/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/')));
END
$$;

-- options.reuse_from of a job definition (doc/user-guide.md, "Mirrors"),
-- resolved to the id of the job whose result the new job may copy from:
-- "latest" is the caller's newest job that succeeded with the same source
-- and bucket (none: the key goes, and everything is downloaded); an id must
-- be a job the caller can see (P0002 otherwise, as remora_result says),
-- that succeeded, of the same source kind (22023 otherwise).
CREATE OR REPLACE FUNCTION remora._resolve_reuse_from(caller oid, p_spec jsonb)
RETURNS jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	given	jsonb := p_spec #> '{options,reuse_from}';
	earlier	record;
BEGIN
	IF given IS NULL THEN
		RETURN p_spec;
	END IF;
	IF jsonb_typeof(given) = 'string' THEN	-- "latest": remora_submit checked it
		SELECT j.job_id INTO earlier
		  FROM remora.jobs j
		 WHERE j.owner = caller AND j.source = p_spec #>> '{source,uri}'
		   AND j.bucket = p_spec ->> 'bucket' AND j.state = 'succeeded'
		   AND j.deleted_at IS NULL AND j.hard_delete_requested_at IS NULL
		   AND j.spec #> '{options,dry_run}' IS DISTINCT FROM 'true'
		 ORDER BY j.job_id DESC
		 LIMIT 1;
		IF NOT FOUND THEN
			RETURN p_spec #- '{options,reuse_from}';
		END IF;
		RETURN jsonb_set(p_spec, '{options,reuse_from}', to_jsonb(earlier.job_id));
	END IF;
	SELECT j.job_id, j.state, j.source_kind,
		   j.spec #> '{options,dry_run}' = 'true' AS dry_run INTO earlier
	  FROM remora.jobs j
	 WHERE j.job_id = (given #>> '{}')::bigint
	   AND j.deleted_at IS NULL AND j.hard_delete_requested_at IS NULL
	   AND (j.owner = caller OR pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE'));
	IF NOT FOUND THEN
		RAISE EXCEPTION 'job % does not exist', given #>> '{}'
			USING ERRCODE = 'no_data_found',
				  DETAIL = 'options.reuse_from names a job whose result the new job copies from: one of yours.';
	END IF;
	IF earlier.state <> 'succeeded' THEN
		RAISE EXCEPTION 'invalid option "reuse_from"'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = format('Job %s is %s: only a job that succeeded has a result to reuse.',
								  earlier.job_id, earlier.state);
	END IF;
	IF earlier.dry_run THEN
		RAISE EXCEPTION 'invalid option "reuse_from"'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = format('Job %s was a dry run: its result names members, it holds none.',
								  earlier.job_id);
	END IF;
	IF earlier.source_kind <> p_spec #>> '{source,kind}' THEN
		RAISE EXCEPTION 'invalid option "reuse_from"'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = format('Job %s has a source of kind %s, this job one of kind %s.',
								  earlier.job_id, earlier.source_kind, p_spec #>> '{source,kind}');
	END IF;
	RETURN p_spec;
END
$$;

-- Record a validated job.  spec is the canonical definition with defaults
-- applied (its source without a query string); request is the canonical
-- request the idempotency key stands for; source_url is the whole URL when
-- it has a query string.  A notify_url's query string goes the same way:
-- into remora.notify_urls, out of the options.
-- Model: Submit (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora._submit(caller oid, spec jsonb, request jsonb,
							   idem_key text, source_url text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	req_hash	text := encode(sha256(convert_to(request::text, 'UTF8')), 'hex');
	kind		text := spec #>> '{source,kind}';
	existing	record;
	new_id		bigint;
	endpoint	text := spec #>> '{options,endpoint}';
	cron_job	bigint;
	cron_run	bigint;
	prov		jsonb;
	area		text;
	cron_runs	oid;
	def_hash	text;
	acc_digest	text;
	notify		text := spec #>> '{options,notify_url}';
BEGIN
	IF idem_key IS NOT NULL THEN
		SELECT job_id, request_hash, source_kind INTO existing
		  FROM remora.jobs WHERE owner = caller AND idempotency_key = idem_key;
		IF FOUND THEN
			IF existing.request_hash <> req_hash THEN
				RAISE EXCEPTION 'idempotency key "%" was already used for % %', idem_key,
					CASE WHEN existing.source_kind = 'export' THEN 'export' ELSE 'job' END, existing.job_id
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
				  DETAIL = 'Only the default bucket and prefix, and the targets granted to your roles, may be written: '
						   || remora._writable_by(caller) || '.',
				  HINT = 'An administrator grants targets with remora.grant_target().';
	END IF;

	IF endpoint IS NOT NULL THEN
		IF NOT EXISTS (SELECT 1 FROM remora.source_endpoints WHERE name = endpoint) THEN
			RAISE EXCEPTION 'invalid option "endpoint"'
				USING ERRCODE = 'invalid_parameter_value',
					  DETAIL = format('No source endpoint named "%s" is registered.', endpoint),
					  HINT = 'An administrator registers source endpoints.';
		END IF;
	END IF;

	spec := remora._resolve_reuse_from(caller, spec);

	-- _may_read and _job_area_reached judge s3:// and hf:// sources alone
	-- (any other is readable and reaches no job's area): not called for
	-- the others, the submits that must be cheapest
	IF kind = 'hf' AND NOT remora._may_read(caller, spec) THEN
		RAISE EXCEPTION 'permission denied for Hugging Face % "%"',
			spec #>> '{source,repo_type}', spec #>> '{source,repo}'
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Hub repositories are read with the deployment''s token (remora.hf_token), which may open private and gated ones: reading one needs a source grant on endpoint "hf" for its owner/name.',
				  HINT = format('An administrator grants it with remora.grant_source(role, %L, %L, ''hf'').',
								(spec #>> '{source,repo_type}') || 's', spec #>> '{source,repo}');
	END IF;
	IF kind IN ('s3_object', 's3_prefix') AND NOT remora._may_read(caller, spec) THEN
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
	IF kind IN ('s3_object', 's3_prefix')
		AND NOT pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE') THEN
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

	-- a role at its max_queued is refused (53400); exports count too.
	-- Called only when a limit may apply (its own max_queued, or the
	-- default's): a submit without one pays this probe, not the call.
	IF coalesce(nullif(current_setting('remora.default_role_max_queued', true), '')::integer, 0) <> 0
		OR EXISTS (SELECT 1 FROM remora.role_limits l
					WHERE l.role_id = caller AND l.max_queued <> 0) THEN
		PERFORM remora._check_queue_limit(caller, idem_key);
	END IF;

	-- Provenance: who, from where, and the pg_cron job when pg_cron runs us.
	-- Only the installed pg_cron extension's own run table is believed: a
	-- look-alike cron.job_run_details that a user created would forge it.
	-- Without a relation of that name (no pg_cron) the join is not run: a
	-- simple expression, planned once.
	IF pg_catalog.to_regclass('cron.job_run_details') IS NOT NULL THEN
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
	END IF;
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

	IF strpos(notify, '?') > 0 THEN
		spec := jsonb_set(spec, '{options,notify_url}', to_jsonb(split_part(notify, '?', 1)));
	ELSE
		notify := NULL;
	END IF;
	def_hash := encode(sha256(convert_to(spec::text || coalesce(source_url, '')
										 || coalesce(notify, ''), 'UTF8')), 'hex');
	acc_digest := encode(sha256(convert_to(jsonb_build_object(
		'owner', caller, 'role', pg_get_userbyid(caller),
		'bucket', spec ->> 'bucket', 'prefix', spec ->> 'prefix',
		'endpoint', endpoint)::text, 'UTF8')), 'hex');
	-- Without a key nothing can conflict: a plain INSERT, where ON
	-- CONFLICT would insert speculatively and confirm the row in a second
	-- WAL record.
	IF idem_key IS NULL THEN
		INSERT INTO remora.jobs
			(owner, source, source_kind, bucket, prefix, spec, label,
			 priority, max_attempts, request_hash, definition_hash,
			 access_digest, provenance)
		VALUES
			(caller, spec #>> '{source,uri}', kind, spec ->> 'bucket',
			 spec ->> 'prefix', spec, spec #>> '{options,label}',
			 (spec #>> '{options,priority}')::integer,
			 (spec #>> '{options,max_attempts}')::integer,
			 req_hash, def_hash, acc_digest, prov)
		RETURNING job_id INTO new_id;
	ELSE
		INSERT INTO remora.jobs
			(owner, source, source_kind, bucket, prefix, spec, label,
			 priority, max_attempts, idempotency_key, request_hash,
			 definition_hash, access_digest, provenance)
		VALUES
			(caller, spec #>> '{source,uri}', kind, spec ->> 'bucket',
			 spec ->> 'prefix', spec, spec #>> '{options,label}',
			 (spec #>> '{options,priority}')::integer,
			 (spec #>> '{options,max_attempts}')::integer,
			 idem_key, req_hash, def_hash, acc_digest, prov)
		ON CONFLICT (owner, idempotency_key) DO NOTHING
		RETURNING job_id INTO new_id;
	END IF;

	IF new_id IS NULL THEN
		-- A concurrent submit with the same key won the insert.
		SELECT job_id, request_hash, source_kind INTO existing
		  FROM remora.jobs WHERE owner = caller AND idempotency_key = idem_key;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'could not serialize access due to concurrent submit'
				USING ERRCODE = 'serialization_failure';
		END IF;
		IF existing.request_hash <> req_hash THEN
			RAISE EXCEPTION 'idempotency key "%" was already used for % %', idem_key,
				CASE WHEN existing.source_kind = 'export' THEN 'export' ELSE 'job' END, existing.job_id
				USING ERRCODE = 'unique_violation',
					  DETAIL = 'The key was reused for another request; the existing job is unchanged.',
					  HINT = 'Use a new idempotency key for a different request.';
		END IF;
		RETURN existing.job_id;
	END IF;

	IF source_url IS NOT NULL THEN
		INSERT INTO remora.source_urls (job_id, url) VALUES (new_id, source_url);
	END IF;
	IF notify IS NOT NULL THEN
		INSERT INTO remora.notify_urls (job_id, url) VALUES (new_id, notify);
	END IF;
	-- the owner is the job's, just written: named, so that the queue's
	-- trigger need not look it up
	INSERT INTO remora.queue (job_id, priority, not_before, owner)
	VALUES (new_id, (spec #>> '{options,priority}')::integer, now(), caller);
	RETURN new_id;
END
$$;

CREATE OR REPLACE FUNCTION remora._job_for(caller oid, job bigint) RETURNS remora.jobs
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	j	remora.jobs;
BEGIN
	SELECT * INTO j FROM remora.jobs WHERE job_id = job FOR UPDATE;
	IF NOT FOUND OR NOT remora._may_act(caller, j.owner) THEN
		RAISE EXCEPTION 'job % does not exist', job
			USING ERRCODE = 'no_data_found';
	END IF;
	RETURN j;
END
$$;

-- Cancel: queued and retrying jobs end at once; a running job gets a
-- durable request that its attempt observes at its next protocol call (or
-- its lease expiry).  Terminal jobs are unchanged.  Returns the state.
-- Model: Cancel (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora._cancel(caller oid, job bigint) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	j	remora.jobs := remora._job_for(caller, job);
BEGIN
	IF j.state IN ('queued', 'retrying') THEN
		UPDATE remora.jobs
		   SET state = 'cancelled', cancel_requested_at = now(), finished_at = now()
		 WHERE job_id = job;
		DELETE FROM remora.queue WHERE job_id = job;
		RETURN 'cancelled';
	ELSIF j.state = 'running' AND j.cancel_requested_at IS NULL THEN
		UPDATE remora.jobs SET cancel_requested_at = now() WHERE job_id = job;
	END IF;
	RETURN j.state;
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
	-- a job that never ran wrote nothing: its hard delete is done; an
	-- export stages nothing, and its stable keys are never deleted
	IF hard AND (j.source_kind = 'export'
				 OR NOT EXISTS (SELECT 1 FROM remora.attempts a WHERE a.job_id = job)) THEN
		UPDATE remora.jobs SET hard_deleted_at = coalesce(hard_deleted_at, now())
		 WHERE job_id = job;
	END IF;
END
$$;

-- Retry: a new job with the same request (source, bucket, prefix,
-- options) for the job's owner, from a failed or cancelled job; judged as
-- a submit of the owner's is now (grants, limits, reuse_from).  The new
-- job carries the old one's request hash: it is the same request.
CREATE OR REPLACE FUNCTION remora._retry(caller oid, job bigint) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	j		remora.jobs := remora._job_for(caller, job);
	spec	jsonb := j.spec;
	notify	text;
	new_id	bigint;
BEGIN
	IF j.deleted_at IS NOT NULL THEN
		RAISE EXCEPTION 'job % does not exist', job USING ERRCODE = 'no_data_found';
	END IF;
	IF j.source_kind = 'export' THEN
		RAISE EXCEPTION 'job % is an export', job
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Export the result again with remora_export.';
	END IF;
	IF j.state NOT IN ('failed', 'cancelled') THEN
		RAISE EXCEPTION 'job % is %', job, j.state
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'Only a failed or cancelled job can be retried.';
	END IF;
	SELECT n.url INTO notify FROM remora.notify_urls n WHERE n.job_id = job;
	IF notify IS NOT NULL THEN
		spec := jsonb_set(spec, '{options,notify_url}', to_jsonb(notify));
	END IF;
	new_id := remora._submit(j.owner::oid, spec, jsonb_build_object('retry', job), NULL,
							 (SELECT u.url FROM remora.source_urls u WHERE u.job_id = job));
	UPDATE remora.jobs SET request_hash = j.request_hash WHERE job_id = new_id;
	RETURN new_id;
END
$$;

CREATE OR REPLACE FUNCTION remora_retry(job bigint) RETURNS bigint
AS 'MODULE_PATHNAME', 'remora_retry'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION remora_submit(source text, bucket text DEFAULT NULL,
							  prefix text DEFAULT NULL,
							  options jsonb DEFAULT '{}',
							  idempotency_key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'remora_submit'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION remora_cancel(job bigint) RETURNS text
AS 'MODULE_PATHNAME', 'remora_cancel'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION remora_delete(job bigint, hard boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'remora_delete'
LANGUAGE C VOLATILE;

-- Members of the committed manifest only; runs as the caller, so
-- row-level security decides what exists.
CREATE OR REPLACE FUNCTION remora_result(job bigint)
RETURNS TABLE (path text, bucket text, key text, size bigint, sha256 text,
			   etag text, reused_from_job bigint, action text)
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
		SELECT m.path, m.bucket, m.key, m.size, m.sha256, m.etag, m.reused_from_job,
			   CASE WHEN m.reused_from_job IS NULL THEN 'download' ELSE 'reuse' END
		  FROM remora.results r
		  JOIN remora.jobs j ON j.job_id = r.job_id
		  JOIN remora.members m ON m.attempt_id = r.attempt_id
		 WHERE r.job_id = job AND j.hard_delete_requested_at IS NULL
		 ORDER BY m.path;
END
$$;

