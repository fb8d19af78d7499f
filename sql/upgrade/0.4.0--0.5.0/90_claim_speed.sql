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
