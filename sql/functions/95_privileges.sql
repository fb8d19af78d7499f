/* ------------------------------------------------------------------------
 * Privileges
 * ------------------------------------------------------------------------ */

REVOKE ALL ON ALL FUNCTIONS IN SCHEMA remora FROM PUBLIC;
REVOKE ALL ON FUNCTION remora_submit(text, text, text, jsonb, text),
	remora_cancel(bigint), remora_delete(bigint, boolean), remora_retry(bigint),
	remora_result(bigint), remora_presign(bigint, text, interval) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora_submit(text, text, text, jsonb, text),
	remora_cancel(bigint), remora_delete(bigint, boolean), remora_retry(bigint),
	remora_result(bigint), remora_presign(bigint, text, interval) TO remora_user;

-- remora_worker holds EXECUTE on the worker's functions and no privilege on
-- any table, sequence or view: every interaction of a worker with the
-- database is a call of one of them (test/regress/sql/worker_privileges.sql).
GRANT EXECUTE ON FUNCTION remora.claim(uuid, integer),
	remora.renew(uuid, bigint), remora.checkpoint(uuid, bigint, jsonb),
	remora.commit(uuid, bigint, jsonb), remora.yield(uuid, bigint),
	remora.commit_many(uuid[], bigint[], jsonb[]),
	remora.fail(uuid, bigint, jsonb, boolean),
	remora.export_members(uuid, bigint, text, integer),
	remora.reconcile(), remora.staging_to_clean(integer),
	remora.staging_cleaned(uuid, boolean),
	remora.job_objects_deleted(bigint, boolean) TO remora_worker;
GRANT EXECUTE ON FUNCTION remora.worker_settings(),
	remora._blocked_origins() TO remora_worker;
GRANT EXECUTE ON FUNCTION
	remora.start_incarnation(uuid, integer, text, text, text, text),
	remora.heartbeat(uuid, text, timestamptz), remora.end_incarnation(uuid),
	remora.earlier_members(bigint, uuid, text[]),
	remora.source_endpoint_settings(text) TO remora_worker;
GRANT EXECUTE ON FUNCTION remora._progress() TO remora_user;
REVOKE ALL ON FUNCTION remora_export(bigint, text, text, jsonb, text),
	remora_export_resolve(bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora_export(bigint, text, text, jsonb, text),
	remora_export_resolve(bigint, text) TO remora_user;
GRANT SELECT ON remora_exports, remora_export_attempts TO remora_user;
REVOKE ALL ON remora_exports, remora_export_attempts FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora._checkpoint_stats(), remora.prune(integer),
	remora.grant_target(name, text, text), remora.revoke_target(name, text, text),
	remora.register_source_endpoint(text, text, text, boolean, text, text,
		text, text, text, text),
	remora.drop_source_endpoint(text), remora._source_endpoints()
	TO remora_admin;
GRANT EXECUTE ON FUNCTION remora.set_source_endpoint_ca(text, text) TO remora_admin;
GRANT EXECUTE ON FUNCTION remora.grant_source(name, text, text, text),
	remora.revoke_source(name, text, text, text) TO remora_admin;
GRANT EXECUTE ON FUNCTION remora.reconcile() TO remora_admin;
GRANT EXECUTE ON FUNCTION remora.sweep_orphans(text, interval, boolean)
	TO remora_admin;

GRANT SELECT ON remora_jobs, remora_attempts, remora_progress, remora_stats
	TO remora_user;
GRANT SELECT ON remora_workers, remora_checkpoint_stats, remora_target_grants,
	remora_source_endpoints TO remora_admin;
REVOKE ALL ON remora_jobs, remora_attempts, remora_progress, remora_stats,
	remora_workers, remora_checkpoint_stats, remora_target_grants,
	remora_source_endpoints FROM PUBLIC;
GRANT SELECT ON remora_source_grants TO remora_admin;
REVOKE ALL ON remora_source_grants FROM PUBLIC;
-- the tables remora_worker could read or write before 0.5.0: revoked in a
-- fresh install as by the update, so that both carry the same ACLs
REVOKE ALL ON remora.incarnations, remora.source_endpoints, remora.jobs,
	remora.attempts, remora.members FROM remora_worker;
