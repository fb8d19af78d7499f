-- remora 0.1.0 -> 0.2.0: presigned URLs, hard delete by workers,
-- retention, checkpoint-writer statistics.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION remora UPDATE TO '0.2.0'" to load this file. \quit

ALTER TABLE remora.jobs
	ADD COLUMN delete_failures integer NOT NULL DEFAULT 0,
	ADD COLUMN delete_after timestamptz,
	ADD COLUMN pruned_at timestamptz;

CREATE OR REPLACE FUNCTION remora_result(job bigint)
RETURNS TABLE (path text, bucket text, key text, size bigint, sha256 text,
			   etag text)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF job IS NULL THEN
		RAISE EXCEPTION 'job must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF NOT EXISTS (SELECT 1 FROM remora.jobs j WHERE j.job_id = job) THEN
		RAISE EXCEPTION 'job % does not exist', job USING ERRCODE = 'no_data_found';
	END IF;
	RETURN QUERY
		SELECT m.path, m.bucket, m.key, m.size, m.sha256, m.etag
		  FROM remora.results r
		  JOIN remora.jobs j ON j.job_id = r.job_id
		  JOIN remora.members m ON m.attempt_id = r.attempt_id
		 WHERE r.job_id = job AND j.hard_delete_requested_at IS NULL
		 ORDER BY m.path;
END
$$;

-- A time-limited GET URL for one member of the committed manifest.
CREATE FUNCTION remora_presign(job bigint, path text,
							   ttl interval DEFAULT '15 minutes')
RETURNS text
AS 'MODULE_PATHNAME', 'remora_presign'
LANGUAGE C VOLATILE;

DROP FUNCTION remora.staging_to_clean(integer);

