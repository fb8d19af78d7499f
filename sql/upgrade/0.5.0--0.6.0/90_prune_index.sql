-- Retention in batches at any history size (remora.prune): the ended jobs
-- it has still to prune, by when they ended.
CREATE INDEX jobs_unpruned_idx ON remora.jobs (finished_at)
	WHERE finished_at IS NOT NULL AND pruned_at IS NULL;
