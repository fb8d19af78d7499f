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
