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

-- The bounds of the claim-wait histogram's buckets (seconds).
CREATE OR REPLACE FUNCTION remora._claim_wait_buckets() RETURNS float8[]
LANGUAGE sql IMMUTABLE
AS $$
	SELECT ARRAY[0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600]::float8[]
$$;

-- The bucket a claim wait falls in: the least bound it does not exceed.
CREATE OR REPLACE FUNCTION remora._claim_wait_bucket(secs float8) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
	SELECT coalesce((SELECT pg_catalog.min(b) FROM pg_catalog.unnest(remora._claim_wait_buckets()) b
					  WHERE secs OPERATOR(pg_catalog.<=) b)::text, '+Inf')
$$;

-- What a statement's new attempts add to the counts: attempts, those of
-- each worker, failures by class, and the wait of each first attempt from
-- its job's submission to its claim (later attempts wait out a backoff by
-- design).
CREATE OR REPLACE FUNCTION remora._count_attempts() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	INSERT INTO remora.metric_deltas (metric, label, n)
	SELECT 'attempts', '', pg_catalog.count(*) FROM added
	UNION ALL
	SELECT 'worker_attempts', a.incarnation::text, pg_catalog.count(*)
	  FROM added a GROUP BY a.incarnation
	UNION ALL
	SELECT 'failures', coalesce(a.error OPERATOR(pg_catalog.->>) 'class', 'unknown'), pg_catalog.count(*)
	  FROM added a WHERE a.error IS NOT NULL GROUP BY 2
	UNION ALL
	SELECT m.metric, m.label, pg_catalog.sum(m.n)
	  FROM (SELECT w.secs, u.metric, u.label, u.n
			  FROM (SELECT pg_catalog.date_part('epoch', a.started_at OPERATOR(pg_catalog.-)
												  j.submitted_at) AS secs
					  FROM added a JOIN remora.jobs j ON j.job_id OPERATOR(pg_catalog.=) a.job_id
					 WHERE a.attempt_no OPERATOR(pg_catalog.=) 1) w
			 CROSS JOIN LATERAL (VALUES ('claim_wait', remora._claim_wait_bucket(w.secs), 1::numeric),
										('claim_wait_sum', '', greatest(w.secs, 0)::numeric))
					 AS u(metric, label, n)) m
	 GROUP BY m.metric, m.label;
	RETURN NULL;
END
$$;

-- An attempt that ends with an error: a failure of its class (an error
-- that changes moves it to its new class).
CREATE OR REPLACE FUNCTION remora._count_failure() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	INSERT INTO remora.metric_deltas (metric, label, n)
	SELECT 'failures', coalesce(f.error OPERATOR(pg_catalog.->>) 'class', 'unknown'), f.n
	  FROM (VALUES (OLD.error, -1), (NEW.error, 1)) f(error, n)
	 WHERE f.error IS NOT NULL;
	RETURN NULL;
END
$$;

-- What a statement's committed results add: their bytes, in all and by
-- the worker whose attempt committed them.
CREATE OR REPLACE FUNCTION remora._count_results() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	INSERT INTO remora.metric_deltas (metric, label, n)
	SELECT 'committed_bytes', '', coalesce(pg_catalog.sum(r.bytes), 0) FROM added r
	UNION ALL
	SELECT 'worker_bytes', a.incarnation::text, pg_catalog.sum(r.bytes)
	  FROM added r JOIN remora.attempts a ON a.attempt_id OPERATOR(pg_catalog.=) r.attempt_id
	 GROUP BY a.incarnation;
	RETURN NULL;
END
$$;

-- A job or export that ended (finished_at set), while it is not deleted,
-- counts under its state; the unfinished ones are counted at each scrape
-- (jobs_unfinished_idx).  An export that succeeds adds its bytes.
CREATE OR REPLACE FUNCTION remora._count_jobs() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	IF TG_OP OPERATOR(pg_catalog.<>) 'INSERT' AND OLD.finished_at IS NOT NULL
		AND OLD.deleted_at IS NULL THEN
		INSERT INTO remora.metric_deltas (metric, label, n)
		VALUES (CASE WHEN OLD.source_kind OPERATOR(pg_catalog.=) 'export' THEN 'exports'
					 ELSE 'jobs' END, OLD.state, -1);
	END IF;
	IF TG_OP OPERATOR(pg_catalog.<>) 'DELETE' AND NEW.finished_at IS NOT NULL
		AND NEW.deleted_at IS NULL THEN
		INSERT INTO remora.metric_deltas (metric, label, n)
		VALUES (CASE WHEN NEW.source_kind OPERATOR(pg_catalog.=) 'export' THEN 'exports'
					 ELSE 'jobs' END, NEW.state, 1);
	END IF;
	IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' AND NEW.source_kind OPERATOR(pg_catalog.=) 'export'
		AND NEW.state OPERATOR(pg_catalog.=) 'succeeded'
		AND OLD.state OPERATOR(pg_catalog.<>) 'succeeded' THEN
		INSERT INTO remora.metric_deltas (metric, label, n)
		SELECT 'exported_bytes', '', e.bytes FROM remora.exports e
		 WHERE e.export_id OPERATOR(pg_catalog.=) NEW.job_id AND e.bytes IS NOT NULL;
	END IF;
	RETURN NULL;
