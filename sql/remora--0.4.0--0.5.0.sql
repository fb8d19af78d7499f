-- remora 0.4.0 -> 0.5.0
--
-- Each change to the install script (sql/remora/) since 0.4.0 is carried
-- here as well, in the order it was made; a function changed more than
-- once appears once, in its final form, where it last changed.
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

-- remora._may_read and remora._submit check hub grants too; they changed
-- again later, and are in 90_submit_speed.sql in their final forms.

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
				OR v #>> '{}' !~ '^-?[0-9]{1,9}$'  -- 2.0 keeps its fraction: no integer
				OR (k = 'max_attempts' AND (v #>> '{}')::numeric NOT BETWEEN 1 AND 100)
				OR (k = 'priority' AND (v #>> '{}')::numeric NOT BETWEEN -1000 AND 1000) THEN
				RAISE EXCEPTION 'invalid option "%"', k USING ERRCODE = 'invalid_parameter_value',
					DETAIL = CASE WHEN k = 'max_attempts' THEN 'max_attempts is an integer from 1 to 100.'
								  ELSE 'priority is an integer from -1000 to 1000.' END;
			END IF;
			canon := canon || jsonb_build_object(k, (v #>> '{}')::integer);
		ELSIF k = 'label' THEN
			-- as remora_submit judges a job's
			IF jsonb_typeof(v) IS DISTINCT FROM 'string' OR octet_length(v #>> '{}') > 256
				OR v #>> '{}' ~ '[\x01-\x1f\x7f]' THEN
				RAISE EXCEPTION 'invalid option "label"' USING ERRCODE = 'invalid_parameter_value',
					DETAIL = 'A label is a string of at most 256 bytes without control characters.';
			END IF;
			canon := canon || jsonb_build_object(k, v);
		ELSIF k = 'notify_url' THEN
			-- remora_export judged it by the outbound-source policy
			IF jsonb_typeof(v) IS DISTINCT FROM 'string' OR v #>> '{}' !~* '^https?://'
				OR octet_length(v #>> '{}') > 2048 THEN
				RAISE EXCEPTION 'invalid option "notify_url"' USING ERRCODE = 'invalid_parameter_value',
					DETAIL = 'A notify_url is an http:// or https:// URL of at most 2048 bytes.';
			END IF;
			canon := canon || jsonb_build_object(k, v);
		ELSE
			RAISE EXCEPTION 'invalid option "%"', k USING ERRCODE = 'invalid_parameter_value',
				DETAIL = 'An export knows the options if_exists, max_attempts, priority, label and notify_url.';
		END IF;
	END LOOP;
	canon := canon || jsonb_build_object('if_exists', if_exists);
	request := jsonb_build_object('export', p_job, 'bucket', p_bucket,
								  'prefix', p_prefix, 'options', canon);

	-- a replayed key returns the export, whatever has happened since
	IF idem_key IS NOT NULL THEN
		SELECT jb.job_id, jb.request_hash, jb.source_kind INTO existing
		  FROM remora.jobs jb WHERE jb.owner = caller AND jb.idempotency_key = idem_key;
		IF FOUND THEN
			IF existing.request_hash <> remora._sha256(request::text) THEN
				RAISE EXCEPTION 'idempotency key "%" was already used for % %', idem_key,
					CASE WHEN existing.source_kind = 'export' THEN 'export' ELSE 'job' END, existing.job_id
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
					ELSE '{}' END
			|| CASE WHEN canon ? 'notify_url'
					THEN jsonb_build_object('notify_url', canon -> 'notify_url')
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
-- one plan for its statement: a custom plan for each call (the arrays are
-- parameters) cost more than a commit's writes (planning was half of a
-- single commit's server time)
SET plan_cache_mode = force_generic_plan
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
-- Limits per role (doc/operator-guide.md, "Limits per role"): a NULL column
-- takes the default from the setting remora.default_role_<column>.  One row
-- per role that has any.
CREATE TABLE remora.role_limits (
	role_id oid PRIMARY KEY,
	weight integer CHECK (weight BETWEEN 1 AND 1000),
	max_running integer CHECK (max_running >= 0),
	max_queued integer CHECK (max_queued >= 0),
	max_bytes_per_second bigint CHECK (max_bytes_per_second >= 0),
	updated_at timestamptz NOT NULL DEFAULT now()
);
-- ---------------------------------------------------------------------
-- Limits per role (remora.role_limits, created by 50_role_limits.sql):
-- remora.set_role_limits and remora.reset_role_limits for remora_admin,
-- the view remora_role_limits, and max_queued, which remora._submit (so
-- every submit and export) enforces with SQLSTATE 53400.
-- ---------------------------------------------------------------------

ALTER TABLE remora.role_limits ENABLE ROW LEVEL SECURITY;
-- a user reads their own row (through remora_role_limits), an admin all
CREATE POLICY role_limits_visible ON remora.role_limits FOR SELECT
	USING (role_id = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
		   OR pg_catalog.pg_has_role(current_user, 'remora_admin', 'USAGE'));
GRANT SELECT ON remora.role_limits TO remora_user;
SELECT pg_catalog.pg_extension_config_dump('remora.role_limits', '');

-- One row per owner that submitted under a max_queued limit, locked by
-- each such submit until its transaction ends: the owner's submits and
-- exports then count their queued jobs one at a time, and the count is
-- exact.  A row lock and not an advisory lock, which any user could take
-- and hold to stall another's submits; no role but the extension's owner
-- may lock these rows.  The update of the counter is what a REPEATABLE
-- READ transaction that started before another submit committed trips on
-- (40001, retried by the client) instead of counting without that job.
-- Coordination only: a crash empties it, and the next submit re-creates
-- its row.
CREATE UNLOGGED TABLE remora.submit_gates (
	role_id			oid PRIMARY KEY,
	submits			bigint NOT NULL DEFAULT 0
);

-- Refuse a new job of caller (remora._submit: a submit or an export) when
-- the caller already has its max_queued jobs queued or waiting to retry:
-- 53400, naming the limit and the count.  No limit (0) costs nothing and
-- takes no lock.  idem_key: the new job's idempotency key; a submit with
-- the same key that committed while this one waited is returned by the
-- caller, never refused.
CREATE FUNCTION remora._check_queue_limit(caller oid, idem_key text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
	own		integer;
	lim		integer;
	n		bigint;
BEGIN
	SELECT l.max_queued INTO own FROM remora.role_limits l WHERE l.role_id = caller;
	lim := coalesce(own, nullif(current_setting('remora.default_role_max_queued', true), '')::integer, 0);
	IF lim = 0 THEN
		RETURN;
	END IF;
	INSERT INTO remora.submit_gates AS g (role_id) VALUES (caller)
	ON CONFLICT (role_id) DO UPDATE SET submits = g.submits + 1;
	-- counting stops at the limit: its index scan never reads the backlog
	SELECT count(*) INTO n
	  FROM (SELECT 1 FROM remora.jobs j
			 WHERE j.owner = caller AND j.finished_at IS NULL
			   AND j.state IN ('queued', 'retrying')
			 LIMIT lim) q;
	IF n < lim THEN
		RETURN;
	END IF;
	IF idem_key IS NOT NULL
		AND EXISTS (SELECT 1 FROM remora.jobs j
					 WHERE j.owner = caller AND j.idempotency_key = idem_key) THEN
		RETURN;
	END IF;
	SELECT count(*) INTO n FROM remora.jobs j
	 WHERE j.owner = caller AND j.finished_at IS NULL
	   AND j.state IN ('queued', 'retrying');
	RAISE EXCEPTION 'role "%" has % %, its limit % is %',
		pg_get_userbyid(caller), n, CASE WHEN n = 1 THEN 'job queued' ELSE 'jobs queued' END,
		CASE WHEN own IS NULL THEN 'remora.default_role_max_queued' ELSE 'max_queued' END, lim
		USING ERRCODE = 'configuration_limit_exceeded',
			  DETAIL = 'Jobs and exports that are queued or waiting to retry count against the limit; a new one is accepted once one of them has started or been cancelled.',
			  HINT = format('An administrator raises it with remora.set_role_limits(%L, max_queued => ...)%s.',
							pg_get_userbyid(caller),
							CASE WHEN own IS NULL THEN ', or for every role with remora.default_role_max_queued' ELSE '' END);
END
$$;

-- The oid of an existing role; 22004 for NULL, 42704 naming an unknown one.
CREATE FUNCTION remora._role_oid(role name) RETURNS oid
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r	oid;
BEGIN
	IF $1 IS NULL THEN
		RAISE EXCEPTION 'role must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT a.oid INTO r FROM pg_catalog.pg_roles a WHERE a.rolname = $1;
	IF r IS NULL THEN
		RAISE EXCEPTION 'role "%" does not exist', $1 USING ERRCODE = 'undefined_object';
	END IF;
	RETURN r;
END
$$;

-- Set a role's own limits; a NULL argument leaves that limit as it is
-- (its own value, or the default).  reset_role_limits returns them all to
-- the defaults.
CREATE FUNCTION remora.set_role_limits(role name, weight integer DEFAULT NULL,
									   max_running integer DEFAULT NULL,
									   max_queued integer DEFAULT NULL,
									   max_bytes_per_second bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r	oid := remora._role_oid($1);
BEGIN
	IF $2 NOT BETWEEN 1 AND 1000 THEN
		RAISE EXCEPTION 'invalid weight: %', $2 USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'weight is an integer from 1 to 1000, or NULL to leave it as it is.';
	END IF;
	IF $3 < 0 THEN
		RAISE EXCEPTION 'invalid max_running: %', $3 USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'max_running is a number of running attempts, 0 for no limit, or NULL to leave it as it is.';
	END IF;
	IF $4 < 0 THEN
		RAISE EXCEPTION 'invalid max_queued: %', $4 USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'max_queued is a number of queued jobs, 0 for no limit, or NULL to leave it as it is.';
	END IF;
	IF $5 < 0 THEN
		RAISE EXCEPTION 'invalid max_bytes_per_second: %', $5 USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'max_bytes_per_second is a number of bytes per second, 0 for no limit, or NULL to leave it as it is.';
	END IF;
	DELETE FROM remora.role_limits l
	 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.oid = l.role_id);
	IF num_nulls($2, $3, $4, $5) = 4 THEN
		RETURN;
	END IF;
	INSERT INTO remora.role_limits AS l
		(role_id, weight, max_running, max_queued, max_bytes_per_second)
	VALUES (r, $2, $3, $4, $5)
	ON CONFLICT (role_id) DO UPDATE
	   SET weight = coalesce(EXCLUDED.weight, l.weight),
		   max_running = coalesce(EXCLUDED.max_running, l.max_running),
		   max_queued = coalesce(EXCLUDED.max_queued, l.max_queued),
		   max_bytes_per_second = coalesce(EXCLUDED.max_bytes_per_second,
										   l.max_bytes_per_second),
		   updated_at = now();
END
$$;

-- A role's limits back to the defaults (remora.default_role_*).
CREATE FUNCTION remora.reset_role_limits(role name)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r	oid := remora._role_oid($1);
BEGIN
	DELETE FROM remora.role_limits l
	 WHERE l.role_id = r
		OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.oid = l.role_id);
END
$$;

REVOKE ALL ON FUNCTION remora.set_role_limits(name, integer, integer, integer, bigint),
	remora.reset_role_limits(name) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.set_role_limits(name, integer, integer, integer, bigint),
	remora.reset_role_limits(name) TO remora_admin;
REVOKE ALL ON FUNCTION remora._check_queue_limit(oid, text), remora._role_oid(name)
	FROM PUBLIC;

-- remora._submit (remora_submit, remora._export) refuses a role at its
-- max_queued; it changed again later, and is in 90_submit_speed.sql in
-- its final form.

-- Limits per role, as they apply now, beside what each role uses: every
-- role that has limits of its own or unfinished jobs, and the reader.
-- Row-level security on remora.role_limits and remora.jobs leaves a user
-- their own row; remora_admin sees every role.  A limit the role has not
-- set is the default (remora.default_role_*); 0 is no limit.  queued
-- counts the jobs and exports waiting to run (queued, or retrying after a
-- failed attempt), the ones max_queued limits; bytes_per_second is the
-- current rate of the role's running attempts, as remora_progress shows
-- them.  A role dropped since is not shown.
CREATE VIEW remora_role_limits WITH (security_invoker = true) AS
SELECT r.rolname AS role,
	   coalesce(l.weight,
				nullif(current_setting('remora.default_role_weight', true), '')::integer,
				1) AS weight,
	   coalesce(l.max_running,
				nullif(current_setting('remora.default_role_max_running', true), '')::integer,
				0) AS max_running,
	   coalesce(l.max_queued,
				nullif(current_setting('remora.default_role_max_queued', true), '')::integer,
				0) AS max_queued,
	   coalesce(l.max_bytes_per_second,
				nullif(current_setting('remora.default_role_max_bytes_per_second', true), '')::bigint,
				0) AS max_bytes_per_second,
	   coalesce(u.running, 0) AS running,
	   coalesce(u.queued, 0) AS queued,
	   coalesce(b.rate, 0) AS bytes_per_second
  FROM (SELECT l.role_id FROM remora.role_limits l
		UNION
		SELECT j.owner FROM remora.jobs j
		 WHERE j.finished_at IS NULL
		   AND j.state IN ('queued', 'running', 'retrying')
		UNION
		SELECT a.oid FROM pg_catalog.pg_roles a WHERE a.rolname = current_user) o
  JOIN pg_catalog.pg_roles r ON r.oid = o.role_id
  LEFT JOIN remora.role_limits l ON l.role_id = o.role_id
  LEFT JOIN (SELECT j.owner,
					count(*) FILTER (WHERE j.state = 'running') AS running,
					count(*) FILTER (WHERE j.state IN ('queued', 'retrying')) AS queued
			   FROM remora.jobs j
			  WHERE j.finished_at IS NULL
				AND j.state IN ('queued', 'running', 'retrying')
			  GROUP BY j.owner) u ON u.owner = o.role_id
  LEFT JOIN (SELECT j.owner, sum(p.rate) AS rate
			   FROM remora._progress() p
			   JOIN remora.jobs j
				 ON j.job_id = p.job_id AND j.current_attempt = p.attempt_id
				AND j.fencing_token = p.fencing_token AND j.state = 'running'
			  GROUP BY j.owner) b ON b.owner = o.role_id;

GRANT SELECT ON remora_role_limits TO remora_user;
REVOKE ALL ON remora_role_limits FROM PUBLIC;
-- Claims share the workers between owners (doc/operator-guide.md, "Sharing
-- the workers between users"): the queue carries each job's owner and is read
-- owner by owner.
ALTER TABLE remora.queue ADD COLUMN owner oid;
DELETE FROM remora.queue q
 WHERE NOT EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = q.job_id);
UPDATE remora.queue q SET owner = j.owner FROM remora.jobs j WHERE j.job_id = q.job_id;
ALTER TABLE remora.queue ALTER COLUMN owner SET NOT NULL;
DROP INDEX remora.queue_order_idx;
CREATE INDEX queue_owner_idx ON remora.queue (owner, priority DESC, job_id);

-- Every path that queues a job (export, retry, resolve, reconcile) names
-- the job alone; its owner comes from the job row, so that no path can
-- queue a job under another owner.  remora._submit alone names the owner
-- (97_submit_width.sql's change): the trigger is not called then.  No
-- search_path of its own: every name in it is qualified.
CREATE FUNCTION remora._queue_owner() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	NEW.owner := (SELECT jb.owner FROM remora.jobs jb
				   WHERE jb.job_id OPERATOR(pg_catalog.=) NEW.job_id);
	RETURN NEW;
END
$$;
CREATE TRIGGER queue_owner BEFORE INSERT ON remora.queue
	FOR EACH ROW WHEN (NEW.owner IS NULL)
	EXECUTE FUNCTION remora._queue_owner();

-- Running attempts per owner, counted as remora._leases_in_use counts
-- them: the lease rows while coordination state is whole, every running
-- job too while it is not.  A small read (the leases and their jobs, by
-- key), for the claim's share and the owners' max_running.
CREATE FUNCTION remora._running_by_owner()
RETURNS TABLE (owner oid, running bigint)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM remora.coordination) THEN
		RETURN QUERY
		SELECT jb.owner, count(*)
		  FROM remora.leases l JOIN remora.jobs jb ON jb.job_id = l.job_id
		 GROUP BY jb.owner;
	ELSE
		RETURN QUERY
		SELECT jb.owner, count(*)
		  FROM remora.jobs jb
		 WHERE jb.job_id IN (SELECT a.job_id FROM remora.attempts a WHERE a.state = 'running'
							 UNION
							 SELECT l.job_id FROM remora.leases l)
		 GROUP BY jb.owner;
	END IF;
END
$$;

-- Hand out up to max_jobs runnable jobs, shared between their owners
-- (doc/operator-guide.md, "Sharing the workers between users").  The next job
-- goes to the owner with runnable jobs whose running attempts, with those
-- already picked in this batch, are the fewest for its weight ((running +
-- picked) / weight, ties drawn by lot in proportion to the weights); an
-- owner's own jobs go by priority, then age.  An owner alone gets every job;
-- one at its max_running gets none.
-- Each claim creates a new attempt with a fencing token greater than any before it
-- for the job, records the recovery ledger, and takes a lease.  Leases in
-- use never exceed remora.max_active_leases: a claim reserves the room it
-- takes in shared memory before it takes it, against the leases it can see
-- plus those others reserved (running jobs count while the lease rows are
-- lost), and the reservation lasts until its transaction ends (leases.c
-- says why that suffices); claimers never wait for each other, and skip
-- queue and job rows others hold.  A lease runs from when it is written
-- (clock_timestamp()), not from a transaction start.
-- Model: Claim (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora.claim(incarnation uuid, max_jobs integer DEFAULT 1)
RETURNS TABLE (job_id bigint, attempt_id uuid, fencing_token bigint,
			   spec jsonb, resume jsonb, lease_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- one plan for the batch statement: replanning it on each call (its LIMIT
-- is a parameter) cost more than the claim itself
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
	p_incarnation uuid := $1;
	lim			integer := current_setting('remora.max_active_leases')::integer;
	room		integer;
	seen		bigint;
	others		integer;
	taken		integer;
	expires		timestamptz;
	dweight		integer := coalesce(nullif(current_setting('remora.default_role_weight', true), '')::integer, 1);
	dcap		integer := coalesce(nullif(current_setting('remora.default_role_max_running', true), '')::integer, 0);
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

	-- the reservation is read before the leases are counted (each
	-- statement here takes a new snapshot)
	LOOP
		seen := remora._lease_reservations();
		room := least(max_jobs, lim - remora._leases_in_use()
								- (seen & 4294967295)::integer);
		IF room <= 0 THEN
			RETURN;
		END IF;
		EXIT WHEN remora._reserve_leases(seen, room);
	END LOOP;
	-- the room other claims in flight hold: what they may still take of
	-- any one owner's jobs, unseen by the count below
	others := (seen & 4294967295)::integer;
	expires := clock_timestamp() + remora._setting_interval('remora.lease_duration');

	-- One statement for the whole batch.  The owners with queued jobs are
	-- found by a loose scan of the queue's owner index (one descent per
	-- owner, whatever their backlogs); at most room of them, the first in
	-- share order that have a runnable job, can be picked from (each of
	-- them has a job that comes before any other owner's first), and of
	-- each, its next jobs at most: the candidates.  They are locked in
	-- share order, skipping those others hold.  A claim thus reads
	-- O(owners + room * (room + others)) index entries, never the backlog.
	--
	-- max_running holds without a lock any user could take: an owner's
	-- running attempts are counted in this statement's snapshot, taken
	-- after the reservations were read, and every other claim in flight is
	-- assumed to take that owner's jobs up to its whole room (leases.c's
	-- argument, owner by owner).  Under overlapping claims an owner close to
	-- its limit may so be passed over, never taken past it.
	--
	-- A job row is locked only if nobody else holds it, so a claim never
	-- waits on a cancel (which holds the job, then the queue row).  The
	-- queue entry of every job locked goes: it is claimed now, or it no
	-- longer waits (an entry left behind; reconcile removes them too).
	RETURN QUERY
	WITH RECURSIVE owners (owner) AS (
		(SELECT qq.owner FROM remora.queue qq ORDER BY qq.owner LIMIT 1)
		UNION ALL
		SELECT (SELECT qq.owner FROM remora.queue qq
				 WHERE qq.owner > o.owner ORDER BY qq.owner LIMIT 1)
		  FROM owners o
		 WHERE o.owner IS NOT NULL
	), running AS MATERIALIZED (
		SELECT r.owner, r.running FROM remora._running_by_owner() r
	), share AS (
		-- weight and the jobs an owner may still start (0 = no max_running)
		SELECT o.owner, coalesce(l.weight, dweight) AS weight,
			   coalesce(r.running, 0) AS running,
			   least(room, coalesce(nullif(coalesce(l.max_running, dcap), 0)
									- coalesce(r.running, 0) - others, room)) AS may_take,
			   -- the lot that breaks ties: the least of draws made at
			   -- rates proportional to the weights falls to each owner with
			   -- the probability of its weight's share
			   -ln(1 - random()) / coalesce(l.weight, dweight) AS lot
		  FROM owners o
		  LEFT JOIN remora.role_limits l ON l.role_id = o.owner
		  LEFT JOIN running r ON r.owner = o.owner
		 WHERE o.owner IS NOT NULL
	), first AS MATERIALIZED (
		SELECT s.* FROM (SELECT s.* FROM share s
						  WHERE s.may_take > 0
						  ORDER BY s.running::float8 / s.weight, s.lot
						 OFFSET 0) s
		 WHERE EXISTS (SELECT 1 FROM remora.queue qq
						WHERE qq.owner = s.owner AND qq.not_before <= now())
		 LIMIT room
	), candidate AS MATERIALIZED (
		-- beyond what it may take, room + others more of each owner's
		-- jobs: those that claims in flight or a cancel hold are skipped,
		-- and the next ones are there to take instead
		SELECT c.job_id, f.owner, f.may_take,
			   (f.running + c.k - 1)::float8 / f.weight AS due, f.lot, c.k
		  FROM first f
		 CROSS JOIN LATERAL (
			SELECT n.job_id, row_number() OVER () AS k
			  FROM (SELECT qq.job_id FROM remora.queue qq
					 WHERE qq.owner = f.owner AND qq.not_before <= now()
					 ORDER BY qq.priority DESC, qq.job_id
					 LIMIT f.may_take + room + others) n) c
	), locked AS MATERIALIZED (
		SELECT qq.job_id, c.owner, c.may_take, c.due, c.k
		  FROM candidate c JOIN remora.queue qq ON qq.job_id = c.job_id
		 ORDER BY c.due, c.lot, c.k
		 LIMIT room
		   FOR UPDATE OF qq SKIP LOCKED
	), picked AS (
		-- no owner past what it may take (a row locked and not picked
		-- stays queued)
		SELECT l.job_id
		  FROM (SELECT l.job_id, l.may_take,
					   row_number() OVER (PARTITION BY l.owner ORDER BY l.due, l.k) AS n
				  FROM locked l) l
		 WHERE l.n <= l.may_take
	), held AS MATERIALIZED (
		SELECT jb.* FROM remora.jobs jb
		 WHERE jb.job_id IN (SELECT p.job_id FROM picked p)
		   FOR UPDATE SKIP LOCKED
	), unqueued AS (
		-- by key, from the batch: a join (planned generically for up to
		-- max_jobs rows) would hash the whole queue
		DELETE FROM remora.queue qq
		 WHERE qq.job_id = ANY (ARRAY(SELECT h.job_id FROM held h))
	), go AS MATERIALIZED (
		SELECT h.*, gen_random_uuid() AS new_attempt,
			   (SELECT c FROM remora.checkpoints c WHERE c.job_id = h.job_id) AS cp,
			   (SELECT u.url FROM remora.source_urls u WHERE u.job_id = h.job_id) AS url,
			   (SELECT e FROM remora.exports e WHERE e.export_id = h.job_id) AS ex
		  FROM held h
		 WHERE h.state IN ('queued', 'retrying') AND h.cancel_requested_at IS NULL
		   AND h.attempts_used < h.max_attempts
	), attempt AS (
		-- an export stages nothing to clean up, and records what it is to
		-- publish before it runs
		INSERT INTO remora.attempts
			(attempt_id, job_id, attempt_no, fencing_token, incarnation,
			 definition_hash, request_hash, access_digest, provenance,
			 resumed_from, cleaned_at, export_ledger)
		SELECT g.new_attempt, g.job_id, g.attempts_used + 1, g.fencing_token + 1,
			   p_incarnation, g.definition_hash, g.request_hash, g.access_digest,
			   g.provenance, (g.cp).attempt_id,
			   CASE WHEN (g.ex).export_id IS NOT NULL THEN now() END,
			   CASE WHEN (g.ex).export_id IS NOT NULL THEN jsonb_build_object(
					'output_digest', (g.ex).output_digest, 'source_digest', (g.ex).source_digest,
					'publication_digest', (g.ex).publication_digest, 'members', (g.ex).members,
					'bytes', (g.ex).bytes, 'if_exists', (g.ex).if_exists, 'mode', (g.ex).mode,
					'decision', (g.ex).decisions -> -1) END
		  FROM go g
	), job AS (
		UPDATE remora.jobs jb
		   SET state = 'running',
			   attempts_used = jb.attempts_used + 1,
			   fencing_token = jb.fencing_token + 1,
			   current_attempt = g.new_attempt,
			   started_at = coalesce(jb.started_at, now())
		  FROM go g
		 WHERE jb.job_id = g.job_id
	), lease AS (
		INSERT INTO remora.leases (attempt_id, job_id, fencing_token, incarnation, expires_at)
		SELECT g.new_attempt, g.job_id, g.fencing_token + 1, p_incarnation, expires
		  FROM go g
	)
	SELECT g.job_id, g.new_attempt, g.fencing_token + 1,
		   -- the worker gets the whole URL, query string included
		   CASE WHEN g.url IS NULL THEN s.spec
				ELSE coalesce(jsonb_set(s.spec, '{source,uri}', to_jsonb(g.url)), s.spec) END
		   || CASE WHEN (g.ex).export_id IS NULL THEN '{}'::jsonb
				   ELSE jsonb_build_object('export', remora._export_spec(g.job_id)) END,
		   CASE WHEN g.cp IS NULL THEN NULL
				ELSE jsonb_build_object('attempt_id', (g.cp).attempt_id,
										'fencing_token', (g.cp).fencing_token,
										'bytes_done', (g.cp).bytes_done,
										'state', (g.cp).state) END,
		   expires
	  FROM go g
	 CROSS JOIN LATERAL (SELECT g.spec || jsonb_build_object(
				'job_id', g.job_id, 'attempt_no', g.attempts_used + 1, 'owner', g.owner,
				'staging_prefix', remora._staging_prefix(g.prefix, g.job_id, g.new_attempt))
				AS spec) s
	 ORDER BY g.priority DESC, g.job_id;
	GET DIAGNOSTICS taken = ROW_COUNT;
	PERFORM remora._release_leases(room - taken);
END
$$;

REVOKE ALL ON FUNCTION remora._queue_owner(), remora._running_by_owner() FROM PUBLIC;
/* ------------------------------------------------------------------------
 * Byte-rate caps (worker protocol).  Three caps bound what a running
 * attempt downloads from its source: the job's own
 * options.max_bytes_per_second, its owner's max_bytes_per_second
 * (remora.role_limits, or remora.default_role_max_bytes_per_second)
 * shared by all the owner's running attempts, on every worker and host,
 * and remora.max_bytes_per_second shared by every running attempt of the
 * deployment.  A worker asks at every renewal round and applies the
 * answer to its transfers: a changed limit reaches a running attempt
 * there, and never stops it.  0 is no limit.
 * ------------------------------------------------------------------------ */

-- The cap of each of the given attempts that is running now: the least of
-- the job's own, its owner's divided by the owner's running attempts, and
-- the deployment's divided by all running attempts; NULL for none.  An
-- attempt that is not (or no longer) its job's running attempt has no row.
-- A shared cap divides evenly, at least a byte a second each: an attempt
-- that takes less than its share leaves the rest unused until the count
-- changes.
CREATE FUNCTION remora.rate_limits(attempt_ids uuid[])
RETURNS TABLE (attempt_id uuid, max_bytes_per_second bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	deployment	bigint := coalesce(nullif(current_setting('remora.max_bytes_per_second', true), '')::bigint, 0);
	role_default bigint := coalesce(nullif(current_setting('remora.default_role_max_bytes_per_second', true), '')::bigint, 0);
BEGIN
	IF $1 IS NULL THEN
		RAISE EXCEPTION 'attempt_ids must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	RETURN QUERY
	WITH running AS (
		-- a running job's current attempt runs (attempts_running_idx)
		SELECT j.owner, j.current_attempt, j.spec -> 'options' AS options
		  FROM remora.attempts a
		  JOIN remora.jobs j ON j.job_id = a.job_id AND j.current_attempt = a.attempt_id
		 WHERE a.state = 'running' AND j.state = 'running'
	), per_owner AS (
		SELECT r.owner, count(*) AS n FROM running r GROUP BY r.owner
	), total AS (
		SELECT count(*) AS n FROM running
	), caps AS (
		SELECT r.current_attempt,
			   nullif((r.options ->> 'max_bytes_per_second')::bigint, 0) AS own,
			   CASE WHEN coalesce(l.max_bytes_per_second, role_default) > 0
					THEN greatest(1, coalesce(l.max_bytes_per_second, role_default) / o.n)
			   END AS role_share,
			   CASE WHEN deployment > 0 THEN greatest(1, deployment / t.n) END AS deployment_share
		  FROM running r
		  JOIN per_owner o ON o.owner = r.owner
		  CROSS JOIN total t
		  LEFT JOIN remora.role_limits l ON l.role_id = r.owner
		 WHERE r.current_attempt = ANY ($1)
	)
	SELECT c.current_attempt, least(c.own, c.role_share, c.deployment_share)
	  FROM caps c;
END
$$;

REVOKE ALL ON FUNCTION remora.rate_limits(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.rate_limits(uuid[]) TO remora_worker;
/* ------------------------------------------------------------------------
 * Events (doc/user-guide.md, "Waiting for a job: LISTEN", and "Webhooks"):
 * NOTIFY remora_events on every state change of a job or an export (an export
 * is a row of remora.jobs too), and signed webhooks on a job's terminal
 * state.
 *
 * A webhook is recorded in the transaction that ends the job, so that one
 * is owed exactly when the end commits; workers deliver it later, each try
 * a short transaction around no network I/O (remora.webhooks_due claims,
 * remora.webhook_tried records).  Nothing here changes a job: a delivery's
 * failure never changes the job's outcome.
 * ------------------------------------------------------------------------ */

-- NOTIFY remora_events '{"job_id": N, "state": "..."}' when the change
-- commits.  LISTEN is open to every role: the payload says nothing more
-- than that a job of that number changed state; a client reads the rest
-- from remora_jobs, where row-level security applies.  No search_path of
-- its own (every name in it is qualified): only the extension's
-- functions, which pinned it, write the jobs, and a SET clause cost every
-- submit a save and restore of the setting.
CREATE FUNCTION remora._notify_event() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	PERFORM pg_catalog.pg_notify('remora_events',
		pg_catalog.format('{"job_id": %s, "state": %s}', NEW.job_id,
						  pg_catalog.to_json(NEW.state)));
	RETURN NULL;
END
$$;
CREATE TRIGGER jobs_event_insert AFTER INSERT ON remora.jobs
	FOR EACH ROW EXECUTE FUNCTION remora._notify_event();
CREATE TRIGGER jobs_event_state AFTER UPDATE OF state ON remora.jobs
	FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
	EXECUTE FUNCTION remora._notify_event();

-- Each role's webhook secret: 32 random bytes, the HMAC key; users see it
-- as 'whsec_' || base64 (remora_webhook_secret).  No role may read the
-- table: the owner's functions hand a role its own, and a worker the
-- secret of the delivery it claimed.
CREATE TABLE remora.webhook_secrets (
	owner			oid PRIMARY KEY,
	secret			bytea NOT NULL CHECK (pg_catalog.length(secret) = 32),
	created_at		timestamptz NOT NULL DEFAULT now()
);

-- A webhook owed: one per terminal state a job with options.notify_url
-- reached.  The body is fixed when the job ends, so that every try sends
-- the same bytes under the same webhook_id.  Tried until delivered (a 2xx
-- answer), refused (another answer that is not worth repeating) or
-- give_up_at, with backoff between tries (remora.webhook_tried).  No
-- foreign key to remora.jobs: a job's row is never deleted (retention
-- prunes its history, not the row), and the webhooks are a log that a
-- TRUNCATE of the jobs need not cascade to.
CREATE TABLE remora.webhooks (
	webhook_id		text PRIMARY KEY,
	job_id			bigint NOT NULL,
	state			text NOT NULL,
	finished_at		timestamptz,
	url				text NOT NULL,
	body			text NOT NULL,
	created_at		timestamptz NOT NULL DEFAULT now(),
	give_up_at		timestamptz NOT NULL,
	next_try_at		timestamptz NOT NULL DEFAULT now(),
	tries			integer NOT NULL DEFAULT 0,	-- tries handed out so far
	claimed_until	timestamptz,	-- a worker is trying it until then
	delivered_at	timestamptz,
	ended_at		timestamptz,	-- delivered, refused or given up
	UNIQUE NULLS NOT DISTINCT (job_id, state, finished_at)
);
CREATE INDEX webhooks_job_idx ON remora.webhooks (job_id);
CREATE INDEX webhooks_due_idx ON remora.webhooks (next_try_at)
	WHERE ended_at IS NULL;

-- Each try of a webhook, as the worker that made it reported it.
CREATE TABLE remora.webhook_tries (
	webhook_id		text NOT NULL,
	attempt			integer NOT NULL,
	http_status		integer,
	error			text,
	tried_at		timestamptz NOT NULL DEFAULT now(),
	next_try_at		timestamptz,	-- NULL: not tried again
	delivered		boolean NOT NULL,
	PRIMARY KEY (webhook_id, attempt)
);

ALTER TABLE remora.webhook_secrets ENABLE ROW LEVEL SECURITY;
ALTER TABLE remora.webhooks ENABLE ROW LEVEL SECURITY;
CREATE POLICY webhooks_visible ON remora.webhooks FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = webhooks.job_id));
ALTER TABLE remora.webhook_tries ENABLE ROW LEVEL SECURITY;
CREATE POLICY webhook_tries_visible ON remora.webhook_tries FOR SELECT
	USING (EXISTS (SELECT 1 FROM remora.webhooks w WHERE w.webhook_id = webhook_tries.webhook_id));

-- The caller's secret as 'whsec_' || base64, created from fresh (32 random
-- bytes from remora_webhook_secret, C) on first use, or replaced by it
-- when rotate.  Called by remora_webhook_secret, remora_rotate_webhook_secret
-- and by remora_submit and remora_export for a notify_url, so that a
-- webhook owed always has a secret to sign with.
CREATE FUNCTION remora._webhook_secret(caller oid, fresh bytea, rotate boolean)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	s	bytea;
BEGIN
	IF caller IS NULL OR fresh IS NULL OR length(fresh) <> 32 OR rotate IS NULL THEN
		RAISE EXCEPTION 'invalid webhook secret request' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF rotate THEN
		INSERT INTO remora.webhook_secrets AS ws (owner, secret) VALUES (caller, fresh)
		ON CONFLICT (owner) DO UPDATE SET secret = EXCLUDED.secret, created_at = now()
		RETURNING ws.secret INTO s;
	ELSE
		INSERT INTO remora.webhook_secrets (owner, secret) VALUES (caller, fresh)
		ON CONFLICT (owner) DO NOTHING;
		SELECT ws.secret INTO s FROM remora.webhook_secrets ws WHERE ws.owner = caller;
	END IF;
	RETURN 'whsec_' || encode(s, 'base64');
END
$$;

-- The caller's webhook secret, created on first use; and a new one in its
-- place (C: 32 bytes from pg_strong_random, then remora._webhook_secret).
CREATE FUNCTION remora_webhook_secret() RETURNS text
AS 'MODULE_PATHNAME', 'remora_webhook_secret'
LANGUAGE C VOLATILE;
CREATE FUNCTION remora_rotate_webhook_secret() RETURNS text
AS 'MODULE_PATHNAME', 'remora_rotate_webhook_secret'
LANGUAGE C VOLATILE;

-- Deferred to the end of the transaction that ended the job, so that the
-- body sees the result (or the export's figures) that the same transaction
-- recorded, and a job that changed state again before COMMIT owes one
-- webhook, for its last state.  Runs as the extension's owner: a cancel
-- commits in the user's own transaction.
CREATE FUNCTION remora._webhook_owed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	j	remora.jobs;
	sha text;
	n	bigint;
	b	bigint;
BEGIN
	SELECT * INTO j FROM remora.jobs jb WHERE jb.job_id = NEW.job_id;
	IF NOT FOUND OR j.state <> NEW.state OR NOT (j.spec -> 'options' ? 'notify_url') THEN
		RETURN NULL;
	END IF;
	IF j.state = 'succeeded' THEN
		IF j.source_kind = 'export' THEN
			SELECT e.output_digest, e.members, e.bytes INTO sha, n, b
			  FROM remora.exports e WHERE e.export_id = j.job_id;
		ELSE
			SELECT r.manifest_sha256, r.members, r.bytes INTO sha, n, b
			  FROM remora.results r WHERE r.job_id = j.job_id;
		END IF;
	END IF;
	INSERT INTO remora.webhooks (webhook_id, job_id, state, finished_at, url, body, give_up_at)
	VALUES ('msg_' || replace(gen_random_uuid()::text, '-', ''), j.job_id, j.state,
			j.finished_at, j.spec #>> '{options,notify_url}',
			jsonb_build_object('job_id', j.job_id, 'state', j.state,
							   'result_manifest_sha256', sha, 'members', n,
							   'bytes', b, 'last_error', j.last_error)::text,
			now() + interval '24 hours')
	ON CONFLICT (job_id, state, finished_at) DO NOTHING;
	RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER jobs_webhook AFTER UPDATE OF state ON remora.jobs
	DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state
					   AND NEW.state IN ('succeeded', 'failed', 'cancelled',
										 'outcome_unknown'))
	EXECUTE FUNCTION remora._webhook_owed();

-- Worker protocol: claim up to max_webhooks webhooks due now, for a
-- minute (a try's request must end well within it), with the secret of
-- each one's job owner: the URL and body are the job's own, so a worker
-- never sends one user's job to another user's receiver.  attempt numbers
-- the try (1, 2, ...): a try that outlives its claim is recorded, but the
-- schedule follows the latest.
CREATE FUNCTION remora.webhooks_due(incarnation uuid, max_webhooks integer)
RETURNS TABLE (webhook_id text, job_id bigint, url text, body text,
			   secret bytea, attempt integer)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF $1 IS NULL OR $2 IS NULL OR $2 < 1 THEN
		RAISE EXCEPTION 'incarnation and a positive max_webhooks are required'
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	-- as in remora.claim, an incarnation unknown or stopped claims nothing
	IF NOT EXISTS (SELECT 1 FROM remora.incarnations i
					WHERE i.incarnation = $1 AND i.stopped_at IS NULL) THEN
		RETURN;
	END IF;
	RETURN QUERY
	WITH due AS (
		SELECT w.webhook_id
		  FROM remora.webhooks w
		 WHERE w.ended_at IS NULL AND w.next_try_at <= now()
		   AND (w.claimed_until IS NULL OR w.claimed_until <= now())
		 ORDER BY w.next_try_at
		 LIMIT $2
		 FOR UPDATE SKIP LOCKED
	)
	UPDATE remora.webhooks w
	   SET tries = w.tries + 1, claimed_until = now() + interval '1 minute'
	  FROM due, remora.jobs j, remora.webhook_secrets s
	 WHERE w.webhook_id = due.webhook_id AND j.job_id = w.job_id
	   AND s.owner = j.owner
	RETURNING w.webhook_id, w.job_id, w.url, w.body, s.secret, w.tries;
END
$$;

-- Worker protocol: record a try.  delivered for a 2xx answer; retry for a
-- failure worth repeating (a 5xx answer, a timeout, a reset connection):
-- tried again after 1, 2, 4 ... seconds, at most 5 minutes apart, until
-- 24 hours after the job ended.  Anything else (a 4xx answer, a URL the
-- outbound-source policy refuses at connect time) ends the webhook.
-- Returns when it is tried next, NULL if not.
CREATE FUNCTION remora.webhook_tried(webhook_id text, attempt integer,
									 http_status integer, error text,
									 retry boolean)
RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	w		remora.webhooks;
	ok		boolean := coalesce($3 BETWEEN 200 AND 299, false);
	next_at timestamptz;
BEGIN
	IF $1 IS NULL OR $2 IS NULL OR $5 IS NULL THEN
		RAISE EXCEPTION 'webhook_id, attempt and retry are required'
			USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT * INTO w FROM remora.webhooks wh WHERE wh.webhook_id = $1 FOR UPDATE;
	IF NOT FOUND OR $2 < 1 OR $2 > w.tries THEN
		RAISE EXCEPTION 'webhook % has no try %', $1, $2 USING ERRCODE = 'no_data_found';
	END IF;
	IF NOT ok AND $5 AND w.ended_at IS NULL THEN
		next_at := now() + least(interval '1 second' * power(2, least($2 - 1, 16)),
								 interval '5 minutes');
		IF next_at > w.give_up_at THEN
			next_at := NULL;
		END IF;
	END IF;
	INSERT INTO remora.webhook_tries (webhook_id, attempt, http_status, error,
									  next_try_at, delivered)
	VALUES ($1, $2, $3, left($4, 1000), next_at, ok)
	ON CONFLICT DO NOTHING;
	IF ok AND w.delivered_at IS NULL THEN
		UPDATE remora.webhooks wh
		   SET delivered_at = now(), ended_at = coalesce(wh.ended_at, now()),
			   claimed_until = NULL
		 WHERE wh.webhook_id = $1;
	ELSIF $2 = w.tries AND w.ended_at IS NULL THEN
		UPDATE remora.webhooks wh
		   SET next_try_at = coalesce(next_at, wh.next_try_at), claimed_until = NULL,
			   ended_at = CASE WHEN next_at IS NULL THEN now() END
		 WHERE wh.webhook_id = $1;
	END IF;
	RETURN next_at;
END
$$;

-- Each try of each webhook of the caller's jobs (row-level security).
CREATE VIEW remora_webhook_deliveries WITH (security_invoker = true) AS
SELECT w.job_id, t.webhook_id, t.attempt, t.http_status, t.error,
	   t.tried_at, t.next_try_at, t.delivered
  FROM remora.webhook_tries t
  JOIN remora.webhooks w ON w.webhook_id = t.webhook_id;

SELECT pg_catalog.pg_extension_config_dump('remora.webhook_secrets', '');
SELECT pg_catalog.pg_extension_config_dump('remora.webhooks', '');
SELECT pg_catalog.pg_extension_config_dump('remora.webhook_tries', '');

REVOKE ALL ON FUNCTION remora._notify_event(), remora._webhook_secret(oid, bytea, boolean),
	remora._webhook_owed(), remora.webhooks_due(uuid, integer),
	remora.webhook_tried(text, integer, integer, text, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION remora_webhook_secret(), remora_rotate_webhook_secret()
	FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora_webhook_secret(), remora_rotate_webhook_secret()
	TO remora_user;
GRANT EXECUTE ON FUNCTION remora.webhooks_due(uuid, integer),
	remora.webhook_tried(text, integer, integer, text, boolean) TO remora_worker;
GRANT SELECT ON remora.webhooks, remora.webhook_tries, remora_webhook_deliveries
	TO remora_user;
REVOKE ALL ON remora_webhook_deliveries FROM PUBLIC;
/* ------------------------------------------------------------------------
 * Metrics (doc/operator-guide.md, "Metrics"): the Prometheus text exposition
 * of GET /metrics
 * ------------------------------------------------------------------------ */

-- A label value as the text format writes it between double quotes:
-- backslash, double quote and line feed escaped (the format's only
-- escapes; anything else, a carriage return included, may stand as it is).
-- Worker labels and error classes come from workers: never trusted.
CREATE FUNCTION remora._metric_label(v text) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
	SELECT pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
		coalesce(v, ''), E'\\', E'\\\\'), '"', E'\\"'), E'\n', E'\\n')
$$;

-- The HELP and TYPE lines of one metric family, then its samples (lines
-- each ending in a line feed; none: the family is announced all the same).
CREATE FUNCTION remora._metric_family(name text, kind text, help text,
									  samples text) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
	SELECT pg_catalog.format(E'# HELP %s %s\n# TYPE %s %s\n', name, help, name, kind)
		   OPERATOR(pg_catalog.||) coalesce(samples, '')
$$;

-- Everything GET /metrics shows, in the Prometheus text format (version
-- 0.0.4), for remora_admin and the metrics listener (remora.metrics_listen).
-- Counters are counts over the tables (attempts, results): they go down
-- only when remora.retention prunes history, which Prometheus takes for a
-- counter reset.  Label values are escaped by remora._metric_label.
CREATE FUNCTION remora.metrics_text() RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	buckets CONSTANT float8[] := ARRAY[0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
									   300, 900, 3600];
	states CONSTANT text[] := ARRAY['queued', 'running', 'retrying', 'succeeded',
									'failed', 'cancelled', 'outcome_unknown'];
	body text;
	s text;
BEGIN
	-- jobs and exports by state: every state, 0 included
	SELECT string_agg(format(E'remora_jobs{state="%s"} %s\n', st,
							 (SELECT count(*) FROM remora.jobs j
							   WHERE j.state = st AND j.deleted_at IS NULL
								 AND j.source_kind <> 'export')), '' ORDER BY o)
	  INTO s FROM unnest(states) WITH ORDINALITY AS u(st, o);
	body := remora._metric_family('remora_jobs', 'gauge',
		'Jobs by state (exports not counted).', s);
	SELECT string_agg(format(E'remora_exports{state="%s"} %s\n', st,
							 (SELECT count(*) FROM remora.jobs j
							   WHERE j.state = st AND j.deleted_at IS NULL
								 AND j.source_kind = 'export')), '' ORDER BY o)
	  INTO s FROM unnest(states) WITH ORDINALITY AS u(st, o);
	body := body || remora._metric_family('remora_exports', 'gauge',
		'Exports by state.', s);

	-- attempts (of jobs and exports) and their failures by class
	SELECT format(E'remora_attempts_total %s\n', count(*)) INTO s
	  FROM remora.attempts;
	body := body || remora._metric_family('remora_attempts_total', 'counter',
		'Attempts started, of jobs and exports.', s);
	SELECT string_agg(format(E'remora_attempt_failures_total{class="%s"} %s\n',
							 remora._metric_label(f.class), f.n), '' ORDER BY f.class)
	  INTO s
	  FROM (SELECT coalesce(a.error ->> 'class', 'unknown') AS class, count(*) AS n
			  FROM remora.attempts a
			 WHERE a.error IS NOT NULL
			 GROUP BY 1) f;
	body := body || remora._metric_family('remora_attempt_failures_total',
		'counter', 'Attempts that ended with an error, by error class.', s);

	-- bytes
	SELECT format(E'remora_committed_bytes_total %s\n', coalesce(sum(r.bytes), 0))
	  INTO s FROM remora.results r;
	body := body || remora._metric_family('remora_committed_bytes_total',
		'counter', 'Bytes of the committed results of jobs.', s);
	SELECT format(E'remora_exported_bytes_total %s\n', coalesce(sum(e.bytes), 0))
	  INTO s
	  FROM remora.exports e JOIN remora.jobs j ON j.job_id = e.export_id
	 WHERE j.state = 'succeeded';
	body := body || remora._metric_family('remora_exported_bytes_total',
		'counter', 'Bytes of the results that succeeded exports published.', s);
	SELECT format(E'remora_in_flight_bytes %s\n', coalesce(sum(p.bytes_done), 0))
	  INTO s FROM remora._progress() p;
	body := body || remora._metric_family('remora_in_flight_bytes', 'gauge',
		'Bytes moved so far by the attempts running now.', s);

	-- leases: in use and the limit
	SELECT format(E'remora_leases_active %s\n', count(*)) INTO s
	  FROM remora.leases;
	body := body || remora._metric_family('remora_leases_active', 'gauge',
		'Leases held now (running attempts).', s);
	body := body || remora._metric_family('remora_leases_limit', 'gauge',
		'The limit of leases held at once (remora.max_active_leases).',
		format(E'remora_leases_limit %s\n',
			   current_setting('remora.max_active_leases')::integer));

	-- claim latency: from a job's submission to its first attempt's claim
	-- (later attempts wait out a backoff by design, and the time they
	-- became claimable is not kept)
	WITH w AS (
		SELECT extract(epoch FROM a.started_at - j.submitted_at)::float8 AS secs
		  FROM remora.attempts a JOIN remora.jobs j ON j.job_id = a.job_id
		 WHERE a.attempt_no = 1
	)
	SELECT (SELECT string_agg(format(E'remora_claim_wait_seconds_bucket{le="%s"} %s\n',
									 b, (SELECT count(*) FROM w WHERE w.secs <= b)),
							  '' ORDER BY b)
			  FROM unnest(buckets) AS b)
		   || format(E'remora_claim_wait_seconds_bucket{le="+Inf"} %s\n', count(*))
		   || format(E'remora_claim_wait_seconds_sum %s\n', coalesce(sum(greatest(secs, 0)), 0))
		   || format(E'remora_claim_wait_seconds_count %s\n', count(*))
	  INTO s FROM w;
	body := body || remora._metric_family('remora_claim_wait_seconds',
		'histogram',
		'Time from a job''s submission to the claim of its first attempt.', s);

	-- workers running now (not stopped), and what each has done
	SELECT string_agg(format(E'remora_workers{kind="%s"} %s\n',
							 remora._metric_label(k.kind), k.n), '' ORDER BY k.kind)
	  INTO s
	  FROM (SELECT i.kind, count(*) AS n FROM remora.incarnations i
			 WHERE i.stopped_at IS NULL GROUP BY 1) k;
	body := body || remora._metric_family('remora_workers', 'gauge',
		'Worker processes running now, by kind.', s);
	SELECT remora._metric_family('remora_worker_committed_bytes_total',
			   'counter', 'Bytes of the results committed by each running worker.',
			   string_agg(format(E'remora_worker_committed_bytes_total{%s} %s\n',
								 m.labels, m.bytes), '' ORDER BY m.labels))
		|| remora._metric_family('remora_worker_attempts_total', 'counter',
			   'Attempts started by each running worker.',
			   string_agg(format(E'remora_worker_attempts_total{%s} %s\n',
								 m.labels, m.attempts), '' ORDER BY m.labels))
		|| remora._metric_family('remora_worker_leases_active', 'gauge',
			   'Leases each running worker holds now.',
			   string_agg(format(E'remora_worker_leases_active{%s} %s\n',
								 m.labels, m.leases), '' ORDER BY m.labels))
	  INTO s
	  FROM (SELECT format('worker="%s",incarnation="%s",kind="%s"',
						  remora._metric_label(coalesce(i.label, i.incarnation::text)),
						  i.incarnation, remora._metric_label(i.kind)) AS labels,
				   (SELECT coalesce(sum(r.bytes), 0) FROM remora.results r
					  JOIN remora.attempts a ON a.attempt_id = r.attempt_id
					 WHERE a.incarnation = i.incarnation) AS bytes,
				   (SELECT count(*) FROM remora.attempts a
					 WHERE a.incarnation = i.incarnation) AS attempts,
				   (SELECT count(*) FROM remora.leases l
					 WHERE l.incarnation = i.incarnation) AS leases
			  FROM remora.incarnations i
			 WHERE i.stopped_at IS NULL) m;
	body := body || s;

	-- the checkpoint writer, since the server started
	SELECT remora._metric_family('remora_checkpoint_transactions_total', 'counter',
			   'Transactions of the checkpoint writer.',
			   format(E'remora_checkpoint_transactions_total %s\n', c.transactions))
		|| remora._metric_family('remora_checkpoints_total', 'counter',
			   'Checkpoints written.',
			   format(E'remora_checkpoints_total %s\n', c.checkpoints))
		|| remora._metric_family('remora_checkpoint_refusals_total', 'counter',
			   'Checkpoints refused (the attempt was no longer current).',
			   format(E'remora_checkpoint_refusals_total %s\n', c.refusals))
		|| remora._metric_family('remora_checkpoint_commit_seconds_total',
			   'counter', 'Time spent committing checkpoint transactions.',
			   format(E'remora_checkpoint_commit_seconds_total %s\n',
					  c.commit_ms_total / 1000))
		|| remora._metric_family('remora_checkpoint_commit_max_seconds', 'gauge',
			   'The longest commit of a checkpoint transaction.',
			   format(E'remora_checkpoint_commit_max_seconds %s\n',
					  c.commit_ms_max / 1000))
		|| remora._metric_family('remora_checkpoint_max_batch', 'gauge',
			   'The most checkpoints written by one transaction.',
			   format(E'remora_checkpoint_max_batch %s\n', c.max_batch))
	  INTO s FROM remora._checkpoint_stats() c;
	RETURN body || s;
END
$$;

REVOKE ALL ON FUNCTION remora._metric_label(text),
	remora._metric_family(text, text, text, text), remora.metrics_text()
	FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.metrics_text() TO remora_admin;
-- The last hour, minute by minute, for the web client's charts (the
-- admin page): how many jobs were queued and running at the end of each
-- minute, how many ended in it (succeeded, failed, cancelled), and the
-- bytes per second moved in it.  Nothing keeps a history of progress, so
-- the figures are rebuilt from the jobs' own timestamps: a job is queued
-- from its submission to its first start (a retrying job counts as
-- running from then to its end), and an attempt's bytes are spread evenly
-- over its life (a committed attempt's result from its start to the
-- commit, a running attempt's progress from its start to now; an attempt
-- that failed leaves nothing to count).  Row-level security on the
-- tables leaves a user their own jobs, remora_admin everyone's.  Cheap on
-- a long history: only jobs unfinished (jobs_unfinished_idx) or finished in
-- the hour (jobs_finished_idx) are read.  Exports are not jobs here, as
-- in remora_stats; deleted jobs are (they ran).
CREATE INDEX jobs_finished_idx ON remora.jobs (finished_at)
	WHERE finished_at IS NOT NULL;

CREATE VIEW remora_throughput WITH (security_invoker = true) AS
WITH recent AS (
	SELECT j.job_id, j.state, j.submitted_at, j.started_at, j.finished_at,
		   j.current_attempt
	  FROM remora.jobs j
	 WHERE j.finished_at IS NULL
	   AND j.source_kind <> 'export'
	UNION
	SELECT j.job_id, j.state, j.submitted_at, j.started_at, j.finished_at,
		   j.current_attempt
	  FROM remora.jobs j
	 WHERE j.finished_at >= pg_catalog.now() - interval '1 hour'
	   AND j.source_kind <> 'export'),
spans AS (
	-- committed attempts: the result's bytes from the start to the commit
	SELECT a.started_at AS t0, r.committed_at AS t1, r.bytes::float8 AS bytes
	  FROM recent j
	  JOIN remora.results r ON r.job_id = j.job_id
	  JOIN remora.attempts a ON a.attempt_id = r.attempt_id
	UNION ALL
	-- running attempts: their progress so far
	SELECT p.started_at, pg_catalog.now(), p.bytes_done::float8
	  FROM recent j
	  JOIN remora_progress p ON p.job_id = j.job_id
	 WHERE j.state = 'running'),
-- the hour's minutes, and the one before it (what happened before the hour)
minutes AS (
	SELECT m
	  FROM pg_catalog.generate_series(
			pg_catalog.date_trunc('minute', pg_catalog.now()) - interval '60 minutes',
			pg_catalog.date_trunc('minute', pg_catalog.now()), interval '1 minute') m),
-- a job enters and leaves queued and running once each: the changes per
-- minute, summed in order, are the counts at each minute's end (one pass
-- over the jobs, however many minutes)
changes AS (
	SELECT greatest(pg_catalog.date_trunc('minute', e.t),
							   pg_catalog.date_trunc('minute', pg_catalog.now())
							   - interval '60 minutes') AS m,
		   sum(e.queued) AS queued, sum(e.running) AS running
	  FROM recent j,
		   LATERAL (VALUES (j.submitted_at, 1, 0),
						   (coalesce(j.started_at, j.finished_at), -1, 0),
						   (j.started_at, 0, 1),
						   (CASE WHEN j.started_at IS NOT NULL THEN j.finished_at END, 0, -1))
			   e(t, queued, running)
	 WHERE e.t IS NOT NULL
	 GROUP BY 1),
ended AS (
	SELECT pg_catalog.date_trunc('minute', j.finished_at) AS m,
		   count(*) FILTER (WHERE j.state = 'succeeded') AS succeeded,
		   count(*) FILTER (WHERE j.state = 'failed') AS failed,
		   count(*) FILTER (WHERE j.state = 'cancelled') AS cancelled
	  FROM recent j
	 WHERE j.finished_at IS NOT NULL
	 GROUP BY 1),
counted AS (
	SELECT m.m,
		   sum(coalesce(c.queued, 0)) OVER (ORDER BY m.m) AS queued,
		   sum(coalesce(c.running, 0)) OVER (ORDER BY m.m) AS running
	  FROM minutes m LEFT JOIN changes c ON c.m = m.m)
SELECT c.m AS minute,
	   c.queued::bigint AS queued,
	   c.running::bigint AS running,
	   coalesce(e.succeeded, 0) AS succeeded,
	   coalesce(e.failed, 0) AS failed,
	   coalesce(e.cancelled, 0) AS cancelled,
	   coalesce((SELECT sum(s.bytes
					* extract(epoch FROM least(s.t1, c.m + interval '1 minute')
											- greatest(s.t0, c.m))
					/ greatest(extract(epoch FROM s.t1 - s.t0), 0.001))
			   FROM spans s
			  WHERE s.t0 < c.m + interval '1 minute' AND s.t1 > c.m), 0)::float8 / 60
		   AS bytes_per_second
  FROM counted c
  LEFT JOIN ended e ON e.m = c.m
 WHERE c.m > pg_catalog.date_trunc('minute', pg_catalog.now()) - interval '60 minutes';

GRANT SELECT ON remora_throughput TO remora_user;
REVOKE ALL ON remora_throughput FROM PUBLIC;
-- ---------------------------------------------------------------------
-- remora.max_upload_parts reaches remora-worker: worker_settings() gets
-- a column, so it is dropped and made again (an OUT list cannot change
-- in place), with the same privileges.
-- ---------------------------------------------------------------------

DROP FUNCTION remora.worker_settings();

-- What an external worker (remora-worker) needs of the server's settings:
-- the target store with its credentials, the outbound policy and the lease.
-- Secrets: executable by remora_worker only (and checked again inside);
-- not SECURITY DEFINER: the C function reads the settings (and the secret
-- key file) itself.  doc/security.md: connect with sslmode=verify-full.
CREATE FUNCTION remora.worker_settings(
	OUT s3_endpoint text, OUT s3_region text, OUT s3_path_style boolean,
	OUT s3_access_key_id text, OUT s3_secret_access_key text,
	OUT default_bucket text, OUT default_prefix text, OUT part_size bigint,
	OUT lease_duration_ms integer, OUT worker_concurrency integer,
	OUT stall_timeout_ms integer, OUT allow_networks text,
	OUT deny_networks text, OUT allow_ports text, OUT hf_endpoint text,
	OUT hf_token text, OUT ca_file text, OUT ca_path text,
	OUT http_proxy text, OUT https_proxy text, OUT no_proxy text,
	OUT object_connections integer, OUT max_connections_per_host integer,
	OUT export_copy_cutoff bigint, OUT max_upload_parts integer)
RETURNS record
AS 'MODULE_PATHNAME', 'remora_worker_settings'
LANGUAGE C VOLATILE;

REVOKE ALL ON FUNCTION remora.worker_settings() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.worker_settings() TO remora_worker;
-- Claims and batched commits nearer the floor (bench/claim_cpu.sh; doc/
-- benchmarks.md, "Where a claim and a commit spend the server's CPU"):
-- the staging prefix is plain SQL that the statements of claim and
-- commit inline for each job, a known incarnation costs a claim one read,
-- and a batch whose items were all published skips the query for the
-- others.

-- Plain SQL, so that the statements of claim and commit inline it for
-- each of their jobs.
CREATE OR REPLACE FUNCTION remora._staging_prefix(prefix text, job bigint, attempt uuid)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
	SELECT CASE WHEN prefix = '' THEN '' ELSE prefix || '/' END
		   || job::text || '/' || attempt::text || '/'
$$;

-- Hand out up to max_jobs runnable jobs, shared between their owners
-- (doc/operator-guide.md, "Sharing the workers between users").  The next job
-- goes to the owner with runnable jobs whose running attempts, with those
-- already picked in this batch, are the fewest for its weight ((running +
-- picked) / weight, ties drawn by lot in proportion to the weights); an
-- owner's own jobs go by priority, then age.  An owner alone gets every job;
-- one at its max_running gets none.
-- Each claim creates a new attempt with a fencing token greater than any before it
-- for the job, records the recovery ledger, and takes a lease.  Leases in
-- use never exceed remora.max_active_leases: a claim reserves the room it
-- takes in shared memory before it takes it, against the leases it can see
-- plus those others reserved (running jobs count while the lease rows are
-- lost), and the reservation lasts until its transaction ends (leases.c
-- says why that suffices); claimers never wait for each other, and skip
-- queue and job rows others hold.  A lease runs from when it is written
-- (clock_timestamp()), not from a transaction start.
-- Model: Claim (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora.claim(incarnation uuid, max_jobs integer DEFAULT 1)
RETURNS TABLE (job_id bigint, attempt_id uuid, fencing_token bigint,
			   spec jsonb, resume jsonb, lease_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- one plan for the batch statement: replanning it on each call (its LIMIT
-- is a parameter) cost more than the claim itself
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
	p_incarnation uuid := $1;
	lim			integer := current_setting('remora.max_active_leases')::integer;
	room		integer;
	seen		bigint;
	others		integer;
	taken		integer;
	stopped		boolean;
	expires		timestamptz;
	dweight		integer := coalesce(nullif(current_setting('remora.default_role_weight', true), '')::integer, 1);
	dcap		integer := coalesce(nullif(current_setting('remora.default_role_max_running', true), '')::integer, 0);
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
	-- marked stopped claims nothing (one read, as a known one claims again
	-- and again)
	SELECT i.stopped_at IS NOT NULL INTO stopped
	  FROM remora.incarnations i WHERE i.incarnation = p_incarnation;
	IF NOT FOUND THEN
		INSERT INTO remora.incarnations (incarnation) VALUES (p_incarnation)
		ON CONFLICT DO NOTHING;
		SELECT i.stopped_at IS NOT NULL INTO stopped
		  FROM remora.incarnations i WHERE i.incarnation = p_incarnation;
	END IF;
	IF stopped THEN
		RETURN;
	END IF;

	-- the reservation is read before the leases are counted (each
	-- statement here takes a new snapshot)
	LOOP
		seen := remora._lease_reservations();
		room := least(max_jobs, lim - remora._leases_in_use()
								- (seen & 4294967295)::integer);
		IF room <= 0 THEN
			RETURN;
		END IF;
		EXIT WHEN remora._reserve_leases(seen, room);
	END LOOP;
	-- the room other claims in flight hold: what they may still take of
	-- any one owner's jobs, unseen by the count below
	others := (seen & 4294967295)::integer;
	expires := clock_timestamp() + remora._setting_interval('remora.lease_duration');

	-- One statement for the whole batch.  The owners with queued jobs are
	-- found by a loose scan of the queue's owner index (one descent per
	-- owner, whatever their backlogs); at most room of them, the first in
	-- share order that have a runnable job, can be picked from (each of
	-- them has a job that comes before any other owner's first), and of
	-- each, its next jobs at most: the candidates.  They are locked in
	-- share order, skipping those others hold.  A claim thus reads
	-- O(owners + room * (room + others)) index entries, never the backlog.
	--
	-- max_running holds without a lock any user could take: an owner's
	-- running attempts are counted in this statement's snapshot, taken
	-- after the reservations were read, and every other claim in flight is
	-- assumed to take that owner's jobs up to its whole room (leases.c's
	-- argument, owner by owner).  Under overlapping claims an owner close to
	-- its limit may so be passed over, never taken past it.
	--
	-- A job row is locked only if nobody else holds it, so a claim never
	-- waits on a cancel (which holds the job, then the queue row).  The
	-- queue entry of every job locked goes: it is claimed now, or it no
	-- longer waits (an entry left behind; reconcile removes them too).
	RETURN QUERY
	WITH RECURSIVE owners (owner) AS (
		(SELECT qq.owner FROM remora.queue qq ORDER BY qq.owner LIMIT 1)
		UNION ALL
		SELECT (SELECT qq.owner FROM remora.queue qq
				 WHERE qq.owner > o.owner ORDER BY qq.owner LIMIT 1)
		  FROM owners o
		 WHERE o.owner IS NOT NULL
	), running AS MATERIALIZED (
		SELECT r.owner, r.running FROM remora._running_by_owner() r
	), share AS (
		-- weight and the jobs an owner may still start (0 = no max_running)
		SELECT o.owner, coalesce(l.weight, dweight) AS weight,
			   coalesce(r.running, 0) AS running,
			   least(room, coalesce(nullif(coalesce(l.max_running, dcap), 0)
									- coalesce(r.running, 0) - others, room)) AS may_take,
			   -- the lot that breaks ties: the least of draws made at
			   -- rates proportional to the weights falls to each owner with
			   -- the probability of its weight's share
			   -ln(1 - random()) / coalesce(l.weight, dweight) AS lot
		  FROM owners o
		  LEFT JOIN remora.role_limits l ON l.role_id = o.owner
		  LEFT JOIN running r ON r.owner = o.owner
		 WHERE o.owner IS NOT NULL
	), first AS MATERIALIZED (
		SELECT s.* FROM (SELECT s.* FROM share s
						  WHERE s.may_take > 0
						  ORDER BY s.running::float8 / s.weight, s.lot
						 OFFSET 0) s
		 WHERE EXISTS (SELECT 1 FROM remora.queue qq
						WHERE qq.owner = s.owner AND qq.not_before <= now())
		 LIMIT room
	), candidate AS MATERIALIZED (
		-- beyond what it may take, room + others more of each owner's
		-- jobs: those that claims in flight or a cancel hold are skipped,
		-- and the next ones are there to take instead
		SELECT c.job_id, f.owner, f.may_take,
			   (f.running + c.k - 1)::float8 / f.weight AS due, f.lot, c.k
		  FROM first f
		 CROSS JOIN LATERAL (
			SELECT n.job_id, row_number() OVER () AS k
			  FROM (SELECT qq.job_id FROM remora.queue qq
					 WHERE qq.owner = f.owner AND qq.not_before <= now()
					 ORDER BY qq.priority DESC, qq.job_id
					 LIMIT f.may_take + room + others) n) c
	), locked AS MATERIALIZED (
		-- the queue rows by key, as unqueued below: a join alone, planned
		-- generically for up to max_jobs candidates, hashed the whole queue
		-- and made every claim read the backlog
		SELECT qq.job_id, c.owner, c.may_take, c.due, c.k
		  FROM candidate c JOIN remora.queue qq ON qq.job_id = c.job_id
		 WHERE qq.job_id = ANY (ARRAY(SELECT c2.job_id FROM candidate c2))
		 ORDER BY c.due, c.lot, c.k
		 LIMIT room
		   FOR UPDATE OF qq SKIP LOCKED
	), picked AS (
		-- no owner past what it may take (a row locked and not picked
		-- stays queued)
		SELECT l.job_id
		  FROM (SELECT l.job_id, l.may_take,
					   row_number() OVER (PARTITION BY l.owner ORDER BY l.due, l.k) AS n
				  FROM locked l) l
		 WHERE l.n <= l.may_take
	), held AS MATERIALIZED (
		SELECT jb.* FROM remora.jobs jb
		 WHERE jb.job_id IN (SELECT p.job_id FROM picked p)
		   FOR UPDATE SKIP LOCKED
	), unqueued AS (
		-- by key, from the batch: a join (planned generically for up to
		-- max_jobs rows) would hash the whole queue
		DELETE FROM remora.queue qq
		 WHERE qq.job_id = ANY (ARRAY(SELECT h.job_id FROM held h))
	), go AS MATERIALIZED (
		SELECT h.*, gen_random_uuid() AS new_attempt,
			   (SELECT c FROM remora.checkpoints c WHERE c.job_id = h.job_id) AS cp,
			   (SELECT u.url FROM remora.source_urls u WHERE u.job_id = h.job_id) AS url,
			   (SELECT e FROM remora.exports e WHERE e.export_id = h.job_id) AS ex
		  FROM held h
		 WHERE h.state IN ('queued', 'retrying') AND h.cancel_requested_at IS NULL
		   AND h.attempts_used < h.max_attempts
	), attempt AS (
		-- an export stages nothing to clean up, and records what it is to
		-- publish before it runs
		INSERT INTO remora.attempts
			(attempt_id, job_id, attempt_no, fencing_token, incarnation,
			 definition_hash, request_hash, access_digest, provenance,
			 resumed_from, cleaned_at, export_ledger)
		SELECT g.new_attempt, g.job_id, g.attempts_used + 1, g.fencing_token + 1,
			   p_incarnation, g.definition_hash, g.request_hash, g.access_digest,
			   g.provenance, (g.cp).attempt_id,
			   CASE WHEN (g.ex).export_id IS NOT NULL THEN now() END,
			   CASE WHEN (g.ex).export_id IS NOT NULL THEN jsonb_build_object(
					'output_digest', (g.ex).output_digest, 'source_digest', (g.ex).source_digest,
					'publication_digest', (g.ex).publication_digest, 'members', (g.ex).members,
					'bytes', (g.ex).bytes, 'if_exists', (g.ex).if_exists, 'mode', (g.ex).mode,
					'decision', (g.ex).decisions -> -1) END
		  FROM go g
	), job AS (
		UPDATE remora.jobs jb
		   SET state = 'running',
			   attempts_used = jb.attempts_used + 1,
			   fencing_token = jb.fencing_token + 1,
			   current_attempt = g.new_attempt,
			   started_at = coalesce(jb.started_at, now())
		  FROM go g
		 WHERE jb.job_id = g.job_id
	), lease AS (
		INSERT INTO remora.leases (attempt_id, job_id, fencing_token, incarnation, expires_at)
		SELECT g.new_attempt, g.job_id, g.fencing_token + 1, p_incarnation, expires
		  FROM go g
	)
	SELECT g.job_id, g.new_attempt, g.fencing_token + 1,
		   -- the worker gets the whole URL, query string included
		   CASE WHEN g.url IS NULL THEN s.spec
				ELSE coalesce(jsonb_set(s.spec, '{source,uri}', to_jsonb(g.url)), s.spec) END
		   || CASE WHEN (g.ex).export_id IS NULL THEN '{}'::jsonb
				   ELSE jsonb_build_object('export', remora._export_spec(g.job_id)) END,
		   CASE WHEN g.cp IS NULL THEN NULL
				ELSE jsonb_build_object('attempt_id', (g.cp).attempt_id,
										'fencing_token', (g.cp).fencing_token,
										'bytes_done', (g.cp).bytes_done,
										'state', (g.cp).state) END,
		   expires
	  FROM go g
	 CROSS JOIN LATERAL (SELECT g.spec || jsonb_build_object(
				'job_id', g.job_id, 'attempt_no', g.attempts_used + 1, 'owner', g.owner,
				'staging_prefix', remora._staging_prefix(g.prefix, g.job_id, g.new_attempt))
				AS spec) s
	 ORDER BY g.priority DESC, g.job_id;
	GET DIAGNOSTICS taken = ROW_COUNT;
	PERFORM remora._release_leases(room - taken);
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

	-- the others, one by one in job order (none, as a rule)
	IF cardinality(clean) < n THEN
		FOR k IN SELECT i.ord::integer
				   FROM unnest(attempt_ids) WITH ORDINALITY i(aid, ord)
				   LEFT JOIN LATERAL (SELECT a.job_id FROM remora.attempts a
									   WHERE a.attempt_id = i.aid OFFSET 0) a ON true
				  WHERE NOT i.ord = ANY (clean)
				  ORDER BY a.job_id NULLS LAST, i.ord LOOP
			ok[k] := remora.commit(attempt_ids[k], fencing_tokens[k], manifests[k]);
		END LOOP;
	END IF;

	RETURN QUERY SELECT i.aid, ok[i.ord]
				   FROM unnest(attempt_ids) WITH ORDINALITY i(aid, ord)
				  ORDER BY i.ord;
END
$$;
-- ---------------------------------------------------------------------
-- Submits at the floor: the checks a submit calls are plpgsql, whose
-- statements' plans a session keeps (a SQL function with a SET clause is
-- planned anew in every transaction); remora._submit computes its hashes
-- in place and calls the source checks only for the sources they judge.
-- As 97_submit_width.sql changes them further (no options column, a
-- plain INSERT without a key, the queue row's owner named, no
-- search_path pinned by _may_write), they are here as that leaves them.
-- ---------------------------------------------------------------------

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
				  DETAIL = 'Only the default bucket and prefix, and the targets granted to your roles, may be written.',
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

	def_hash := encode(sha256(convert_to(spec::text || coalesce(source_url, ''), 'UTF8')), 'hex');
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
	-- the owner is the job's, just written: named, so that the queue's
	-- trigger need not look it up
	INSERT INTO remora.queue (job_id, priority, not_before, owner)
	VALUES (new_id, (spec #>> '{options,priority}')::integer, now(), caller);
	RETURN new_id;
END
$$;
/* ------------------------------------------------------------------------
 * When the next queued job becomes due (worker protocol).  A job queued
 * for later (a retry's backoff, a Retry-After) is claimed when it becomes
 * due, not at a worker's next poll: a worker whose claim took fewer jobs
 * than it had room for asks how long until the next one is due, and
 * claims again then (src/runner/round.c).
 * ------------------------------------------------------------------------ */

-- The queued jobs that wait for a time later than when they were queued:
-- retries and the jobs reconcile queues again for later, never a submit's
-- (queued due at once, not_before = enqueued_at).  A job outside the index
-- was due when it was queued; the earliest one not yet due is the index's
-- first entry past now: one descent, however long the queue.  Without an
-- index every idle poll of every worker would scan the queue (100,000 rows
-- and more); an index of every row would cost each submit an insert into
-- it (a third more time to insert queue rows, measured), where this one
-- costs a submit its predicate alone (bench/submit.sh).
CREATE INDEX queue_later_idx ON remora.queue (not_before)
	WHERE not_before > enqueued_at;

-- Milliseconds until the next queued job becomes due, by the server's
-- clock (a worker's own may be off): 0 when none is due later but one is
-- queued (due now, and left to claim's rules: an owner at its max_running,
-- leases at remora.max_active_leases, a row another claim holds); NULL
-- when nothing is queued, or the incarnation was stopped (it claims
-- nothing).  Reads, locks and changes nothing.
CREATE FUNCTION remora.next_due(incarnation uuid) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_incarnation uuid := $1;
	t			timestamptz := clock_timestamp();
	due			timestamptz;
BEGIN
	IF p_incarnation IS NULL THEN
		RAISE EXCEPTION 'incarnation must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF EXISTS (SELECT 1 FROM remora.incarnations i
				WHERE i.incarnation = p_incarnation AND i.stopped_at IS NOT NULL) THEN
		RETURN NULL;
	END IF;
	-- the predicate repeated, so that the partial index answers
	SELECT q.not_before INTO due
	  FROM remora.queue q
	 WHERE q.not_before > q.enqueued_at AND q.not_before > t
	 ORDER BY q.not_before
	 LIMIT 1;
	IF FOUND THEN
		RETURN greatest(1, ceil(extract(epoch FROM due - t) * 1000))::bigint;
	END IF;
	IF EXISTS (SELECT 1 FROM remora.queue) THEN
		RETURN 0;
	END IF;
	RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION remora.next_due(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.next_due(uuid) TO remora_worker;
-- ---------------------------------------------------------------------
-- A claim's update of the job row is HOT (no index entries): no index
-- names the jobs' state any more (see remora.jobs).  jobs_active_idx (on
-- state) gives way to jobs_unfinished_idx (finished_at IS NULL, which
-- holds exactly for the queued, running and retrying jobs), the running
-- jobs are read through their running attempts (attempts_running_idx),
-- and the jobs' pages keep room for a claim's row version (fillfactor;
-- pages written before stay full until rewritten, and their jobs' claims
-- are HOT only where there is room).  The readers changed with it are
-- here, or in the part that adds them in this version.
-- ---------------------------------------------------------------------

ALTER TABLE remora.jobs SET (fillfactor = 50);
DROP INDEX remora.jobs_active_idx;
CREATE INDEX jobs_unfinished_idx ON remora.jobs (owner)
	WHERE finished_at IS NULL;
CREATE INDEX attempts_running_idx ON remora.attempts (job_id)
	WHERE state = 'running';
-- the sweep's index of attempts to clean holds only attempts that ended:
-- a claim's new attempt is not entered
DROP INDEX remora.attempts_clean_due_idx;
CREATE INDEX attempts_clean_due_idx ON remora.attempts (finished_at, attempt_id)
	WHERE cleaned_at IS NULL AND clean_after IS NULL AND finished_at IS NOT NULL;

-- Leases in use, as claim counts them.  While coordination state is whole
-- (remora.coordination), every running attempt has its lease row (claim,
-- settle and commit change both in one transaction, reconcile re-creates
-- lost rows before it restores the marker), so the lease rows are the
-- count: a small table.  Without the marker, a running job's lease may have
-- been lost and not yet re-created: every running job counts too, read
-- through its running attempt (no index names the jobs' state: remora.jobs).
-- Model: LeasesInUse (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora._leases_in_use() RETURNS bigint
LANGUAGE plpgsql STABLE
AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM remora.coordination) THEN
		RETURN (SELECT count(*) FROM remora.leases);
	END IF;
	RETURN (SELECT count(*)
			  FROM (SELECT a.job_id FROM remora.attempts a WHERE a.state = 'running'
					UNION
					SELECT l.job_id FROM remora.leases l) s);
END
$$;

-- Rebuild coordination state from durable state and expire lapsed leases.
-- Returns the number of repairs made.  Safe to run at any time, by any
-- number of callers.
-- Model: Reconcile (proof/remora.pml)
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
	  FROM remora.attempts a
	  JOIN remora.jobs j ON j.job_id = a.job_id AND j.current_attempt = a.attempt_id
	 WHERE a.state = 'running' AND j.state = 'running'
	   AND NOT EXISTS (SELECT 1 FROM remora.leases le WHERE le.attempt_id = a.attempt_id)
	ON CONFLICT DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	repairs := repairs + n;

	-- queue entries: exactly the jobs waiting to be claimed.  Submit,
	-- retry, cancel and claim keep them so; they are rebuilt from the jobs
	-- only when coordination state was lost (remora.coordination).
	IF NOT EXISTS (SELECT 1 FROM remora.coordination) THEN
		DELETE FROM remora.queue q
		 WHERE NOT EXISTS (SELECT 1 FROM remora.jobs j
						   WHERE j.job_id = q.job_id AND j.state IN ('queued', 'retrying'));
		GET DIAGNOSTICS n = ROW_COUNT;
		repairs := repairs + n;

		INSERT INTO remora.queue (job_id, priority, not_before)
		SELECT j.job_id, j.priority, j.not_before
		  FROM remora.jobs j
		 WHERE j.finished_at IS NULL AND j.state IN ('queued', 'retrying')
		   AND NOT EXISTS (SELECT 1 FROM remora.queue q WHERE q.job_id = j.job_id)
		ON CONFLICT DO NOTHING;
		GET DIAGNOSTICS n = ROW_COUNT;
		repairs := repairs + n;
		INSERT INTO remora.coordination VALUES (true) ON CONFLICT DO NOTHING;
	END IF;

	RETURN repairs;
END
$$;
-- ---------------------------------------------------------------------
-- Narrower submits: a job's row no longer keeps its options a second
-- time (they are its spec's, spec -> 'options'), the index on owner alone
-- goes (the (owner, idempotency_key) key leads with owner), and a submit
-- calls less: a submit without an idempotency key inserts without ON
-- CONFLICT; it names the queue row's owner, so that the queue's trigger
-- is not called; it calls the max_queued check only when a limit may
-- apply; and the functions it calls inside remora._submit, which pinned
-- search_path, pin none of their own.
-- ---------------------------------------------------------------------

DROP INDEX remora.jobs_owner_idx;

-- Every release recorded options as spec -> 'options' and never changed
-- either; a row that differs all the same keeps its options, in its spec.
UPDATE remora.jobs SET spec = jsonb_set(spec, '{options}', options)
 WHERE spec -> 'options' IS DISTINCT FROM options;
ALTER TABLE remora.jobs DROP COLUMN options;

-- remora._may_write and remora._submit of this change are in
-- 90_submit_speed.sql, remora._queue_owner and its trigger in
-- 60_fair_claim.sql: the parts that first changed them in this version.
CREATE OR REPLACE FUNCTION remora._notify_workers() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	PERFORM pg_catalog.pg_notify('remora_jobs', TG_ARGV[0]);
	RETURN NULL;
END
$$;
-- ---------------------------------------------------------------------
-- A count written with a fraction (2.0), or past a bigint, is refused as
-- a bad count (22023): it passed remora._is_count and the checks of
-- members and manifest descriptors, then failed to cast (22P02, 22003).
-- ---------------------------------------------------------------------

-- Is v absent (SQL NULL) or a non-negative integer that fits in a bigint?
-- Judged by its text: a number written with a fraction (2.0) keeps it,
-- and would not cast to bigint.
CREATE OR REPLACE FUNCTION remora._is_count(v jsonb) RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT CASE WHEN v IS NULL THEN true
				WHEN jsonb_typeof(v) <> 'number' THEN false
				ELSE (v #>> '{}') ~ '^[0-9]{1,19}$'
					 AND (v #>> '{}')::numeric <= 9223372036854775807 END
$$;

-- Validate a member array before anything is written.  One statement
-- over the array (the terms of the OR are evaluated in order, so a size is
-- only cast once its text is known to be an integer's: 2.0 is not).
CREATE OR REPLACE FUNCTION remora._check_members(members jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
	IF members IS NULL THEN
		RETURN;
	END IF;
	IF jsonb_typeof(members) <> 'array' THEN
		RAISE EXCEPTION 'invalid members' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'members must be a JSON array of objects.';
	END IF;
	IF EXISTS (SELECT 1 FROM jsonb_array_elements(members) e(m)
				WHERE jsonb_typeof(m) <> 'object'
				   OR jsonb_typeof(m -> 'path') IS DISTINCT FROM 'string'
				   OR jsonb_typeof(m -> 'bucket') IS DISTINCT FROM 'string'
				   OR jsonb_typeof(m -> 'key') IS DISTINCT FROM 'string'
				   OR jsonb_typeof(m -> 'size') IS DISTINCT FROM 'number'
				   OR jsonb_typeof(m -> 'etag') IS DISTINCT FROM 'string'
				   OR coalesce(m ->> 'sha256', '') !~ '^[0-9a-fA-F]{64}$'
				   OR m ->> 'size' !~ '^[0-9]{1,19}$'
				   OR (m ->> 'size')::numeric > 9223372036854775807) THEN
		RAISE EXCEPTION 'invalid member'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'Each member needs string path, bucket, key and etag, a non-negative integer size and a 64-digit hex sha256.';
	END IF;
END
$$;

-- Validate and normalise a manifest descriptor (sha256 to lower case).
CREATE OR REPLACE FUNCTION remora._check_manifest(manifest jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
	bad		text;
BEGIN
	IF manifest IS NULL OR jsonb_typeof(manifest) <> 'object' THEN
		bad := 'The manifest descriptor must be a JSON object.';
	ELSIF jsonb_typeof(manifest -> 'key') IS DISTINCT FROM 'string' OR manifest ->> 'key' = '' THEN
		bad := 'The manifest descriptor needs a non-empty string "key".';
	ELSIF jsonb_typeof(manifest -> 'etag') IS DISTINCT FROM 'string' OR manifest ->> 'etag' = '' THEN
		bad := 'The manifest descriptor needs a non-empty string "etag".';
	ELSIF coalesce(manifest ->> 'sha256', '') !~ '^[0-9a-fA-F]{64}$'
		OR jsonb_typeof(manifest -> 'sha256') <> 'string' THEN
		bad := 'The manifest descriptor needs "sha256" of 64 hexadecimal digits.';
	ELSIF jsonb_typeof(manifest -> 'members') IS DISTINCT FROM 'number'
		OR NOT remora._is_count(manifest -> 'members') THEN
		bad := 'The manifest descriptor needs "members", a non-negative integer.';
	ELSIF jsonb_typeof(manifest -> 'bytes') IS DISTINCT FROM 'number'
		OR NOT remora._is_count(manifest -> 'bytes') THEN
		bad := 'The manifest descriptor needs "bytes", a non-negative integer.';
	END IF;
	IF bad IS NOT NULL THEN
		RAISE EXCEPTION 'invalid manifest descriptor'
			USING ERRCODE = 'invalid_parameter_value', DETAIL = bad;
	END IF;
	PERFORM remora._check_members(manifest -> 'entries');
	RETURN manifest || jsonb_build_object('sha256', lower(manifest ->> 'sha256'));
END
$$;
-- ---------------------------------------------------------------------
-- remora_progress says the attempt's number and the job's state, and
-- remora_workers each incarnation's state (running, silent, stopped), as
-- every view names its job, attempt and state.
-- ---------------------------------------------------------------------

CREATE OR REPLACE VIEW remora_progress WITH (security_invoker = true) AS
SELECT p.job_id,
	   p.attempt_id,
	   p.fencing_token,
	   p.bytes_done,
	   p.bytes_total,
	   round(100.0 * p.bytes_done / nullif(p.bytes_total, 0), 1) AS percent,
	   p.rate AS bytes_per_second,
	   CASE WHEN p.rate > 0 AND p.bytes_total IS NOT NULL
			THEN make_interval(secs => (p.bytes_total - p.bytes_done) / p.rate) END
		   AS eta,
	   p.restarted AS restarted_from_zero,
	   p.started_at,
	   p.updated_at,
	   p.worker_pid,
	   a.attempt_no,
	   j.state
  FROM remora._progress() p
  JOIN remora.jobs j ON j.job_id = p.job_id AND j.current_attempt = p.attempt_id
  LEFT JOIN remora.attempts a ON a.attempt_id = p.attempt_id;

CREATE OR REPLACE VIEW remora_workers WITH (security_invoker = true) AS
SELECT i.incarnation,
	   i.pid,
	   i.kind,
	   i.started_at,
	   i.heartbeat_at,
	   i.stopped_at,
	   (SELECT count(*) FROM remora.leases l WHERE l.incarnation = i.incarnation)
		   AS active_leases,
	   i.host,
	   i.label,
	   i.version,
	   -- silent: not stopped, but its heartbeat is older than a lease
	   -- (killed, paused or cut off; its leases lapse)
	   CASE WHEN i.stopped_at IS NOT NULL THEN 'stopped'
			WHEN i.heartbeat_at < now() - current_setting('remora.lease_duration', true)::interval
			THEN 'silent'
			ELSE 'running' END AS state
  FROM remora.incarnations i;
