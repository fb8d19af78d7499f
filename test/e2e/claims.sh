#!/usr/bin/env bash
#
# Claimers that do not wait for each other still never exceed the lease
# limit.  Eight pgbench clients claim (up to three jobs a call, holding the
# claim's transaction open a moment) and commit what they claimed, against
# remora.max_active_leases = 5, until 400 jobs are done; a sampler session
# counts the leases and running jobs as often as it can meanwhile.
#   - the limit is reached (the test presses it) and never exceeded;
#   - every job succeeded with exactly one attempt (nothing was lost, no
#     claim handed out a job twice);
#   - no reservation is left behind: with the clients gone, a claim gets
#     the whole limit.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin claims

JOBS=400
LIMIT=5
e2e_cluster <<CONF
remora.max_workers = 0
remora.max_active_leases = $LIMIT
remora.default_bucket = 'target'
max_connections = 40
CONF
q "CREATE EXTENSION remora" >/dev/null
q "SELECT count(remora_submit('https://example.com/c/' || g || '.bin')) FROM generate_series(1, $JOBS) g" >/dev/null
q "CREATE TABLE samples (leases bigint, running bigint); CREATE TABLE stop_sampling (x int)" >/dev/null

# the sampler: a new snapshot for each count, until told to stop (or 120 s)
psql -X -q -d postgres -c "
DO \$\$
DECLARE deadline timestamptz := clock_timestamp() + interval '120 seconds';
BEGIN
	WHILE clock_timestamp() < deadline AND NOT EXISTS (SELECT 1 FROM stop_sampling) LOOP
		INSERT INTO samples SELECT (SELECT count(*) FROM remora.leases),
								   (SELECT count(*) FROM remora.jobs WHERE state = 'running');
		COMMIT;
	END LOOP;
END \$\$" >"$T/sampler.log" 2>&1 &
SAMPLER=$!
e2e_at_exit "kill_if_same TERM $SAMPLER $(pid_start $SAMPLER)"

INC="('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid"
cat >"$T/claim.sql" <<SQL
SET client_min_messages = warning;
CREATE TEMP TABLE IF NOT EXISTS claimed (attempt_id uuid, fencing_token bigint, p text);
BEGIN;
INSERT INTO claimed SELECT attempt_id, fencing_token, spec ->> 'staging_prefix'
  FROM remora.claim($INC, 3);
SELECT pg_sleep(0.002);
COMMIT;
BEGIN;
SELECT count(*) FILTER (WHERE NOT remora.commit(attempt_id, fencing_token,
	jsonb_build_object('key', p || 'manifest.json', 'etag', 'm', 'sha256', repeat('0', 64),
					   'members', 0, 'bytes', 0))) AS refused FROM claimed \gset
\if :refused > 0
SELECT 1 / 0;
\endif
DELETE FROM claimed;
COMMIT;
SQL
done_jobs() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE state = 'succeeded'")" = "$JOBS" ]; }
for round in $(seq 1 20); do
	pgbench -n -c 8 -j 8 -t 40 -f "$T/claim.sql" postgres >"$T/pgbench.$round.log" 2>&1 ||
		{ not_ok "pgbench round $round ran"; cat "$T/pgbench.$round.log"; break; }
	done_jobs && break
done
q "INSERT INTO stop_sampling VALUES (1)" >/dev/null
wait "$SAMPLER"
no_refusal() { ! grep -q "division by zero" "$T"/pgbench.*.log; }
check "the pgbench clients never saw a refused commit" no_refusal
check "every job succeeded" done_jobs
check_eq "each with exactly one attempt" \
	"$(q "SELECT count(*) || ' ' || count(DISTINCT job_id) FROM remora.attempts")" "$JOBS $JOBS"
check "the sampler took a few hundred samples" \
	test "$(q "SELECT count(*) FROM samples")" -ge 200
check_eq "the limit was reached" "$(q "SELECT max(running) FROM samples")" "$LIMIT"
check_eq "and never exceeded, in leases or running jobs" \
	"$(q "SELECT greatest(max(leases), max(running)) FROM samples")" "$LIMIT"
q "SELECT count(remora_submit('https://example.com/after/' || g || '.bin')) FROM generate_series(1, $LIMIT) g" >/dev/null
check_eq "no reservation is left behind: the whole limit can be claimed" \
	"$(q "SELECT count(*) FROM remora.claim('99999999-9999-9999-9999-999999999999', 10)")" "$LIMIT"
e2e_finish
