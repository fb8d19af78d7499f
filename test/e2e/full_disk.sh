#!/usr/bin/env bash
#
# A full disk under PostgreSQL.  The cluster's data directory (pg_wal
# included) is a 160 MB tmpfs of its own; the server log is outside it, as
# an operator's would be.  Background workers and a remora-worker run
# large jobs from a slow source, each with a validated checkpoint, when a
# filler file takes every free byte of that file system, twice:
#
# 1. With room left in the current WAL segment, a statement that must
#    extend a table fails with SQLSTATE 53100 ("could not extend file ...
#    No space left on device"): a submission is refused, and small jobs
#    that finish their transfers meanwhile cannot commit.  Their workers
#    keep the results and try again, more than the five times that once
#    gave them up; once the filler is removed, the first attempts commit.
# 2. Once the server needs a new WAL segment, it stops with a PANIC
#    ("could not write to file "pg_wal/xlogtemp.N": No space left on
#    device"); crash recovery, needing one too, fails, and the postmaster
#    exits.  The filler is removed and the server started (pg_ctl start),
#    as an operator would.
#
# Then: every job ends succeeded with exactly one result, each attempt
# that was running at the PANIC is committed by itself or replaced by one
# that resumed from its checkpoint (no restart from zero: the ranged GETs
# of the resumed transfers are in nginx's log), every member reads back
# from the store with its recorded SHA-256, the staging of every attempt
# is cleaned and nothing else is left in the store (on RGW, which lists
# them: no multipart upload left open).  Every wait has a deadline.
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/disk.sh"
e2e_begin full_disk

# the data directory is a tmpfs of the test's own (test/lib/disk.sh)
DATA=$T/pg/data
FILLER=$DATA/filler
disk_mount "$DATA" 160m || { not_ok "a tmpfs for the data directory is mounted"; exit 1; }
stack_up

free_bytes() { disk_free "$DATA"; }
server_up() { runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }
answers() { q "SELECT 1" >/dev/null 2>&1; }
enospc_logged() { grep -q "No space left on device" "$LOG"; }
not_logged() { ! grep -q "$1" "$LOG"; }

q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw" >/dev/null
e2e_at_exit "cp '$T/wd.log' /tmp/full_disk$E2E_TAG-wd.log 2>/dev/null"

# ---- large jobs under way on both kinds of worker ----
# remora-worker takes the first two (the background workers wait), then
# the background workers take two more
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
bgworkers() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = "$1" ]; }
check "the background workers wait" wait_for 20 bgworkers 0
start_remora_worker wd --label wd --concurrency 2 "host=$T/pg port=$PG_PORT dbname=postgres user=rw"
live_wd() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = 'wd' AND stopped_at IS NULL")" = 1 ]; }
check "remora-worker connects" wait_for 20 live_wd

for i in 1 2 3 4; do make_file "large$i.bin" 60000000; done # 5 MB parts at 1 MB/s
for i in 1 2 3; do make_file "small$i.bin" 1500000; done # 6 s at 256 KB/s
large=$(q "SELECT string_agg(remora_submit('$SRC/slow/large' || g || '.bin')::text, ' ') FROM generate_series(1, 2) g")
external_runs() { [ "$(q "SELECT count(*) FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt JOIN remora.incarnations i ON i.incarnation = a.incarnation WHERE j.state = 'running' AND i.label = 'wd'")" = 2 ]; }
check "remora-worker runs two large jobs" wait_for 20 external_runs
q "ALTER SYSTEM SET remora.max_workers = 2" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
check "the background workers start" wait_for 20 bgworkers 2
large="$large $(q "SELECT string_agg(remora_submit('$SRC/slow/large' || g || '.bin')::text, ' ') FROM generate_series(3, 4) g")"
mid_transfer() {
	[ "$(q "SELECT count(*) FROM remora.jobs j JOIN remora.checkpoints c USING (job_id)
		WHERE j.state = 'running' AND c.attempt_id = j.current_attempt AND c.bytes_done >= 5000000")" = 4 ]
}
check "the four large jobs are mid-transfer, each with a validated checkpoint" wait_for 60 mid_transfer

# ---- the disk fills, WAL has room: statements that need space fail ----
# A fresh WAL segment first, so that this part never needs a new one
q "SELECT pg_switch_wal()" >/dev/null
q "CHECKPOINT" >/dev/null
# small jobs from a slower source, under way as the disk fills: they end
# while it is full
small=$(q "SELECT string_agg(remora_submit('$SRC/slower/small' || g || '.bin')::text, ',') FROM generate_series(1, 3) g")
small_running() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE job_id IN ($small) AND state = 'running'")" = 3 ]; }
check "three small jobs run" wait_for 30 small_running
fill() { disk_fill "$FILLER"; }
fill # the filler takes every free byte (dd stops at ENOSPC)
check_eq "the data directory's file system is full" "$(free_bytes)" 0
echo "# data directory: $(df -h --output=size,used,avail "$DATA" | tail -1)"

