/* ------------------------------------------------------------------------
 * Metrics (doc/operator-guide.md, "Metrics"): the Prometheus text exposition
 * of GET /metrics
 * ------------------------------------------------------------------------ */

-- A label value as the text format writes it between double quotes:
-- backslash, double quote and line feed escaped (the format's only
-- escapes; anything else, a carriage return included, may stand as it is).
-- Worker labels and error classes come from workers: never trusted.
CREATE OR REPLACE FUNCTION remora._metric_label(v text) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
	SELECT pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
		coalesce(v, ''), E'\\', E'\\\\'), '"', E'\\"'), E'\n', E'\\n')
$$;

-- The HELP and TYPE lines of one metric family, then its samples (lines
-- each ending in a line feed; none: the family is announced all the same).
CREATE OR REPLACE FUNCTION remora._metric_family(name text, kind text, help text,
									  samples text) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
	SELECT pg_catalog.format(E'# HELP %s %s\n# TYPE %s %s\n', name, help, name, kind)
		   OPERATOR(pg_catalog.||) coalesce(samples, '')
$$;

-- Everything GET /metrics shows, in the Prometheus text format (version
-- 0.0.4), for remora_admin and the metrics listener (remora.metrics_listen).
-- Counters are counts over the tables (attempts, results): they go down
-- only when remora.retention prunes history, which Prometheus takes for a
-- counter reset.  Label values are escaped by remora._metric_label.
CREATE OR REPLACE FUNCTION remora.metrics_text() RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	buckets CONSTANT float8[] := ARRAY[0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
									   300, 900, 3600];
	states CONSTANT text[] := ARRAY['queued', 'running', 'retrying', 'succeeded',
									'failed', 'cancelled', 'outcome_unknown'];
	body text;
	s text;
