/* ------------------------------------------------------------------------
 * Export to stable keys (remora_export): a job of source kind 'export'.
 * It runs through claim, renew, checkpoint, commit, fail, cancel and
 * reconcile like any job; what differs is here.  doc/protocol.md has its
 * state machine.
 * ------------------------------------------------------------------------ */

-- What a claimed export publishes, for its worker: the mode, if_exists,
-- the output digest and the exported result's member count and bytes.
-- Not the members: the worker reads them a page at a time
-- (remora.export_members), so that neither the spec nor the worker's
-- memory grows with their number.
CREATE OR REPLACE FUNCTION remora._export_spec(export bigint) RETURNS jsonb
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT jsonb_build_object(
		'job_id', e.job_id, 'mode', e.mode, 'if_exists', e.if_exists,
		'output_digest', e.output_digest, 'members_total', e.members,
		'bytes_total', e.bytes)
	  FROM remora.exports e WHERE e.export_id = $1
$$;

-- A page of the members an export's attempt publishes, in path order: at
-- most max_rows members of the exported result whose path sorts after
-- `after` (NULL: from the first), each with the ETag of the conclusive
-- answer an earlier attempt recorded for it (ref_etag, NULL if none) and
-- whether the export may replace other content at its key (may_overwrite:
-- its owner is an administrator, or published the key before; otherwise
-- the worker must not write over an existing key, whatever if_exists
-- says).  A worker reads them page by page (keyset by path, the members'
-- primary key) instead of all at once in the claim's spec.  Only the export's
-- current running attempt with its token, not cancelled, its lease not
-- expired, is answered; any other gets no rows (its checkpoint and commit
-- would be refused).  It locks nothing and changes nothing.
CREATE OR REPLACE FUNCTION remora.export_members(attempt_id uuid, fencing_token bigint,
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

-- Record conclusive per-member answers of an export: [{path, key, etag,
-- version_id, size, outcome}], by path (a later answer replaces one).
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

-- The commit of an export: true when the attempt holds authority and every
-- member of the exported result has a conclusive reference (those
-- checkpointed plus the descriptor's "references"), with the descriptor's
-- sha256 the export's output digest; the references and the success are
-- one transaction.  The exact repeat of a successful call is true.
-- Model: CommitExport (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora._commit_export(p_attempt uuid, p_token bigint,
									  manifest jsonb)
RETURNS boolean
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v		record;
	e		remora.exports;
	missing	bigint;
BEGIN
	IF manifest IS NULL OR jsonb_typeof(manifest) <> 'object'
		OR coalesce(manifest ->> 'sha256', '') !~ '^[0-9a-fA-F]{64}$' THEN
		RAISE EXCEPTION 'invalid export descriptor' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'An export''s descriptor is a JSON object with "sha256" (the output digest) and "references".';
	END IF;
	v := remora._authorize(p_attempt, p_token);
	SELECT * INTO e FROM remora.exports x
	 WHERE x.export_id = (SELECT a.job_id FROM remora.attempts a WHERE a.attempt_id = p_attempt);
	IF v.verdict <> 'ok' THEN
		RETURN coalesce(e.committed_attempt = p_attempt
						AND (v.a).fencing_token = p_token
						AND (v.j).state = 'succeeded', false);
	END IF;
	IF lower(manifest ->> 'sha256') <> e.output_digest THEN
		RAISE WARNING 'commit refused: the descriptor names output % , the export publishes %',
			manifest ->> 'sha256', e.output_digest;
		RETURN false;
	END IF;
	PERFORM remora._record_refs(e.export_id, manifest -> 'references');
	SELECT count(*) INTO missing FROM remora.members m
	 WHERE m.attempt_id = e.result_attempt
	   AND NOT EXISTS (SELECT 1 FROM remora.export_refs r
					    WHERE r.export_id = e.export_id AND r.path = m.path);
	IF missing > 0 THEN
		RAISE WARNING 'commit refused: % members of the export have no conclusive answer', missing;
		RETURN false;
	END IF;
	UPDATE remora.exports x SET committed_attempt = p_attempt WHERE x.export_id = e.export_id;
	UPDATE remora.attempts a SET state = 'succeeded', finished_at = now()
	 WHERE a.attempt_id = p_attempt;
	UPDATE remora.jobs jb SET state = 'succeeded', finished_at = now(), last_error = NULL
	 WHERE jb.job_id = e.export_id;
	DELETE FROM remora.leases l WHERE l.attempt_id = p_attempt;
	RETURN true;
END
$$;

-- Record an export (remora_export validated bucket, prefix and key).
-- Replaying an idempotency key returns the existing export whatever its
-- state; 22023 names a bad option, P0002 is a job the caller cannot see or
-- that has no committed result, 42501 a target without a grant, inside
-- the area where Remora keeps its jobs, or a key another role's export
-- published or is publishing (remora.export_keys).
-- Model: Export (proof/remora.pml)
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
	IF j.spec #> '{options,dry_run}' = 'true' THEN
		RAISE EXCEPTION 'job % was a dry run', p_job
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'A dry run''s result says what a job would download and reuse; it holds no member to export.',
				  HINT = 'Submit the job again without options.dry_run, then export that job.';
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

-- Resolve an export that ended outcome_unknown.  'verify' (its owner or an
-- administrator) queues an attempt that only observes the targets: it
-- commits succeeded when every member is exactly there, and otherwise
-- leaves the export outcome_unknown with the members that differ in its
-- error.  'retry' (dispatch again: a new attempt with a greater token) and
-- 'fail' are an administrator's decisions.  Each is recorded with who
-- decided.  Returns the export's state after the call.
-- Model: Resolve (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora._export_resolve(caller oid, export bigint, action text)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	j		remora.jobs;
	admin	boolean := pg_catalog.pg_has_role(caller, 'remora_admin', 'USAGE');
	new_state text;
BEGIN
	SELECT jb.* INTO j FROM remora.jobs jb JOIN remora.exports e ON e.export_id = jb.job_id
	 WHERE jb.job_id = export FOR UPDATE OF jb;
	IF NOT FOUND OR NOT remora._may_act(caller, j.owner) OR j.deleted_at IS NOT NULL THEN
		RAISE EXCEPTION 'export % does not exist', export USING ERRCODE = 'no_data_found';
	END IF;
	IF action IS NULL OR action NOT IN ('verify', 'retry', 'fail') THEN
		RAISE EXCEPTION 'invalid action' USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'action is "verify", "retry" or "fail".';
	END IF;
	IF action IN ('retry', 'fail') AND NOT admin THEN
		RAISE EXCEPTION 'permission denied to % export %', action, export
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = 'Only remora_admin decides to retry or fail an export whose outcome is unknown.',
				  HINT = 'Ask for ''verify'', which observes the targets.';
	END IF;
	IF j.state <> 'outcome_unknown' THEN
		RAISE EXCEPTION 'export % is %, not outcome_unknown', export, j.state
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'Only an export whose outcome is unknown is resolved.';
	END IF;

	UPDATE remora.exports e
	   SET mode = CASE WHEN action = 'verify' THEN 'verify' ELSE 'dispatch' END,
		   decisions = e.decisions || jsonb_build_object(
			   'action', action, 'by', pg_get_userbyid(caller), 'at', now(),
			   'attempt_no', j.attempts_used)
	 WHERE e.export_id = export;
	IF action = 'fail' THEN
		new_state := 'failed';
		UPDATE remora.jobs jb
		   SET state = new_state, finished_at = now(),
			   last_error = jsonb_build_object(
				   'class', 'resolved', 'retryable', false, 'at', now(),
				   'message', format('%s decided that the export failed', pg_get_userbyid(caller)),
				   'previous', j.last_error)
		 WHERE jb.job_id = export;
	ELSE
		-- a new attempt: one more in the budget, whatever was spent
		new_state := 'queued';
		UPDATE remora.jobs jb
		   SET state = new_state, finished_at = NULL, not_before = now(),
			   max_attempts = greatest(jb.max_attempts, jb.attempts_used + 1)
		 WHERE jb.job_id = export;
		INSERT INTO remora.queue (job_id, priority, not_before)
		VALUES (export, j.priority, now())
		ON CONFLICT (job_id) DO UPDATE SET not_before = EXCLUDED.not_before;
	END IF;
	RETURN new_state;
END
$$;

CREATE OR REPLACE FUNCTION remora_export(job bigint, bucket text, prefix text,
							  options jsonb DEFAULT '{}',
							  idempotency_key text DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'remora_export'
LANGUAGE C VOLATILE;

CREATE OR REPLACE FUNCTION remora_export_resolve(export bigint, action text)
RETURNS text
AS 'MODULE_PATHNAME', 'remora_export_resolve'
LANGUAGE C VOLATILE;

