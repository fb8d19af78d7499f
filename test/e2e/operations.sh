#!/usr/bin/env bash
#
# What a DBA relies on, end to end: presigned URLs fetched with curl (and
# refused once expired or tampered with), hard delete of a job's objects
# that survives a crash half-way, statistics and checkpoint-writer counters,
# and what pg_stat_activity shows of the workers.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin operations

stack_up
make_file small.bin 1000000
make_file doomed.bin 12000000
make_file watched.bin 20000000

j=$(q "SELECT remora_submit('$SRC/small.bin')")
check "a job succeeds" wait_state "$j" succeeded 30
want=$(sha256sum "$WWW/small.bin" | cut -d' ' -f1)

# --- presigned URLs: a plain curl reads the committed member
url=$(q "SELECT remora_presign($j, 'small.bin', '1 minute')")
check_eq "presign: curl reads the member through the URL" \
	"$(curl -s "$url" | sha256sum | cut -d' ' -f1)" "$want"
check_eq "presign: the URL holds no access secret" "$(grep -c 'Secret\|secret' <<<"$url" || true)" "0"
check_eq "presign: a tampered signature is refused" \
	"$(curl -s -o /dev/null -w '%{http_code}' "${url%?}$([ "${url: -1}" = 0 ] && echo 1 || echo 0)")" "403"
short=$(q "SELECT remora_presign($j, 'small.bin', '1 second')")
expired() { [ "$(curl -s -o /dev/null -w '%{http_code}' "$short")" = 403 ]; }
check "presign: an expired URL is refused" wait_for 10 expired
check_eq "presign: only committed members" \
	"$(psql -X -q -t -A -c "SELECT remora_presign($j, 'other.bin')" 2>&1 | grep -c 'has no committed member')" "1"
check_eq "presign: the ttl is bounded by remora.presign_max_ttl" \
	"$(psql -X -q -t -A -c "SELECT remora_presign($j, 'small.bin', '2 days')" 2>&1 | grep -c 'invalid ttl')" "1"
q "CREATE ROLE stranger LOGIN; GRANT remora_user TO stranger" >/dev/null
check_eq "presign: another user's job does not exist" \
	"$(psql -X -q -t -A -U stranger -d postgres -c "SELECT remora_presign($j, 'small.bin')" 2>&1 | grep -c "job $j does not exist")" "1"

# --- hard delete: the objects go, the tombstone stays; a crash half-way
# through (the store's DELETE held, then every worker killed) is survived
member=$(q "SELECT key FROM remora_result($j)")
rule "$S3_PROXY" "match=DELETE%20/target/remora/$j/&action=hold&count=1"
q "SELECT remora_delete($j, true)" >/dev/null
held() { [ "$(hits "$S3_PROXY" "DELETE%20/target/remora/$j/")" -ge 1 ]; }
check "hard delete: a worker is deleting the job's objects" wait_for 30 held
kill_worker "$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora worker' LIMIT 1")"
curl -s "http://127.0.0.1:$S3_PROXY/__release" >/dev/null
deleted() { [ "$(q "SELECT hard_deleted_at IS NOT NULL FROM remora.jobs WHERE job_id = $j" 2>/dev/null)" = t ]; }
check "hard delete: completed after the crash" wait_for 60 deleted
check_eq "hard delete: no object remains under the job's prefix" "$(staging_objects "$j")" "0"
check_eq "hard delete: the member is gone from the store" \
	"$(aws_s3 s3 ls "s3://target/$member" 2>/dev/null | wc -l)" "0"
check_eq "hard delete: the tombstone stays, out of the default view" \
	"$(q "SELECT count(*) FROM remora.jobs WHERE job_id = $j AND deleted_at IS NOT NULL") $(q "SELECT count(*) FROM remora_jobs WHERE job_id = $j")" "1 0"
check_eq "hard delete: no result and no URL any more" \
	"$(q "SELECT count(*) FROM remora_result($j)") $(psql -X -q -t -A -c "SELECT remora_presign($j, 'small.bin')" 2>&1 | grep -c 'has no committed member')" "0 1"
q "SELECT remora_delete($j, true)" >/dev/null
check_eq "hard delete: repeating it changes nothing" \
	"$(q "SELECT count(*) FROM remora.jobs WHERE job_id = $j AND hard_deleted_at IS NOT NULL")" "1"

