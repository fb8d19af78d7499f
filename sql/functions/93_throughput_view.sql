-- The last hour, minute by minute, for the web client's charts (the
-- admin page): how many jobs were queued and running at the end of each
-- minute, how many ended in it (succeeded, failed, cancelled), and the
-- bytes per second moved in it.  Nothing keeps a history of progress, so
-- the figures are rebuilt from the jobs' own timestamps: a job is queued
-- from its submission to its first start (a retrying job counts as
-- running from then to its end), and an attempt's bytes are spread evenly
-- over its life (a committed attempt's result from its start to the
-- commit, a running attempt's progress from its start to now; an attempt
-- that failed leaves nothing to count).  Row-level security on the
-- tables leaves a user their own jobs, remora_admin everyone's.  Cheap on
-- a long history: only jobs unfinished (jobs_unfinished_idx) or finished in
-- the hour (jobs_finished_idx) are read.  Exports are not jobs here, as
-- in remora_stats; deleted jobs are (they ran).
CREATE OR REPLACE VIEW remora_throughput WITH (security_invoker = true) AS
WITH recent AS (
	SELECT j.job_id, j.state, j.submitted_at, j.started_at, j.finished_at,
		   j.current_attempt
	  FROM remora.jobs j
	 WHERE j.finished_at IS NULL
	   AND j.source_kind <> 'export'
	UNION
	SELECT j.job_id, j.state, j.submitted_at, j.started_at, j.finished_at,
		   j.current_attempt
	  FROM remora.jobs j
	 WHERE j.finished_at >= pg_catalog.now() - interval '1 hour'
	   AND j.source_kind <> 'export'),
spans AS (
	-- committed attempts: the result's bytes from the start to the commit
	SELECT a.started_at AS t0, r.committed_at AS t1, r.bytes::float8 AS bytes
	  FROM recent j
	  JOIN remora.results r ON r.job_id = j.job_id
	  JOIN remora.attempts a ON a.attempt_id = r.attempt_id
	UNION ALL
	-- running attempts: their progress so far
	SELECT p.started_at, pg_catalog.now(), p.bytes_done::float8
	  FROM recent j
	  JOIN remora_progress p ON p.job_id = j.job_id
	 WHERE j.state = 'running'),
-- the hour's minutes, and the one before it (what happened before the hour)
minutes AS (
	SELECT m
	  FROM pg_catalog.generate_series(
			pg_catalog.date_trunc('minute', pg_catalog.now()) - interval '60 minutes',
			pg_catalog.date_trunc('minute', pg_catalog.now()), interval '1 minute') m),
-- a job enters and leaves queued and running once each: the changes per
-- minute, summed in order, are the counts at each minute's end (one pass
-- over the jobs, however many minutes)
changes AS (
	SELECT greatest(pg_catalog.date_trunc('minute', e.t),
							   pg_catalog.date_trunc('minute', pg_catalog.now())
							   - interval '60 minutes') AS m,
		   sum(e.queued) AS queued, sum(e.running) AS running
	  FROM recent j,
		   LATERAL (VALUES (j.submitted_at, 1, 0),
						   (coalesce(j.started_at, j.finished_at), -1, 0),
						   (j.started_at, 0, 1),
						   (CASE WHEN j.started_at IS NOT NULL THEN j.finished_at END, 0, -1))
			   e(t, queued, running)
	 WHERE e.t IS NOT NULL
	 GROUP BY 1),
ended AS (
	SELECT pg_catalog.date_trunc('minute', j.finished_at) AS m,
		   count(*) FILTER (WHERE j.state = 'succeeded') AS succeeded,
		   count(*) FILTER (WHERE j.state = 'failed') AS failed,
		   count(*) FILTER (WHERE j.state = 'cancelled') AS cancelled
	  FROM recent j
	 WHERE j.finished_at IS NOT NULL
	 GROUP BY 1),
counted AS (
	SELECT m.m,
		   sum(coalesce(c.queued, 0)) OVER (ORDER BY m.m) AS queued,
		   sum(coalesce(c.running, 0)) OVER (ORDER BY m.m) AS running
	  FROM minutes m LEFT JOIN changes c ON c.m = m.m)
SELECT c.m AS minute,
	   c.queued::bigint AS queued,
	   c.running::bigint AS running,
	   coalesce(e.succeeded, 0) AS succeeded,
	   coalesce(e.failed, 0) AS failed,
	   coalesce(e.cancelled, 0) AS cancelled,
	   coalesce((SELECT sum(s.bytes
					* extract(epoch FROM least(s.t1, c.m + interval '1 minute')
											- greatest(s.t0, c.m))
					/ greatest(extract(epoch FROM s.t1 - s.t0), 0.001))
			   FROM spans s
			  WHERE s.t0 < c.m + interval '1 minute' AND s.t1 > c.m), 0)::float8 / 60
		   AS bytes_per_second
  FROM counted c
  LEFT JOIN ended e ON e.m = c.m
 WHERE c.m > pg_catalog.date_trunc('minute', pg_catalog.now()) - interval '60 minutes';

GRANT SELECT ON remora_throughput TO remora_user;
REVOKE ALL ON remora_throughput FROM PUBLIC;
