#!/usr/bin/env bash
#
# pg_cron: a job scheduled every minute submits with an idempotency key
# derived from the scheduled minute, so a repeated run in the same minute
# does not submit twice; the job's provenance, and the recovery ledger of
# its attempt, record the pg_cron job id.  Real pg_cron from Debian; its
# finest schedule is one minute, so this waits for the next minute.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin cron_provenance

CLUSTER_PRELOAD=pg_cron,remora e2e_cluster <<CONF
remora.max_workers = 0
remora.default_bucket = 'target'
cron.database_name = 'postgres'
CONF

q "CREATE EXTENSION remora; CREATE EXTENSION pg_cron" >/dev/null
# the recipe: the key is the scheduled minute, so a rerun is a no-op
cron_job=$(q "SELECT cron.schedule('remora-nightly', '* * * * *',
	\$\$SELECT remora_submit('https://example.com/weights.bin',
	    idempotency_key => 'weights-' || to_char(date_trunc('minute', now()), 'YYYYMMDD\"T\"HH24MI'))\$\$)")
check "pg_cron accepted the schedule" test -n "$cron_job"

jobs_submitted() { [ "$(q "SELECT count(*) FROM remora.jobs")" -ge 1 ]; }
if wait_for 130 jobs_submitted; then
	ok "pg_cron submitted a job within two minutes"
else
	not_ok "pg_cron submitted no job; run details: $(q "SELECT string_agg(status || ': ' || coalesce(return_message, ''), '; ') FROM cron.job_run_details")"
fi
check_eq "the job's provenance names the pg_cron job" \
	"$(q "SELECT provenance ->> 'cron_job_id' FROM remora.jobs ORDER BY job_id LIMIT 1")" "$cron_job"
check "the provenance has the pg_cron run id" \
	test -n "$(q "SELECT provenance ->> 'cron_run_id' FROM remora.jobs ORDER BY job_id LIMIT 1")"
q "SELECT count(*) FROM remora.claim('11111111-1111-1111-1111-111111111111')" >/dev/null
check_eq "the attempt's recovery ledger carries it" \
	"$(q "SELECT provenance ->> 'cron_job_id' FROM remora.attempts ORDER BY job_id LIMIT 1")" "$cron_job"

# the same minute's command run again (as a retry would) returns the job
key=$(q "SELECT idempotency_key FROM remora.jobs ORDER BY job_id LIMIT 1")
again=$(q "SELECT remora_submit('https://example.com/weights.bin', idempotency_key => '$key')")
check_eq "a rerun with the minute's key returns the same job" "$again" \
	"$(q "SELECT min(job_id) FROM remora.jobs")"
check_eq "one job per scheduled minute" \
	"$(q "SELECT count(*) = count(DISTINCT idempotency_key) FROM remora.jobs")" "t"
manual=$(q "SELECT remora_submit('https://example.com/x.bin')")
check_eq "a manual submit records no cron job" \
	"$(q "SELECT provenance ? 'cron_job_id' FROM remora.jobs WHERE job_id = $manual")" "f"
q "SELECT cron.unschedule('remora-nightly')" >/dev/null

e2e_finish
