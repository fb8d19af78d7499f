-- remora 0.3.0 -> 0.4.0
--
-- Each change to sql/remora.sql since 0.3.0 is carried here as well, in the
-- order it was made; test/e2e/upgrade.sh checks that an updated catalog
-- equals a fresh one.

\echo Use "ALTER EXTENSION remora UPDATE TO '0.4.0'" to load this file. \quit

/* ------------------------------------------------------------------------
 * Claims in O(log backlog): the queue is read from its index in claim
 * order with SKIP LOCKED, instead of sorting a join of the whole queue
 * with the jobs.
 * ------------------------------------------------------------------------ */

-- Hand out up to max_jobs runnable jobs, by priority then age.  Each claim
-- creates a new attempt with a fencing token greater than any before it
-- for the job, records the recovery ledger, and takes a lease.  Leases in
-- use never exceed remora.max_active_leases: claimers serialise on the
-- lease lock for the count (running jobs count, so a lost lease table does
-- not make room), and skip queue and job rows others hold.  A lease runs from when
-- it is written (clock_timestamp()), not from a transaction start that may
-- have waited on the lock.
CREATE OR REPLACE FUNCTION remora.claim(incarnation uuid, max_jobs integer DEFAULT 1)
RETURNS TABLE (job_id bigint, attempt_id uuid, fencing_token bigint,
			   spec jsonb, resume jsonb, lease_expires_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_incarnation uuid := $1;
	lim			integer := current_setting('remora.max_active_leases')::integer;
	room		integer;
	next_job	record;
	j			remora.jobs;
	cp			remora.checkpoints;
	new_attempt uuid;
	expires		timestamptz;
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

	PERFORM remora._lock_leases();
	room := least(max_jobs, lim - remora._leases_in_use());
	expires := clock_timestamp() + remora._setting_interval('remora.lease_duration');

	-- the queue in claim order, from its index: a claim reads the rows it
	-- hands out (and those others hold, which it skips), whatever the
	-- backlog; the job row is only locked if nobody else holds it, so a
	-- claim never waits on a cancel (which holds the job, then the queue row)
	FOR next_job IN
		SELECT qq.job_id FROM remora.queue qq
		 WHERE qq.not_before <= now()
		 ORDER BY qq.priority DESC, qq.job_id
		 LIMIT greatest(room, 0)
		   FOR UPDATE SKIP LOCKED
	LOOP
		SELECT * INTO j FROM remora.jobs jb WHERE jb.job_id = next_job.job_id
		   FOR UPDATE SKIP LOCKED;
		CONTINUE WHEN NOT FOUND;
		IF j.state NOT IN ('queued', 'retrying') OR j.cancel_requested_at IS NOT NULL
			OR j.attempts_used >= j.max_attempts THEN
			-- an entry left behind (reconcile removes them too)
			DELETE FROM remora.queue qq WHERE qq.job_id = j.job_id;
			CONTINUE;
		END IF;

		new_attempt := gen_random_uuid();
		SELECT * INTO cp FROM remora.checkpoints c WHERE c.job_id = j.job_id;

		INSERT INTO remora.attempts
			(attempt_id, job_id, attempt_no, fencing_token, incarnation,
			 definition_hash, request_hash, access_digest, provenance,
			 resumed_from)
		VALUES
			(new_attempt, j.job_id, j.attempts_used + 1, j.fencing_token + 1,
			 p_incarnation, j.definition_hash, j.request_hash,
			 j.access_digest, j.provenance, cp.attempt_id);

		UPDATE remora.jobs jb
		   SET state = 'running',
			   attempts_used = jb.attempts_used + 1,
			   fencing_token = jb.fencing_token + 1,
			   current_attempt = new_attempt,
			   started_at = coalesce(jb.started_at, now())
		 WHERE jb.job_id = j.job_id;

		INSERT INTO remora.leases (attempt_id, job_id, fencing_token, incarnation, expires_at)
		VALUES (new_attempt, j.job_id, j.fencing_token + 1, p_incarnation, expires);
		DELETE FROM remora.queue q WHERE q.job_id = j.job_id;

		job_id := j.job_id;
		attempt_id := new_attempt;
		fencing_token := j.fencing_token + 1;
		spec := j.spec || jsonb_build_object(
			'job_id', j.job_id, 'attempt_no', j.attempts_used + 1,
			'owner', j.owner,
			'staging_prefix', remora._staging_prefix(j.prefix, j.job_id, new_attempt));
		-- the worker gets the whole URL, query string included
		spec := coalesce(jsonb_set(spec, '{source,uri}',
								   to_jsonb((SELECT u.url FROM remora.source_urls u
											  WHERE u.job_id = j.job_id))),
						 spec);
		resume := CASE WHEN cp.job_id IS NULL THEN NULL
					   ELSE jsonb_build_object('attempt_id', cp.attempt_id,
											   'fencing_token', cp.fencing_token,
											   'bytes_done', cp.bytes_done,
											   'state', cp.state) END;
		lease_expires_at := expires;
		RETURN NEXT;
	END LOOP;
END
$$;

/* ------------------------------------------------------------------------
 * Reconcile reads the jobs to rebuild the queue only after coordination
 * state was lost (remora.coordination), not every second.
 * ------------------------------------------------------------------------ */

-- A row while the queue and the leases are whole.  Crash recovery and a
-- promoted standby empty it with them (it is unlogged too), and a TRUNCATE
-- of either removes it (the triggers below): reconcile then rebuilds the
-- queue from the jobs, which it need not read otherwise (that read grows
-- with the backlog, and reconcile runs every second).
CREATE UNLOGGED TABLE remora.coordination (
	intact			boolean PRIMARY KEY DEFAULT true CHECK (intact)
);

CREATE FUNCTION remora._coordination_lost() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	DELETE FROM remora.coordination;
	RETURN NULL;
END
$$;
CREATE TRIGGER queue_truncated AFTER TRUNCATE ON remora.queue
	FOR EACH STATEMENT EXECUTE FUNCTION remora._coordination_lost();
CREATE TRIGGER leases_truncated AFTER TRUNCATE ON remora.leases
	FOR EACH STATEMENT EXECUTE FUNCTION remora._coordination_lost();

-- Rebuild coordination state from durable state and expire lapsed leases.
-- Returns the number of repairs made.  Safe to run at any time, by any
-- number of callers.
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
	  FROM remora.jobs j
	  JOIN remora.attempts a ON a.attempt_id = j.current_attempt
	 WHERE j.state = 'running' AND a.state = 'running'
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
		 WHERE j.state IN ('queued', 'retrying')
		   AND NOT EXISTS (SELECT 1 FROM remora.queue q WHERE q.job_id = j.job_id)
		ON CONFLICT DO NOTHING;
		GET DIAGNOSTICS n = ROW_COUNT;
		repairs := repairs + n;
		INSERT INTO remora.coordination VALUES (true) ON CONFLICT DO NOTHING;
	END IF;

	RETURN repairs;
END
$$;
REVOKE ALL ON FUNCTION remora._coordination_lost() FROM PUBLIC;

/* ------------------------------------------------------------------------
 * TLS trust (issue 17): a registered source endpoint may carry its own CA
 * certificates, set by remora.set_source_endpoint_ca and read only by the
 * workers.
 * ------------------------------------------------------------------------ */
ALTER TABLE remora.source_endpoints ADD COLUMN ca_pem text;

-- Trust a private CA for a registered source endpoint: PEM certificates
-- its TLS certificate may chain to (besides remora.ca_file); NULL forgets
-- them.  Only the workers read them: no view shows them.
CREATE FUNCTION remora.set_source_endpoint_ca(name text, ca_pem text)
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
REVOKE ALL ON FUNCTION remora.set_source_endpoint_ca(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.set_source_endpoint_ca(text, text) TO remora_admin;

/* ------------------------------------------------------------------------
 * Web client sorting (issue 13): the jobs list ordered by priority pages
 * by keyset over (priority, job_id), served by this index.
 * ------------------------------------------------------------------------ */
-- the web client's list by priority (keyset over (priority, job_id))
CREATE INDEX jobs_priority_idx ON remora.jobs (priority, job_id)
	WHERE deleted_at IS NULL;
