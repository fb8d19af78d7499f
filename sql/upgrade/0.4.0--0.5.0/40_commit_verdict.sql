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
