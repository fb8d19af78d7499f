-- ---------------------------------------------------------------------
-- remora_progress says the attempt's number and the job's state, and
-- remora_workers each incarnation's state (running, silent, stopped), as
-- every view names its job, attempt and state.
-- ---------------------------------------------------------------------

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
			ELSE 'running' END AS state
  FROM remora.incarnations i;
