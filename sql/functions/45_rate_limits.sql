/* ------------------------------------------------------------------------
 * Byte-rate caps (worker protocol).  Three caps bound what a running
 * attempt downloads from its source: the job's own
 * options.max_bytes_per_second, its owner's max_bytes_per_second
 * (remora.role_limits, or remora.default_role_max_bytes_per_second)
 * shared by all the owner's running attempts, on every worker and host,
 * and remora.max_bytes_per_second shared by every running attempt of the
 * deployment.  A worker asks at every renewal round and applies the
 * answer to its transfers: a changed limit reaches a running attempt
 * there, and never stops it.  0 is no limit.
 * ------------------------------------------------------------------------ */

-- The cap of each of the given attempts that is running now: the least of
-- the job's own, its owner's divided by the owner's running attempts, and
-- the deployment's divided by all running attempts; NULL for none.  An
-- attempt that is not (or no longer) its job's running attempt has no row.
-- A shared cap divides evenly, at least a byte a second each: an attempt
-- that takes less than its share leaves the rest unused until the count
-- changes.  A job's own cap is at least remora.min_bytes_per_second, which
-- a submit enforces: one submitted before the floor existed is raised to
-- it, so that its attempts reach checkpoints, and yield, in time.
CREATE OR REPLACE FUNCTION remora.rate_limits(attempt_ids uuid[])
RETURNS TABLE (attempt_id uuid, max_bytes_per_second bigint)
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	deployment	bigint := coalesce(nullif(current_setting('remora.max_bytes_per_second', true), '')::bigint, 0);
	role_default bigint := coalesce(nullif(current_setting('remora.default_role_max_bytes_per_second', true), '')::bigint, 0);
	floor		bigint := coalesce(nullif(current_setting('remora.min_bytes_per_second', true), '')::bigint, 0);
BEGIN
	IF $1 IS NULL THEN
		RAISE EXCEPTION 'attempt_ids must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	RETURN QUERY
	WITH running AS (
		-- a running job's current attempt runs (attempts_running_idx)
		SELECT j.owner, j.current_attempt, j.spec -> 'options' AS options
		  FROM remora.attempts a
		  JOIN remora.jobs j ON j.job_id = a.job_id AND j.current_attempt = a.attempt_id
		 WHERE a.state = 'running' AND j.state = 'running'
	), per_owner AS (
		SELECT r.owner, count(*) AS n FROM running r GROUP BY r.owner
	), total AS (
		SELECT count(*) AS n FROM running
	), caps AS (
		SELECT r.current_attempt,
			   CASE WHEN (r.options ->> 'max_bytes_per_second')::bigint > 0
					THEN greatest((r.options ->> 'max_bytes_per_second')::bigint, floor)
			   END AS own,
			   CASE WHEN coalesce(l.max_bytes_per_second, role_default) > 0
					THEN greatest(1, coalesce(l.max_bytes_per_second, role_default) / o.n)
			   END AS role_share,
			   CASE WHEN deployment > 0 THEN greatest(1, deployment / t.n) END AS deployment_share
		  FROM running r
		  JOIN per_owner o ON o.owner = r.owner
		  CROSS JOIN total t
		  LEFT JOIN remora.role_limits l ON l.role_id = r.owner
		 WHERE r.current_attempt = ANY ($1)
	)
	SELECT c.current_attempt, least(c.own, c.role_share, c.deployment_share)
	  FROM caps c;
END
$$;

REVOKE ALL ON FUNCTION remora.rate_limits(uuid[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.rate_limits(uuid[]) TO remora_worker;
