-- ---------------------------------------------------------------------
-- The worker protocol closed in SQL: a worker records its incarnation and
-- heartbeat, reads the members of earlier attempts and a source endpoint's
-- settings through functions, and remora_worker loses every privilege on
-- the tables (and the policies that let it read them).
-- ---------------------------------------------------------------------

-- Record a new worker incarnation: kind 'worker' (a background worker) or
-- 'external' (remora-worker, which says on which host it runs, under which
-- label, and its version).  An incarnation already recorded is an error:
-- each is new.
CREATE FUNCTION remora.start_incarnation(incarnation uuid, pid integer,
										 kind text, host text, label text,
										 version text)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF $1 IS NULL THEN
		RAISE EXCEPTION 'incarnation must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF $3 IS NULL OR $3 NOT IN ('worker', 'external') THEN
		RAISE EXCEPTION 'invalid incarnation kind: %', $3
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'The kind is worker or external.';
	END IF;
	INSERT INTO remora.incarnations (incarnation, pid, kind, host, label, version)
	VALUES ($1, $2, $3, $4, $5, $6);
END
$$;

-- The incarnation is alive: true if recorded, false if it has been ended
-- (the worker then starts another; its claims would be refused).
CREATE FUNCTION remora.heartbeat(incarnation uuid) RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH beat AS (
		UPDATE remora.incarnations i SET heartbeat_at = now()
		 WHERE i.incarnation = $1 AND i.stopped_at IS NULL
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM beat)
$$;

-- Record the end of an incarnation, unless already recorded (true: ended
-- now).  remora.reconcile then takes its leases as lapsed.
CREATE FUNCTION remora.end_incarnation(incarnation uuid) RETURNS boolean
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH ended AS (
		UPDATE remora.incarnations i SET stopped_at = now()
		 WHERE i.incarnation = $1 AND i.stopped_at IS NULL
		RETURNING 1)
	SELECT EXISTS (SELECT 1 FROM ended)
$$;

-- The launcher, first in a server lifetime: every background worker
-- incarnation of the previous lifetime has ended.  Not for remora_worker
-- (an external worker cannot know that); returns how many were recorded.
CREATE FUNCTION remora.end_previous_lifetime() RETURNS integer
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	WITH ended AS (
		UPDATE remora.incarnations i SET stopped_at = now()
		 WHERE i.kind = 'worker' AND i.stopped_at IS NULL
		RETURNING 1)
	SELECT count(*)::integer FROM ended
$$;

-- Members an earlier attempt of the job completed, for its attempt
-- attempt_id to reuse: for each of paths (pos: its place in paths, from 1,
-- the first if repeated), the copy of the newest other attempt, in the
-- job's bucket.  Paths with none are absent.
CREATE FUNCTION remora.earlier_members(job_id bigint, attempt_id uuid, paths text[])
RETURNS TABLE (pos integer, path text, key text, etag text, sha256 text,
			   size bigint, source jsonb)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT DISTINCT ON (m.path) p.pos::integer, m.path, m.key, m.etag,
		   m.sha256, m.size, m.source
	  FROM unnest($3) WITH ORDINALITY p(path, pos)
	  JOIN remora.members m ON m.path = p.path
	  JOIN remora.attempts t ON t.attempt_id = m.attempt_id
	 WHERE t.job_id = $1 AND t.attempt_id <> $2
	   AND m.bucket = (SELECT j.bucket FROM remora.jobs j WHERE j.job_id = $1)
	 ORDER BY m.path, t.attempt_no DESC, p.pos
$$;

-- The registered source endpoint a job of an s3 source names, with its
-- secret (a worker signs its requests with it): no row if there is none.
-- region, access_key_id and secret_access_key are '' rather than null; ca_pem
-- is null when the endpoint has no CAs of its own.
CREATE FUNCTION remora.source_endpoint_settings(name text)
RETURNS TABLE (url text, region text, path_style boolean,
			   access_key_id text, secret_access_key text, ca_pem text)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT e.url, coalesce(e.region, ''), e.path_style,
		   coalesce(e.access_key_id, ''), coalesce(e.secret_access_key, ''),
		   e.ca_pem
	  FROM remora.source_endpoints e
	 WHERE e.name = $1
$$;

REVOKE ALL ON FUNCTION
	remora.start_incarnation(uuid, integer, text, text, text, text),
	remora.heartbeat(uuid), remora.end_incarnation(uuid),
	remora.end_previous_lifetime(),
	remora.earlier_members(bigint, uuid, text[]),
	remora.source_endpoint_settings(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
	remora.start_incarnation(uuid, integer, text, text, text, text),
	remora.heartbeat(uuid), remora.end_incarnation(uuid),
	remora.earlier_members(bigint, uuid, text[]),
	remora.source_endpoint_settings(text) TO remora_worker;

DROP POLICY source_endpoints_worker ON remora.source_endpoints;
DROP POLICY jobs_worker ON remora.jobs;
DROP POLICY attempts_worker ON remora.attempts;
DROP POLICY members_worker ON remora.members;
REVOKE ALL ON remora.incarnations, remora.source_endpoints, remora.jobs,
	remora.attempts, remora.members FROM remora_worker;

