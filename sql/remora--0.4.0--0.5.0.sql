-- remora 0.4.0 -> 0.5.0
--
-- Each change to sql/remora.sql since 0.4.0 is carried here as well, in the
-- order it was made; a function changed more than once appears once, in
-- its final form, where it last changed.
-- test/e2e/upgrade.sh checks that an updated catalog equals a fresh one.

\echo Use "ALTER EXTENSION remora UPDATE TO '0.5.0'" to load this file. \quit

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

-- Exports overwrite only keys their owner published (admins excepted):
-- remora.export_keys records who publishes each exported key, filled here
-- from the references recorded before 0.5.0 (a key's latest writer);
-- remora_export reserves and refuses; remora.export_members tells the
-- worker what the owner may overwrite.
-- Who publishes each key exported to a bucket: the role whose export last
-- wrote it (an answer "copied" or "verified", published) or, until one
-- does, whose export was created for it (published false).  The primary
-- key is the lookup remora_export and remora.export_members make, and the
-- reservation: of two roles exporting to one new key at once, the second
-- waits for the first's row and is refused (doc/security.md).  A
-- reservation whose export ended without writing the key binds no one.
-- Not tied to an export's row: a published key stays in the store, and
-- its publisher with it, when the export is deleted.
CREATE TABLE remora.export_keys (
	bucket			text NOT NULL,
	key				text NOT NULL,
	owner			oid NOT NULL,
	export_id		bigint NOT NULL,	-- the export that wrote or reserved it
	published		boolean NOT NULL,
	PRIMARY KEY (bucket, key)
);
SELECT pg_catalog.pg_extension_config_dump('remora.export_keys', '');
ALTER TABLE remora.export_keys ENABLE ROW LEVEL SECURITY;
INSERT INTO remora.export_keys (bucket, key, owner, export_id, published)
SELECT DISTINCT ON (j.bucket, r.ref ->> 'key') j.bucket, r.ref ->> 'key', j.owner, r.export_id, true
  FROM remora.export_refs r JOIN remora.jobs j ON j.job_id = r.export_id
 WHERE r.ref ->> 'outcome' IN ('copied', 'verified') AND r.ref ->> 'key' IS NOT NULL
 ORDER BY j.bucket, r.ref ->> 'key', r.export_id DESC;

DROP FUNCTION remora.export_members(uuid, bigint, text, integer);
CREATE FUNCTION remora.export_members(attempt_id uuid, fencing_token bigint,
									  after text DEFAULT NULL,
									  max_rows integer DEFAULT 1000)
RETURNS TABLE (path text, bucket text, key text, size bigint, sha256 text,
			   etag text, ref_etag text, may_overwrite boolean)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_attempt	uuid := $1;
	p_token		bigint := $2;
	p_after		text := $3;
	p_max		integer := $4;
	p_export	bigint;
	result_att	uuid;
	target		remora.jobs;
	admin		boolean;
BEGIN
	IF p_max IS NULL OR p_max < 1 OR p_max > 10000 THEN
		RAISE EXCEPTION 'invalid max_rows: %', p_max
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'max_rows must be between 1 and 10000.';
	END IF;
	SELECT e.export_id, e.result_attempt INTO p_export, result_att
	  FROM remora.attempts a
	  JOIN remora.jobs j ON j.job_id = a.job_id
	  JOIN remora.exports e ON e.export_id = a.job_id
	 WHERE a.attempt_id = p_attempt AND a.fencing_token = p_token
	   AND a.state = 'running' AND j.state = 'running'
	   AND j.current_attempt = p_attempt AND j.cancel_requested_at IS NULL
	   AND NOT EXISTS (SELECT 1 FROM remora.leases l
						WHERE l.attempt_id = p_attempt AND l.expires_at < now());
	IF NOT FOUND THEN
		RETURN;
	END IF;
	SELECT * INTO target FROM remora.jobs j WHERE j.job_id = p_export;
	admin := pg_catalog.pg_has_role(target.owner, 'remora_admin', 'USAGE');
	RETURN QUERY
	SELECT m.path, m.bucket, m.key, m.size, m.sha256, m.etag, r.ref ->> 'etag',
		   admin OR coalesce(k.published AND k.owner = target.owner, false)
	  FROM remora.members m
	  LEFT JOIN remora.export_refs r ON r.export_id = p_export AND r.path = m.path
	  LEFT JOIN remora.export_keys k
		ON k.bucket = target.bucket
	   AND k.key = CASE WHEN target.prefix = '' THEN m.path
						ELSE target.prefix || '/' || m.path END
	 WHERE m.attempt_id = result_att
	   AND m.path > coalesce(p_after, '')	-- a range of the primary key (no path is '')
	 ORDER BY m.path
	 LIMIT p_max;
END
$$;
REVOKE ALL ON FUNCTION remora.export_members(uuid, bigint, text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.export_members(uuid, bigint, text, integer) TO remora_worker;

CREATE OR REPLACE FUNCTION remora._record_refs(export bigint, p_refs jsonb) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r	jsonb;
BEGIN
	IF p_refs IS NULL THEN
		RETURN;
	END IF;
	IF jsonb_typeof(p_refs) <> 'array' THEN
		RAISE EXCEPTION 'invalid references' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'references must be a JSON array of objects.';
	END IF;
	FOR r IN SELECT value FROM jsonb_array_elements(p_refs) LOOP
		IF jsonb_typeof(r) <> 'object'
			OR jsonb_typeof(r -> 'path') IS DISTINCT FROM 'string'
			OR jsonb_typeof(r -> 'key') IS DISTINCT FROM 'string'
			OR jsonb_typeof(r -> 'etag') IS DISTINCT FROM 'string'
			OR NOT remora._is_count(r -> 'size') THEN
			RAISE EXCEPTION 'invalid reference' USING ERRCODE = 'invalid_parameter_value',
				DETAIL = 'Each reference needs string path, key and etag and a non-negative integer size.';
		END IF;
	END LOOP;
	-- the last answer for a path in the batch, as for one before it
	INSERT INTO remora.export_refs AS r (export_id, path, ref)
	SELECT DISTINCT ON (x.value ->> 'path') export, x.value ->> 'path', x.value
	  FROM jsonb_array_elements(p_refs) WITH ORDINALITY x(value, n)
	 ORDER BY x.value ->> 'path', x.n DESC
	ON CONFLICT (export_id, path) DO UPDATE SET ref = EXCLUDED.ref;
	-- a key the export wrote is its owner's from now on (a key found
	-- "present" was written by someone else, and stays as it was)
	INSERT INTO remora.export_keys AS k (bucket, key, owner, export_id, published)
	SELECT DISTINCT ON (x.value ->> 'key') j.bucket, x.value ->> 'key', j.owner, export, true
	  FROM jsonb_array_elements(p_refs) x(value), remora.jobs j
	 WHERE j.job_id = export AND x.value ->> 'outcome' IN ('copied', 'verified')
	 ORDER BY x.value ->> 'key'
	ON CONFLICT ON CONSTRAINT export_keys_pkey DO UPDATE
	   SET owner = EXCLUDED.owner, export_id = EXCLUDED.export_id, published = true;
END
$$;

CREATE OR REPLACE FUNCTION remora._export(caller oid, job bigint, bucket text,
							   prefix text, options jsonb, idem_key text)
RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_job		bigint := $2;
	p_bucket	text := $3;
	p_prefix	text := $4;
	opts		jsonb := coalesce($5, '{}');
	k			text;
	v			jsonb;
	if_exists	text := 'fail';
	canon		jsonb := '{}';
	request		jsonb;
	existing	record;
	j			remora.jobs;
	r			remora.results;
	spec		jsonb;
	new_id		bigint;
	src_digest	text;
	clash		text;
	keys		text[];
BEGIN
	IF jsonb_typeof(opts) <> 'object' THEN
		RAISE EXCEPTION 'invalid options' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'options must be a JSON object.';
	END IF;
	FOR k, v IN SELECT key, value FROM jsonb_each(opts) LOOP
		IF k = 'if_exists' THEN
			IF jsonb_typeof(v) IS DISTINCT FROM 'string'
				OR v #>> '{}' NOT IN ('fail', 'overwrite', 'skip_identical') THEN
				RAISE EXCEPTION 'invalid option "if_exists"' USING ERRCODE = 'invalid_parameter_value',
					DETAIL = 'if_exists is "fail", "overwrite" or "skip_identical".';
			END IF;
			if_exists := v #>> '{}';
		ELSIF k IN ('max_attempts', 'priority') THEN
			IF jsonb_typeof(v) IS DISTINCT FROM 'number'
				OR (v #>> '{}')::numeric <> trunc((v #>> '{}')::numeric)
				OR (k = 'max_attempts' AND (v #>> '{}')::numeric NOT BETWEEN 1 AND 100)
				OR (k = 'priority' AND (v #>> '{}')::numeric NOT BETWEEN -1000 AND 1000) THEN
				RAISE EXCEPTION 'invalid option "%"', k USING ERRCODE = 'invalid_parameter_value',
					DETAIL = CASE WHEN k = 'max_attempts' THEN 'max_attempts is an integer from 1 to 100.'
								  ELSE 'priority is an integer from -1000 to 1000.' END;
			END IF;
			canon := canon || jsonb_build_object(k, (v #>> '{}')::integer);
		ELSIF k = 'label' THEN
			IF jsonb_typeof(v) IS DISTINCT FROM 'string' OR length(v #>> '{}') > 256 THEN
				RAISE EXCEPTION 'invalid option "label"' USING ERRCODE = 'invalid_parameter_value',
					DETAIL = 'label is a string of at most 256 characters.';
			END IF;
			canon := canon || jsonb_build_object(k, v);
		ELSE
			RAISE EXCEPTION 'invalid option "%"', k USING ERRCODE = 'invalid_parameter_value',
				DETAIL = 'An export knows the options if_exists, max_attempts, priority and label.';
		END IF;
	END LOOP;
	canon := canon || jsonb_build_object('if_exists', if_exists);
	request := jsonb_build_object('export', p_job, 'bucket', p_bucket,
								  'prefix', p_prefix, 'options', canon);

	-- a replayed key returns the export, whatever has happened since
	IF idem_key IS NOT NULL THEN
		SELECT jb.job_id, jb.request_hash INTO existing
		  FROM remora.jobs jb WHERE jb.owner = caller AND jb.idempotency_key = idem_key;
		IF FOUND THEN
			IF existing.request_hash <> remora._sha256(request::text) THEN
				RAISE EXCEPTION 'idempotency key "%" was already used for job %', idem_key, existing.job_id
					USING ERRCODE = 'unique_violation',
						  DETAIL = 'The key was reused for another request; the existing export or job is unchanged.',
						  HINT = 'Use a new idempotency key for a different request.';
			END IF;
			RETURN existing.job_id;
		END IF;
	END IF;

	SELECT * INTO j FROM remora.jobs jb WHERE jb.job_id = p_job FOR SHARE;
	IF NOT FOUND OR NOT remora._may_act(caller, j.owner) OR j.source_kind = 'export' THEN
		RAISE EXCEPTION 'job % does not exist', p_job USING ERRCODE = 'no_data_found';
	END IF;
	SELECT * INTO r FROM remora.results rr WHERE rr.job_id = p_job;
	IF j.state <> 'succeeded' OR r.job_id IS NULL OR j.hard_delete_requested_at IS NOT NULL THEN
		RAISE EXCEPTION 'job % has no result to export', p_job
			USING ERRCODE = 'no_data_found',
				  DETAIL = format('The job is %s; only a succeeded job whose result was not deleted can be exported.',
								  CASE WHEN j.hard_delete_requested_at IS NOT NULL THEN 'deleted' ELSE j.state END);
	END IF;

	-- never onto the staging and result areas of Remora's own jobs
	SELECT k2.key INTO clash
	  FROM (SELECT CASE WHEN p_prefix = '' THEN m.path ELSE p_prefix || '/' || m.path END AS key
			  FROM remora.members m WHERE m.attempt_id = r.attempt_id) k2,
		   (SELECT remora._prefix_dir(current_setting('remora.default_prefix')) AS dir
			 WHERE p_bucket = current_setting('remora.default_bucket')
			UNION
			SELECT DISTINCT remora._prefix_dir(jb.prefix) FROM remora.jobs jb
			 WHERE jb.bucket = p_bucket AND jb.source_kind <> 'export') d
	 WHERE left(k2.key, length(d.dir)) = d.dir
	   AND substr(k2.key, length(d.dir) + 1) ~ '^[0-9]+/'
	 LIMIT 1;
	IF clash IS NOT NULL THEN
		RAISE EXCEPTION 'permission denied for target bucket "%" key "%"', p_bucket, clash
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'The key is inside the area where Remora keeps the staging objects and results of jobs.',
				  HINT = 'Export under a prefix of its own.';
	END IF;

	SELECT remora._sha256(coalesce(string_agg(
			   concat_ws(' ', m.path, m.key, m.etag, m.size, m.sha256), E'\n' ORDER BY m.path), ''))
	  INTO src_digest
	  FROM remora.members m WHERE m.attempt_id = r.attempt_id;

	spec := jsonb_build_object(
		'source', jsonb_build_object('kind', 'export', 'uri', 'remora-job:' || p_job,
									 'job_id', p_job),
		'bucket', p_bucket, 'prefix', p_prefix,
		'options', jsonb_build_object(
			'if_exists', if_exists,
			'max_attempts', coalesce((canon ->> 'max_attempts')::integer,
									 current_setting('remora.max_attempts')::integer),
			'priority', coalesce((canon ->> 'priority')::integer, 0))
			|| CASE WHEN canon ? 'label' THEN jsonb_build_object('label', canon -> 'label')
					ELSE '{}' END);
	new_id := remora._submit(caller, spec, request, idem_key, NULL);

	-- a key another role published, or is publishing, is not the caller's
	-- to write (an administrator's excepted); the others are reserved for
	-- the caller, in key order.  A key another export holds is locked
	-- before it is judged, and judged by a later statement: its holder
	-- committed by then, so the holder's export is seen (a statement whose
	-- snapshot predates the holder's commit would take its key as free).
	IF NOT pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE') THEN
		keys := ARRAY(SELECT CASE WHEN p_prefix = '' THEN m.path
								  ELSE p_prefix || '/' || m.path END
						FROM remora.members m WHERE m.attempt_id = r.attempt_id
					   ORDER BY 1);
		INSERT INTO remora.export_keys (bucket, key, owner, export_id, published)
		SELECT p_bucket, t.key, caller, new_id, false
		  FROM unnest(keys) WITH ORDINALITY t(key, n) ORDER BY t.n
		ON CONFLICT ON CONSTRAINT export_keys_pkey DO NOTHING;
		PERFORM 1 FROM remora.export_keys ek
		  WHERE ek.bucket = p_bucket AND ek.key = ANY (keys) AND ek.export_id <> new_id
		  ORDER BY ek.key FOR UPDATE;
		-- the caller's own keys, and reservations whose export has ended
		UPDATE remora.export_keys ek
		   SET owner = caller, export_id = new_id,
			   published = ek.published AND ek.owner = caller
		 WHERE ek.bucket = p_bucket AND ek.key = ANY (keys) AND ek.export_id <> new_id
		   AND (ek.owner = caller
				OR (NOT ek.published
					AND NOT EXISTS (SELECT 1 FROM remora.jobs jb
									 WHERE jb.job_id = ek.export_id
									   AND jb.state IN ('queued', 'running', 'retrying',
														'outcome_unknown'))));
		SELECT ek.key INTO clash FROM remora.export_keys ek
		 WHERE ek.bucket = p_bucket AND ek.key = ANY (keys) AND ek.owner <> caller
		 ORDER BY ek.key
		 LIMIT 1;
		IF clash IS NOT NULL THEN
			RAISE EXCEPTION 'permission denied for target bucket "%" key "%"', p_bucket, clash
				USING ERRCODE = 'insufficient_privilege',
					  DETAIL = 'An export of another role published the key, or is publishing it.',
					  HINT = 'Export under a prefix of your own, or ask an administrator.';
		END IF;
	END IF;

	INSERT INTO remora.exports AS e
		(export_id, job_id, result_attempt, if_exists, output_digest,
		 source_digest, publication_digest, members, bytes)
	VALUES (new_id, p_job, r.attempt_id, if_exists, r.manifest_sha256, src_digest,
			remora._sha256(jsonb_build_object(
				'bucket', p_bucket, 'prefix', p_prefix, 'if_exists', if_exists,
				'output_digest', r.manifest_sha256, 'source_digest', src_digest)::text),
			r.members, r.bytes)
	ON CONFLICT (export_id) DO NOTHING;
	RETURN new_id;
END
$$;

-- ---------------------------------------------------------------------
-- The worker protocol closed in SQL: a worker records its incarnation and
-- heartbeat, reads the members of earlier attempts and a source endpoint's
-- settings through functions, and remora_worker loses every privilege on
-- the tables (and the policies that let it read them).
-- ---------------------------------------------------------------------

-- Record a new worker incarnation: kind 'worker' (a background worker) or
-- 'external' (remora-worker, which says on which host it runs, under which
-- label, and its version).  An incarnation already recorded is an error:
-- each is new.
CREATE FUNCTION remora.start_incarnation(incarnation uuid, pid integer,
										 kind text, host text, label text,
										 version text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF $1 IS NULL THEN
		RAISE EXCEPTION 'incarnation must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF $3 IS NULL OR $3 NOT IN ('worker', 'external') THEN
		RAISE EXCEPTION 'invalid incarnation kind: %', $3
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'The kind is worker or external.';
	END IF;
	INSERT INTO remora.incarnations (incarnation, pid, kind, host, label, version)
	VALUES ($1, $2, $3, $4, $5, $6);
END
$$;

-- The incarnation is alive: true if recorded, false if it has been ended
-- (the worker then starts another; its claims would be refused).
CREATE FUNCTION remora.heartbeat(incarnation uuid) RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH beat AS (
		UPDATE remora.incarnations i SET heartbeat_at = now()
		 WHERE i.incarnation = $1 AND i.stopped_at IS NULL
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM beat)
$$;

-- Record the end of an incarnation, unless already recorded (true: ended
-- now).  remora.reconcile then takes its leases as lapsed.
CREATE FUNCTION remora.end_incarnation(incarnation uuid) RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH ended AS (
		UPDATE remora.incarnations i SET stopped_at = now()
		 WHERE i.incarnation = $1 AND i.stopped_at IS NULL
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM ended)
$$;

-- The launcher, first in a server lifetime: every background worker
-- incarnation of the previous lifetime has ended.  Not for remora_worker
-- (an external worker cannot know that); returns how many were recorded.
CREATE FUNCTION remora.end_previous_lifetime() RETURNS integer
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH ended AS (
		UPDATE remora.incarnations i SET stopped_at = now()
		 WHERE i.kind = 'worker' AND i.stopped_at IS NULL
		RETURNING 1)
	SELECT count(*)::integer FROM ended
$$;

-- Members an earlier attempt of the job completed, for its attempt
-- attempt_id to reuse: for each of paths (pos: its place in paths, from 1,
-- the first if repeated), the copy of the newest other attempt, in the
-- job's bucket.  Paths with none are absent.
CREATE FUNCTION remora.earlier_members(job_id bigint, attempt_id uuid, paths text[])
RETURNS TABLE (pos integer, path text, key text, etag text, sha256 text,
			   size bigint, source jsonb)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT DISTINCT ON (m.path) p.pos::integer, m.path, m.key, m.etag,
		   m.sha256, m.size, m.source
	  FROM unnest($3) WITH ORDINALITY p(path, pos)
	  JOIN remora.members m ON m.path = p.path
	  JOIN remora.attempts t ON t.attempt_id = m.attempt_id
	 WHERE t.job_id = $1 AND t.attempt_id <> $2
	   AND m.bucket = (SELECT j.bucket FROM remora.jobs j WHERE j.job_id = $1)
	 ORDER BY m.path, t.attempt_no DESC, p.pos
$$;

-- The registered source endpoint a job of an s3 source names, with its
-- secret (a worker signs its requests with it): no row if there is none.
-- region, access_key_id and secret_access_key are '' rather than null; ca_pem
-- is null when the endpoint has no CAs of its own.
CREATE FUNCTION remora.source_endpoint_settings(name text)
RETURNS TABLE (url text, region text, path_style boolean,
			   access_key_id text, secret_access_key text, ca_pem text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT e.url, coalesce(e.region, ''), e.path_style,
		   coalesce(e.access_key_id, ''), coalesce(e.secret_access_key, ''),
		   e.ca_pem
	  FROM remora.source_endpoints e
	 WHERE e.name = $1
$$;

REVOKE ALL ON FUNCTION
	remora.start_incarnation(uuid, integer, text, text, text, text),
	remora.heartbeat(uuid), remora.end_incarnation(uuid),
	remora.end_previous_lifetime(),
	remora.earlier_members(bigint, uuid, text[]),
	remora.source_endpoint_settings(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
	remora.start_incarnation(uuid, integer, text, text, text, text),
	remora.heartbeat(uuid), remora.end_incarnation(uuid),
	remora.earlier_members(bigint, uuid, text[]),
	remora.source_endpoint_settings(text) TO remora_worker;

DROP POLICY source_endpoints_worker ON remora.source_endpoints;
DROP POLICY jobs_worker ON remora.jobs;
DROP POLICY attempts_worker ON remora.attempts;
DROP POLICY members_worker ON remora.members;
REVOKE ALL ON remora.incarnations, remora.source_endpoints, remora.jobs,
	remora.attempts, remora.members FROM remora_worker;

-- One verdict for a commit.  remora.commit and remora.commit_many decide
-- through remora._commit_verdict, which states every rule once and judges
-- authority by remora._authority, the rule remora._authorize also judges
-- by; remora._publish writes an accepted commit for both.
-- ---------------------------------------------------------------------
-- Does attempt a, called with p_token, hold authority over its job j, whose
-- lease row (if there is one) expires at lease_expires?  'stale' unless a
-- is the job's current running attempt and p_token its token; then 'lost'
-- when the lease has expired, 'cancelled' when cancellation was requested,
-- 'ok' otherwise.  It only judges (the caller holds the job lock, and
-- settles): every call of the protocol that needs authority, commit and
-- commit_many included, judges by this one rule.  Plain SQL, so that it is
-- inlined into the statements that use it.
CREATE FUNCTION remora._authority(j remora.jobs, a remora.attempts,
								  p_token bigint, lease_expires timestamptz)
RETURNS text
LANGUAGE sql STABLE
AS $$
	SELECT CASE
			 WHEN a.fencing_token IS DISTINCT FROM p_token OR a.state <> 'running'
				  OR j.state <> 'running'
				  OR j.current_attempt IS DISTINCT FROM a.attempt_id THEN 'stale'
			 WHEN lease_expires < now() THEN 'lost'
			 WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
			 ELSE 'ok' END
$$;

-- Lock a job and judge (remora._authority) whether (attempt, token) still
-- holds authority.
-- verdict: 'ok', 'unknown' (no such attempt), 'stale' (not the current
-- running attempt and token), or 'lost'/'cancelled' when this call found the
-- lease expired or cancellation requested and settled the attempt.
-- A missing lease row is coordination loss, not expiry: it never revokes.
-- Model: Authorize (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora._authorize(p_attempt uuid, p_token bigint,
								  OUT verdict text, OUT j remora.jobs,
								  OUT a remora.attempts)
LANGUAGE plpgsql
AS $$
DECLARE
	jid			bigint;
	expires		timestamptz;
BEGIN
	SELECT job_id INTO jid FROM remora.attempts WHERE attempt_id = p_attempt;
	IF NOT FOUND THEN
		verdict := 'unknown';
		RETURN;
	END IF;
	SELECT * INTO j FROM remora.jobs WHERE job_id = jid FOR UPDATE;
	SELECT * INTO a FROM remora.attempts WHERE attempt_id = p_attempt;
	SELECT expires_at INTO expires FROM remora.leases WHERE attempt_id = p_attempt;
	verdict := remora._authority(j, a, p_token, expires);
	IF verdict = 'lost' THEN
		PERFORM remora._settle(j, a, 'lost',
			jsonb_build_object('class', 'lease_expired',
							   'message', 'the attempt did not renew its lease in time'),
			true);
	ELSIF verdict = 'cancelled' THEN
		PERFORM remora._settle(j, a, 'cancelled', NULL, false);
	ELSE
		RETURN;
	END IF;
	SELECT * INTO j FROM remora.jobs WHERE job_id = jid;
	SELECT * INTO a FROM remora.attempts WHERE attempt_id = p_attempt;
END
$$;

-- The paths of a (validated) member array that the attempt recorded
-- already with other content.  Plain SQL, so that a commit's verdict
-- inlines it.
CREATE FUNCTION remora._member_clashes(p_attempt uuid, p_members jsonb)
RETURNS SETOF text
LANGUAGE sql STABLE
AS $$
	SELECT e.value ->> 'path'
	  FROM jsonb_array_elements(coalesce(p_members, '[]')) e
	  JOIN remora.members m ON m.attempt_id = p_attempt AND m.path = e.value ->> 'path'
	 WHERE (m.key, m.size, m.sha256) IS DISTINCT FROM
		   (e.value ->> 'key', (e.value ->> 'size')::bigint, lower(e.value ->> 'sha256'))
$$;

-- Record members of an attempt; recording the same member again is a
-- no-op, recording a path again with other content is an error.
CREATE OR REPLACE FUNCTION remora._record_members(attempt uuid, members jsonb)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
	clash	text;
BEGIN
	IF members IS NULL THEN
		RETURN;
	END IF;
	SELECT c INTO clash FROM remora._member_clashes(attempt, members) c LIMIT 1;
	IF clash IS NOT NULL THEN
		RAISE EXCEPTION 'member "%" was already recorded with other content', clash
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	INSERT INTO remora.members (attempt_id, path, bucket, key, size, sha256, etag, source)
	SELECT attempt, e.value ->> 'path', e.value ->> 'bucket', e.value ->> 'key',
		   (e.value ->> 'size')::bigint, lower(e.value ->> 'sha256'),
		   e.value ->> 'etag', e.value -> 'source'
	  FROM jsonb_array_elements(members) e
	ON CONFLICT DO NOTHING;
END
$$;

-- The verdict on a commit of (p_attempt, p_token, d), d a descriptor that
-- remora._check_manifest validated: every rule that decides whether the
-- attempt may publish d, written once.  remora.commit asks it for one
-- attempt, remora.commit_many for all of a batch in one statement; the
-- caller holds the job lock.  One row, the first of these that applies:
--   unknown    no such attempt
--   export     an export's attempt (remora._commit_export decides)
--   repeat     no authority, but this very commit succeeded before
--   stale, lost, cancelled
--              no authority (remora._authority); a lost or cancelled
--              attempt is settled by the caller, through remora._authorize
--   invalid    d is not a descriptor (callers validate it first)
--   outside    the manifest key is not under the attempt's staging prefix
--   foreign    a member, recorded or among d's entries, is not an object
--              under that prefix in the job's bucket, or is the manifest
--   counts     d's members and bytes are not exactly those of the recorded
--              members plus its entries (also when both are zero: a
--              descriptor claiming members nobody recorded is refused)
--   clash      an entry names a member recorded with other content
--   ok         it may publish
-- with the count and bytes of that member set.  Plain SQL, so that it is
-- inlined into its callers' statements; each row is looked up by key in a
-- subquery of its own (OFFSET 0), so that no plan joins whole tables.
CREATE FUNCTION remora._commit_verdict(p_attempt uuid, p_token bigint, d jsonb)
RETURNS TABLE (verdict text, recorded_members bigint, recorded_bytes numeric)
LANGUAGE sql STABLE
AS $$
	SELECT CASE
			 WHEN (a.a).attempt_id IS NULL THEN 'unknown'
			 WHEN x.export_id IS NOT NULL THEN 'export'
			 WHEN au.v <> 'ok' AND r.fencing_token = p_token AND r.descriptor = d
				  THEN 'repeat'
			 WHEN au.v <> 'ok' THEN au.v
			 WHEN jsonb_typeof(d) IS DISTINCT FROM 'object' THEN 'invalid'
			 WHEN left(d ->> 'key', length(j.sp)) IS DISTINCT FROM j.sp
				  OR length(d ->> 'key') = length(j.sp) THEN 'outside'
			 WHEN EXISTS (SELECT 1
							FROM (SELECT m.bucket, m.key FROM remora.members m
								   WHERE m.attempt_id = p_attempt
								  UNION ALL
								  SELECT e.value ->> 'bucket', e.value ->> 'key'
									FROM jsonb_array_elements(coalesce(d -> 'entries', '[]')) e) k
						   WHERE k.bucket IS DISTINCT FROM (j.j).bucket
							  OR left(k.key, length(j.sp)) IS DISTINCT FROM j.sp
							  OR k.key = d ->> 'key') THEN 'foreign'
			 WHEN (c.n, c.total) IS DISTINCT FROM
				  ((d ->> 'members')::bigint, (d ->> 'bytes')::numeric) THEN 'counts'
			 WHEN EXISTS (SELECT 1 FROM remora._member_clashes(p_attempt, d -> 'entries'))
				  THEN 'clash'
			 ELSE 'ok' END,
		   c.n, c.total
	  FROM (SELECT) one
	  LEFT JOIN LATERAL (SELECT t AS a FROM remora.attempts t
						  WHERE t.attempt_id = p_attempt OFFSET 0) a ON true
	  LEFT JOIN LATERAL (SELECT t AS j, remora._staging_prefix(t.prefix, t.job_id, p_attempt) AS sp
						   FROM remora.jobs t WHERE t.job_id = (a.a).job_id OFFSET 0) j ON true
	  LEFT JOIN LATERAL (SELECT l.expires_at FROM remora.leases l
						  WHERE l.attempt_id = p_attempt OFFSET 0) l ON true
	  LEFT JOIN LATERAL (SELECT x.export_id FROM remora.exports x
						  WHERE x.export_id = (a.a).job_id OFFSET 0) x ON true
	  LEFT JOIN LATERAL (SELECT r.fencing_token, r.descriptor FROM remora.results r
						  WHERE r.attempt_id = p_attempt OFFSET 0) r ON true
	  CROSS JOIN LATERAL (SELECT remora._authority(j.j, a.a, p_token, l.expires_at) AS v) au
	  -- the member set the commit would publish: recorded members plus d's
	  -- entries
	  CROSS JOIN LATERAL (SELECT count(*) AS n, coalesce(sum(u.size), 0) AS total
							FROM (SELECT m.path, m.size FROM remora.members m
								   WHERE m.attempt_id = p_attempt
								  UNION
								  SELECT e.value ->> 'path', (e.value ->> 'size')::bigint
									FROM jsonb_array_elements(coalesce(d -> 'entries', '[]')) e) u
						   OFFSET 0) c
$$;

-- Publish the results of attempts whose verdict is 'ok' (the caller holds
-- their jobs' locks): record each descriptor's entries and its result, and
-- end attempt and job succeeded, one statement for them all.
CREATE FUNCTION remora._publish(p_attempts uuid[], p_tokens bigint[],
								p_descriptors jsonb[])
RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
	WITH c AS MATERIALIZED (
		SELECT i.aid, i.tok, i.d, a.job_id
		  FROM unnest(p_attempts, p_tokens, p_descriptors) i(aid, tok, d)
		 CROSS JOIN LATERAL (SELECT a.job_id FROM remora.attempts a
							  WHERE a.attempt_id = i.aid OFFSET 0) a
	), mem AS (
		INSERT INTO remora.members (attempt_id, path, bucket, key, size, sha256, etag, source)
		SELECT c.aid, e.value ->> 'path', e.value ->> 'bucket', e.value ->> 'key',
			   (e.value ->> 'size')::bigint, lower(e.value ->> 'sha256'),
			   e.value ->> 'etag', e.value -> 'source'
		  FROM c CROSS JOIN LATERAL jsonb_array_elements(coalesce(c.d -> 'entries', '[]')) e
		ON CONFLICT DO NOTHING
	), res AS (
		INSERT INTO remora.results
			(job_id, attempt_id, fencing_token, manifest_key, manifest_etag,
			 manifest_sha256, members, bytes, descriptor)
		SELECT c.job_id, c.aid, c.tok, c.d ->> 'key', c.d ->> 'etag', c.d ->> 'sha256',
			   (c.d ->> 'members')::bigint, (c.d ->> 'bytes')::bigint, c.d
		  FROM c
	), att AS (
		-- its staging holds the result and nothing else, so there is
		-- nothing to clean (a 0.3.0 commit left segments/ there: those are
		-- still found)
		UPDATE remora.attempts a
		   SET state = 'succeeded', finished_at = now(), cleaned_at = now()
		 WHERE a.attempt_id = ANY (ARRAY(SELECT c.aid FROM c))
	), job AS (
		UPDATE remora.jobs jb SET state = 'succeeded', finished_at = now()
		 WHERE jb.job_id = ANY (ARRAY(SELECT c.job_id FROM c))
	), lease AS (
		DELETE FROM remora.leases l WHERE l.attempt_id = ANY (ARRAY(SELECT c.aid FROM c))
	)
	DELETE FROM remora.checkpoints cp WHERE cp.job_id = ANY (ARRAY(SELECT c.job_id FROM c));
END
$$;

-- The compare-and-swap that publishes a result.  True only for the current
-- attempt and token of a running job whose cancellation was not requested
-- (or for the exact repeat of the call that succeeded); false otherwise,
-- changing nothing.  The descriptor must name a manifest under the
-- attempt's own staging prefix; its member count and bytes must equal those
-- of the members recorded for the attempt plus its "entries", exactly.
-- remora._commit_verdict decides; this acts on its verdict.
-- Model: Commit (proof/remora.pml)
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
	d			jsonb;
BEGIN
	IF EXISTS (SELECT 1 FROM remora.attempts a
				 JOIN remora.exports e ON e.export_id = a.job_id
				WHERE a.attempt_id = p_attempt) THEN
		RETURN remora._commit_export(p_attempt, p_token, manifest);
	END IF;
	d := remora._check_manifest(manifest);

	-- lock the job, and settle the attempt if its lease lapsed or a cancel
	-- was requested; the verdict then finds it without authority
	PERFORM remora._authorize(p_attempt, p_token);
	SELECT * INTO v FROM remora._commit_verdict(p_attempt, p_token, d);
	CASE v.verdict
		WHEN 'ok' THEN
			PERFORM remora._publish(ARRAY[p_attempt], ARRAY[p_token], ARRAY[d]);
			RETURN true;
		-- the repeat of a successful call (also one that waited for it on
		-- the job lock)
		WHEN 'repeat' THEN
			RETURN true;
		WHEN 'outside' THEN
			RAISE WARNING 'commit refused: the manifest key is not under the attempt''s staging prefix';
		WHEN 'foreign' THEN
			RAISE WARNING 'commit refused: a member is not an object of the attempt''s staging prefix, or is the manifest';
		WHEN 'counts' THEN
			RAISE WARNING 'commit refused: the manifest lists % members and % bytes, the attempt recorded % and %',
				d ->> 'members', d ->> 'bytes', v.recorded_members, v.recorded_bytes;
		WHEN 'clash' THEN
			-- raises, naming the member
			PERFORM remora._record_members(p_attempt, d -> 'entries');
		ELSE
			-- unknown, stale, lost, cancelled
			NULL;
	END CASE;
	RETURN false;
END
$$;

-- Commit the results of several attempts in one call, as a worker does
-- when several finish in one round.  Each item is decided exactly as
-- remora.commit(attempt_ids[i], fencing_tokens[i], manifests[i]) decides
-- it, by remora._commit_verdict, and one row comes back for each, in the
-- order given.  The jobs are locked in job order first, so that two
-- batches never deadlock.  The items whose verdict is 'ok' are published
-- together, one statement a table (a commit's statements, item by item,
-- were most of a claim-and-commit's cost); any other item (a stale token,
-- a lapsed lease, a cancel, an export, a repeat, a descriptor that does
-- not add up, an attempt named twice) goes through remora.commit itself,
-- which settles, refuses or repeats it.  A descriptor that is not valid
-- raises, and the call changes nothing.
-- Model: Commit (proof/remora.pml), once per item, in one transaction
CREATE OR REPLACE FUNCTION remora.commit_many(attempt_ids uuid[], fencing_tokens bigint[],
								   manifests jsonb[])
RETURNS TABLE (attempt_id uuid, committed boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- one plan for each statement: a custom plan for each call (the arrays are
-- parameters) cost more than the commits (4 ms of a 5 ms call of one item)
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
	n			integer := cardinality(attempt_ids);
	ds			jsonb[];
	exports		integer[];
	clean		integer[];
	clean_ids	uuid[];
	clean_toks	bigint[];
	clean_ds	jsonb[];
	ok			boolean[];
	k			integer;
	msg			text;
	det			text;
	code		text;
BEGIN
	IF attempt_ids IS NULL OR fencing_tokens IS NULL OR manifests IS NULL THEN
		RAISE EXCEPTION 'attempt_ids, fencing_tokens and manifests must not be null'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF array_ndims(attempt_ids) > 1 OR array_ndims(fencing_tokens) > 1
		OR array_ndims(manifests) > 1
		OR cardinality(fencing_tokens) <> n OR cardinality(manifests) <> n THEN
		RAISE EXCEPTION 'invalid batch of commits'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'attempt_ids, fencing_tokens and manifests must be one-dimensional arrays of the same length.';
	END IF;
	IF n > 1000 THEN
		RAISE EXCEPTION 'invalid batch of commits'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = format('A batch holds at most 1000 commits, not %s.', n);
	END IF;
	IF n = 0 THEN
		RETURN;
	END IF;

	PERFORM 1 FROM remora.jobs jb
	 WHERE jb.job_id = ANY (ARRAY(SELECT a.job_id FROM remora.attempts a
								   WHERE a.attempt_id = ANY (attempt_ids)))
	 ORDER BY jb.job_id
	   FOR UPDATE OF jb;

	-- validate every descriptor first (an export's goes to its own commit),
	-- saying which item is wrong
	-- (each row of the tables below is found by key from an item: the
	-- lateral subqueries keep the planner from joining whole tables, which
	-- a generic plan made while they were small had done)
	SELECT coalesce(array_agg(i.ord::integer), '{}') INTO exports
	  FROM unnest(attempt_ids) WITH ORDINALITY i(aid, ord)
	 CROSS JOIN LATERAL (SELECT a.job_id FROM remora.attempts a
						  WHERE a.attempt_id = i.aid OFFSET 0) a
	 WHERE EXISTS (SELECT 1 FROM remora.exports e WHERE e.export_id = a.job_id);
	ds := array_fill(NULL::jsonb, ARRAY[n]);
	BEGIN
		FOR i IN 1 .. n LOOP
			k := i;
			IF NOT i = ANY (exports) THEN
				ds[i] := remora._check_manifest(manifests[i]);
			END IF;
		END LOOP;
	EXCEPTION WHEN invalid_parameter_value THEN
		GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL,
								code = RETURNED_SQLSTATE;
		RAISE EXCEPTION '% (item % of the batch)', msg, k
			USING ERRCODE = code, DETAIL = det;
	END;

	-- the items remora.commit would publish, each named once in the batch
	SELECT coalesce(array_agg(i.ord::integer), '{}'), array_agg(i.aid),
		   array_agg(i.tok), array_agg(i.d)
	  INTO clean, clean_ids, clean_toks, clean_ds
	  FROM unnest(attempt_ids, fencing_tokens, ds) WITH ORDINALITY i(aid, tok, d, ord)
	 CROSS JOIN LATERAL remora._commit_verdict(i.aid, i.tok, i.d) v
	 WHERE v.verdict = 'ok'
	   AND array_position(attempt_ids, i.aid) = i.ord
	   AND array_position(attempt_ids, i.aid, i.ord::integer + 1) IS NULL;

	ok := array_fill(false, ARRAY[n]);
	IF cardinality(clean) > 0 THEN
		PERFORM remora._publish(clean_ids, clean_toks, clean_ds);
		FOREACH k IN ARRAY clean LOOP
			ok[k] := true;
		END LOOP;
	END IF;

	-- the others, one by one in job order
	FOR k IN SELECT i.ord::integer
			   FROM unnest(attempt_ids) WITH ORDINALITY i(aid, ord)
			   LEFT JOIN LATERAL (SELECT a.job_id FROM remora.attempts a
								   WHERE a.attempt_id = i.aid OFFSET 0) a ON true
			  WHERE NOT i.ord = ANY (clean)
			  ORDER BY a.job_id NULLS LAST, i.ord LOOP
		ok[k] := remora.commit(attempt_ids[k], fencing_tokens[k], manifests[k]);
	END LOOP;

	RETURN QUERY SELECT i.aid, ok[i.ord]
				   FROM unnest(attempt_ids) WITH ORDINALITY i(aid, ord)
				  ORDER BY i.ord;
END
$$;

REVOKE ALL ON FUNCTION remora._authority(remora.jobs, remora.attempts, bigint, timestamptz),
	remora._member_clashes(uuid, jsonb), remora._commit_verdict(uuid, bigint, jsonb),
	remora._publish(uuid[], bigint[], jsonb[]) FROM PUBLIC;
