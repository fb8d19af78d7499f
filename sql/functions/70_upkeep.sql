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
	stale		regrole[];
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
		-- and every owner of a queued job waits for its turn (rows a queue
		-- insert made are there; this adds those a lost table took along)
		INSERT INTO remora.queue_owners (owner, pass)
		SELECT DISTINCT q.owner, remora._turn(0) FROM remora.queue q
		ON CONFLICT DO NOTHING;
		GET DIAGNOSTICS n = ROW_COUNT;
		repairs := repairs + n;
		INSERT INTO remora.coordination VALUES (true) ON CONFLICT DO NOTHING;
	END IF;

	-- owners without queued jobs or running attempts no longer wait (one
	-- that runs keeps its pass: a job it queues again, as a yield does,
	-- takes its turn, not a newcomer's).  Their rows are locked
	-- first, skipping those a queue insert in flight holds
	-- (remora._owners_wait), then looked at again with a new snapshot that
	-- sees every queue insert committed before the lock: a job queued since
	-- keeps its owner's row (so only under READ COMMITTED, where each
	-- statement takes a new snapshot; proof/owners.pml).  A thousand a
	-- round, by their pass.
	IF current_setting('transaction_isolation') = 'read committed' THEN
		stale := ARRAY(SELECT w.owner FROM remora.queue_owners w
						WHERE NOT EXISTS (SELECT 1 FROM remora.queue q WHERE q.owner = w.owner)
						  AND w.owner::oid NOT IN (SELECT r.owner FROM remora._running_by_owner() r)
						ORDER BY w.pass LIMIT 1000
						  FOR UPDATE SKIP LOCKED);
		DELETE FROM remora.queue_owners w
		 WHERE w.owner = ANY (stale)
		   AND NOT EXISTS (SELECT 1 FROM remora.queue q WHERE q.owner = w.owner);
	END IF;

	-- the changes of the metrics' counts, folded (GET /metrics)
	PERFORM remora._fold_metrics();

	RETURN repairs;
END
$$;

