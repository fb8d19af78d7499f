--
-- Byte-rate caps: options.max_bytes_per_second (validated at submit, any
-- user, it can only lower), a role's max_bytes_per_second shared by its
-- running attempts, remora.max_bytes_per_second shared by all of them;
-- remora.rate_limits, which workers call at each renewal round, answers
-- the least of the three for each running attempt.
--
CREATE FUNCTION pg_temp.try(q text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	st	text;
	msg text;
	det text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
		det = PG_EXCEPTION_DETAIL;
	RETURN st || ': ' || msg || coalesce(' (' || nullif(det, '') || ')', '');
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.try(text) TO PUBLIC;

TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases, remora.role_limits;
SET remora.default_bucket = 'target';
SET remora.default_prefix = 'remora';
SET client_min_messages = error;

CREATE ROLE regress_rl_ann LOGIN;
CREATE ROLE regress_rl_ben LOGIN;
CREATE ROLE regress_rl_worker LOGIN;
GRANT remora_user TO regress_rl_ann, regress_rl_ben;
GRANT remora_worker TO regress_rl_worker;

-- small caps, to count them: no floor here (time_slices.sql shows it)
\getenv abs_srcdir PG_ABS_SRCDIR
\set rl_wait :abs_srcdir '/sql/rate_limits_wait.psql'
ALTER SYSTEM SET remora.min_bytes_per_second = 0;
SELECT pg_reload_conf();
SELECT 'remora.min_bytes_per_second' AS rl_name, '0' AS rl_want,
	   clock_timestamp() + interval '60 s' AS rl_deadline \gset
\set ECHO none
\i :rl_wait
\set ECHO all

-- a job's own cap: a positive whole number of bytes a second, else 22023
SET ROLE regress_rl_ann;
SELECT pg_temp.try(format($$SELECT remora_submit('https://example.com/x.bin', options => %L)$$, o))
  FROM unnest(ARRAY['{"max_bytes_per_second": 0}', '{"max_bytes_per_second": -1}',
					'{"max_bytes_per_second": 1.5}', '{"max_bytes_per_second": "1000"}',
					'{"max_bytes_per_second": null}', '{"max_bytes_per_second": 1e30}',
					'{"max_bytes_per_second": 9223372036854775808}',
					'{"max_bytes_per_second": [1000]}']) o;
SELECT remora_submit('https://example.com/a1.bin',
					 options => '{"max_bytes_per_second": 1000}') AS a1 \gset
SELECT remora_submit('https://example.com/big.bin',
					 options => '{"max_bytes_per_second": 9223372036854775807}') IS NOT NULL AS submitted;
SELECT spec #>> '{options,max_bytes_per_second}' AS own FROM remora.jobs ORDER BY job_id;
SELECT remora_submit('https://example.com/a2.bin') AS a2 \gset
SET ROLE regress_rl_ben;
SELECT remora_submit('https://example.com/b1.bin') AS b1 \gset
RESET ROLE;
-- the big one waits: three running attempts, a1, a2 and b1
DELETE FROM remora.queue WHERE job_id NOT IN (:a1, :a2, :b1);
SELECT count(*) AS claimed FROM remora.claim('7a7e0000-0000-4000-8000-000000000001', 3);

CREATE TEMP VIEW caps AS
SELECT j.job_id, pg_get_userbyid(j.owner) AS owner, r.max_bytes_per_second
  FROM remora.jobs j
  LEFT JOIN remora.rate_limits(ARRAY(SELECT current_attempt FROM remora.jobs
									  WHERE state = 'running')) r
	ON r.attempt_id = j.current_attempt
 WHERE j.state = 'running'
 ORDER BY j.job_id;

-- no limit but a1's own
SELECT * FROM caps;
-- ann's cap shared by her two running attempts; a1 keeps its lower own
SELECT remora.set_role_limits('regress_rl_ann', max_bytes_per_second => 4000);
SELECT * FROM caps;

-- the deployment's cap shared by all three; a role without its own takes
-- the default
ALTER SYSTEM SET remora.max_bytes_per_second = 3000;
ALTER SYSTEM SET remora.default_role_max_bytes_per_second = 500;
SELECT pg_reload_conf();
SELECT 'remora.default_role_max_bytes_per_second' AS rl_name, '500' AS rl_want,
	   clock_timestamp() + interval '60 s' AS rl_deadline \gset
\set ECHO none
\i :rl_wait
\set ECHO all
SELECT current_setting('remora.max_bytes_per_second') AS deployment;
SELECT * FROM caps;
-- a role's own 0 is no limit, whatever the default
SELECT remora.set_role_limits('regress_rl_ben', max_bytes_per_second => 0);
SELECT * FROM caps;
-- one attempt fewer: the shares grow
SELECT current_attempt AS a2att, fencing_token AS a2tok FROM remora.jobs WHERE job_id = :a2 \gset
SELECT remora.fail(:'a2att', :a2tok, '{"class": "network"}', false);
SELECT * FROM caps;

-- attempts that are not running have no row; the argument is required
SELECT count(*) AS rows FROM remora.rate_limits(ARRAY['7a7e0000-0000-4000-8000-0000000000ff'::uuid, NULL]);
SELECT count(*) AS rows FROM remora.rate_limits('{}');
SELECT pg_temp.try($$SELECT remora.rate_limits(NULL)$$);

-- a worker may call it; a user may not
SET ROLE regress_rl_worker;
SELECT count(*) AS rows FROM remora.rate_limits(ARRAY(SELECT NULL::uuid));
SET ROLE regress_rl_ann;
SELECT pg_temp.try($$SELECT remora.rate_limits('{}')$$);
RESET ROLE;

-- clean up
ALTER SYSTEM RESET remora.max_bytes_per_second;
ALTER SYSTEM RESET remora.default_role_max_bytes_per_second;
ALTER SYSTEM RESET remora.min_bytes_per_second;
SELECT pg_reload_conf();
SELECT 'remora.min_bytes_per_second' AS rl_name, '65536' AS rl_want,
	   clock_timestamp() + interval '60 s' AS rl_deadline \gset
\set ECHO none
\i :rl_wait
\set ECHO all
SELECT 'remora.default_role_max_bytes_per_second' AS rl_name, '0' AS rl_want,
	   clock_timestamp() + interval '60 s' AS rl_deadline \gset
\set ECHO none
\i :rl_wait
\set ECHO all
TRUNCATE remora.role_limits;
TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
TRUNCATE remora.queue, remora.leases;
DROP ROLE regress_rl_ann, regress_rl_ben, regress_rl_worker;
