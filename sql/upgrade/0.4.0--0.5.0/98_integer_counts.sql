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
