-- Limits per role (doc/operator-guide.md, "Limits per role"): a NULL column
-- takes the default from the setting remora.default_role_<column>.  One row
-- per role that has any.
CREATE TABLE remora.role_limits (
	role_id regrole PRIMARY KEY,
	weight integer CHECK (weight BETWEEN 1 AND 1000),
	max_running integer CHECK (max_running >= 0),
	max_queued integer CHECK (max_queued >= 0),
	max_bytes_per_second bigint CHECK (max_bytes_per_second >= 0),
	updated_at timestamptz NOT NULL DEFAULT now()
);

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
	role_id			regrole PRIMARY KEY,
	submits			bigint NOT NULL DEFAULT 0
);