-- Objects a worker should delete, most urgent first:
--  * a hard-deleted job: the staging prefix of each attempt that was not
--    cleaned yet (attempt_id set; the worker records it with
--    remora.staging_cleaned), then, last, the whole staging prefix of the
--    attempt whose result was committed (or of the last attempt) with
--    attempt_id NULL (recorded with remora.job_objects_deleted).  Only the
--    job's own attempt prefixes, <prefix>/<job id>/<attempt id>/: another
--    job whose prefix happens to be <prefix>/<job id> is not touched;
--  * staging: every attempt of a finished job that did not commit (all of
--    its staging prefix), and the segments of the one that did.
-- Attempts of unfinished jobs keep theirs: a replacement may reuse them.
-- Nothing is touched until one lease after the job or attempt ended, so
-- that a zombie that has not yet heard it lost has stopped writing.  (One
-- paused for longer may still write afterwards; commit refuses it, and its
-- objects are left to the store's lifecycle rules.)
-- Model: StagingToClean (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora.staging_to_clean(max_rows integer DEFAULT 1)
RETURNS TABLE (attempt_id uuid, job_id bigint, bucket text, prefix text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH doomed AS (
		SELECT j.job_id, j.bucket, j.prefix, j.hard_delete_requested_at,
			   r.attempt_id AS committed
		  FROM remora.jobs j
		  LEFT JOIN remora.results r ON r.job_id = j.job_id
		 WHERE j.hard_delete_requested_at IS NOT NULL AND j.hard_deleted_at IS NULL
		   AND j.state IN ('succeeded', 'failed', 'cancelled')
		   AND (j.delete_after IS NULL OR j.delete_after <= now())
		   AND coalesce(j.finished_at, j.hard_delete_requested_at)
			   <= now() - remora._setting_interval('remora.lease_duration'))
	(SELECT u.attempt_id, u.job_id, u.bucket, u.prefix
	   FROM (SELECT a.attempt_id, d.job_id, d.bucket,
					remora._staging_prefix(d.prefix, d.job_id, a.attempt_id) AS prefix,
					d.hard_delete_requested_at AS since
			   FROM doomed d
			   JOIN remora.attempts a ON a.job_id = d.job_id
			  WHERE a.cleaned_at IS NULL
				AND a.attempt_id IS DISTINCT FROM d.committed
				AND (a.clean_after IS NULL OR a.clean_after <= now())
			 UNION ALL
			 SELECT NULL::uuid, d.job_id, d.bucket,
					remora._staging_prefix(d.prefix, d.job_id, last.attempt_id),
					d.hard_delete_requested_at
			   FROM doomed d
			   CROSS JOIN LATERAL (
					SELECT a.attempt_id FROM remora.attempts a
					 WHERE a.job_id = d.job_id
					 ORDER BY a.attempt_id = d.committed DESC, a.attempt_no DESC
					 LIMIT 1) last
			  WHERE NOT EXISTS (SELECT 1 FROM remora.attempts a
								 WHERE a.job_id = d.job_id AND a.cleaned_at IS NULL
								   AND a.attempt_id IS DISTINCT FROM d.committed)) u
	  ORDER BY u.since, u.job_id, u.attempt_id NULLS LAST
	  LIMIT greatest(max_rows, 0))
	UNION ALL
	(SELECT c.attempt_id, c.job_id, j.bucket,
			remora._staging_prefix(j.prefix, j.job_id, c.attempt_id)
			|| CASE WHEN r.attempt_id IS NULL THEN '' ELSE 'segments/' END
	   FROM ((SELECT a.attempt_id, a.job_id, a.finished_at AS due
				FROM remora.attempts a
			   WHERE a.cleaned_at IS NULL AND a.clean_after IS NULL
				 AND a.finished_at <= now() - remora._setting_interval('remora.lease_duration')
			   ORDER BY a.finished_at, a.attempt_id)
			 UNION ALL
			 (SELECT a.attempt_id, a.job_id, a.clean_after
				FROM remora.attempts a
			   WHERE a.cleaned_at IS NULL AND a.clean_after <= now()
				 AND a.finished_at <= now() - remora._setting_interval('remora.lease_duration')
			   ORDER BY a.clean_after, a.attempt_id)) c
	   JOIN remora.jobs j ON j.job_id = c.job_id
	   LEFT JOIN remora.results r ON r.attempt_id = c.attempt_id
	  WHERE j.hard_delete_requested_at IS NULL
		AND j.state IN ('succeeded', 'failed', 'cancelled')
	  ORDER BY c.due, c.attempt_id
	  LIMIT greatest(max_rows, 0))
	LIMIT greatest(max_rows, 0)
$$;

-- Record a hard delete's objects gone (or a failed try, retried after a
-- backoff that doubles up to an hour).  The job row stays as a tombstone.
CREATE OR REPLACE FUNCTION remora.job_objects_deleted(job_id bigint, ok boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF ok THEN
		UPDATE remora.jobs j SET hard_deleted_at = coalesce(j.hard_deleted_at, now())
		 WHERE j.job_id = $1 AND j.hard_delete_requested_at IS NOT NULL;
		UPDATE remora.attempts a SET cleaned_at = coalesce(a.cleaned_at, now())
		 WHERE a.job_id = $1;
	ELSE
		UPDATE remora.jobs j
		   SET delete_failures = j.delete_failures + 1,
			   delete_after = now() + make_interval(secs => least(3600, power(2, least(j.delete_failures, 12))))
		 WHERE j.job_id = $1 AND j.hard_deleted_at IS NULL;
	END IF;
END
$$;

-- Record a cleanup: done, or failed (tried again after a backoff that
-- doubles up to an hour).
-- Model: StagingCleaned (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora.staging_cleaned(attempt_id uuid, ok boolean DEFAULT true)
RETURNS void
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	UPDATE remora.attempts a
	   SET cleaned_at = CASE WHEN $2 THEN now() END,
		   clean_failures = CASE WHEN $2 THEN a.clean_failures ELSE a.clean_failures + 1 END,
		   clean_after = CASE WHEN $2 THEN NULL
						 ELSE now() + make_interval(secs => least(3600, power(2, least(a.clean_failures, 12)))) END
	 WHERE a.attempt_id = $1 AND a.cleaned_at IS NULL
$$;

-- The rows of roles that were dropped (DROP ROLE cannot be hooked) go to
-- nobody: jobs and export keys to role 0 ('-'), which no role has; grants,
-- limits and webhook secrets are deleted.  Otherwise they keep the dropped
-- role's OID, which pg_dump writes as a number (regrole of no role), and a
-- restore would hand them to whichever role has that OID in the other
-- cluster.  A dropped role's idempotency keys go with it: nobody can
-- replay them.  The owners of jobs are found by a loose scan of the index
-- that leads with owner, one descent each, whatever the history.  Called
-- by remora.prune; returns the jobs handed to nobody.
CREATE OR REPLACE FUNCTION remora._forget_dropped_roles() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	gone	oid[];
	n		integer;
BEGIN
	WITH RECURSIVE owners (owner) AS (
		(SELECT j.owner::oid FROM remora.jobs j WHERE j.owner::oid > 0
		  ORDER BY j.owner LIMIT 1)
		UNION ALL
		SELECT (SELECT j.owner::oid FROM remora.jobs j WHERE j.owner::oid > o.owner
				 ORDER BY j.owner LIMIT 1)
		  FROM owners o WHERE o.owner IS NOT NULL
	)
	SELECT coalesce(array_agg(o.owner), '{}') INTO gone FROM owners o
	 WHERE o.owner IS NOT NULL
	   AND NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = o.owner);
	UPDATE remora.jobs j SET owner = 0, idempotency_key = NULL
	 WHERE j.owner::oid = ANY (gone);
	GET DIAGNOSTICS n = ROW_COUNT;
	UPDATE remora.queue q SET owner = 0 WHERE q.owner::oid = ANY (gone);
	UPDATE remora.export_keys k SET owner = 0
	 WHERE k.owner::oid > 0 AND NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = k.owner);
	DELETE FROM remora.target_grants g
	 WHERE NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = g.grantee);
	UPDATE remora.target_grants g SET granted_by = 0
	 WHERE g.granted_by::oid > 0 AND NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = g.granted_by);
	DELETE FROM remora.source_grants g
	 WHERE NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = g.grantee);
	UPDATE remora.source_grants g SET granted_by = 0
	 WHERE g.granted_by::oid > 0 AND NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = g.granted_by);
	DELETE FROM remora.role_limits l
	 WHERE NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = l.role_id);
	DELETE FROM remora.webhook_secrets w
	 WHERE NOT EXISTS (SELECT 1 FROM pg_roles r WHERE r.oid = w.owner);
	RETURN n;