# --- hard delete of a running job: cancelled first, then deleted
k=$(q "SELECT remora_submit('$SRC/slow/doomed.bin')")
check "hard delete of a running job: it is under way" wait_for 30 live_at_least "$k" 1000000
q "SELECT remora_delete($k, true)" >/dev/null
check "hard delete of a running job: it is cancelled" wait_state "$k" cancelled 10
deleted_k() { [ "$(q "SELECT hard_deleted_at IS NOT NULL FROM remora.jobs WHERE job_id = $k")" = t ]; }
check "hard delete of a running job: its objects are deleted" wait_for 30 deleted_k
check_eq "hard delete of a running job: nothing remains" "$(staging_objects "$k")" "0"

# --- what a DBA sees while a transfer runs (20 MB at 1 MB/s: the checks
# below have some 14 s of it left when it is 6 MB along).  The doomed
# job's checkpoint may have been refused by its cancellation (that is what
# refusals count), so the watched job is judged by what it adds.
refused_before=$(q "SELECT refusals FROM remora_checkpoint_stats")
w=$(q "SELECT remora_submit('$SRC/slow/watched.bin')")
check "watched: under way" wait_for 30 live_at_least "$w" 6000000
check "remora_progress: rate and ETA, of the job's first attempt, running" \
	test "$(q "SELECT bytes_per_second > 0 AND eta IS NOT NULL AND percent > 0 AND attempt_no = 1 AND state = 'running' FROM remora_progress WHERE job_id = $w")" = t
check "remora_workers: live incarnations with heartbeats and leases" \
	test "$(q "SELECT count(*) FROM remora_workers WHERE stopped_at IS NULL AND state = 'running' AND heartbeat_at > now() - interval '30 seconds'")" -ge 2
check "remora_stats: current throughput" \
	test "$(q "SELECT bytes_per_second > 0 AND bytes_in_flight > 0 FROM remora_stats")" = t
check_eq "pg_stat_activity: a launcher and two workers" \
	"$(q "SELECT string_agg(backend_type, ',' ORDER BY backend_type) FROM pg_stat_activity WHERE backend_type LIKE 'remora%'")" \
	"remora launcher,remora worker,remora worker"
# (between its transactions: one sampled inside a call shows the call)
says_job() {
	[ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker' AND state = 'idle' AND query LIKE '%transferring job $w attempt %'")" = 1 ]
}
check "pg_stat_activity: a worker says which job and attempt it moves" wait_for 10 says_job
# (the first checkpoint follows the first sealed part by up to a second)
checkpointed() {
	[ "$(q "SELECT transactions > 0 AND checkpoints >= transactions AND max_batch >= 1 AND refusals = $refused_before AND mean_commit_ms >= 0 FROM remora_checkpoint_stats")" = t ]
}
check "remora_checkpoint_stats: checkpoints are written and coalesced" wait_for 20 checkpointed
check "watched: succeeds" wait_state "$w" succeeded 60
# (deleted jobs leave the statistics with the default view)
check_eq "remora_stats: bytes committed and jobs by state" \
	"$(q "SELECT (bytes_committed >= 20000000)::text || ' ' || succeeded || ' ' || cancelled FROM remora_stats")" "true 1 0"
q "SELECT remora_submit('$SRC/missing.bin')" >/dev/null
failed_one() { [ "$(q "SELECT failed FROM remora_stats")" = 1 ]; }
check "a failing job" wait_for 30 failed_one
check_eq "remora_stats: failures by class" \
	"$(q "SELECT failures_by_class ->> 'http' FROM remora_stats")" "1"

# --- retention, by the launcher: with a short retention, finished jobs'
# history is pruned and their rows stay as tombstones
q "ALTER SYSTEM SET remora.retention = '2s'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
pruned() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE pruned_at IS NOT NULL AND state = 'failed'")" -ge 1 ]; }
check "retention: the launcher prunes the failed job's history" wait_for 60 pruned
check_eq "retention: its attempts are gone, its row and last error stay" \
	"$(q "SELECT count(a.*) || ' ' || (j.last_error ->> 'class') FROM remora.jobs j LEFT JOIN remora.attempts a USING (job_id) WHERE j.state = 'failed' GROUP BY j.job_id, j.last_error")" "0 http"
check_eq "retention: a pruned job's result is still offered" \
	"$(q "SELECT count(*) FROM remora_result($w)")" "1"

e2e_finish
