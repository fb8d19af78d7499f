--
-- Claims share the workers between owners (doc/operator-guide.md, "Sharing
-- the workers between users"): a late owner's job starts within the first
-- claims behind another's backlog, whatever its priority; weights 3:1 give
-- the heavier owner 0.70-0.80 of the running attempts; max_running is reached
-- and holds; priority orders an owner's own jobs; an owner alone gets the
-- whole batch; owners with nothing running take turns.
--
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases, remora.role_limits;
SET remora.default_bucket = 'target';
CREATE ROLE regress_fair_alice;
CREATE ROLE regress_fair_bob;
GRANT remora_user TO regress_fair_alice, regress_fair_bob;

-- submit n jobs as role r at priority p
CREATE FUNCTION pg_temp.submit(r text, n integer, p integer) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	k	bigint := 0;
BEGIN
	EXECUTE format('SET LOCAL ROLE %I', r);
	FOR i IN 1 .. n LOOP
		PERFORM remora_submit(format('https://example.com/%s/%s.bin', r, i), NULL, NULL,
							  jsonb_build_object('priority', p));
		k := k + 1;
	END LOOP;
	RESET ROLE;
	RETURN k;
END
$$;
-- claim up to n, and name the owners of what was claimed
CREATE FUNCTION pg_temp.claim(n integer) RETURNS TABLE (owner text, claimed bigint)
LANGUAGE sql AS $$
	SELECT pg_get_userbyid((c.spec ->> 'owner')::oid), count(*)
	  FROM remora.claim('fafafafa-0000-4000-8000-000000000001', n) c
	 GROUP BY 1 ORDER BY 1
$$;
-- n claims of up to batch each, each its own transaction as a worker's
-- (a transaction's own reservations last until it ends)
CREATE TEMP TABLE fair_claimed (owner text, claimed bigint);
CREATE PROCEDURE pg_temp.claims(n integer, batch integer)
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. n LOOP
		INSERT INTO fair_claimed SELECT * FROM pg_temp.claim(batch);
		COMMIT;
	END LOOP;
END
$$;
-- end every running attempt (a failure that is not retried)
CREATE FUNCTION pg_temp.finish() RETURNS bigint
LANGUAGE sql AS $$
	SELECT count(remora.fail(a.attempt_id, a.fencing_token,
							 '{"class": "test", "message": "done"}', false))
	  FROM remora.attempts a WHERE a.state = 'running'
$$;

-- alice queues 3,000 jobs at priority 1000, then bob one at 0: a claim of 2
-- starts one of each
SELECT pg_temp.submit('regress_fair_alice', 3000, 1000) AS alice_queued;
SELECT pg_temp.submit('regress_fair_bob', 1, 0) AS bob_queued;
SELECT * FROM pg_temp.claim(2);
SELECT pg_temp.finish() AS finished;

-- a claim finds its jobs' queue rows by key, never by reading the backlog:
-- the queue's heap blocks it fetches, against the pages that alice's 2,999
-- queued jobs fill (the counts are the backend's since its stats were last
-- flushed, which no transaction does: a difference within one), with the
-- queue analyzed as autovacuum would
ANALYZE remora.queue;
BEGIN;
SELECT pg_stat_get_xact_blocks_fetched('remora.queue'::regclass) AS fetched_before \gset
SELECT count(*) AS claimed FROM remora.claim('fafafafa-0000-4000-8000-000000000001', 1);
SELECT pg_stat_get_xact_blocks_fetched('remora.queue'::regclass) - :fetched_before < 16
		   AS queue_read_by_key,
	   pg_relation_size('remora.queue') / 8192 >= 16 AS backlog_fills_pages;
ROLLBACK;

-- bob's queue is empty: alice alone gets the whole batch
SELECT * FROM pg_temp.claim(3);
SELECT pg_temp.finish() AS finished;

-- priority orders an owner's own jobs only
TRUNCATE remora.jobs RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
SELECT pg_temp.submit('regress_fair_alice', 1, 0) + pg_temp.submit('regress_fair_alice', 1, 5)
	   + pg_temp.submit('regress_fair_alice', 1, 1) AS alice_queued;
SELECT c.job_id AS first FROM remora.claim('fafafafa-0000-4000-8000-000000000001') c;
SELECT c.job_id AS second FROM remora.claim('fafafafa-0000-4000-8000-000000000001') c;
SELECT c.job_id AS third FROM remora.claim('fafafafa-0000-4000-8000-000000000001') c;
SELECT pg_temp.finish() AS finished;

-- max_running: reached and never passed, the other owner still served
TRUNCATE remora.jobs RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
INSERT INTO remora.role_limits (role_id, max_running)
VALUES ('regress_fair_alice'::regrole, 2);
SELECT pg_temp.submit('regress_fair_alice', 5, 0) AS alice_queued;
SELECT * FROM pg_temp.claim(3);
SELECT * FROM pg_temp.claim(3);
SELECT pg_temp.submit('regress_fair_bob', 2, 0) AS bob_queued;
SELECT * FROM pg_temp.claim(3);
SELECT pg_temp.finish() AS finished;
-- room again once attempts end, and 0 is no limit
SELECT * FROM pg_temp.claim(3);
SELECT pg_temp.finish() AS finished;
UPDATE remora.role_limits SET max_running = 0;
SELECT pg_temp.submit('regress_fair_alice', 5, 0) AS alice_queued;
SELECT * FROM pg_temp.claim(3);
SELECT pg_temp.finish() AS finished;

-- weights 3:1 (the test cluster allows 3 leases: 40 here, for a share
-- that can be 3:1; a new setting reaches this session between statements)
ALTER SYSTEM SET remora.max_active_leases = 40;
SELECT pg_reload_conf() AS reloaded;
\o /dev/null
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
SELECT pg_sleep(0.1) WHERE current_setting('remora.max_active_leases') <> '40';
\o
SHOW remora.max_active_leases;
TRUNCATE remora.jobs RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases, remora.role_limits;
INSERT INTO remora.role_limits (role_id, weight) VALUES ('regress_fair_alice'::regrole, 3);
SELECT pg_temp.submit('regress_fair_alice', 200, 1000) AS alice_queued;
SELECT pg_temp.submit('regress_fair_bob', 200, 0) AS bob_queued;
-- one batch: its picks follow (running + picked) / weight
SELECT * FROM pg_temp.claim(8);
SELECT pg_temp.finish() AS finished;
-- 40 claims of one, every attempt still running: the running attempts
CALL pg_temp.claims(40, 1);
SELECT sum(claimed) AS claimed FROM fair_claimed;
SELECT count(*) AS running,
	   round(count(*) FILTER (WHERE j.owner = 'regress_fair_alice'::regrole)::numeric
			 / count(*), 2) BETWEEN 0.70 AND 0.80 AS alice_share_3_to_1
  FROM remora.leases l JOIN remora.jobs j USING (job_id);
SELECT pg_temp.finish() AS finished;
-- 10 claims of 4: the share of what they hand out
TRUNCATE fair_claimed;
CALL pg_temp.claims(10, 4);
SELECT round(sum(claimed) FILTER (WHERE owner = 'regress_fair_alice') / sum(claimed), 2)
	   BETWEEN 0.70 AND 0.80 AS alice_share_3_to_1, sum(claimed) AS claimed
  FROM fair_claimed;
SELECT pg_temp.finish() AS finished;

ALTER SYSTEM RESET remora.max_active_leases;
SELECT pg_reload_conf() AS reloaded;

-- owners even on running attempts take turns: with nothing running, one
-- job each in turn (a round robin, as the weights are equal), whatever
-- their backlogs
TRUNCATE remora.jobs RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases, remora.role_limits;
DELETE FROM remora.queue_owners;	-- turns taken above
CREATE ROLE regress_fair_carol;
GRANT remora_user TO regress_fair_carol;
SELECT pg_temp.submit('regress_fair_alice', 5, 0) + pg_temp.submit('regress_fair_bob', 2, 0)
	   + pg_temp.submit('regress_fair_carol', 3, 0) AS queued;
CREATE TEMP TABLE fair_turns (k serial, owner text);
CREATE PROCEDURE pg_temp.turns(n integer)
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. n LOOP
		INSERT INTO fair_turns (owner) SELECT c.owner FROM pg_temp.claim(1) c;
		PERFORM pg_temp.finish();
		COMMIT;
	END LOOP;
END
$$;
CALL pg_temp.turns(6);
SELECT string_agg(owner, ',' ORDER BY k) AS served FROM fair_turns;
-- the owners waiting for a turn are those with queued jobs: reconcile
-- removes the others (bob's queue is empty now), a submit adds its owner
SELECT remora.reconcile() >= 0 AS reconciled;
SELECT pg_get_userbyid(owner) AS waiting FROM remora.queue_owners ORDER BY 1;
SELECT pg_temp.submit('regress_fair_bob', 1, 0) AS bob_queued;
SELECT pg_get_userbyid(owner) AS waiting FROM remora.queue_owners ORDER BY 1;
-- the table lost (as a crash loses it): reconcile brings every owner of a
-- queued job back
TRUNCATE remora.queue_owners;
SELECT remora.reconcile() > 0 AS repaired;
SELECT pg_get_userbyid(owner) AS waiting FROM remora.queue_owners ORDER BY 1;
SELECT count(*) AS claimed FROM remora.claim('fafafafa-0000-4000-8000-000000000001', 3);
SELECT pg_temp.finish() AS finished;

TRUNCATE remora.jobs RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases, remora.role_limits;
DROP ROLE regress_fair_alice, regress_fair_bob, regress_fair_carol;
