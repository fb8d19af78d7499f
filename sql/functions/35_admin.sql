-- Administration of target grants (remora_admin).
CREATE OR REPLACE FUNCTION remora.grant_target(role name, bucket text,
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

-- Register (or change) an S3-compatible store that s3:// sources may name
-- with options.endpoint.  Its credentials are readable only by the
-- extension's own functions and the workers: no view shows them.  They
-- are static keys (with session_token when temporary), each worker's own
-- AWS chain ('chain') or none ('anonymous'), with role_arn assumed on top
-- (doc/operator-guide.md, "Cloud credentials").
CREATE OR REPLACE FUNCTION remora.register_source_endpoint(name text, url text,
		region text DEFAULT 'us-east-1', path_style boolean DEFAULT true,
		access_key_id text DEFAULT NULL, secret_access_key text DEFAULT NULL,
		session_token text DEFAULT NULL, credentials text DEFAULT NULL,
		role_arn text DEFAULT NULL, external_id text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	-- given keys: static; none: anonymous, unless said otherwise
	kind text := coalesce($8, CASE WHEN $5 IS NULL THEN 'anonymous' ELSE 'static' END);
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
	IF kind NOT IN ('static', 'chain', 'anonymous') THEN
		RAISE EXCEPTION 'invalid endpoint credentials' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'credentials is ''static'' (the keys given), ''chain'' (each worker''s own AWS credential chain) or ''anonymous'' (unsigned requests).';
	END IF;
	IF (kind = 'static') <> ($5 IS NOT NULL) THEN
		RAISE EXCEPTION 'invalid endpoint credentials' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = CASE WHEN kind = 'static'
						  THEN 'Static credentials need an access key id and a secret access key.'
						  ELSE format('With %s credentials, give no access key id or secret access key.', quote_literal(kind)) END;
	END IF;
	IF $7 IS NOT NULL AND (kind <> 'static' OR $7 !~ '^[[:graph:]]+$' OR length($7) > 8192) THEN
		RAISE EXCEPTION 'invalid endpoint credentials' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'A session token goes with static keys (the temporary credentials it belongs to): printable, at most 8192 characters.';
	END IF;
	IF $9 IS NOT NULL AND (kind = 'anonymous'
		OR $9 !~ '^arn:[a-z0-9-]{1,32}:iam::[0-9]{0,12}:role/[[:alnum:]_+=,.@/-]+$'
		OR length($9) > 2048) THEN
		RAISE EXCEPTION 'invalid endpoint role' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'role_arn is a role''s ARN (arn:aws:iam::123456789012:role/name), assumed with static or chain credentials.';
	END IF;
	IF $10 IS NOT NULL AND ($9 IS NULL OR $10 !~ '^[[:alnum:]_+=,.@:/-]+$'
		OR length($10) NOT BETWEEN 2 AND 1224) THEN
		RAISE EXCEPTION 'invalid endpoint role' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'external_id goes with role_arn: 2 to 1224 letters, digits and _+=,.@:/-.';
	END IF;
	INSERT INTO remora.source_endpoints AS e
		(name, url, region, path_style, access_key_id, secret_access_key,
		 session_token, credentials, role_arn, external_id)
	VALUES ($1, rtrim($2, '/'), $3, $4, $5, $6, $7, kind, $9, $10)
	ON CONFLICT ON CONSTRAINT source_endpoints_pkey DO UPDATE
	   SET url = EXCLUDED.url, region = EXCLUDED.region,
		   path_style = EXCLUDED.path_style,
		   access_key_id = EXCLUDED.access_key_id,
		   secret_access_key = EXCLUDED.secret_access_key,
		   session_token = EXCLUDED.session_token,
		   credentials = EXCLUDED.credentials,
		   role_arn = EXCLUDED.role_arn,
		   external_id = EXCLUDED.external_id;
END
$$;

-- Trust a private CA for a registered source endpoint: PEM certificates
-- its TLS certificate may chain to (besides remora.ca_file); NULL forgets
-- them.  Only the workers read them: no view shows them.
CREATE OR REPLACE FUNCTION remora.set_source_endpoint_ca(name text, ca_pem text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF $2 IS NOT NULL AND ($2 !~ '-----BEGIN CERTIFICATE-----' OR length($2) > 1048576) THEN
		RAISE EXCEPTION 'invalid endpoint CA' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'Give PEM certificates ("-----BEGIN CERTIFICATE-----"), at most 1 MB, or NULL.';
	END IF;
	UPDATE remora.source_endpoints e SET ca_pem = $2 WHERE e.name = $1;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'source endpoint "%" does not exist', $1
			USING ERRCODE = 'undefined_object',
				  HINT = 'Register it first with remora.register_source_endpoint().';
	END IF;
END
$$;

-- Forget a source endpoint; jobs that name it fail when next claimed.
CREATE OR REPLACE FUNCTION remora.drop_source_endpoint(name text)
RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH gone AS (DELETE FROM remora.source_endpoints e WHERE e.name = $1 RETURNING 1)
	SELECT count(*) > 0 FROM gone
$$;

-- The registered endpoints without their secrets: where their credentials
-- come from and the role they assume are not secret.
CREATE OR REPLACE FUNCTION remora._source_endpoints()
RETURNS TABLE(name text, url text, region text, path_style boolean,
			  has_credentials boolean, created_at timestamptz,
			  credentials text, role_arn text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT e.name, e.url, e.region, e.path_style,
		   e.access_key_id IS NOT NULL, e.created_at, e.credentials, e.role_arn
	  FROM remora.source_endpoints e
$$;

CREATE OR REPLACE FUNCTION remora.revoke_target(role name, bucket text,
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

-- Administration of source grants (remora_admin): who may read which
-- s3:// and hf:// sources.  endpoint NULL is the target store, a name is a
-- registered source endpoint, 'hf' is the Hugging Face Hub (bucket
-- 'models' or 'datasets', a pattern over owner/name).
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

-- A time-limited GET URL for one member of the committed manifest.
CREATE OR REPLACE FUNCTION remora_presign(job bigint, path text,
							   ttl interval DEFAULT '15 minutes')
RETURNS text
AS 'MODULE_PATHNAME', 'remora_presign'
LANGUAGE C VOLATILE;