# A statement that must extend a table fails with disk_full.  Submissions
# in batches large enough to need new pages, until one is refused.
refused=""
for _ in $(seq 1 20); do
	refused=$(psql -X -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c \
		"SELECT count(remora_submit('$SRC/refused-' || g || '-' || repeat('x', 200) || '.bin')) FROM generate_series(1, 500) g" 2>&1 >/dev/null) &&
		refused=""
	[ -z "$refused" ] || break
done
echo "$refused" | sed 's/^/# submit on a full disk: /'
check "a submission that needs a new page is refused with SQLSTATE 53100" grep -q "53100" <<<"$refused"
check "naming the full device" grep -q "No space left on device" <<<"$refused"
check "the server log says so" enospc_logged
check "while the disk is full, remora_stats still answers (reads need no space)" answers
q "SELECT * FROM remora_stats" | sed 's/^/# remora_stats on a full disk: /'

# The small jobs' transfers end; their results cannot be committed (the
# results table must grow).  The workers keep them and try again, further
# apart, while their leases are renewed: more often than the five tries
# that once gave a finished transfer up within a quarter of a second.  A
# renewal writes too: where the pages it writes have no room left, it
# fails on the full disk like a commit, the lease lapses and the job is
# tried again, which loses nothing (the checks after the space is back
# say so).  So each small job either keeps its first attempt, its commit
# tried again and again, or loses it to a lapsed lease, and at least one
# shows the former.
commit_failures() { grep -cE "job $1: committing a result failed: .*No space left on device" "$LOG" || true; }
kept_first() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE job_id = $1 AND state = 'running' AND attempts_used = 1")" = 1 ]; }
lapsed() { [ "$(q "SELECT count(*) FROM remora.attempts WHERE job_id = $1 AND attempt_no = 1 AND state = 'lost'")" = 1 ]; }
settled_on_full_disk() {
	local j
	for j in ${small//,/ }; do
		{ [ "$(commit_failures "$j")" -ge 7 ] && kept_first "$j"; } || lapsed "$j" || return 1
	done
}
check "each small job's commit is tried again more than 5 times on the full disk, or its lease lapsed" wait_for 90 settled_on_full_disk
kept=0
for j in ${small//,/ }; do lapsed "$j" || kept=$((kept + 1)); done
echo "# small jobs that kept their first attempt: $kept of 3"
check "at least one small job keeps its first attempt, its commit tried again while its lease holds" [ "$kept" -ge 1 ]
q "SELECT job_id, state, attempts_used, bytes_done, bytes_total, last_error FROM remora_jobs WHERE job_id IN ($small)" |
	sed 's/^/# remora_jobs on a full disk: /'

# the space comes back: the results are committed by the attempts that
# transferred them, where their leases held
rm -f "$FILLER"
small_done() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE job_id IN ($small) AND state = 'succeeded'")" = 3 ]; }
check "space back: the small jobs succeed" wait_for 60 small_done
check_eq "each that kept its first attempt committed by it: nothing transferred again" \
	"$(q "SELECT count(*) FROM remora.attempts WHERE job_id IN ($small) AND attempt_no = 1 AND state = 'succeeded'")" "$kept"
check "no attempt was given up" not_logged "giving the attempt up"

# ---- the disk fills again, and WAL needs a new segment: a PANIC ----
check "the large jobs are still mid-transfer" wait_for 10 mid_transfer
running_before=$(q "SELECT string_agg(format('(%L::uuid, %s::bigint, %s::bigint)', a.attempt_id, a.fencing_token, c.bytes_done), ',' ORDER BY a.job_id)
	FROM remora.attempts a JOIN remora.checkpoints c USING (attempt_id) WHERE a.state = 'running'")
fill
check_eq "the data directory's file system is full again" "$(free_bytes)" 0

# WAL: each switch to a new segment needs one that is not there yet; the
# first that must be made fails, in a critical section: a PANIC
panicked() { grep -qE "PANIC:.*No space left on device" "$LOG"; }
wal_until_panic() {
	psql -X -q -c "SELECT pg_switch_wal(); CREATE TEMP TABLE t AS SELECT 1; CHECKPOINT" >/dev/null 2>&1
	panicked
}
check "a new WAL segment cannot be made: the server PANICs" wait_for 60 wal_until_panic
grep -E "PANIC|No space left|terminated by signal|startup process|aborting startup|database system is shut down" "$LOG" |
	tail -n 12 | sed 's/^/# server log: /'

# either crash recovery came through (it may find room in the current
# segment) or the postmaster gave up; see which.  The disk stays full for
# longer than a lease (4 s) beyond that: the attempts cut off lose theirs.
settled() { answers || ! server_up; }
check "the server settles (back, or down) while the disk stays full" wait_for 60 settled
past() { [ "$(date +%s)" -ge "$1" ]; }
wait_for 20 past $(($(date +%s) + 6))
if answers; then state_full="up"; else state_full="down"; fi
echo "# with the disk full after the PANIC the server is $state_full"

# ---- the space comes back ----
rm -f "$FILLER"
echo "# space returned: $(df -h --output=avail "$DATA" | tail -1)"
if ! server_up; then
	# what an operator does: start it; crash recovery runs first
	check "the server starts again once space is back (pg_ctl start)" cluster_start "$T/pg"
fi
check "the server answers" wait_for 120 answers
check "the launcher runs" wait_for 60 bgworkers 2
check "remora-worker is connected again" wait_for 120 live_wd

all_succeeded() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE state <> 'succeeded'")" = 0 ]; }
if ! check "every job succeeds" wait_for 180 all_succeeded; then
	q "SELECT job_id, state, last_error FROM remora.jobs WHERE state <> 'succeeded'" | sed 's/^/# /'
