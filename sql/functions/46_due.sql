/* ------------------------------------------------------------------------
 * When the next queued job becomes due (worker protocol).  A job queued
 * for later (a retry's backoff, a Retry-After) is claimed when it becomes
 * due, not at a worker's next poll: a worker whose claim took fewer jobs
 * than it had room for asks how long until the next one is due, and
 * claims again then (src/runner/round.c).
 * ------------------------------------------------------------------------ */

-- Milliseconds until the next queued job becomes due, by the server's
-- clock (a worker's own may be off): 0 when none is due later but one is
-- queued (due now, and left to claim's rules: an owner at its max_running,
-- leases at remora.max_active_leases, a row another claim holds); NULL
-- when nothing is queued, or the incarnation was stopped (it claims
-- nothing).  Reads, locks and changes nothing.
CREATE OR REPLACE FUNCTION remora.next_due(incarnation uuid) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	p_incarnation uuid := $1;
	t			timestamptz := clock_timestamp();
	due			timestamptz;
BEGIN
	IF p_incarnation IS NULL THEN
		RAISE EXCEPTION 'incarnation must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF EXISTS (SELECT 1 FROM remora.incarnations i
				WHERE i.incarnation = p_incarnation AND i.stopped_at IS NOT NULL) THEN
		RETURN NULL;
	END IF;
	-- the predicate repeated, so that the partial index answers
	SELECT q.not_before INTO due
	  FROM remora.queue q
	 WHERE q.not_before > q.enqueued_at AND q.not_before > t
	 ORDER BY q.not_before
	 LIMIT 1;
	IF FOUND THEN
		RETURN greatest(1, ceil(extract(epoch FROM due - t) * 1000))::bigint;
	END IF;
	IF EXISTS (SELECT 1 FROM remora.queue) THEN
		RETURN 0;
	END IF;
	RETURN NULL;
END
$$;

REVOKE ALL ON FUNCTION remora.next_due(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.next_due(uuid) TO remora_worker;
