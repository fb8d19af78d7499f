-- ---------------------------------------------------------------------
-- Limits per role (remora.role_limits, created by 50_role_limits.sql):
-- remora.set_role_limits and remora.reset_role_limits for remora_admin,
-- the view remora_role_limits, and max_queued, which remora._submit (so
-- every submit and export) enforces with SQLSTATE 53400.
-- ---------------------------------------------------------------------

ALTER TABLE remora.role_limits ENABLE ROW LEVEL SECURITY;
-- a user reads their own row (through remora_role_limits), an admin all
CREATE POLICY role_limits_visible ON remora.role_limits FOR SELECT
	USING (role_id = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
		   OR pg_catalog.pg_has_role(current_user, 'remora_admin', 'USAGE'));
GRANT SELECT ON remora.role_limits TO remora_user;
SELECT pg_catalog.pg_extension_config_dump('remora.role_limits', '');

-- One row per owner that submitted under a max_queued limit, locked by
-- each such submit until its transaction ends: the owner's submits and
-- exports then count their queued jobs one at a time, and the count is
-- exact.  A row lock and not an advisory lock, which any user could take
-- and hold to stall another's submits; no role but the extension's owner
-- may lock these rows.  The update of the counter is what a REPEATABLE
-- READ transaction that started before another submit committed trips on
-- (40001, retried by the client) instead of counting without that job.
-- Coordination only: a crash empties it, and the next submit re-creates
-- its row.
CREATE UNLOGGED TABLE remora.submit_gates (
	role_id			oid PRIMARY KEY,
	submits			bigint NOT NULL DEFAULT 0
);

-- Refuse a new job of caller (remora._submit: a submit or an export) when
-- the caller already has its max_queued jobs queued or waiting to retry:
-- 53400, naming the limit and the count.  No limit (0) costs nothing and
-- takes no lock.  idem_key: the new job's idempotency key; a submit with
-- the same key that committed while this one waited is returned by the
-- caller, never refused.
CREATE FUNCTION remora._check_queue_limit(caller oid, idem_key text)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
	own		integer;
	lim		integer;
	n		bigint;
BEGIN
	SELECT l.max_queued INTO own FROM remora.role_limits l WHERE l.role_id = caller;
	lim := coalesce(own, nullif(current_setting('remora.default_role_max_queued', true), '')::integer, 0);
	IF lim = 0 THEN
		RETURN;
	END IF;
	INSERT INTO remora.submit_gates AS g (role_id) VALUES (caller)
	ON CONFLICT (role_id) DO UPDATE SET submits = g.submits + 1;
	-- counting stops at the limit: its index scan never reads the backlog
	SELECT count(*) INTO n
	  FROM (SELECT 1 FROM remora.jobs j
			 WHERE j.owner = caller AND j.finished_at IS NULL
			   AND j.state IN ('queued', 'retrying')
			 LIMIT lim) q;
	IF n < lim THEN
		RETURN;
	END IF;
	IF idem_key IS NOT NULL
		AND EXISTS (SELECT 1 FROM remora.jobs j
					 WHERE j.owner = caller AND j.idempotency_key = idem_key) THEN
		RETURN;
	END IF;
	SELECT count(*) INTO n FROM remora.jobs j
	 WHERE j.owner = caller AND j.finished_at IS NULL
	   AND j.state IN ('queued', 'retrying');
	RAISE EXCEPTION 'role "%" has % %, its limit % is %',
		pg_get_userbyid(caller), n, CASE WHEN n = 1 THEN 'job queued' ELSE 'jobs queued' END,
		CASE WHEN own IS NULL THEN 'remora.default_role_max_queued' ELSE 'max_queued' END, lim
		USING ERRCODE = 'configuration_limit_exceeded',
			  DETAIL = 'Jobs and exports that are queued or waiting to retry count against the limit; a new one is accepted once one of them has started or been cancelled.',
			  HINT = format('An administrator raises it with remora.set_role_limits(%L, max_queued => ...)%s.',
							pg_get_userbyid(caller),
							CASE WHEN own IS NULL THEN ', or for every role with remora.default_role_max_queued' ELSE '' END);
END
$$;

-- The oid of an existing role; 22004 for NULL, 42704 naming an unknown one.
CREATE FUNCTION remora._role_oid(role name) RETURNS oid
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r	oid;
BEGIN
	IF $1 IS NULL THEN
		RAISE EXCEPTION 'role must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	SELECT a.oid INTO r FROM pg_catalog.pg_roles a WHERE a.rolname = $1;
	IF r IS NULL THEN
		RAISE EXCEPTION 'role "%" does not exist', $1 USING ERRCODE = 'undefined_object';
	END IF;
	RETURN r;
END
$$;