END
$$;

CREATE OR REPLACE TRIGGER attempts_counted AFTER INSERT ON remora.attempts
	REFERENCING NEW TABLE AS added
	FOR EACH STATEMENT EXECUTE FUNCTION remora._count_attempts();
CREATE OR REPLACE TRIGGER attempts_failed_counted AFTER UPDATE OF error ON remora.attempts
	FOR EACH ROW WHEN (OLD.error IS DISTINCT FROM NEW.error)
	EXECUTE FUNCTION remora._count_failure();
CREATE OR REPLACE TRIGGER results_counted AFTER INSERT ON remora.results
	REFERENCING NEW TABLE AS added
	FOR EACH STATEMENT EXECUTE FUNCTION remora._count_results();
CREATE OR REPLACE TRIGGER jobs_counted AFTER INSERT ON remora.jobs
	FOR EACH ROW WHEN (NEW.finished_at IS NOT NULL AND NEW.deleted_at IS NULL)
	EXECUTE FUNCTION remora._count_jobs();
CREATE OR REPLACE TRIGGER jobs_counted_change AFTER UPDATE OF state, finished_at, deleted_at
	ON remora.jobs
	FOR EACH ROW WHEN ((OLD.finished_at IS NOT NULL AND OLD.deleted_at IS NULL
						OR NEW.finished_at IS NOT NULL AND NEW.deleted_at IS NULL)
					   AND (OLD.state IS DISTINCT FROM NEW.state
							OR (OLD.finished_at IS NULL) <> (NEW.finished_at IS NULL)
							OR (OLD.deleted_at IS NULL) <> (NEW.deleted_at IS NULL)))
	EXECUTE FUNCTION remora._count_jobs();
CREATE OR REPLACE TRIGGER jobs_counted_delete AFTER DELETE ON remora.jobs
	FOR EACH ROW WHEN (OLD.finished_at IS NOT NULL AND OLD.deleted_at IS NULL)
	EXECUTE FUNCTION remora._count_jobs();

-- Fold the changes into the counts (remora.reconcile, every round).  One
-- folder at a time; a scrape reads on (it reads both tables in one
-- snapshot, and a fold moves rows from one to the other in one
-- transaction).  A stopped worker's counts go: only running ones are shown.
CREATE OR REPLACE FUNCTION remora._fold_metrics() RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
	LOCK TABLE remora.metric_counts IN SHARE ROW EXCLUSIVE MODE;
	WITH d AS (DELETE FROM remora.metric_deltas RETURNING metric, label, n)
	INSERT INTO remora.metric_counts AS c (metric, label, n)
	SELECT d.metric, d.label, pg_catalog.sum(d.n) FROM d GROUP BY d.metric, d.label
	ON CONFLICT (metric, label) DO UPDATE SET n = c.n OPERATOR(pg_catalog.+) EXCLUDED.n;
	DELETE FROM remora.metric_counts c
	 WHERE c.metric IN ('worker_attempts', 'worker_bytes')
	   AND NOT EXISTS (SELECT 1 FROM remora.incarnations i
					    WHERE i.incarnation::text OPERATOR(pg_catalog.=) c.label
						  AND i.stopped_at IS NULL);
END
$$;