-- Objects a worker should delete, most urgent first:
--  * a hard-deleted job: everything under <prefix>/<job id>/ (attempt_id
--    NULL in the result);
--  * staging: every attempt of a finished job that did not commit (all of
--    its staging prefix), and the segments of the one that did.
-- Attempts of unfinished jobs keep theirs: a replacement may reuse them.
-- Nothing is touched until one lease after the job or attempt ended, so
-- that a zombie that has not yet heard it lost has stopped writing.  (One
-- paused for longer may still write afterwards; commit refuses it, and its
-- objects are left to the store's lifecycle rules.)
CREATE FUNCTION remora.staging_to_clean(max_rows integer DEFAULT 1)
RETURNS TABLE (attempt_id uuid, job_id bigint, bucket text, prefix text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	(SELECT NULL::uuid, j.job_id, j.bucket,
			CASE WHEN j.prefix = '' THEN '' ELSE j.prefix || '/' END
			|| j.job_id::text || '/'
	   FROM remora.jobs j
	  WHERE j.hard_delete_requested_at IS NOT NULL AND j.hard_deleted_at IS NULL
		AND j.state IN ('succeeded', 'failed', 'cancelled')
		AND (j.delete_after IS NULL OR j.delete_after <= now())
		AND coalesce(j.finished_at, j.hard_delete_requested_at)
			<= now() - remora._setting_interval('remora.lease_duration')
	  ORDER BY j.hard_delete_requested_at
	  LIMIT greatest(max_rows, 0))
	UNION ALL
	(SELECT a.attempt_id, a.job_id, j.bucket,
			remora._staging_prefix(j.prefix, j.job_id, a.attempt_id)
			|| CASE WHEN r.attempt_id IS NULL THEN '' ELSE 'segments/' END
	   FROM remora.attempts a
	   JOIN remora.jobs j ON j.job_id = a.job_id
	   LEFT JOIN remora.results r ON r.attempt_id = a.attempt_id
	  WHERE a.cleaned_at IS NULL
		AND j.hard_delete_requested_at IS NULL
		AND j.state IN ('succeeded', 'failed', 'cancelled')
		AND (a.clean_after IS NULL OR a.clean_after <= now())
		AND coalesce(a.finished_at, j.finished_at)
			<= now() - remora._setting_interval('remora.lease_duration')
	  ORDER BY a.finished_at NULLS FIRST, a.attempt_id
	  LIMIT greatest(max_rows, 0))
	LIMIT greatest(max_rows, 0)
$$;

-- Record a hard delete's objects gone (or a failed try, retried after a
-- backoff that doubles up to an hour).  The job row stays as a tombstone.
CREATE FUNCTION remora.job_objects_deleted(job_id bigint, ok boolean DEFAULT true)
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

-- Retention: the history of jobs that ended more than remora.retention ago
-- is pruned, a batch at a time (the launcher calls this every minute).  The
-- job row stays as a tombstone (its state, owner, idempotency key, last
-- error); the attempts go, except the one whose result is still offered.
-- A job whose staging or hard delete is not finished waits.
CREATE FUNCTION remora.prune(max_jobs integer DEFAULT 100) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	keep	interval := remora._setting_interval('remora.retention');
	n		integer := 0;
	j		record;
BEGIN
	IF keep <= interval '0' THEN
		RETURN 0;
	END IF;
	FOR j IN
		SELECT jb.job_id,
			   (jb.deleted_at IS NOT NULL OR jb.hard_deleted_at IS NOT NULL) AS gone
		  FROM remora.jobs jb
		 WHERE jb.state IN ('succeeded', 'failed', 'cancelled')
		   AND jb.pruned_at IS NULL
		   AND jb.finished_at < now() - keep
		   AND (jb.hard_delete_requested_at IS NULL OR jb.hard_deleted_at IS NOT NULL)
		   AND NOT EXISTS (SELECT 1 FROM remora.attempts a
							WHERE a.job_id = jb.job_id AND a.cleaned_at IS NULL)
		 ORDER BY jb.finished_at
		 LIMIT greatest(max_jobs, 0)
		   FOR UPDATE SKIP LOCKED
	LOOP
		DELETE FROM remora.checkpoints c WHERE c.job_id = j.job_id;
		IF j.gone THEN
			DELETE FROM remora.results r WHERE r.job_id = j.job_id;
		END IF;
		DELETE FROM remora.attempts a
		 WHERE a.job_id = j.job_id
		   AND NOT EXISTS (SELECT 1 FROM remora.results r WHERE r.attempt_id = a.attempt_id);
		UPDATE remora.jobs jb SET pruned_at = now() WHERE jb.job_id = j.job_id;
		n := n + 1;
	END LOOP;
	RETURN n;
END
$$;

-- Checkpoint-writer statistics since the server started, from shared memory.
CREATE FUNCTION remora._checkpoint_stats()
RETURNS TABLE (transactions bigint, checkpoints bigint, max_batch bigint,
			   commit_ms_total double precision, commit_ms_max double precision,
			   refusals bigint)
AS 'MODULE_PATHNAME', 'remora_checkpoint_stats'
LANGUAGE C VOLATILE;

DROP VIEW remora_stats;
CREATE VIEW remora_stats WITH (security_invoker = true) AS
SELECT count(*) FILTER (WHERE state = 'queued') AS queued,
	   count(*) FILTER (WHERE state = 'running') AS running,
	   count(*) FILTER (WHERE state = 'retrying') AS retrying,
	   count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
	   count(*) FILTER (WHERE state = 'failed') AS failed,
	   count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
	   (SELECT coalesce(sum(r.bytes), 0) FROM remora.results r) AS bytes_committed,
	   (SELECT coalesce(sum(p.bytes_done), 0) FROM remora_progress p) AS bytes_in_flight,
	   (SELECT coalesce(sum(p.bytes_per_second), 0) FROM remora_progress p)
		   AS bytes_per_second,
	   (SELECT coalesce(jsonb_object_agg(f.class, f.n), '{}')
		  FROM (SELECT a.error ->> 'class' AS class, count(*) AS n
				  FROM remora.attempts a
				 WHERE a.error IS NOT NULL
				 GROUP BY 1) f) AS failures_by_class,
	   (SELECT count(*) FROM remora.leases) AS active_leases,
	   current_setting('remora.max_active_leases')::integer AS max_active_leases
  FROM remora.jobs
 WHERE deleted_at IS NULL;

CREATE VIEW remora_checkpoint_stats WITH (security_invoker = true) AS
SELECT s.transactions,
	   s.checkpoints,
	   round(s.checkpoints::numeric / nullif(s.transactions, 0), 2) AS mean_batch,
	   s.max_batch,
	   round((s.commit_ms_total / nullif(s.transactions, 0))::numeric, 3) AS mean_commit_ms,
	   round(s.commit_ms_max::numeric, 3) AS max_commit_ms,
	   s.refusals
  FROM remora._checkpoint_stats() s;

REVOKE ALL ON FUNCTION remora_presign(bigint, text, interval),
	remora.staging_to_clean(integer), remora.job_objects_deleted(bigint, boolean),
	remora.prune(integer), remora._checkpoint_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora_presign(bigint, text, interval) TO remora_user;
GRANT EXECUTE ON FUNCTION remora.staging_to_clean(integer),
	remora.job_objects_deleted(bigint, boolean) TO remora_worker;
GRANT EXECUTE ON FUNCTION remora._checkpoint_stats(), remora.prune(integer)
	TO remora_admin;
GRANT SELECT ON remora_stats TO remora_user;
GRANT SELECT ON remora_checkpoint_stats TO remora_admin;
REVOKE ALL ON remora_stats, remora_checkpoint_stats FROM PUBLIC;