END
$$;

-- Retention: the history of jobs that ended more than remora.retention ago
-- is pruned, a batch at a time (the launcher calls this every minute, and
-- again at once while batches come back full).  The job row stays as a
-- tombstone (its state, owner, idempotency key, last error); the attempts
-- go, except the one whose result is still offered.  A job whose staging
-- or hard delete is not finished waits, and one whose webhooks are not all
-- delivered or given up; then its webhooks and their tries go too.  First,
-- the rows of dropped roles go to nobody (remora._forget_dropped_roles).
-- A batch is found through jobs_unpruned_idx (the tombstones are not in
-- it) and pruned with one statement per table, each by the batch's ids:
-- its cost is the batch's, whatever the history.  It locks only jobs that
-- nobody holds, so it never waits for a claim or a commit.
CREATE OR REPLACE FUNCTION remora.prune(max_jobs integer DEFAULT 1000) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	keep	interval := remora._setting_interval('remora.retention');
	ids		bigint[];
	gone	bigint[];
BEGIN
	PERFORM remora._forget_dropped_roles();
	IF keep <= interval '0' THEN
		RETURN 0;
	END IF;
	SELECT coalesce(array_agg(b.job_id), '{}'),
		   coalesce(array_agg(b.job_id) FILTER (WHERE b.gone), '{}')
	  INTO ids, gone
	  FROM (SELECT jb.job_id,
				   (jb.deleted_at IS NOT NULL OR jb.hard_deleted_at IS NOT NULL) AS gone
			  FROM remora.jobs jb
			 WHERE jb.finished_at IS NOT NULL AND jb.pruned_at IS NULL
			   AND jb.finished_at < now() - keep
			   AND jb.state IN ('succeeded', 'failed', 'cancelled')
			   AND (jb.hard_delete_requested_at IS NULL OR jb.hard_deleted_at IS NOT NULL)
			   AND NOT EXISTS (SELECT 1 FROM remora.attempts a
								WHERE a.job_id = jb.job_id AND a.cleaned_at IS NULL)
			   AND NOT EXISTS (SELECT 1 FROM remora.webhooks w
								WHERE w.job_id = jb.job_id AND w.ended_at IS NULL)
			 ORDER BY jb.finished_at
			 LIMIT greatest(max_jobs, 0)
			   FOR UPDATE SKIP LOCKED) b;
	IF cardinality(ids) = 0 THEN
		RETURN 0;
	END IF;
	DELETE FROM remora.checkpoints c WHERE c.job_id = ANY (ids);
	DELETE FROM remora.source_urls u WHERE u.job_id = ANY (ids);
	DELETE FROM remora.notify_urls n WHERE n.job_id = ANY (ids);
	DELETE FROM remora.webhook_tries t USING remora.webhooks w
	 WHERE t.webhook_id = w.webhook_id AND w.job_id = ANY (ids);
	DELETE FROM remora.webhooks w WHERE w.job_id = ANY (ids);
	DELETE FROM remora.results r WHERE r.job_id = ANY (gone);
	DELETE FROM remora.attempts a
	 WHERE a.job_id = ANY (ids)
	   AND NOT EXISTS (SELECT 1 FROM remora.results r WHERE r.attempt_id = a.attempt_id);
	UPDATE remora.jobs jb SET pruned_at = now() WHERE jb.job_id = ANY (ids);
	RETURN cardinality(ids);
