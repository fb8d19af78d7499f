-- The owners with queued jobs, in the order of their turns (remora.claim
-- finds the next owners by index, however many wait): a claim's cost no
-- longer grows with the number of owners.  The owners of the jobs queued
-- now start at the same pass.
CREATE UNLOGGED TABLE remora.queue_owners (
	owner			regrole PRIMARY KEY,
	pass			float8 NOT NULL CHECK (pass >= 0)
);
CREATE INDEX queue_owners_pass_idx ON remora.queue_owners (pass, owner);
INSERT INTO remora.queue_owners (owner, pass)
SELECT DISTINCT q.owner, 0 FROM remora.queue q;
