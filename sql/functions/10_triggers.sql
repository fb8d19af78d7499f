/* ------------------------------------------------------------------------
 * The triggers of the coordination state (remora.queue, remora.leases,
 * remora.coordination: sql/schema/10_schema.sql) and of cancel requests.
 * ------------------------------------------------------------------------ */

-- Every path that queues a job (export, retry, resolve, reconcile) names
-- the job alone; its owner comes from the job row, so that no path can
-- queue a job under another owner.  remora._submit alone names the owner:
-- the one it wrote into the job's row a statement before; the trigger is
-- not called then (a call a submit, with its executor start, saved).
-- Like the protocol's private helpers it pins no search_path (every name
-- in it is qualified): only the extension's functions write the queue,
-- and they pinned it; a SET clause cost each submit a save and restore
-- of the setting.
CREATE OR REPLACE FUNCTION remora._queue_owner() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	NEW.owner := (SELECT jb.owner FROM remora.jobs jb
				   WHERE jb.job_id OPERATOR(pg_catalog.=) NEW.job_id);
	RETURN NEW;
END
$$;
CREATE OR REPLACE TRIGGER queue_owner BEFORE INSERT ON remora.queue
	FOR EACH ROW WHEN (NEW.owner IS NULL)
	EXECUTE FUNCTION remora._queue_owner();

-- An owner whose jobs a statement queued waits for its turn: its row in
-- remora.queue_owners, held FOR KEY SHARE until the transaction ends, so
-- that reconcile, which removes the rows of owners without queued jobs
-- (FOR UPDATE, then a look at the queue with a new snapshot), cannot remove
-- it before this transaction's queue rows are there to be seen; a row
-- removed meanwhile is added again.  A new owner's pass comes just before
-- the least pass (the claims' turn when none waits): a new owner takes the
-- next turn, then waits its turns as others do.
-- Its model: proof/owners.pml.
CREATE OR REPLACE FUNCTION remora._owners_wait() RETURNS trigger
LANGUAGE plpgsql
AS $$
DECLARE
	o	regrole;
BEGIN
	FOR o IN SELECT DISTINCT n.owner FROM added n LOOP
		LOOP
			PERFORM 1 FROM remora.queue_owners w
			 WHERE w.owner OPERATOR(pg_catalog.=) o FOR KEY SHARE;
			EXIT WHEN FOUND;
			INSERT INTO remora.queue_owners (owner, pass)
			VALUES (o, greatest(coalesce((SELECT pg_catalog.min(w.pass)
											FROM remora.queue_owners w) OPERATOR(pg_catalog.-) 1e-9,
										 remora._turn(0)), 0))
			ON CONFLICT DO NOTHING;
		END LOOP;
	END LOOP;
	RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER queue_owners_wait AFTER INSERT ON remora.queue
	REFERENCING NEW TABLE AS added
	FOR EACH STATEMENT EXECUTE FUNCTION remora._owners_wait();
-- and a queue row given to another owner (a dropped role's jobs go to
-- role 0: remora._forget_dropped_roles) brings that owner too
CREATE OR REPLACE TRIGGER queue_owners_moved AFTER UPDATE ON remora.queue
	REFERENCING NEW TABLE AS added
	FOR EACH STATEMENT EXECUTE FUNCTION remora._owners_wait();

-- Model: CoordinationLost (proof/remora.pml)
CREATE OR REPLACE FUNCTION remora._coordination_lost() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	DELETE FROM remora.coordination;
	RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER queue_truncated AFTER TRUNCATE ON remora.queue
	FOR EACH STATEMENT EXECUTE FUNCTION remora._coordination_lost();
CREATE OR REPLACE TRIGGER leases_truncated AFTER TRUNCATE ON remora.leases
	FOR EACH STATEMENT EXECUTE FUNCTION remora._coordination_lost();
CREATE OR REPLACE TRIGGER queue_owners_truncated AFTER TRUNCATE ON remora.queue_owners
	FOR EACH STATEMENT EXECUTE FUNCTION remora._coordination_lost();

-- External workers (remora-worker) LISTEN on remora_jobs: a job queued
-- (submit, export, retry, reconcile) says 'claim', a cancel request 'cancel'.
-- NOTIFY is sent when the transaction commits, so a worker never looks for
-- a job before it is visible, and one rolled back wakes nobody.  No
-- search_path of its own, as _queue_owner.
CREATE OR REPLACE FUNCTION remora._notify_workers() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
	PERFORM pg_catalog.pg_notify('remora_jobs', TG_ARGV[0]);
	RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER queue_notify AFTER INSERT ON remora.queue
	FOR EACH STATEMENT EXECUTE FUNCTION remora._notify_workers('claim');
CREATE OR REPLACE TRIGGER cancel_notify AFTER UPDATE OF cancel_requested_at ON remora.jobs
	FOR EACH ROW WHEN (OLD.cancel_requested_at IS NULL
					   AND NEW.cancel_requested_at IS NOT NULL
					   AND NEW.state = 'running')
	EXECUTE FUNCTION remora._notify_workers('cancel');
