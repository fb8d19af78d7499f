-- Time slices (doc/operator-guide.md, "Time slices"): an attempt may end
-- 'yielded', handing its job back to the queue with its checkpoint.  The
-- renewal says when (remora.renew's new column yield_requested): its
-- result changes, so it is dropped and made again (sql/functions/).
ALTER TABLE remora.attempts DROP CONSTRAINT attempts_state_check,
	ADD CONSTRAINT attempts_state_check
	CHECK (state IN ('running', 'succeeded', 'failed', 'lost', 'cancelled',
					 'yielded'));
DROP FUNCTION remora.renew(uuid, bigint);
