-- Record validated resume progress and completed members of the current
-- attempt.  checkpoint: {"state": {...}, "bytes_done": n, "bytes_total": n,
-- "members": [{path, bucket, key, size, sha256, etag, source}]}; every key
-- is optional.  Repeating a call records nothing new.
-- Model: Checkpoint (proof/remora.pml)
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
	IF (v.j).source_kind = 'export' THEN
		PERFORM remora._record_refs((v.j).job_id, p_cp -> 'references');
	END IF;

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

-- Validate a checkpoint before anything is written: what a later claim
-- offers as resume state must be what the workers can read back.  An
-- object's state names its multipart upload (upload_key, upload_id) and
-- the validated parts of it, in order.
CREATE OR REPLACE FUNCTION remora._check_checkpoint(cp jsonb) RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
	st		jsonb := cp -> 'state';
	part	jsonb;
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
	ELSIF st ? 'parts' AND jsonb_typeof(st -> 'parts') <> 'array' THEN
		bad := '"state.parts" must be an array.';
	ELSIF st ? 'parts' AND (jsonb_typeof(st -> 'upload_key') IS DISTINCT FROM 'string'
		OR jsonb_typeof(st -> 'upload_id') IS DISTINCT FROM 'string') THEN
		bad := '"state.parts" needs the upload they belong to: string "state.upload_key" and "state.upload_id".';
	END IF;
	IF bad IS NULL AND jsonb_typeof(st -> 'parts') = 'array' THEN
		FOR part IN SELECT value FROM jsonb_array_elements(st -> 'parts') LOOP
			IF jsonb_typeof(part) <> 'object'
				OR jsonb_typeof(part -> 'etag') IS DISTINCT FROM 'string'
				OR part -> 'size' IS NULL OR NOT remora._is_count(part -> 'size') THEN
				bad := 'Each of "state.parts" needs a string etag and a non-negative integer size.';
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
	-- a written member has key, etag and sha256; a dry run's has none of
	-- them (remora._commit_verdict tells which a job may record)
	IF EXISTS (SELECT 1 FROM jsonb_array_elements(members) e(m)
				WHERE jsonb_typeof(m) <> 'object'
				   OR jsonb_typeof(m -> 'path') IS DISTINCT FROM 'string'
				   OR jsonb_typeof(m -> 'bucket') IS DISTINCT FROM 'string'
				   OR jsonb_typeof(m -> 'size') IS DISTINCT FROM 'number'
				   OR m ->> 'size' !~ '^[0-9]{1,19}$'
				   OR (m ->> 'size')::numeric > 9223372036854775807
				   OR CASE WHEN m ?| ARRAY['key', 'etag', 'sha256']
						   THEN jsonb_typeof(m -> 'key') IS DISTINCT FROM 'string'
								OR jsonb_typeof(m -> 'etag') IS DISTINCT FROM 'string'
								OR coalesce(m ->> 'sha256', '') !~ '^[0-9a-fA-F]{64}$'
						   ELSE false END) THEN
		RAISE EXCEPTION 'invalid member'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'Each member needs string path and bucket, a non-negative integer size, and string key and etag with a 64-digit hex sha256 (a dry run''s: none of these three).';
	END IF;
END
$$;

-- The paths of a (validated) member array that the attempt recorded
-- already with other content.  Plain SQL, so that a commit's verdict
-- inlines it.
CREATE OR REPLACE FUNCTION remora._member_clashes(p_attempt uuid, p_members jsonb)
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
	-- reused_from_job: believed only when it names the job the attempt's
	-- job may reuse from (options.reuse_from, resolved at submit)
	INSERT INTO remora.members (attempt_id, path, bucket, key, size, sha256, etag, source,
								reused_from_job)
	SELECT attempt, e.value ->> 'path', e.value ->> 'bucket', e.value ->> 'key',
		   (e.value ->> 'size')::bigint, lower(e.value ->> 'sha256'),
		   e.value ->> 'etag', e.value -> 'source',
		   CASE WHEN e.value ->> 'reused_from_job' = rf.job_text THEN rf.job_text::bigint END
	  FROM jsonb_array_elements(members) e
	  LEFT JOIN (SELECT j.spec #>> '{options,reuse_from}' AS job_text
				   FROM remora.attempts a JOIN remora.jobs j ON j.job_id = a.job_id
				  WHERE a.attempt_id = attempt) rf ON true
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
--              under that prefix in the job's bucket, or is the manifest;
--              or, of a dry run (options.dry_run), names any object
--   counts     d's members and bytes are not exactly those of the recorded
--              members plus its entries (also when both are zero: a
--              descriptor claiming members nobody recorded is refused)
--   clash      an entry names a member recorded with other content
--   ok         it may publish
-- with the count and bytes of that member set.  Plain SQL, so that it is
-- inlined into its callers' statements; each row is looked up by key in a
-- subquery of its own (OFFSET 0), so that no plan joins whole tables.
CREATE OR REPLACE FUNCTION remora._commit_verdict(p_attempt uuid, p_token bigint, d jsonb)
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
							  OR CASE WHEN (j.j).spec #> '{options,dry_run}' = 'true'
									  THEN k.key IS NOT NULL
									  ELSE left(k.key, length(j.sp)) IS DISTINCT FROM j.sp
										   OR k.key = d ->> 'key' END) THEN 'foreign'
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
CREATE OR REPLACE FUNCTION remora._publish(p_attempts uuid[], p_tokens bigint[],
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
		INSERT INTO remora.members (attempt_id, path, bucket, key, size, sha256, etag, source,
									reused_from_job)
		SELECT c.aid, e.value ->> 'path', e.value ->> 'bucket', e.value ->> 'key',
			   (e.value ->> 'size')::bigint, lower(e.value ->> 'sha256'),
			   e.value ->> 'etag', e.value -> 'source',
			   CASE WHEN e.value ->> 'reused_from_job' = j.spec #>> '{options,reuse_from}'
					THEN (e.value ->> 'reused_from_job')::bigint END
		  FROM c JOIN remora.jobs j ON j.job_id = c.job_id
		 CROSS JOIN LATERAL jsonb_array_elements(coalesce(c.d -> 'entries', '[]')) e
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
	-- a mirror's result: the bytes it copied from the earlier job's
	-- (its members, all recorded now); nothing to do for other jobs
	UPDATE remora.results r SET bytes_reused = s.n
	  FROM (SELECT m.attempt_id, sum(m.size) AS n
			  FROM remora.members m
			 WHERE m.attempt_id IN (SELECT a.attempt_id
									  FROM remora.attempts a
									  JOIN remora.jobs j ON j.job_id = a.job_id
									 WHERE a.attempt_id = ANY (p_attempts)
									   AND j.spec #> '{options,reuse_from}' IS NOT NULL)
			   AND m.reused_from_job IS NOT NULL
			 GROUP BY m.attempt_id) s
	 WHERE r.attempt_id = s.attempt_id;
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

-- Report an attempt's failure.  Returns the job's resulting state; a report
-- from an attempt that no longer holds authority changes nothing, and one
-- from an attempt that no longer exists (pruned) returns NULL, so that a
-- late report never wedges the worker that sends it.
-- Model: Fail (proof/remora.pml)
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

