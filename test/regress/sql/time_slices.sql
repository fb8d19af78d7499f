--
-- Time slices (doc/operator-guide.md, "Time slices"): a byte-rate cap below
-- remora.min_bytes_per_second is refused, for a job and for a role;
-- remora.renew asks an attempt to yield only once it has run past
-- remora.time_slice while another owner waits and its owner holds more
-- than its share, the longest-running first; remora.yield hands the job
-- back without spending its budget, once, and only for the current
-- attempt; the waiting owner's job is claimed next, and the yielded job
-- runs again under a budget of one.
--
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases, remora.role_limits;
SET remora.default_bucket = 'target';
CREATE ROLE regress_slice_alice;
CREATE ROLE regress_slice_bob;
GRANT remora_user TO regress_slice_alice, regress_slice_bob;

-- caps below the floor (65536 by default) are refused, naming the setting
\set VERBOSITY default
SET ROLE regress_slice_alice;
SELECT remora_submit('https://example.com/one-byte.bin',
					 options => '{"max_bytes_per_second": 1}');
RESET ROLE;
SELECT remora.set_role_limits('regress_slice_bob', max_bytes_per_second => 100);
-- at the floor, or none (0), they are taken
SELECT remora.set_role_limits('regress_slice_bob', max_bytes_per_second => 65536);
SELECT remora.set_role_limits('regress_slice_bob', max_bytes_per_second => 0);
SELECT role, max_bytes_per_second FROM remora_role_limits
 WHERE role = 'regress_slice_bob';

-- alice's three jobs take the three leases (remora.max_active_leases = 3)
SET ROLE regress_slice_alice;
SELECT remora_submit('https://example.com/a1.bin',
					 options => '{"max_bytes_per_second": 65536, "max_attempts": 1}') AS a1 \gset
SELECT remora_submit('https://example.com/a2.bin') AS a2 \gset
SELECT remora_submit('https://example.com/a3.bin') AS a3 \gset
RESET ROLE;
SELECT count(*) AS claimed FROM remora.claim('5a5a5a5a-0000-4000-8000-000000000001', 3);

-- renew the running attempt of a job: (ok, yield_requested)
CREATE FUNCTION pg_temp.renew(job bigint) RETURNS TABLE (ok boolean, yield_requested boolean)
LANGUAGE sql AS $$
	SELECT r.ok, r.yield_requested
	  FROM remora.attempts a, remora.renew(a.attempt_id, a.fencing_token) r
	 WHERE a.job_id = job AND a.state = 'running'
$$;
-- within the slice: no
SELECT * FROM pg_temp.renew(:a1);
-- past it, with nobody else waiting: no
UPDATE remora.attempts SET started_at = now() - interval '11 minutes' WHERE job_id = :a1;
UPDATE remora.attempts SET started_at = now() - interval '10 minutes' WHERE job_id = :a2;
SELECT * FROM pg_temp.renew(:a1);

-- bob's job waits: alice holds 3, her share of 3 between two owners is
-- 1.5; of the 2 (1.5 rounded up) she holds beyond it, the two that have
-- run longest yield, both past the slice; not the one within it
SET ROLE regress_slice_bob;
SELECT remora_submit('https://example.com/b1.bin') AS b1 \gset
RESET ROLE;
SELECT :a1 AS job, * FROM pg_temp.renew(:a1)
UNION ALL SELECT :a2, * FROM pg_temp.renew(:a2)
UNION ALL SELECT :a3, * FROM pg_temp.renew(:a3);
-- a stale token yields nothing
SELECT remora.yield(a.attempt_id, a.fencing_token + 1) AS state
  FROM remora.attempts a WHERE a.job_id = :a1;
-- the current attempt yields: the job is queued, its budget given back
SELECT remora.yield(a.attempt_id, a.fencing_token) AS state
  FROM remora.attempts a WHERE a.job_id = :a1;
SELECT j.state, j.attempts_used, j.max_attempts, a.state AS attempt,
	   (SELECT count(*) FROM remora.leases l WHERE l.job_id = j.job_id) AS leases,
	   (SELECT count(*) FROM remora.queue q WHERE q.job_id = j.job_id
			AND q.not_before > now()) AS queued_for_later
  FROM remora.jobs j JOIN remora.attempts a USING (job_id) WHERE j.job_id = :a1;
-- again: nothing more
SELECT remora.yield(a.attempt_id, a.fencing_token) AS state
  FROM remora.attempts a WHERE a.job_id = :a1;
SELECT attempts_used FROM remora.jobs WHERE job_id = :a1;
SELECT state, count(*) FROM remora_attempts WHERE job_id = :a1 GROUP BY state;

-- the lease it gave back goes to bob's job, not to the yielded one
SELECT pg_get_userbyid((c.spec ->> 'owner')::oid) AS owner, c.job_id = :b1 AS bobs
  FROM remora.claim('5a5a5a5a-0000-4000-8000-000000000001', 3) c;
-- once due, the yielded job runs again, under its budget of one
SELECT pg_temp.renew(:b1) IS NOT NULL AS renewed;
SELECT count(remora.fail(a.attempt_id, a.fencing_token, '{"class": "test"}', false))
  FROM remora.attempts a WHERE a.job_id = :b1 AND a.state = 'running';
UPDATE remora.queue SET not_before = now() WHERE job_id = :a1;
SELECT c.job_id = :a1 AS yielded_one, (c.spec ->> 'attempt_no')::integer AS attempt_no
  FROM remora.claim('5a5a5a5a-0000-4000-8000-000000000001', 1) c;
SELECT attempt_no, state FROM remora_attempts WHERE job_id = :a1 ORDER BY attempt_no;
SELECT state, attempts_used, max_attempts FROM remora.jobs WHERE job_id = :a1;
-- a job capped below the floor before the floor existed runs at the floor
UPDATE remora.jobs SET spec = jsonb_set(spec, '{options,max_bytes_per_second}', '1')
 WHERE job_id = :a1;
SELECT r.max_bytes_per_second
  FROM remora.jobs j, remora.rate_limits(ARRAY[j.current_attempt]) r
 WHERE j.job_id = :a1;