fi
q "SELECT * FROM remora_stats" | sed 's/^/# remora_stats after: /'
jobs=$(q "SELECT count(*) FROM remora.jobs")
check_eq "no submission refused on the full disk left a job behind" \
	"$(q "SELECT count(*) FROM remora.jobs WHERE source LIKE '%/refused-%'")" 0
check_eq "one result per job" \
	"$(q "SELECT count(*) || '/' || count(DISTINCT job_id) FROM remora.results")" "$jobs/$jobs"
check_eq "at most one succeeded attempt per job, and it is the result's" \
	"$(q "SELECT count(*) FROM (SELECT a.job_id FROM remora.attempts a LEFT JOIN remora.results r USING (job_id)
		WHERE a.state = 'succeeded' GROUP BY a.job_id
		HAVING count(*) > 1 OR bool_or(a.attempt_id IS DISTINCT FROM r.attempt_id)) s")" 0
# a running attempt kept its bytes: it committed itself, or the attempt
# that did resumed (directly or through others) from it, never from zero
check_eq "every attempt running when the disk filled was committed by itself or resumed from its checkpoint" \
	"$(q "WITH RECURSIVE chain (job_id, attempt_id, from_zero) AS (
			SELECT a.job_id, a.attempt_id, false FROM (VALUES $running_before) old (attempt_id, token, bytes)
			  JOIN remora.attempts a USING (attempt_id)
			UNION ALL
			SELECT n.job_id, n.attempt_id, c.from_zero OR n.restart_reason IS NOT NULL
			  FROM chain c JOIN remora.attempts n ON n.resumed_from = c.attempt_id)
		SELECT count(*) FILTER (WHERE NOT c.from_zero) || '/' || count(*)
		  FROM remora.results r JOIN chain c USING (job_id, attempt_id)")" "4/4"
check_eq "no attempt restarted from zero" \
	"$(q "SELECT count(*) FROM remora.attempts WHERE restart_reason IS NOT NULL")" 0
q "SELECT job_id, restart_reason FROM remora.attempts WHERE restart_reason IS NOT NULL" |
	sed 's/^/# restarted from zero: job|reason: /'
check "the resumed transfers asked the source for ranges" \
	grep -q '"GET /slow/large[1-4].bin HTTP/1.1" 206' "$T/nginx/access.log"
q "SELECT a.job_id, a.state, coalesce(i.label, i.kind), old.bytes, n.attempt_id = a.attempt_id
	FROM (VALUES $running_before) old (attempt_id, token, bytes)
	JOIN remora.attempts a USING (attempt_id) JOIN remora.incarnations i ON i.incarnation = a.incarnation
	JOIN remora.results r ON r.job_id = a.job_id JOIN remora.attempts n ON n.attempt_id = r.attempt_id" |
	sed 's/^/# running when the disk filled: job|state|worker|checkpointed bytes|committed itself: /'

bad=0
while IFS='|' read -r job bucket key sha file; do
	got=$(aws_s3 s3 cp "s3://$bucket/$key" - 2>/dev/null | sha256sum | cut -d' ' -f1)
	want=$(sha256sum "$WWW/$file" | cut -d' ' -f1)
	if [ "$got" != "$sha" ] || [ "$sha" != "$want" ]; then
		echo "# job $job: $key has $got, the result says $sha, the source $want"
		bad=$((bad + 1))
	fi
done < <(q "SELECT r.job_id, m.bucket, m.key, m.sha256, regexp_replace(j.source, '^.*/', '')
	FROM remora.results r JOIN remora.members m USING (attempt_id) JOIN remora.jobs j USING (job_id)
	ORDER BY r.job_id")
check_eq "every member's SHA-256 recomputed from the store matches the result and the source" "$bad" 0
cleaned() { [ "$(q "SELECT count(*) FROM remora.attempts WHERE cleaned_at IS NULL")" = 0 ]; }
check "the staging of every attempt is cleaned" wait_for 90 cleaned
# what stays in the store is the committed attempts' results alone
q "SELECT remora._staging_prefix(j.prefix, j.job_id, r.attempt_id) FROM remora.results r JOIN remora.jobs j USING (job_id)" >"$T/kept"
check_eq "no object is left in the store outside the committed attempts' prefixes" \
	"$(aws_s3 s3 ls --recursive s3://target/ 2>/dev/null | awk '{print $4}' | grep -cvF -f "$T/kept" || true)" 0
if [ "${REMORA_STORE:-s3rver}" = rgw ]; then
	check_eq "no multipart upload left open" \
		"$(aws_s3 s3api list-multipart-uploads --bucket target --query 'length(Uploads || `[]`)' --output text)" 0
fi

e2e_finish
