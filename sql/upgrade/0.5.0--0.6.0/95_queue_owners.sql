-- The owners with queued jobs, in the order of their turns (remora.claim
-- finds the next owners by index, however many wait): a claim's cost no
-- longer grows with the number of owners.  The owners of the jobs queued
-- now start at the same pass.
CREATE UNLOGGED TABLE remora.queue_owners (
	owner			regrole PRIMARY KEY,
	pass			float8 NOT NULL CHECK (pass >= 0)
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
	  autovacuum_vacuum_cost_delay = 0);
CREATE INDEX queue_owners_pass_idx ON remora.queue_owners (pass, owner);
INSERT INTO remora.queue_owners (owner, pass)
SELECT DISTINCT q.owner, 0 FROM remora.queue q;
-- The coordination tables churn: their dead rows are vacuumed after
-- every thousand, at full speed (sql/schema/10_schema.sql says why).
ALTER TABLE remora.queue SET (autovacuum_vacuum_scale_factor = 0,
	autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0);
ALTER TABLE remora.leases SET (autovacuum_vacuum_scale_factor = 0,
	autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_cost_delay = 0);