BEGIN
	-- jobs and exports by state: every state, 0 included
	SELECT string_agg(format(E'remora_jobs{state="%s"} %s\n', st,
							 (SELECT count(*) FROM remora.jobs j
							   WHERE j.state = st AND j.deleted_at IS NULL
								 AND j.source_kind <> 'export')), '' ORDER BY o)
	  INTO s FROM unnest(states) WITH ORDINALITY AS u(st, o);
	body := remora._metric_family('remora_jobs', 'gauge',
		'Jobs by state (exports not counted).', s);
	SELECT string_agg(format(E'remora_exports{state="%s"} %s\n', st,
							 (SELECT count(*) FROM remora.jobs j
							   WHERE j.state = st AND j.deleted_at IS NULL
								 AND j.source_kind = 'export')), '' ORDER BY o)
	  INTO s FROM unnest(states) WITH ORDINALITY AS u(st, o);
	body := body || remora._metric_family('remora_exports', 'gauge',
		'Exports by state.', s);

	-- attempts (of jobs and exports) and their failures by class
	SELECT format(E'remora_attempts_total %s\n', count(*)) INTO s
	  FROM remora.attempts;
	body := body || remora._metric_family('remora_attempts_total', 'counter',
		'Attempts started, of jobs and exports.', s);
	SELECT string_agg(format(E'remora_attempt_failures_total{class="%s"} %s\n',
							 remora._metric_label(f.class), f.n), '' ORDER BY f.class)
	  INTO s
	  FROM (SELECT coalesce(a.error ->> 'class', 'unknown') AS class, count(*) AS n
			  FROM remora.attempts a
			 WHERE a.error IS NOT NULL
			 GROUP BY 1) f;
	body := body || remora._metric_family('remora_attempt_failures_total',
		'counter', 'Attempts that ended with an error, by error class.', s);

	-- bytes
	SELECT format(E'remora_committed_bytes_total %s\n', coalesce(sum(r.bytes), 0))
	  INTO s FROM remora.results r;
	body := body || remora._metric_family('remora_committed_bytes_total',
		'counter', 'Bytes of the committed results of jobs.', s);
	SELECT format(E'remora_exported_bytes_total %s\n', coalesce(sum(e.bytes), 0))
	  INTO s
	  FROM remora.exports e JOIN remora.jobs j ON j.job_id = e.export_id
	 WHERE j.state = 'succeeded';
	body := body || remora._metric_family('remora_exported_bytes_total',
		'counter', 'Bytes of the results that succeeded exports published.', s);
	SELECT format(E'remora_in_flight_bytes %s\n', coalesce(sum(p.bytes_done), 0))
	  INTO s FROM remora._progress() p;
	body := body || remora._metric_family('remora_in_flight_bytes', 'gauge',
		'Bytes moved so far by the attempts running now.', s);

	-- leases: in use and the limit
	SELECT format(E'remora_leases_active %s\n', count(*)) INTO s
	  FROM remora.leases;
	body := body || remora._metric_family('remora_leases_active', 'gauge',
		'Leases held now (running attempts).', s);
	body := body || remora._metric_family('remora_leases_limit', 'gauge',
		'The limit of leases held at once (remora.max_active_leases).',
		format(E'remora_leases_limit %s\n',
			   current_setting('remora.max_active_leases')::integer));

	-- claim latency: from a job's submission to its first attempt's claim
	-- (later attempts wait out a backoff by design, and the time they
	-- became claimable is not kept)
	WITH w AS (
		SELECT extract(epoch FROM a.started_at - j.submitted_at)::float8 AS secs
		  FROM remora.attempts a JOIN remora.jobs j ON j.job_id = a.job_id
		 WHERE a.attempt_no = 1
	)
	SELECT (SELECT string_agg(format(E'remora_claim_wait_seconds_bucket{le="%s"} %s\n',
									 b, (SELECT count(*) FROM w WHERE w.secs <= b)),
							  '' ORDER BY b)
			  FROM unnest(buckets) AS b)
		   || format(E'remora_claim_wait_seconds_bucket{le="+Inf"} %s\n', count(*))
		   || format(E'remora_claim_wait_seconds_sum %s\n', coalesce(sum(greatest(secs, 0)), 0))
		   || format(E'remora_claim_wait_seconds_count %s\n', count(*))
	  INTO s FROM w;
	body := body || remora._metric_family('remora_claim_wait_seconds',
		'histogram',
		'Time from a job''s submission to the claim of its first attempt.', s);

	-- workers running now (not stopped), and what each has done
	SELECT string_agg(format(E'remora_workers{kind="%s"} %s\n',
							 remora._metric_label(k.kind), k.n), '' ORDER BY k.kind)
	  INTO s
	  FROM (SELECT i.kind, count(*) AS n FROM remora.incarnations i
			 WHERE i.stopped_at IS NULL GROUP BY 1) k;
	body := body || remora._metric_family('remora_workers', 'gauge',
		'Worker processes running now, by kind.', s);
	SELECT remora._metric_family('remora_worker_committed_bytes_total',
			   'counter', 'Bytes of the results committed by each running worker.',
			   string_agg(format(E'remora_worker_committed_bytes_total{%s} %s\n',
								 m.labels, m.bytes), '' ORDER BY m.labels))
		|| remora._metric_family('remora_worker_attempts_total', 'counter',
			   'Attempts started by each running worker.',
			   string_agg(format(E'remora_worker_attempts_total{%s} %s\n',
								 m.labels, m.attempts), '' ORDER BY m.labels))
		|| remora._metric_family('remora_worker_leases_active', 'gauge',
			   'Leases each running worker holds now.',
			   string_agg(format(E'remora_worker_leases_active{%s} %s\n',
								 m.labels, m.leases), '' ORDER BY m.labels))
	  INTO s
	  FROM (SELECT format('worker="%s",incarnation="%s",kind="%s"',
						  remora._metric_label(coalesce(i.label, i.incarnation::text)),
						  i.incarnation, remora._metric_label(i.kind)) AS labels,
				   (SELECT coalesce(sum(r.bytes), 0) FROM remora.results r
					  JOIN remora.attempts a ON a.attempt_id = r.attempt_id
					 WHERE a.incarnation = i.incarnation) AS bytes,
				   (SELECT count(*) FROM remora.attempts a
					 WHERE a.incarnation = i.incarnation) AS attempts,
				   (SELECT count(*) FROM remora.leases l
					 WHERE l.incarnation = i.incarnation) AS leases
			  FROM remora.incarnations i
			 WHERE i.stopped_at IS NULL) m;
	body := body || s;

	-- the checkpoint writer, since the server started
	SELECT remora._metric_family('remora_checkpoint_transactions_total', 'counter',
			   'Transactions of the checkpoint writer.',
			   format(E'remora_checkpoint_transactions_total %s\n', c.transactions))
		|| remora._metric_family('remora_checkpoints_total', 'counter',
			   'Checkpoints written.',
			   format(E'remora_checkpoints_total %s\n', c.checkpoints))
		|| remora._metric_family('remora_checkpoint_refusals_total', 'counter',
			   'Checkpoints refused (the attempt was no longer current).',
			   format(E'remora_checkpoint_refusals_total %s\n', c.refusals))
		|| remora._metric_family('remora_checkpoint_commit_seconds_total',
			   'counter', 'Time spent committing checkpoint transactions.',
			   format(E'remora_checkpoint_commit_seconds_total %s\n',
					  c.commit_ms_total / 1000))
		|| remora._metric_family('remora_checkpoint_commit_max_seconds', 'gauge',
			   'The longest commit of a checkpoint transaction.',
			   format(E'remora_checkpoint_commit_max_seconds %s\n',
					  c.commit_ms_max / 1000))
		|| remora._metric_family('remora_checkpoint_max_batch', 'gauge',
			   'The most checkpoints written by one transaction.',
			   format(E'remora_checkpoint_max_batch %s\n', c.max_batch))
	  INTO s FROM remora._checkpoint_stats() c;
	RETURN body || s;
END
$$;

REVOKE ALL ON FUNCTION remora._metric_label(text),
	remora._metric_family(text, text, text, text), remora.metrics_text()
	FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.metrics_text() TO remora_admin;