-- Count again from the history there is: when the extension is installed
-- or updated, and after a TRUNCATE of the history.  Every change committed
-- before this statement's snapshot is in the tables it reads; those
-- committed after stay to be folded.
CREATE OR REPLACE FUNCTION remora._count_again() RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
	LOCK TABLE remora.metric_counts IN SHARE ROW EXCLUSIVE MODE;
	DELETE FROM remora.metric_counts;
	WITH gone AS (DELETE FROM remora.metric_deltas), first AS (
		SELECT pg_catalog.date_part('epoch', a.started_at OPERATOR(pg_catalog.-) j.submitted_at) AS secs
		  FROM remora.attempts a JOIN remora.jobs j ON j.job_id OPERATOR(pg_catalog.=) a.job_id
		 WHERE a.attempt_no OPERATOR(pg_catalog.=) 1)
	INSERT INTO remora.metric_counts (metric, label, n)
	SELECT CASE WHEN j.source_kind OPERATOR(pg_catalog.=) 'export' THEN 'exports' ELSE 'jobs' END,
		   j.state, pg_catalog.count(*)
	  FROM remora.jobs j WHERE j.finished_at IS NOT NULL AND j.deleted_at IS NULL GROUP BY 1, 2
	UNION ALL
	SELECT 'attempts', '', pg_catalog.count(*) FROM remora.attempts
	UNION ALL
	SELECT 'failures', coalesce(a.error OPERATOR(pg_catalog.->>) 'class', 'unknown'), pg_catalog.count(*)
	  FROM remora.attempts a WHERE a.error IS NOT NULL GROUP BY 2
	UNION ALL
	SELECT 'committed_bytes', '', coalesce(pg_catalog.sum(r.bytes), 0) FROM remora.results r
	UNION ALL
	SELECT 'exported_bytes', '', coalesce(pg_catalog.sum(e.bytes), 0)
	  FROM remora.exports e JOIN remora.jobs j ON j.job_id OPERATOR(pg_catalog.=) e.export_id
	 WHERE j.state OPERATOR(pg_catalog.=) 'succeeded'
	UNION ALL
	SELECT 'claim_wait', remora._claim_wait_bucket(f.secs), pg_catalog.count(*) FROM first f GROUP BY 2
	UNION ALL
	SELECT 'claim_wait_sum', '', coalesce(pg_catalog.sum(greatest(f.secs, 0)), 0) FROM first f
	UNION ALL
	SELECT 'worker_attempts', i.incarnation::text,
		   (SELECT pg_catalog.count(*) FROM remora.attempts a
			 WHERE a.incarnation OPERATOR(pg_catalog.=) i.incarnation)
	  FROM remora.incarnations i WHERE i.stopped_at IS NULL
	UNION ALL
	SELECT 'worker_bytes', i.incarnation::text,
		   (SELECT coalesce(pg_catalog.sum(r.bytes), 0) FROM remora.results r
			  JOIN remora.attempts a ON a.attempt_id OPERATOR(pg_catalog.=) r.attempt_id
			 WHERE a.incarnation OPERATOR(pg_catalog.=) i.incarnation)
	  FROM remora.incarnations i WHERE i.stopped_at IS NULL;
END
$$;

CREATE OR REPLACE FUNCTION remora._history_truncated() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	PERFORM remora._count_again();
	RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER jobs_truncated_counted AFTER TRUNCATE ON remora.jobs
	FOR EACH STATEMENT EXECUTE FUNCTION remora._history_truncated();
CREATE OR REPLACE TRIGGER attempts_truncated_counted AFTER TRUNCATE ON remora.attempts
	FOR EACH STATEMENT EXECUTE FUNCTION remora._history_truncated();
CREATE OR REPLACE TRIGGER results_truncated_counted AFTER TRUNCATE ON remora.results
	FOR EACH STATEMENT EXECUTE FUNCTION remora._history_truncated();

-- Everything GET /metrics shows, in the Prometheus text format (version
-- 0.0.4), for remora_admin and the metrics listener (remora.metrics_listen).
-- The history's counts are kept as it changes (remora.metric_counts and
-- the changes not yet folded): a scrape costs the same at any history
-- size.  Counters never go down when retention prunes history.  Label
-- values are escaped by remora._metric_label.
CREATE OR REPLACE FUNCTION remora.metrics_text() RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	states CONSTANT text[] := ARRAY['queued', 'running', 'retrying', 'succeeded',
									'failed', 'cancelled', 'outcome_unknown'];
	counts jsonb;
	body text;
	s text;
