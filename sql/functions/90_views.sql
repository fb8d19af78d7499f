/* ------------------------------------------------------------------------
 * Views (security_invoker: row-level security applies to the reader)
 * ------------------------------------------------------------------------ */

CREATE OR REPLACE VIEW remora_jobs WITH (security_invoker = true) AS
SELECT j.job_id,
	   pg_catalog.pg_get_userbyid(j.owner) AS owner,
	   j.source,
	   j.source_kind,
	   j.bucket,
	   j.prefix,
	   j.label,
	   j.state,
	   j.priority,
	   j.attempts_used,
	   j.max_attempts,
	   j.current_attempt AS current_attempt_id,
	   j.fencing_token,
	   j.cancel_requested_at IS NOT NULL AS cancel_requested,
	   j.idempotency_key,
	   j.submitted_at,
	   j.started_at,
	   j.finished_at,
	   CASE WHEN j.state = 'retrying' THEN j.not_before END AS next_attempt_at,
	   -- validated durable progress plus the current attempt's live progress
	   coalesce(greatest(p.bytes_done, cp.bytes_done), cp.bytes_done,
				CASE WHEN j.state = 'succeeded' THEN r.bytes END) AS bytes_done,
	   cp.bytes_done AS bytes_validated,
	   coalesce(p.bytes_total, cp.bytes_total,
				CASE WHEN j.state = 'succeeded' THEN r.bytes END) AS bytes_total,
	   p.rate AS bytes_per_second,
	   -- a later attempt that could not (or was not offered to) resume
	   (ca.attempt_no > 1 AND (ca.resumed_from IS NULL OR ca.restart_reason IS NOT NULL))
		   AS restarted_from_zero,
	   ca.restart_reason,
	   j.last_error,
	   (SELECT jsonb_agg(a.error ORDER BY a.attempt_no)
		  FROM remora.attempts a
		 WHERE a.job_id = j.job_id AND a.error IS NOT NULL) AS error_history,
	   r.manifest_key AS result_manifest_key,
	   r.manifest_etag AS result_manifest_etag,
	   r.manifest_sha256 AS result_manifest_sha256,
	   r.members AS result_members,
	   r.bytes AS result_bytes,
	   r.committed_at,
	   j.hard_delete_requested_at IS NOT NULL AS hard_delete_requested,
	   -- many-member sources: members recorded by the current attempt
	   CASE WHEN j.state = 'succeeded' THEN r.members
			WHEN j.source_kind <> 'http' THEN
				(SELECT count(*) FROM remora.members m
				  WHERE m.attempt_id = j.current_attempt) END AS members_done,
	   CASE WHEN j.state = 'succeeded' THEN r.members
			WHEN j.source_kind <> 'http' THEN
				(cp.state ->> 'members_total')::bigint END AS members_total,
	   -- bytes copied from an earlier job's result (options.reuse_from)
	   -- instead of downloaded, counted when the result is committed (a
	   -- column of its own: a subquery here made every page of the list of
	   -- jobs cost more than ten times as much)
	   coalesce(r.bytes_reused, 0) AS bytes_reused,
	   -- options.dry_run: its result is a plan, with no objects
	   coalesce(j.spec #> '{options,dry_run}' = 'true', false) AS dry_run
  FROM remora.jobs j
  LEFT JOIN remora.results r ON r.job_id = j.job_id
  LEFT JOIN remora.checkpoints cp ON cp.job_id = j.job_id
  LEFT JOIN remora.attempts ca ON ca.attempt_id = j.current_attempt
  LEFT JOIN remora._progress() p
		 ON p.attempt_id = j.current_attempt AND p.fencing_token = j.fencing_token
			AND j.state = 'running'
 WHERE j.deleted_at IS NULL AND j.source_kind <> 'export';

CREATE OR REPLACE VIEW remora_progress WITH (security_invoker = true) AS
SELECT p.job_id,
	   p.attempt_id,
	   p.fencing_token,
	   p.bytes_done,
	   p.bytes_total,
	   round(100.0 * p.bytes_done / nullif(p.bytes_total, 0), 1) AS percent,
	   p.rate AS bytes_per_second,
	   CASE WHEN p.rate > 0 AND p.bytes_total IS NOT NULL
			THEN make_interval(secs => (p.bytes_total - p.bytes_done) / p.rate) END
		   AS eta,
	   p.restarted AS restarted_from_zero,
	   p.started_at,
	   p.updated_at,
	   p.worker_pid,
	   a.attempt_no,
	   j.state
  FROM remora._progress() p
  JOIN remora.jobs j ON j.job_id = p.job_id AND j.current_attempt = p.attempt_id
  LEFT JOIN remora.attempts a ON a.attempt_id = p.attempt_id;

CREATE OR REPLACE VIEW remora_attempts WITH (security_invoker = true) AS
SELECT a.attempt_id,
	   a.job_id,
	   a.attempt_no,
	   a.fencing_token,
	   a.incarnation,
	   a.state,
	   a.started_at,
	   a.finished_at,
	   l.expires_at AS lease_expires_at,
	   l.renewed_at AS lease_renewed_at,
	   a.resumed_from,
	   a.restart_reason,
	   a.cleaned_at AS staging_cleaned_at,
	   a.error,
	   a.definition_hash,
	   a.request_hash,
	   a.access_digest,
	   a.provenance
  FROM remora.attempts a
  LEFT JOIN remora.leases l ON l.attempt_id = a.attempt_id
 WHERE NOT EXISTS (SELECT 1 FROM remora.exports e WHERE e.export_id = a.job_id);

CREATE OR REPLACE VIEW remora_workers WITH (security_invoker = true) AS
SELECT i.incarnation,
	   i.pid,
	   i.kind,
	   i.started_at,
	   i.heartbeat_at,
	   i.stopped_at,
	   (SELECT count(*) FROM remora.leases l WHERE l.incarnation = i.incarnation)
		   AS active_leases,
	   i.host,
	   i.label,
	   i.version,
	   -- silent: not stopped, but its heartbeat is older than a lease
	   -- (killed, paused or cut off; its leases lapse)
	   CASE WHEN i.stopped_at IS NOT NULL THEN 'stopped'
			WHEN i.heartbeat_at < now() - current_setting('remora.lease_duration', true)::interval
			THEN 'silent'
			ELSE 'running' END AS state,
	   -- where its target credentials came from, and when they expire
	   i.credentials,
	   i.credentials_expire_at
  FROM remora.incarnations i;

CREATE OR REPLACE VIEW remora_stats WITH (security_invoker = true) AS
SELECT count(*) FILTER (WHERE state = 'queued') AS queued,
	   count(*) FILTER (WHERE state = 'running') AS running,
	   count(*) FILTER (WHERE state = 'retrying') AS retrying,
	   count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
	   count(*) FILTER (WHERE state = 'failed') AS failed,
	   count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
	   (SELECT coalesce(sum(r.bytes), 0) FROM remora.results r) AS bytes_committed,
	   (SELECT coalesce(sum(p.bytes_done), 0) FROM remora_progress p) AS bytes_in_flight,
	   (SELECT coalesce(sum(p.bytes_per_second), 0) FROM remora_progress p)
		   AS bytes_per_second,
	   (SELECT coalesce(jsonb_object_agg(f.class, f.n), '{}')
		  FROM (SELECT a.error ->> 'class' AS class, count(*) AS n
				  FROM remora.attempts a
				 WHERE a.error IS NOT NULL
				   AND NOT EXISTS (SELECT 1 FROM remora.exports e
									WHERE e.export_id = a.job_id)
				 GROUP BY 1) f) AS failures_by_class,
	   (SELECT count(*) FROM remora.leases) AS active_leases,
	   current_setting('remora.max_active_leases')::integer AS max_active_leases
  FROM remora.jobs
 WHERE deleted_at IS NULL AND source_kind <> 'export';

CREATE OR REPLACE VIEW remora_exports WITH (security_invoker = true) AS
SELECT j.job_id AS export_id,
	   e.job_id,
	   pg_catalog.pg_get_userbyid(j.owner) AS owner,
	   j.bucket,
	   j.prefix,
	   j.state,
	   e.output_digest,
	   e.publication_digest,
	   e.source_digest,
	   e.members,
	   e.bytes,
	   (SELECT count(*) FROM remora.export_refs r WHERE r.export_id = e.export_id) AS members_done,
	   (SELECT jsonb_agg(r.ref ORDER BY r.path) FROM remora.export_refs r
		 WHERE r.export_id = e.export_id) AS "references",
	   e.if_exists,
	   e.mode = 'verify' AND j.state IN ('queued', 'running') AS verifying,
	   j.label,
	   j.idempotency_key,
	   j.attempts_used,
	   j.max_attempts,
	   j.current_attempt AS current_attempt_id,
	   j.fencing_token,
	   j.cancel_requested_at IS NOT NULL AS cancel_requested,
	   j.last_error,
	   e.decisions,
	   j.submitted_at AS created_at,
	   j.started_at,
	   j.finished_at
  FROM remora.jobs j
  JOIN remora.exports e ON e.export_id = j.job_id
 WHERE j.deleted_at IS NULL;

CREATE OR REPLACE VIEW remora_export_attempts WITH (security_invoker = true) AS
SELECT a.attempt_id,
	   a.job_id AS export_id,
	   a.attempt_no,
	   a.fencing_token,
	   a.incarnation,
	   a.state,
	   a.started_at,
	   a.finished_at,
	   l.expires_at AS lease_expires_at,
	   a.error,
	   a.export_ledger AS ledger,
	   a.definition_hash,
	   a.request_hash,
	   a.access_digest,
	   a.provenance
  FROM remora.attempts a
  JOIN remora.exports e ON e.export_id = a.job_id
  LEFT JOIN remora.leases l ON l.attempt_id = a.attempt_id;

CREATE OR REPLACE VIEW remora_target_grants WITH (security_invoker = true) AS
SELECT pg_catalog.pg_get_userbyid(g.grantee) AS role,
	   g.bucket,
	   g.prefix_pattern,
	   pg_catalog.pg_get_userbyid(g.granted_by) AS granted_by,
	   g.granted_at
  FROM remora.target_grants g;

CREATE OR REPLACE VIEW remora_source_grants WITH (security_invoker = true) AS
SELECT pg_catalog.pg_get_userbyid(g.grantee) AS role,
	   g.bucket,
	   g.prefix_pattern,
	   CASE WHEN g.hub THEN 'hf' ELSE g.endpoint END AS endpoint,
	   pg_catalog.pg_get_userbyid(g.granted_by) AS granted_by,
	   g.granted_at
  FROM remora.source_grants g;

CREATE OR REPLACE VIEW remora_source_endpoints WITH (security_invoker = true) AS
SELECT * FROM remora._source_endpoints();

CREATE OR REPLACE VIEW remora_checkpoint_stats WITH (security_invoker = true) AS
SELECT s.transactions,
	   s.checkpoints,
	   round(s.checkpoints::numeric / nullif(s.transactions, 0), 2) AS mean_batch,
	   s.max_batch,
	   round((s.commit_ms_total / nullif(s.transactions, 0))::numeric, 3) AS mean_commit_ms,
	   round(s.commit_ms_max::numeric, 3) AS max_commit_ms,
	   s.refusals
  FROM remora._checkpoint_stats() s;

