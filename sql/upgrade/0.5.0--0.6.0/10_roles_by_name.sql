-- Roles by name in pg_dump (doc/operator-guide.md, "Backup and restore"):
-- every column that records a role becomes regrole, which pg_dump writes
-- as the role's name, where an oid column was written as a number that
-- another cluster may give to nobody or to another role.  The same four
-- bytes: no table is rewritten (the small partial index of the
-- unfinished jobs is rebuilt).  The views, the policies and the queue's
-- trigger that read these columns are dropped first and made again (the
-- views and the trigger by sql/functions/).  The job id's sequence is
-- dumped too, so that ids continue after a restore.
DROP VIEW remora_jobs, remora_exports, remora_target_grants,
	remora_source_grants, remora_role_limits;
DROP TRIGGER queue_owner ON remora.queue;
DROP POLICY jobs_visible ON remora.jobs;
DROP POLICY role_limits_visible ON remora.role_limits;

ALTER TABLE remora.jobs ALTER COLUMN owner TYPE regrole;
ALTER TABLE remora.target_grants ALTER COLUMN grantee TYPE regrole,
	ALTER COLUMN granted_by TYPE regrole;
ALTER TABLE remora.source_grants ALTER COLUMN grantee TYPE regrole,
	ALTER COLUMN granted_by TYPE regrole;
ALTER TABLE remora.export_keys ALTER COLUMN owner TYPE regrole;
ALTER TABLE remora.queue ALTER COLUMN owner TYPE regrole;
ALTER TABLE remora.role_limits ALTER COLUMN role_id TYPE regrole;
ALTER TABLE remora.submit_gates ALTER COLUMN role_id TYPE regrole;
ALTER TABLE remora.webhook_secrets ALTER COLUMN owner TYPE regrole;

CREATE POLICY jobs_visible ON remora.jobs FOR SELECT
	USING (owner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
		   OR pg_catalog.pg_has_role(current_user, 'remora_admin', 'USAGE'));
CREATE POLICY role_limits_visible ON remora.role_limits FOR SELECT
	USING (role_id = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = current_user)
		   OR pg_catalog.pg_has_role(current_user, 'remora_admin', 'USAGE'));

SELECT pg_catalog.pg_extension_config_dump('remora.jobs_job_id_seq', '');
