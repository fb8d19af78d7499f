-- Limits per role (doc/operator-guide.md, "Limits per role"): a NULL column
-- takes the default from the setting remora.default_role_<column>.  One row
-- per role that has any.
CREATE TABLE remora.role_limits (
	role_id oid PRIMARY KEY,
	weight integer CHECK (weight BETWEEN 1 AND 1000),
	max_running integer CHECK (max_running >= 0),
	max_queued integer CHECK (max_queued >= 0),
	max_bytes_per_second bigint CHECK (max_bytes_per_second >= 0),
	updated_at timestamptz NOT NULL DEFAULT now()
);
