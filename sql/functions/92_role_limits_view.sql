-- Limits per role, as they apply now, beside what each role uses: every
-- role that has limits of its own or unfinished jobs, and the reader.
-- Row-level security on remora.role_limits and remora.jobs leaves a user
-- their own row; remora_admin sees every role.  A limit the role has not
-- set is the default (remora.default_role_*); 0 is no limit.  queued
-- counts the jobs and exports waiting to run (queued, or retrying after a
-- failed attempt), the ones max_queued limits; bytes_per_second is the
-- current rate of the role's running attempts, as remora_progress shows
-- them.  A role dropped since is not shown.
CREATE OR REPLACE VIEW remora_role_limits WITH (security_invoker = true) AS
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
