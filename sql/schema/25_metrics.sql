/* ------------------------------------------------------------------------
 * The counts behind GET /metrics (remora.metrics_text), kept as they change
 * so that a scrape reads a few rows, not the history.
 * ------------------------------------------------------------------------ */

-- What each change adds: one row per change, written by triggers on the
-- jobs, attempts and results (sql/functions/97_metrics.sql), never updated,
-- so that no two transactions wait on one counter row.  remora.reconcile
-- folds them into remora.metric_counts every round.  metric names a count
-- (jobs and exports that ended, by state; attempts; failures by class;
-- committed and exported bytes; the claim waits by bucket, and their sum;
-- the attempts and bytes of each worker), label its label's value.
CREATE TABLE remora.metric_deltas (
	metric			text NOT NULL,
	label			text NOT NULL,
	n				numeric NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
	  autovacuum_vacuum_cost_delay = 0);

-- The counts folded so far.  A count never goes down when retention
-- prunes history: it counts what happened, not the rows left.  A TRUNCATE
-- of the history counts again from what is left.  Neither table is in a
-- dump: a restore writes the history again, and its triggers count it.
CREATE TABLE remora.metric_counts (
	metric			text NOT NULL,
	label			text NOT NULL,
	n				numeric NOT NULL,
	PRIMARY KEY (metric, label)
);