END
$$;

/* ------------------------------------------------------------------------
 * Orphans after a restore (doc/operator-guide.md, "Backup and restore"):
 * objects in Remora's staging area of attempts the database does not know,
 * which a point-in-time recovery forgot.  remora.sweep_orphans (C,
 * src/pg/sweep.c) lists the staging area of each place jobs write to and
 * asks _sweep_judge, a page at a time, which objects are orphans.
 * ------------------------------------------------------------------------ */

-- Where staging objects may be: the bucket and prefix of every job (an
-- export writes to stable keys, never to a staging area), and the
-- deployment's defaults; those of one bucket when bucket is not NULL.
-- As one array, bucket and prefix after bucket and prefix.
CREATE OR REPLACE FUNCTION remora._sweep_areas(bucket text)
RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT coalesce(array_agg(x ORDER BY a.bucket, a.prefix, o), '{}')
	  FROM (SELECT j.bucket, j.prefix FROM remora.jobs j
			 WHERE j.source_kind <> 'export' AND ($1 IS NULL OR j.bucket = $1)
			UNION
			SELECT current_setting('remora.default_bucket'),
				   current_setting('remora.default_prefix')
			 WHERE current_setting('remora.default_bucket') <> ''
			   AND ($1 IS NULL OR current_setting('remora.default_bucket') = $1)) a
	 CROSS JOIN LATERAL (VALUES (1, a.bucket), (2, a.prefix)) v(o, x)
$$;

-- Which of a page of objects listed under the staging area of (bucket,
-- prefix) are orphans, by their position in keys (1-based): a key
-- <prefix>/<job id>/<attempt id>/... whose attempt the database does not
-- know, last modified before now() - older_than.  Never a key of another
-- shape (nothing Remora wrote), one an export published or reserved, one
-- whose last modification cannot be read, nor an object of a job deleted
-- without its objects (remora_delete(job) keeps them; retention may
-- forget the job's attempts, never its objects).
CREATE OR REPLACE FUNCTION remora._sweep_judge(bucket text, prefix text,
	keys text[], modified text[], older_than interval)
RETURNS integer[]
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH page AS (
		SELECT k.i, k.key, m.modified,
			   regexp_match(substr(k.key, length($2) + (CASE WHEN $2 = '' THEN 1 ELSE 2 END)),
				   '^([0-9]{1,18})/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})/.')
				   AS staged
		  FROM unnest($3) WITH ORDINALITY AS k(key, i)
		  JOIN unnest($4) WITH ORDINALITY AS m(modified, i) USING (i)
		 WHERE $2 = '' OR left(k.key, length($2) + 1) = $2 || '/'
	)
	SELECT coalesce(array_agg(p.i::integer ORDER BY p.i), '{}') FROM page p
	 WHERE p.staged IS NOT NULL
	   -- (a CASE: the cast only of what the pattern let through)
	   AND CASE WHEN p.modified ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$'
				THEN p.modified::timestamptz < now() - $5 ELSE false END
	   AND NOT EXISTS (SELECT 1 FROM remora.attempts a
						WHERE a.attempt_id = p.staged[2]::uuid)
	   AND NOT EXISTS (SELECT 1 FROM remora.jobs j
						WHERE j.job_id = p.staged[1]::bigint
						  AND j.deleted_at IS NOT NULL
						  AND j.hard_delete_requested_at IS NULL)
	   AND NOT EXISTS (SELECT 1 FROM remora.export_keys k
						WHERE k.bucket = $1 AND k.key = p.key)
$$;

-- Administrators only (REVOKE below, remora_admin in 95_privileges.sql).
CREATE OR REPLACE FUNCTION remora.sweep_orphans(bucket text DEFAULT NULL,
	older_than interval DEFAULT '1 day', dry_run boolean DEFAULT true)
RETURNS TABLE (bucket text, key text, size bigint, deleted boolean)
AS 'MODULE_PATHNAME', 'remora_sweep_orphans'
LANGUAGE C VOLATILE;
