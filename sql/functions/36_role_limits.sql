/* ------------------------------------------------------------------------
 * Limits per role (remora_admin): remora.role_limits holds a role's own
 * weight, max_running, max_queued and max_bytes_per_second; a NULL column,
 * or no row, takes the default from remora.default_role_<column>.
 *
 * Rows are keyed by the role's oid.  A role dropped since its limits were
 * set leaves its row behind (DROP ROLE cannot be hooked): the view
 * remora_role_limits shows only roles that exist, and set_role_limits and
 * reset_role_limits delete every row whose role is gone, so that a later
 * role given the same oid does not inherit them.
 * ------------------------------------------------------------------------ */

-- Refuse a new job of caller (remora._submit: a submit or an export) when
-- the caller already has its max_queued jobs queued or waiting to retry:
-- 53400, naming the limit and the count.  No limit (0) costs nothing and
-- takes no lock.  idem_key: the new job's idempotency key; a submit with
-- the same key that committed while this one waited is returned by the
-- caller, never refused.
CREATE OR REPLACE FUNCTION remora._check_queue_limit(caller oid, idem_key text)
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
CREATE OR REPLACE FUNCTION remora._role_oid(role name) RETURNS oid
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
CREATE OR REPLACE FUNCTION remora.set_role_limits(role name, weight integer DEFAULT NULL,
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
	-- a cap below the floor would let the role's jobs hold workers for ever
	IF $5 > 0 AND $5 < current_setting('remora.min_bytes_per_second')::bigint THEN
		RAISE EXCEPTION 'invalid max_bytes_per_second: %', $5 USING ERRCODE = 'invalid_parameter_value',
			DETAIL = format('The cap is below remora.min_bytes_per_second (%s).',
							current_setting('remora.min_bytes_per_second')),
			HINT = 'Cap the role at remora.min_bytes_per_second or more, or lower that setting.';
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
CREATE OR REPLACE FUNCTION remora.reset_role_limits(role name)
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
