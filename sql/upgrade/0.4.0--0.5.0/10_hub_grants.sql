-- ---------------------------------------------------------------------
-- Hub sources read with the deployment's token need a grant.  With
-- remora.hf_token set an hf:// source needs a source grant on endpoint
-- 'hf' (a hub grant: bucket 'models' or 'datasets', the pattern over
-- owner/name); 'hf' is reserved and can no longer name an S3 endpoint.
-- ---------------------------------------------------------------------
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM remora.source_endpoints WHERE name = 'hf') THEN
		RAISE EXCEPTION 'a source endpoint is named "hf"'
			USING ERRCODE = 'object_in_use',
				  DETAIL = 'Remora 0.5.0 reserves the name "hf" for source grants on the Hugging Face Hub.',
				  HINT = 'Register the endpoint again under another name, move its grants and jobs to it, drop "hf" with remora.drop_source_endpoint(), then update.';
	END IF;
END
$$;
ALTER TABLE remora.source_endpoints
	DROP CONSTRAINT source_endpoints_name_check,
	ADD CONSTRAINT source_endpoints_name_check
		CHECK (name ~ '^[a-z][a-z0-9_-]{0,62}$' AND name <> 'hf');
ALTER TABLE remora.source_grants
	ADD COLUMN hub boolean NOT NULL DEFAULT false,
	ADD CONSTRAINT source_grants_hub_check
		CHECK (NOT hub OR (endpoint IS NULL AND bucket IN ('models', 'datasets'))),
	DROP CONSTRAINT source_grants_grantee_bucket_prefix_pattern_endpoint_key,
	ADD CONSTRAINT source_grants_grantee_bucket_prefix_pattern_endpoint_hub_key
		UNIQUE NULLS NOT DISTINCT (grantee, bucket, prefix_pattern, endpoint, hub);

CREATE OR REPLACE FUNCTION remora._may_read(caller oid, spec jsonb) RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT CASE
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
	END
$$;

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

	IF spec #>> '{source,kind}' = 'hf' AND NOT remora._may_read(caller, spec) THEN
		RAISE EXCEPTION 'permission denied for Hugging Face % "%"',
			spec #>> '{source,repo_type}', spec #>> '{source,repo}'
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Hub repositories are read with the deployment''s token (remora.hf_token), which may open private and gated ones: reading one needs a source grant on endpoint "hf" for its owner/name.',
				  HINT = format('An administrator grants it with remora.grant_source(role, %L, %L, ''hf'').',
								(spec #>> '{source,repo_type}') || 's', spec #>> '{source,repo}');
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

CREATE OR REPLACE FUNCTION remora.register_source_endpoint(name text, url text,
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
	IF $1 = 'hf' THEN
		RAISE EXCEPTION 'invalid endpoint name' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'The name "hf" is reserved: source grants name the Hugging Face Hub with it.',
			HINT = 'Choose another name.';
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
	hub		boolean := $4 IS NOT DISTINCT FROM 'hf';
BEGIN
	IF grantee IS NULL THEN
		RAISE EXCEPTION 'role "%" does not exist', $1 USING ERRCODE = 'undefined_object';
	END IF;
	IF hub THEN
		IF $2 IS NULL OR $2 NOT IN ('models', 'datasets') THEN
			RAISE EXCEPTION 'invalid bucket' USING ERRCODE = 'invalid_parameter_value',
				DETAIL = 'On endpoint "hf" the bucket is ''models'' or ''datasets''.';
		END IF;
		IF $3 IS NULL OR length($3) > 200
			OR $3 !~ '^(\*|[A-Za-z0-9_][A-Za-z0-9_.-]*(/([A-Za-z0-9_][A-Za-z0-9_.-]*)?)?\*|[A-Za-z0-9_][A-Za-z0-9_.-]*/[A-Za-z0-9_][A-Za-z0-9_.-]*)$' THEN
			RAISE EXCEPTION 'invalid prefix pattern' USING ERRCODE = 'invalid_parameter_value',
				DETAIL = 'On endpoint "hf" a pattern is a repository''s owner/name, or a beginning of it ending in ''*''; ''*'' alone allows every repository.';
		END IF;
		INSERT INTO remora.source_grants (grantee, bucket, prefix_pattern, endpoint, hub, granted_by)
		VALUES (grantee, $2, $3, NULL, true, coalesce(caller, 0))
		ON CONFLICT DO NOTHING;
		RETURN;
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
		   AND g.hub = ($4 IS NOT DISTINCT FROM 'hf')
		   AND (g.hub OR g.endpoint IS NOT DISTINCT FROM $4)
		RETURNING 1)
	SELECT count(*) > 0 FROM gone
$$;

CREATE OR REPLACE VIEW remora_source_grants WITH (security_invoker = true) AS
SELECT pg_catalog.pg_get_userbyid(g.grantee) AS role,
	   g.bucket,
	   g.prefix_pattern,
	   CASE WHEN g.hub THEN 'hf' ELSE g.endpoint END AS endpoint,
	   pg_catalog.pg_get_userbyid(g.granted_by) AS granted_by,
	   g.granted_at
  FROM remora.source_grants g;