BEGIN
	-- the counts, and the unfinished jobs and exports by state (by index),
	-- in one snapshot: {"metric": {"label": n}}
	WITH c AS (
		SELECT x.metric, x.label, sum(x.n) AS n
		  FROM (SELECT k.metric, k.label, k.n FROM remora.metric_counts k
				UNION ALL
				SELECT d.metric, d.label, d.n FROM remora.metric_deltas d
				UNION ALL
				SELECT CASE WHEN j.source_kind = 'export' THEN 'exports' ELSE 'jobs' END,
					   j.state, count(*)
				  FROM remora.jobs j
				 WHERE j.finished_at IS NULL AND j.deleted_at IS NULL
				 GROUP BY 1, 2) x
		 GROUP BY x.metric, x.label)
	SELECT coalesce(jsonb_object_agg(m.metric, m.labels), '{}') INTO counts
	  FROM (SELECT c.metric, jsonb_object_agg(c.label, c.n) AS labels
			  FROM c GROUP BY c.metric) m;

	-- jobs and exports by state: every state, 0 included
	SELECT string_agg(format(E'remora_jobs{state="%s"} %s\n', st,
							 coalesce(counts #>> ARRAY['jobs', st], '0')), '' ORDER BY o)
	  INTO s FROM unnest(states) WITH ORDINALITY AS u(st, o);
	body := remora._metric_family('remora_jobs', 'gauge',
		'Jobs by state (exports not counted).', s);
	SELECT string_agg(format(E'remora_exports{state="%s"} %s\n', st,
							 coalesce(counts #>> ARRAY['exports', st], '0')), '' ORDER BY o)
	  INTO s FROM unnest(states) WITH ORDINALITY AS u(st, o);
	body := body || remora._metric_family('remora_exports', 'gauge',
		'Exports by state.', s);

	-- attempts (of jobs and exports) and their failures by class
	body := body || remora._metric_family('remora_attempts_total', 'counter',
		'Attempts started, of jobs and exports.',
		format(E'remora_attempts_total %s\n', coalesce(counts #>> '{attempts,""}', '0')));
	SELECT string_agg(format(E'remora_attempt_failures_total{class="%s"} %s\n',
							 remora._metric_label(f.key), f.value), '' ORDER BY f.key)
	  INTO s FROM jsonb_each_text(coalesce(counts -> 'failures', '{}')) f;
	body := body || remora._metric_family('remora_attempt_failures_total',
		'counter', 'Attempts that ended with an error, by error class.', s);

	-- bytes
	body := body || remora._metric_family('remora_committed_bytes_total',
		'counter', 'Bytes of the committed results of jobs.',
		format(E'remora_committed_bytes_total %s\n',
			   coalesce(counts #>> '{committed_bytes,""}', '0')));
	body := body || remora._metric_family('remora_exported_bytes_total',
		'counter', 'Bytes of the results that succeeded exports published.',
		format(E'remora_exported_bytes_total %s\n',
			   coalesce(counts #>> '{exported_bytes,""}', '0')));
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
	-- (the buckets are cumulative: each counts the waits up to its bound)
	SELECT string_agg(format(E'remora_claim_wait_seconds_bucket{le="%s"} %s\n', b,
							 (SELECT coalesce(sum(w.value::numeric), 0)
								FROM jsonb_each_text(coalesce(counts -> 'claim_wait', '{}')) w
							   WHERE w.key <> '+Inf' AND w.key::float8 <= b)), '' ORDER BY b)
		   || format(E'remora_claim_wait_seconds_bucket{le="+Inf"} %s\n', x.n)
		   || format(E'remora_claim_wait_seconds_sum %s\n',
					 coalesce(counts #>> '{claim_wait_sum,""}', '0'))
		   || format(E'remora_claim_wait_seconds_count %s\n', x.n)
	  INTO s
	  FROM unnest(remora._claim_wait_buckets()) AS b,
		   (SELECT coalesce(sum(w.value::numeric), 0) AS n
			  FROM jsonb_each_text(coalesce(counts -> 'claim_wait', '{}')) w) x
	 GROUP BY x.n;
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
				   coalesce(counts #>> ARRAY['worker_bytes', i.incarnation::text], '0') AS bytes,
				   coalesce(counts #>> ARRAY['worker_attempts', i.incarnation::text], '0')
					   AS attempts,
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

-- the counts of the history there is, when installed or updated
DO $$ BEGIN PERFORM remora._count_again(); END $$;

REVOKE ALL ON FUNCTION remora._metric_label(text),
	remora._metric_family(text, text, text, text), remora.metrics_text(),
	remora._claim_wait_buckets(), remora._claim_wait_bucket(float8),
	remora._count_attempts(), remora._count_failure(), remora._count_results(),
	remora._count_jobs(), remora._fold_metrics(), remora._count_again(),
	remora._history_truncated()
	FROM PUBLIC;
GRANT EXECUTE ON FUNCTION remora.metrics_text() TO remora_admin;
