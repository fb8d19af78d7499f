-- remora 0.2.0 -> 0.3.0: tenant isolation (source grants, exact commits,
-- locks no user can take) and hardening of the worker protocol.  Each
-- section below repeats what sql/remora.sql now says; test/e2e/upgrade.sh
-- checks that an upgraded catalog equals a fresh install.

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION remora UPDATE TO '0.3.0'" to load this file. \quit

/* ------------------------------------------------------------------------
 * Issue 9, item 3: what a dedicated worker role (remora.worker_role, a
 * LOGIN role that is a member of remora_worker) needs besides the protocol
 * functions: the worker records its incarnation and heartbeat, reads the
 * registered endpoint its job names, and looks up members of a job's
 * earlier attempts.  remora_worker can claim any job already; this adds
 * no job it could not see.
 * ------------------------------------------------------------------------ */
GRANT SELECT (incarnation), INSERT (incarnation, pid, kind),
	UPDATE (heartbeat_at, stopped_at) ON remora.incarnations TO remora_worker;
GRANT SELECT ON remora.source_endpoints, remora.jobs, remora.attempts,
	remora.members TO remora_worker;
CREATE POLICY source_endpoints_worker ON remora.source_endpoints FOR SELECT
	TO remora_worker USING (true);
CREATE POLICY jobs_worker ON remora.jobs FOR SELECT
	TO remora_worker USING (true);
CREATE POLICY attempts_worker ON remora.attempts FOR SELECT
	TO remora_worker USING (true);
CREATE POLICY members_worker ON remora.members FOR SELECT
	TO remora_worker USING (true);
