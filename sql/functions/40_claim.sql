/* ------------------------------------------------------------------------
 * Worker protocol
 * ------------------------------------------------------------------------ */

-- Take the lease lock (see remora.lease_lock) until the transaction ends.
CREATE OR REPLACE FUNCTION remora._lock_leases() RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
	PERFORM 1 FROM remora.lease_lock FOR UPDATE;
	IF NOT FOUND THEN
		INSERT INTO remora.lease_lock VALUES (true) ON CONFLICT DO NOTHING;
		PERFORM 1 FROM remora.lease_lock FOR UPDATE;
	END IF;
END
$$;

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

-- Running attempts per owner, counted as remora._leases_in_use counts
-- them: the lease rows while coordination state is whole, every running
-- job too while it is not.  A small read (the leases and their jobs, by
-- key), for the claim's share and the owners' max_running.
CREATE OR REPLACE FUNCTION remora._running_by_owner()
RETURNS TABLE (owner oid, running bigint)
LANGUAGE plpgsql STABLE
AS $$
BEGIN
	IF EXISTS (SELECT 1 FROM remora.coordination) THEN
		-- each lease's job by key: a join, planned on the statistics of a
		-- table claims empty and fill all the time, read the whole of the
		-- jobs (in parallel, at that) when it took the leases for many
		RETURN QUERY
		SELECT l.owner, count(*)
		  FROM (SELECT (SELECT jb.owner::oid FROM remora.jobs jb WHERE jb.job_id = l.job_id)
						   AS owner
				  FROM remora.leases l) l
		 GROUP BY l.owner;
	ELSE
		RETURN QUERY
		SELECT jb.owner::oid, count(*)
		  FROM remora.jobs jb
		 WHERE jb.job_id IN (SELECT a.job_id FROM remora.attempts a WHERE a.state = 'running'
							 UNION
							 SELECT l.job_id FROM remora.leases l)
		 GROUP BY jb.owner;
	END IF;
END
$$;

-- Lease reservations of claims in flight (src/pg/leases.c): the word to
-- compare, a reservation made only if the word is still the one read, and
-- room given back.  Only claim calls them.
CREATE OR REPLACE FUNCTION remora._lease_reservations() RETURNS bigint
AS 'MODULE_PATHNAME', 'remora_lease_reservations'
LANGUAGE C VOLATILE STRICT;
CREATE OR REPLACE FUNCTION remora._reserve_leases(seen bigint, n integer) RETURNS boolean
AS 'MODULE_PATHNAME', 'remora_reserve_leases'
LANGUAGE C VOLATILE STRICT;
CREATE OR REPLACE FUNCTION remora._release_leases(n integer) RETURNS void
AS 'MODULE_PATHNAME', 'remora_release_leases'
LANGUAGE C VOLATILE STRICT;

-- The claims' turn (src/pg/leases.c), first raised to at_least.
CREATE OR REPLACE FUNCTION remora._turn(at_least float8) RETURNS float8
AS 'MODULE_PATHNAME', 'remora_turn'
LANGUAGE C VOLATILE STRICT;