-- Set a role's own limits; a NULL argument leaves that limit as it is
-- (its own value, or the default).  reset_role_limits returns them all to
-- the defaults.
CREATE FUNCTION remora.set_role_limits(role name, weight integer DEFAULT NULL,
									   max_running integer DEFAULT NULL,
									   max_queued integer DEFAULT NULL,
									   max_bytes_per_second bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r	oid := remora._role_oid($1);
BEGIN
	IF $2 NOT BETWEEN 1 AND 1000 THEN
		RAISE EXCEPTION 'invalid weight: %', $2 USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'weight is an integer from 1 to 1000, or NULL to leave it as it is.';
	END IF;
	IF $3 < 0 THEN
		RAISE EXCEPTION 'invalid max_running: %', $3 USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'max_running is a number of running attempts, 0 for no limit, or NULL to leave it as it is.';
	END IF;
	IF $4 < 0 THEN
		RAISE EXCEPTION 'invalid max_queued: %', $4 USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'max_queued is a number of queued jobs, 0 for no limit, or NULL to leave it as it is.';
	END IF;
	IF $5 < 0 THEN
		RAISE EXCEPTION 'invalid max_bytes_per_second: %', $5 USING ERRCODE = 'invalid_parameter_value',
			DETAIL = 'max_bytes_per_second is a number of bytes per second, 0 for no limit, or NULL to leave it as it is.';
	END IF;
	DELETE FROM remora.role_limits l
	 WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.oid = l.role_id);
	IF num_nulls($2, $3, $4, $5) = 4 THEN
		RETURN;
	END IF;
	INSERT INTO remora.role_limits AS l
		(role_id, weight, max_running, max_queued, max_bytes_per_second)
	VALUES (r, $2, $3, $4, $5)
	ON CONFLICT (role_id) DO UPDATE
	   SET weight = coalesce(EXCLUDED.weight, l.weight),
		   max_running = coalesce(EXCLUDED.max_running, l.max_running),
		   max_queued = coalesce(EXCLUDED.max_queued, l.max_queued),
		   max_bytes_per_second = coalesce(EXCLUDED.max_bytes_per_second,
										   l.max_bytes_per_second),
		   updated_at = now();
END
$$;

-- A role's limits back to the defaults (remora.default_role_*).
CREATE FUNCTION remora.reset_role_limits(role name)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	r	oid := remora._role_oid($1);
BEGIN
	DELETE FROM remora.role_limits l
	 WHERE l.role_id = r
		OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles a WHERE a.oid = l.role_id);
END
$$;

REVOKE ALL ON FUNCTION remora.set_role_limits(name, integer, integer, integer, bigint),
	remora.reset_role_limits(name) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.set_role_limits(name, integer, integer, integer, bigint),
	remora.reset_role_limits(name) TO remora_admin;
REVOKE ALL ON FUNCTION remora._check_queue_limit(oid, text), remora._role_oid(name)
	FROM PUBLIC;

-- remora._submit (remora_submit, remora._export) refuses a role at its
-- max_queued; it changed again later, and is in 90_submit_speed.sql in
-- its final form.

-- Limits per role, as they apply now, beside what each role uses: every
-- role that has limits of its own or unfinished jobs, and the reader.
-- Row-level security on remora.role_limits and remora.jobs leaves a user
-- their own row; remora_admin sees every role.  A limit the role has not
-- set is the default (remora.default_role_*); 0 is no limit.  queued
-- counts the jobs and exports waiting to run (queued, or retrying after a
-- failed attempt), the ones max_queued limits; bytes_per_second is the
-- current rate of the role's running attempts, as remora_progress shows
-- them.  A role dropped since is not shown.
CREATE VIEW remora_role_limits WITH (security_invoker = true) AS
SELECT r.rolname AS role,
	   coalesce(l.weight,
				nullif(current_setting('remora.default_role_weight', true), '')::integer,
				1) AS weight,
	   coalesce(l.max_running,
				nullif(current_setting('remora.default_role_max_running', true), '')::integer,
				0) AS max_running,
	   coalesce(l.max_queued,
				nullif(current_setting('remora.default_role_max_queued', true), '')::integer,
				0) AS max_queued,
	   coalesce(l.max_bytes_per_second,
				nullif(current_setting('remora.default_role_max_bytes_per_second', true), '')::bigint,
				0) AS max_bytes_per_second,
	   coalesce(u.running, 0) AS running,
	   coalesce(u.queued, 0) AS queued,
	   coalesce(b.rate, 0) AS bytes_per_second
  FROM (SELECT l.role_id FROM remora.role_limits l
		UNION
		SELECT j.owner FROM remora.jobs j
		 WHERE j.finished_at IS NULL
		   AND j.state IN ('queued', 'running', 'retrying')
		UNION
		SELECT a.oid FROM pg_catalog.pg_roles a WHERE a.rolname = current_user) o
  JOIN pg_catalog.pg_roles r ON r.oid = o.role_id
  LEFT JOIN remora.role_limits l ON l.role_id = o.role_id
  LEFT JOIN (SELECT j.owner,
					count(*) FILTER (WHERE j.state = 'running') AS running,
					count(*) FILTER (WHERE j.state IN ('queued', 'retrying')) AS queued
			   FROM remora.jobs j
			  WHERE j.finished_at IS NULL
				AND j.state IN ('queued', 'running', 'retrying')
			  GROUP BY j.owner) u ON u.owner = o.role_id
  LEFT JOIN (SELECT j.owner, sum(p.rate) AS rate
			   FROM remora._progress() p
			   JOIN remora.jobs j
				 ON j.job_id = p.job_id AND j.current_attempt = p.attempt_id
				AND j.fencing_token = p.fencing_token AND j.state = 'running'
			  GROUP BY j.owner) b ON b.owner = o.role_id;

GRANT SELECT ON remora_role_limits TO remora_user;
REVOKE ALL ON remora_role_limits FROM PUBLIC;
