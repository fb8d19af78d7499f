-- ---------------------------------------------------------------------
-- Narrower submits: a job's row no longer keeps its options a second
-- time (they are its spec's, spec -> 'options'), the index on owner alone
-- goes (the (owner, idempotency_key) key leads with owner), and a submit
-- calls less: a submit without an idempotency key inserts without ON
-- CONFLICT; it names the queue row's owner, so that the queue's trigger
-- is not called; it calls the max_queued check only when a limit may
-- apply; and the functions it calls inside remora._submit, which pinned
-- search_path, pin none of their own.
-- ---------------------------------------------------------------------

DROP INDEX remora.jobs_owner_idx;

-- Every release recorded options as spec -> 'options' and never changed
-- either; a row that differs all the same keeps its options, in its spec.
UPDATE remora.jobs SET spec = jsonb_set(spec, '{options}', options)
 WHERE spec -> 'options' IS DISTINCT FROM options;
ALTER TABLE remora.jobs DROP COLUMN options;

-- remora._may_write and remora._submit of this change are in
-- 90_submit_speed.sql, remora._queue_owner and its trigger in
-- 60_fair_claim.sql: the parts that first changed them in this version.
CREATE OR REPLACE FUNCTION remora._notify_workers() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	PERFORM pg_catalog.pg_notify('remora_jobs', TG_ARGV[0]);
	RETURN NULL;
END
$$;