-- May an owner with nothing running start a job now: one of its queued
-- jobs is due (the first, by the queue's owner index) and its max_running
-- leaves room beside what the claims in flight (others) may take.
-- Its cost is that of two index probes: said high, so that a claim
-- walks the owners' pass index and stops at room of them, never asking
-- every owner first and sorting them.
CREATE OR REPLACE FUNCTION remora._may_start(owner regrole, others integer, dcap integer)
RETURNS boolean
LANGUAGE sql STABLE COST 1000
AS $$
	-- (not EXISTS, which drops the ORDER BY that makes the owner's
	-- index the way even where one owner holds the whole queue)
	SELECT coalesce((SELECT true FROM remora.queue qq
					  WHERE qq.owner OPERATOR(pg_catalog.=) $1
						AND qq.not_before OPERATOR(pg_catalog.<=) pg_catalog.now()
					  ORDER BY qq.priority DESC, qq.job_id LIMIT 1), false)
		   AND coalesce(nullif(coalesce((SELECT l.max_running FROM remora.role_limits l
										  WHERE l.role_id OPERATOR(pg_catalog.=) $1), dcap), 0)
						OPERATOR(pg_catalog.-) others, 1) OPERATOR(pg_catalog.>) 0
$$;

-- Hand out up to max_jobs runnable jobs, shared between their owners
-- (doc/operator-guide.md, "Sharing the workers between users").  The next job
-- goes to the owner with runnable jobs whose running attempts, with those
-- already picked in this batch, are the fewest for its weight ((running +
-- picked) / weight); of those even, the one whose turn comes first.  Its
-- turn is its pass in remora.queue_owners: each job an owner is handed
-- moves its pass on by 1 / weight, from the claims' turn (remora._turn)
-- if that has gone past it meanwhile, and from no further than one turn
-- of its own past it, so owners with nothing running take turns in
-- proportion to their weights.  An owner's own jobs go by
-- priority, then age.  An owner alone gets every job; one at its
-- max_running gets none.
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
	taken		integer := 0;
	got			integer;
	rounds		integer := 0;
	widen		integer := 1;
	at_turn		float8;
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
	-- no turn comes before the least pass
	at_turn := remora._turn(coalesce((SELECT min(w.pass) FROM remora.queue_owners w), 0));

	-- One statement for each round of the batch.  The owners with nothing
	-- running are found in their turns' order by the index of
	-- remora.queue_owners, as far as the first room of them with a runnable
	-- job; those with attempts running, from the leases (no more than
	-- remora.max_active_leases).  At most room of them, the first in share
	-- order, can be picked from (each of them has a job that comes before
	-- any other owner's first), and of each, its next jobs at most: the
	-- candidates.  They are locked in share order, skipping those others
	-- hold.  A claim thus reads O(room + leases + room * (room + others))
	-- index entries, whatever the number of owners or their backlogs.
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
	--
	-- A candidate that a claim took after this statement's snapshot was
	-- taken is gone when it is to be locked, and is skipped; claims that
	-- began after this one reserved its room are not among the others, and
	-- many of them, each quicker than this statement, can take every
	-- candidate.  So a round that comes back short while owners wait is
	-- followed by another, with a new snapshot and four times the
	-- candidates, up to four rounds.  Each owner picked from has its pass
	-- moved on, unless another claim holds its row (that claim moves it).
	LOOP
		rounds := rounds + 1;
		RETURN QUERY
		WITH running AS MATERIALIZED (
			SELECT r.owner, r.running FROM remora._running_by_owner() r
		), free AS MATERIALIZED (
			-- in turn order, by index: the first room owners with nothing
			-- running that may start a job, of those whose rows no other
			-- claim holds (it is taking their turns now: concurrent
			-- claims take different owners' turns)
			SELECT w.owner, w.pass FROM remora.queue_owners w
			 WHERE NOT EXISTS (SELECT 1 FROM running r WHERE r.owner = w.owner)
			   AND remora._may_start(w.owner, others, dcap)
			 ORDER BY w.pass, w.owner
			 LIMIT room - taken
			   FOR NO KEY UPDATE SKIP LOCKED
		), idle AS MATERIALIZED (
			-- and then those that other claims hold, if room is left
			SELECT f.owner, f.pass, false AS held FROM free f
			UNION ALL
			(SELECT w.owner, w.pass, true FROM remora.queue_owners w
			  WHERE NOT EXISTS (SELECT 1 FROM running r WHERE r.owner = w.owner)
				AND w.owner NOT IN (SELECT f.owner FROM free f)
				AND remora._may_start(w.owner, others, dcap)
			  ORDER BY w.pass, w.owner
			  LIMIT room - taken - (SELECT count(*) FROM free))
		), share AS (
			-- weight and the jobs an owner may still start (0 = no max_running)
			SELECT o.owner, coalesce(l.weight, dweight) AS weight,
				   coalesce(r.running, 0) AS running,
				   least(room - taken,
						 coalesce(nullif(coalesce(l.max_running, dcap), 0)
								  - coalesce(r.running, 0) - others, room - taken)) AS may_take,
				   greatest(o.pass, at_turn) AS turn, o.held
			  FROM (SELECT i.owner, i.pass, i.held FROM idle i
					UNION ALL
					SELECT w.owner, w.pass, false FROM running r
					  JOIN remora.queue_owners w ON w.owner = r.owner) o
			  LEFT JOIN remora.role_limits l ON l.role_id = o.owner
			  LEFT JOIN running r ON r.owner = o.owner
		), first AS MATERIALIZED (
			SELECT s.* FROM (SELECT s.* FROM share s
							  WHERE s.may_take > 0
							  ORDER BY s.running::float8 / s.weight, s.held, s.turn, s.owner
							 OFFSET 0) s
			 WHERE (SELECT true FROM remora.queue qq
					 WHERE qq.owner = s.owner AND qq.not_before <= now()
					 ORDER BY qq.priority DESC, qq.job_id LIMIT 1)
			 LIMIT room - taken
		), candidate AS MATERIALIZED (
			-- beyond what it may take, others more of each owner's jobs:
			-- those that claims in flight or a cancel hold are skipped, and
			-- the next ones are there to take instead
			SELECT c.job_id, f.owner, f.may_take,
				   (f.running + c.k - 1)::float8 / f.weight AS due, f.turn, c.k
			  FROM first f
			 CROSS JOIN LATERAL (
				SELECT n.job_id, row_number() OVER () AS k
				  FROM (SELECT qq.job_id FROM remora.queue qq
						 WHERE qq.owner = f.owner AND qq.not_before <= now()
						 ORDER BY qq.priority DESC, qq.job_id
						 LIMIT (f.may_take + others) * widen) n) c
		), ordered AS MATERIALIZED (
			-- in share order, as many as the batch may take and others may
			-- hold: only these are looked up and locked
			SELECT c.* FROM candidate c
			 ORDER BY c.due, c.turn, c.owner, c.k
			 LIMIT (room - taken + others) * widen
		), locked AS MATERIALIZED (
			-- the queue rows by key, as unqueued below: a join alone, planned
			-- generically for up to max_jobs candidates, hashed the whole queue
			-- and made every claim read the backlog
			SELECT qq.job_id, c.owner, c.may_take, c.due, c.k
			  FROM ordered c JOIN remora.queue qq ON qq.job_id = c.job_id
			 WHERE qq.job_id = ANY (ARRAY(SELECT c2.job_id FROM ordered c2))
			 ORDER BY c.due, c.turn, c.owner, c.k
			 LIMIT room - taken
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
		), turned AS (
			-- each owner picked from: its pass moves on by what it was
			-- handed, from no further than one turn of its own past the
			-- claims' turn (an owner served while it ran attempts is not
			-- owed turns by those that wait, nor owes them)
			UPDATE remora.queue_owners w
			   SET pass = least(f.turn, at_turn + 1.0 / f.weight) + n.handed::float8 / f.weight
			  FROM (SELECT g.owner, count(*) AS handed FROM go g GROUP BY g.owner) n
			  JOIN first f ON f.owner = n.owner
			 WHERE w.owner = n.owner
			   AND w.owner IN (SELECT x.owner FROM remora.queue_owners x
								WHERE x.owner IN (SELECT g.owner FROM go g)
								  FOR NO KEY UPDATE SKIP LOCKED)
			RETURNING f.turn, f.running
		), attempt AS (
			-- an export stages nothing to clean up, and records what it is to
			-- publish before it runs.  Attempts are numbered by their token:
			-- a yield gives its budget back (remora.yield), not its number.
			INSERT INTO remora.attempts
				(attempt_id, job_id, attempt_no, fencing_token, incarnation,
				 definition_hash, request_hash, access_digest, provenance,
				 resumed_from, cleaned_at, export_ledger)
			SELECT g.new_attempt, g.job_id, g.fencing_token + 1, g.fencing_token + 1,
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
					'job_id', g.job_id, 'attempt_no', g.fencing_token + 1, 'owner', g.owner::oid,
					'staging_prefix', remora._staging_prefix(g.prefix, g.job_id, g.new_attempt))
					AS spec) s
		 -- the claims' turn moves on to the last taken by an owner with
		 -- nothing running
		 CROSS JOIN (SELECT remora._turn(max(t.turn) FILTER (WHERE t.running = 0))
					   FROM turned t) moved
		 ORDER BY g.priority DESC, g.job_id;
		GET DIAGNOSTICS got = ROW_COUNT;
		taken := taken + got;
		EXIT WHEN taken >= room OR rounds >= 4 OR NOT EXISTS (SELECT 1 FROM remora.queue_owners);
		widen := widen * 4;
	END LOOP;
	PERFORM remora._release_leases(room - taken);
END
$$;

-- Plain SQL, so that the statements of claim and commit inline it for
-- each of their jobs.
CREATE OR REPLACE FUNCTION remora._staging_prefix(prefix text, job bigint, attempt uuid)
RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
	SELECT CASE WHEN prefix = '' THEN '' ELSE prefix || '/' END
		   || job::text || '/' || attempt::text || '/'
$$;

-- Extend the lease of the current attempt and token.  ok is false once the
-- attempt has lost authority; cancel_requested tells it to stop;
-- yield_requested asks it to hand its job back at its next checkpoint
-- (remora._should_yield, remora.yield).  The new expiry counts from when
-- it is written, so a renewal that waited on the job lock never writes a
-- lease that has already lapsed; a lease lost with coordination state is
-- re-created under the lease lock.
-- Model: Renew (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora.renew(attempt_id uuid, fencing_token bigint)
RETURNS TABLE (ok boolean, cancel_requested boolean,
			   lease_expires_at timestamptz, yield_requested boolean)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_attempt	uuid := $1;
	p_token		bigint := $2;
	v			record;
	expires		timestamptz;
BEGIN
	v := remora._authorize(p_attempt, p_token);
	yield_requested := false;
	IF v.verdict <> 'ok' THEN
		ok := false;
		cancel_requested := coalesce((v.j).cancel_requested_at IS NOT NULL, false);
		lease_expires_at := NULL;
		RETURN NEXT;
		RETURN;
	END IF;

	IF NOT EXISTS (SELECT 1 FROM remora.leases l WHERE l.attempt_id = p_attempt) THEN
		PERFORM remora._lock_leases();
	END IF;
	expires := clock_timestamp() + remora._setting_interval('remora.lease_duration');
	INSERT INTO remora.leases AS l (attempt_id, job_id, fencing_token, incarnation, expires_at)
	VALUES (p_attempt, (v.j).job_id, p_token, (v.a).incarnation, expires)
	ON CONFLICT ON CONSTRAINT leases_pkey
	DO UPDATE SET expires_at = EXCLUDED.expires_at, renewed_at = clock_timestamp();

	ok := true;
	cancel_requested := false;
	lease_expires_at := expires;
	yield_requested := remora._should_yield(v.j, v.a);
	RETURN NEXT;
END
$$;

-- Time slices (doc/operator-guide.md, "Time slices"): should this running
-- attempt hand its job back?  Only when it has run longer than
-- remora.time_slice, another owner has a job waiting that its
-- max_running lets run, and the attempt's owner holds more than its
-- weighted share of the running attempts: the owners with running or
-- waiting jobs share them by weight (remora.claim's order), and of the
-- attempts an owner holds beyond its share (rounded up), those that have
-- run longest yield first.  Never an export's (a dispatch cut short has an
-- unknown outcome).  Reads, locks and changes nothing.
CREATE OR REPLACE FUNCTION remora._should_yield(j remora.jobs, a remora.attempts)
RETURNS boolean
LANGUAGE plpgsql STABLE
AS $$
DECLARE
	dweight		integer := current_setting('remora.default_role_weight')::integer;
	dcap		integer := current_setting('remora.default_role_max_running')::integer;
	total		numeric;
	weights		numeric;
	mine_running	numeric;	-- the owner's
	mine_weight	numeric;
	older		bigint;
BEGIN
	IF j.source_kind = 'export'
		OR a.started_at > now() - remora._setting_interval('remora.time_slice') THEN
		RETURN false;
	END IF;
	WITH RECURSIVE waiting (owner) AS (
		(SELECT q.owner FROM remora.queue q ORDER BY q.owner LIMIT 1)
		UNION ALL
		SELECT (SELECT q.owner FROM remora.queue q
				 WHERE q.owner > w.owner ORDER BY q.owner LIMIT 1)
		  FROM waiting w WHERE w.owner IS NOT NULL
	), running AS MATERIALIZED (
		SELECT r.owner, r.running FROM remora._running_by_owner() r
	), owners AS (
		SELECT o.owner, coalesce(l.weight, dweight) AS weight,
			   coalesce(r.running, 0) AS running,
			   coalesce(nullif(coalesce(l.max_running, dcap), 0), 2147483647) AS cap
		  FROM (SELECT w.owner::oid AS owner FROM waiting w WHERE w.owner IS NOT NULL
				UNION SELECT r.owner FROM running r) o
		  LEFT JOIN remora.role_limits l ON l.role_id = o.owner
		  LEFT JOIN running r ON r.owner = o.owner
	), active AS MATERIALIZED (
		-- the owners that run, and those that wait and may run more
		SELECT o.*, o.running < o.cap
					AND EXISTS (SELECT 1 FROM remora.queue q
								 WHERE q.owner = o.owner AND q.not_before <= now())
					AS waits
		  FROM owners o
	)
	SELECT sum(x.running), sum(x.weight),
		   sum(x.running) FILTER (WHERE x.owner = j.owner::oid),
		   sum(x.weight) FILTER (WHERE x.owner = j.owner::oid)
	  INTO total, weights, mine_running, mine_weight
	  FROM active x
	 WHERE x.running > 0 OR x.waits
	HAVING bool_or(x.waits AND x.owner <> j.owner::oid);
	IF mine_running IS NULL OR mine_running <= total * mine_weight / weights THEN
		RETURN false;
	END IF;
	-- the owner's running attempts that started before this one
	SELECT count(*) INTO older
	  FROM remora.attempts x JOIN remora.jobs y ON y.job_id = x.job_id
	 WHERE x.state = 'running' AND y.owner = j.owner AND x.started_at < a.started_at;
	RETURN older < ceil(mine_running - total * mine_weight / weights);
END
$$;

-- Hand a running attempt's job back to the queue (the worker does so at
-- a checkpoint after remora.renew asked it to yield): the attempt ends
-- 'yielded', the job is queued again with its checkpoint, due a second
-- later, so that the claim that follows takes the waiting owner's job it
-- yields to, and the next attempt resumes from it.  A yield is not a
-- failure and costs no budget: the attempt's claim is given back.  Never
-- an export's (nothing changes).  Returns the job's state (a stale or
-- repeated call changes nothing).
-- Model: Yield (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora.yield(attempt_id uuid, fencing_token bigint)
RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v	record;
BEGIN
	IF $1 IS NULL OR $2 IS NULL THEN
		RAISE EXCEPTION 'attempt_id and fencing_token must not be null'
			USING ERRCODE = '22004';
	END IF;
	v := remora._authorize($1, $2);
	IF v.verdict <> 'ok' OR (v.j).source_kind = 'export' THEN
		-- unknown (pruned by retention, or never issued): NULL, nothing to do
		RETURN (v.j).state;
	END IF;
	UPDATE remora.attempts x SET state = 'yielded', finished_at = now()
	 WHERE x.attempt_id = $1;
	DELETE FROM remora.leases l WHERE l.attempt_id = $1;
	UPDATE remora.jobs jb
	   SET state = 'queued', attempts_used = jb.attempts_used - 1,
		   not_before = now() + interval '1 second'
	 WHERE jb.job_id = (v.j).job_id;
	INSERT INTO remora.queue (job_id, priority, not_before)
	VALUES ((v.j).job_id, (v.j).priority, now() + interval '1 second')
	ON CONFLICT (job_id) DO UPDATE SET not_before = EXCLUDED.not_before;
	RETURN 'queued';
END
$$;

