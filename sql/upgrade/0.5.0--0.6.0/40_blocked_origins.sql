-- Remora's own store, endpoints and listeners are never a source
-- (doc/security.md, "In 0.6.0: restores, sharing under abuse, cloud credentials"):
-- remora.worker_settings hands remora-worker them in one more column,
-- blocked_origins; its result changes, so it is dropped and made again
-- (sql/functions/).
DROP FUNCTION remora.worker_settings();
