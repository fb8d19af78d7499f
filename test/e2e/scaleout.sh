#!/usr/bin/env bash
#
# Scaling out: three remora-worker processes beside a background worker of
# one cluster, and what happens to them.
#
#   - 200 jobs of mixed kinds (http objects, S3 prefixes, single S3
#     objects, Hugging Face snapshots from the local hub, exports of
#     prefix jobs that succeeded): every job succeeds once, every member
#     read back from the store, remora.max_active_leases never exceeded
#     (sampled through the run), nor any remora-worker's --concurrency,
#     and each one's active_leases in remora_workers always its running
#     attempts; every worker incarnation commits some;
#   - the server stopped at once (immediate) and started under the
#     workers: they reconnect and every job finishes;
#   - kill -9 of a worker mid-transfer: its attempt is reclaimed once its
#     lease lapses and resumed from its checkpoint with a greater token;
#     its row in remora_workers keeps a heartbeat that stopped moving;
#   - a worker paused (SIGSTOP) past its lease, then resumed: its attempt
#     never commits, the replacement's does, its staging is cleaned;
#   - a worker whose connections are cut (test/faults/tcpproxy.js between
#     it and PostgreSQL, dropped mid-round, then refused) behaves like the
#     paused one: it stops its attempt before the lease it last renewed
#     expires, and comes back when the network does.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin scaleout
stack_up

# room for 17 attempts (a background worker's 2, three remora-workers' 5)
# against 14 permits: the limit binds, and the first wave of claims, woken
# by the submit's NOTIFY, still leaves each external worker at least two
LIMIT=14
# the workers' logs are kept as /tmp/scaleout-w*.log
e2e_at_exit 'for f in "$T"/w*.log; do cp "$f" "/tmp/scaleout$E2E_TAG-${f##*/}"; done'
CONNINFO="host=$T/pg port=$PG_PORT dbname=postgres user=rw"
# the local Hugging Face Hub (test/hub): 15 repositories of three files,
# the largest (1 MiB or more) an LFS file behind its redirect
HUB_PORT=$(free_port)
CDN_PORT=$(free_port)
HUB=$T/hub
TOKEN=hf_scaleoutToken0123456789
for i in $(seq 1 15); do
	r=$HUB/models/scale/r$i
	mkdir -p "$r/weights"
	head -c $((600 + i)) /dev/urandom >"$r/README.md"
	head -c $((300 + i)) /dev/urandom >"$r/config.json"
	head -c $((1100000 + i * 13)) /dev/urandom >"$r/weights/model.bin"
done
start_hub "$HUB_PORT" "$CDN_PORT" "$HUB" "$TOKEN"
q "ALTER SYSTEM SET remora.hf_endpoint = 'http://127.0.0.1:$HUB_PORT'" >/dev/null
q "ALTER SYSTEM SET remora.hf_token = '$TOKEN'" >/dev/null
q "ALTER SYSTEM SET remora.max_active_leases = $LIMIT" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw" >/dev/null

declare -A WPID
worker() {	# worker NAME [ARGS...]: start remora-worker NAME (label NAME)
	local name=$1
	shift
	start_remora_worker "$name" --label "$name" "$@"
	WPID[$name]=$REMORA_WORKER_PID
}
live() {	# live LABEL: its incarnation is recorded and not ended
	[ "$(q "SELECT count(*) FROM remora_workers WHERE label = '$1' AND stopped_at IS NULL")" = 1 ]
}
stop_worker() {	# stop_worker NAME: SIGTERM; its exit status in $RC
	RC=0
	kill -TERM "${WPID[$1]}"
	wait "${WPID[$1]}" || RC=$?
}
label_of() {	# label_of ATTEMPT: the label of the incarnation that ran it
	q "SELECT coalesce(i.label, i.kind) FROM remora.attempts a JOIN remora.incarnations i USING (incarnation) WHERE a.attempt_id = '$1'"
}
current_attempt() { q "SELECT current_attempt FROM remora.jobs WHERE job_id = $1"; }
runs_on() {	# runs_on JOB LABEL: the job's running attempt is LABEL's
	[ "$(q "SELECT j.state || ':' || coalesce(i.label, '') FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt JOIN remora.incarnations i ON i.incarnation = a.incarnation WHERE j.job_id = $1")" = "running:$2" ]
}
# replaced JOB OLD LABEL: the job succeeded in an attempt of LABEL's with a
# greater token that resumed from OLD's checkpoint; OLD is lost
replaced() {
	check_eq "$4: the job succeeded" "$(state "$1")" succeeded
	check_eq "$4: the old attempt is lost and never committed" \
		"$(q "SELECT a.state || ':' || (r.attempt_id = a.attempt_id) FROM remora.attempts a JOIN remora.results r USING (job_id) WHERE a.attempt_id = '$2'")" \
		"lost:false"
	check_eq "$4: the result is $3's, with a greater token, resumed from the old checkpoint" \
		"$(q "SELECT coalesce(i.label, '') || ':' || (r.fencing_token > o.fencing_token) || ':' || (a.resumed_from = o.attempt_id) || ':' || (a.restart_reason IS NULL)
			FROM remora.results r JOIN remora.attempts a ON a.attempt_id = r.attempt_id
			JOIN remora.incarnations i ON i.incarnation = a.incarnation
			JOIN remora.attempts o ON o.attempt_id = '$2' WHERE r.job_id = $1")" \
		"$3:true:true:true"
}
staging_gone() {	# staging_gone ATTEMPT: cleaned, and no object left under its prefix
	local prefix
	[ "$(q "SELECT cleaned_at IS NOT NULL FROM remora.attempts WHERE attempt_id = '$1'")" = t ] || return 1
	prefix=$(q "SELECT remora._staging_prefix(j.prefix, j.job_id, a.attempt_id) FROM remora.attempts a JOIN remora.jobs j USING (job_id) WHERE a.attempt_id = '$1'")
	[ "$(aws_s3 s3 ls --recursive "s3://target/$prefix" 2>/dev/null | wc -l)" = 0 ]
}

# ---- one background worker drains a backlog without waiting for its poll
# (it claims again as soon as an attempt ends after a full batch) ----
q "ALTER SYSTEM SET remora.max_workers = 1" >/dev/null
q "ALTER SYSTEM SET remora.worker_concurrency = 2" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
one_bgworker() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 1 ]; }
check "one background worker runs, two attempts at a time" wait_for 20 one_bgworker
for i in $(seq 1 16); do make_file "d$i.bin" 10000; done
first=$(q "SELECT max(job_id) FROM remora.jobs")
first=${first:-0}
q "SELECT count(remora_submit('$SRC/d' || g || '.bin')) FROM generate_series(1, 16) g" >/dev/null
drained() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE job_id > $first AND state = 'succeeded'")" = 16 ]; }
wait_for 60 drained || true
check_eq "16 jobs, two at a time, drained well within two of its 5 s polls" \
	"$(q "SELECT count(*) || ':' || (max(finished_at) - min(submitted_at) < interval '8 seconds') FROM remora.jobs WHERE job_id > $first AND state = 'succeeded'")" \
	"16:true"

# ---- 200 jobs, three external workers and the background worker ----
for n in w1 w2 w3; do worker "$n" --concurrency 5 "$CONNINFO"; done
all_live() { live w1 && live w2 && live w3; }
check "three remora-worker incarnations are live" wait_for 20 all_live

# 110 http objects through the fault proxy at 256 KiB/s (each takes a
# moment, so that the batch outlasts the external workers' polls), 40 S3
# prefixes of two objects, 25 single S3 objects, 15 Hub snapshots, and 10
# exports of prefix jobs once they succeeded: 200 jobs
for i in $(seq 1 110); do head -c $((120000 + i * 97)) /dev/urandom >"$WWW/h$i.bin"; done
rule "$SRC_PROXY" "match=/h&action=slow"
chmod 644 "$WWW"/h*.bin
for i in $(seq 1 40); do
	mkdir -p "$T/src/p$i"
	head -c $((1000 + i)) /dev/urandom >"$T/src/p$i/a.bin"
	head -c $((3000 + i)) /dev/urandom >"$T/src/p$i/b.bin"
done
mkdir -p "$T/src/o"
for i in $(seq 1 25); do head -c $((20000 + i * 211)) /dev/urandom >"$T/src/o/s$i.bin"; done
aws_s3 s3 cp --recursive --quiet "$T/src" s3://target/src/

# sample through the run, on one connection: the live leases, the running
# jobs, the most leases one remora-worker held, and the workers whose
# active_leases in remora_workers differ from their running attempts
touch "$T/sampling"
while [ -f "$T/sampling" ]; do
	echo "SELECT (SELECT count(*) FROM remora.leases) || ' ' || (SELECT count(*) FROM remora.jobs WHERE state = 'running')
		|| ' ' || (SELECT coalesce(max(active_leases), 0) FROM remora_workers WHERE kind = 'external' AND stopped_at IS NULL)
		|| ' ' || (SELECT count(*) FROM remora_workers w WHERE w.stopped_at IS NULL AND w.active_leases <>
			(SELECT count(*) FROM remora.attempts a WHERE a.incarnation = w.incarnation AND a.state = 'running'));"
	sleep 0.05
done | psql -X -A -t -q >"$T/samples" 2>&1 &
SAMPLER=$!

first=$(q "SELECT max(job_id) FROM remora.jobs")
first=${first:-0}
t0=$(date +%s)
q "SELECT count(remora_submit('$FLAKY/h' || g || '.bin')) FROM generate_series(1, 110) g" >/dev/null
q "SELECT count(remora_submit('s3://target/src/p' || g || '/')) FROM generate_series(1, 40) g" >/dev/null
q "SELECT count(remora_submit('s3://target/src/o/s' || g || '.bin')) FROM generate_series(1, 25) g" >/dev/null
q "SELECT count(remora_submit('hf://scale/r' || g)) FROM generate_series(1, 15) g" >/dev/null
BATCH="job_id > $first"
PREFIXES="$BATCH AND source LIKE 's3://target/src/p%/' AND state = 'succeeded'"
ten_prefixes() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE $PREFIXES")" -ge 10 ]; }
check "ten prefix jobs of the batch succeed" wait_for 60 ten_prefixes
q "SELECT count(remora_export(job_id, 'target', 'stable/so/' || job_id)) FROM (SELECT job_id FROM remora.jobs WHERE $PREFIXES ORDER BY job_id LIMIT 10) s" >/dev/null
batch_done() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE $BATCH AND state = 'succeeded'")" = 200 ]; }
if ! check "all 200 jobs succeed" wait_for 120 batch_done; then
	q "SELECT source_kind, state, count(*) FROM remora.jobs WHERE $BATCH GROUP BY 1, 2" | sed 's/^/# /'
fi
echo "# 200 jobs in $(($(date +%s) - t0)) s"
rm -f "$T/sampling"
wait "$SAMPLER" || true
check_eq "of every kind: http, S3 prefixes and objects, Hub snapshots, exports" \
	"$(q "SELECT string_agg(k || ' ' || n, ', ' ORDER BY k) FROM (SELECT CASE WHEN source_kind = 'export' THEN 'export'
		WHEN source LIKE 'hf://%' THEN 'hf' WHEN source LIKE 's3://%/' THEN 's3 prefix' WHEN source LIKE 's3://%' THEN 's3 object'
		ELSE 'http' END AS k, count(*) AS n FROM remora.jobs WHERE $BATCH AND state = 'succeeded' GROUP BY 1) s")" \
	"export 10, hf 15, http 110, s3 object 25, s3 prefix 40"

check_eq "each job succeeded once: one result, one succeeded attempt" \
	"$(q "SELECT count(*) || '/' || count(DISTINCT a.job_id) FROM remora.attempts a WHERE a.$BATCH AND a.state = 'succeeded'")" \
	"200/200"
max=$(awk '$1 ~ /^[0-9]+$/ { if ($1 > l) l = $1; if ($2 > r) r = $2; if ($3 > w) w = $3; m += $4; n++ } END { print n + 0, l + 0, r + 0, w + 0, m + 0 }' "$T/samples")
read -r nsamples maxleases maxrunning maxworker mismatched <<<"$max"
echo "# $nsamples samples: at most $maxleases leases, $maxrunning running jobs (limit $LIMIT), $maxworker leases in one remora-worker"
check "the lease count was sampled through the run" test "$nsamples" -ge 20
check "remora.max_active_leases ($LIMIT) was reached and never exceeded: $maxleases leases" \
	test "$maxleases" -le "$LIMIT" -a "$maxleases" -ge $((LIMIT - 2))
check "nor were more jobs running: $maxrunning" test "$maxrunning" -le "$LIMIT"
check "no remora-worker held more leases than its --concurrency (5), and one held several: $maxworker" \
	test "$maxworker" -le 5 -a "$maxworker" -ge 2
check_eq "remora_workers.active_leases was each worker's running attempts in every sample (samples that differ)" \
	"$mismatched" 0
q "SELECT coalesce(i.label, i.kind), count(*) FROM remora.results r JOIN remora.attempts a ON a.attempt_id = r.attempt_id
	JOIN remora.incarnations i ON i.incarnation = a.incarnation WHERE r.$BATCH GROUP BY 1 ORDER BY 1" |
	sed 's/^/# committed by /'
for n in w1 w2 w3; do
	check "remora-worker $n committed some of the jobs" \
		test "$(q "SELECT count(*) FROM remora.attempts a JOIN remora.incarnations i USING (incarnation)
			WHERE a.$BATCH AND a.state = 'succeeded' AND i.label = '$n'")" -gt 0
done
check "the background worker committed some too" \
	test "$(q "SELECT count(*) FROM remora.attempts a JOIN remora.incarnations i USING (incarnation)
		WHERE a.$BATCH AND a.state = 'succeeded' AND i.kind = 'worker'")" -gt 0

# every member, read back from the store at once, has its source's SHA-256,
# and every exported key its member's
mkdir -p "$T/dl"
aws_s3 s3 sync --quiet s3://target/ "$T/dl/"
bad=0
while IFS='|' read -r key sha src; do
	got=$(sha256sum "$T/dl/$key" 2>/dev/null | cut -d' ' -f1)
	[ "$got" = "$sha" ] && [ "$(sha256sum "$src" | cut -d' ' -f1)" = "$sha" ] || bad=$((bad + 1))
done < <(q "SELECT m.key, m.sha256, CASE WHEN j.source LIKE 'hf://%' THEN '$HUB/models/' || regexp_replace(j.source, '^hf://([^@]*).*$', '\1') || '/' || m.path
		WHEN j.source LIKE 's3://%/' THEN '$T/src/' || regexp_replace(j.source, '^s3://target/src/', '') || m.path
		WHEN j.source LIKE 's3://%' THEN '$T/src/' || regexp_replace(j.source, '^s3://target/src/', '')
		ELSE '$WWW/' || regexp_replace(j.source, '^.*/', '') END
	FROM remora.results r JOIN remora.members m USING (attempt_id) JOIN remora.jobs j USING (job_id)
	WHERE r.$BATCH")
check_eq "all 260 members read back from the store have their source's SHA-256" \
	"$bad/$(q "SELECT count(*) FROM remora.results r JOIN remora.members m USING (attempt_id) WHERE r.$BATCH")" "0/260"
bad=0
while IFS='|' read -r key sha; do
	[ "$(sha256sum "$T/dl/$key" 2>/dev/null | cut -d' ' -f1)" = "$sha" ] || bad=$((bad + 1))
done < <(q "SELECT e.prefix || '/' || m.path, m.sha256 FROM remora_exports e JOIN remora.results r USING (job_id)
	JOIN remora.members m USING (attempt_id) WHERE e.export_id > $first")
check_eq "all 20 exported keys hold their member" \
	"$bad/$(q "SELECT count(*) FROM remora_exports e JOIN remora.results r USING (job_id) JOIN remora.members m USING (attempt_id) WHERE e.export_id > $first")" "0/20"

# ---- the server stopped at once and started under the workers ----
for i in $(seq 1 16); do make_file "r$i.bin" 2500000; done
first=$(q "SELECT max(job_id) FROM remora.jobs")
q "SELECT count(remora_submit('$SRC/slow/r' || g || '.bin')) FROM generate_series(1, 16) g" >/dev/null
BATCH="job_id > $first"
some_running() { [ "$(q "SELECT count(*) FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt JOIN remora.incarnations i USING (incarnation) WHERE j.$BATCH AND j.state = 'running' AND i.kind = 'external'")" -ge 3 ]; }
check "transfers run in the external workers" wait_for 30 some_running
declare -A CONNECTS
for n in w1 w2 w3; do CONNECTS[$n]=$(grep -c "connected to" "$T/$n.log"); done
cluster_stop "$T/pg" immediate
cluster_start "$T/pg"
batch_done() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE $BATCH AND state = 'succeeded'")" = 16 ]; }
check "after the restart every job of the batch succeeds" wait_for 90 batch_done
for n in w1 w2 w3; do
	check "$n reconnected, its incarnation live" \
		test "$(grep -c "connected to" "$T/$n.log")" -gt "${CONNECTS[$n]}" -a "$(live "$n" && echo y)" = y
done
check_eq "each job of the batch succeeded once" \
	"$(q "SELECT count(*) || '/' || count(DISTINCT job_id) FROM remora.attempts WHERE $BATCH AND state = 'succeeded'")" "16/16"

# ---- from here on the external workers alone, one at a time ----
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
no_bgworker() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 0 ]; }
check "with remora.max_workers = 0 the background workers stop" wait_for 20 no_bgworker
stop_worker w2
rc=$RC
stop_worker w3
check_eq "SIGTERM: w2 and w3 exit 0" "$rc/$RC" "0/0"

# ---- kill -9 of a worker mid-transfer ----
make_file k.bin 10000000 # 5 MB parts, at 1 MB/s: 10 s
k=$(q "SELECT remora_submit('$SRC/slow/k.bin')")
check "w1 runs the job" wait_for 20 runs_on "$k" w1
check "its first part is checkpointed" wait_for 30 validated_at_least "$k" 5242880
old=$(current_attempt "$k")
W1_INC=$(q "SELECT incarnation FROM remora_workers WHERE label = 'w1' AND stopped_at IS NULL")
kill -9 "${WPID[w1]}"
killed_at=$(q "SELECT now()")
worker w4 "$CONNINFO"
check "after kill -9 the job is reclaimed and succeeds" wait_state "$k" succeeded 60
replaced "$k" "$old" w4 "kill -9"
verify "$k" k.bin
check_eq "the killed worker's row: not stopped, its heartbeat stopped moving at the kill, no lease left" \
	"$(q "SELECT stopped_at IS NULL, heartbeat_at <= '$killed_at', now() - heartbeat_at > interval '4 seconds', active_leases
		FROM remora_workers WHERE incarnation = '$W1_INC'")" "t|t|t|0"

# ---- SIGSTOP past the lease, then SIGCONT ----
make_file s.bin 10000000
s=$(q "SELECT remora_submit('$SRC/slow/s.bin')")
check "w4 runs the job" wait_for 20 runs_on "$s" w4
check "its first part is checkpointed" wait_for 30 validated_at_least "$s" 5242880
old=$(current_attempt "$s")
kill -STOP "${WPID[w4]}"
worker w5 "$CONNINFO"
check "past the paused worker's lease, w5 takes the job over" wait_for 30 runs_on "$s" w5
kill -CONT "${WPID[w4]}"
stopped() { grep -qE "job $s attempt $old (stopped|: commit refused)" "$T/w4.log"; }
check "resumed, w4 stops its attempt without committing" wait_for 20 stopped
check "the job succeeds" wait_state "$s" succeeded 60
replaced "$s" "$old" w5 "SIGSTOP"
verify "$s" s.bin
check "the paused attempt's staging is cleaned" wait_for 60 staging_gone "$old"
check "w4 runs on" live w4

# ---- a worker whose connection to PostgreSQL is cut ----
stop_worker w4
rc=$RC
stop_worker w5
check_eq "SIGTERM: w4 and w5 exit 0" "$rc/$RC" "0/0"
PX=$(free_port)
CT=$(free_port)
start_tcpproxy "$PX" "$PG_PORT" "$CT"
worker wp "host=127.0.0.1 port=$PX dbname=postgres user=rw"
check "a worker connects through the TCP proxy" wait_for 20 live wp
make_file p.bin 10000000
p=$(q "SELECT remora_submit('$SRC/slow/p.bin')")
check "it runs the job" wait_for 20 runs_on "$p" wp
check "its first part is checkpointed" wait_for 30 validated_at_least "$p" 5242880
old=$(current_attempt "$p")
tcpproxy "$CT" refuse >/dev/null
tcpproxy "$CT" drop >/dev/null
# cut off, the worker renews no more: the lease it last renewed expires at
# expires_at, until reconcile removes the row
lease_expires=$(q "SELECT expires_at FROM remora.leases WHERE attempt_id = '$old'")
check "the cut-off attempt's lease is still there, as its last renewal left it" test -n "$lease_expires"
fenced() { grep -q "job $p attempt $old stopped: its lease could not be renewed in time" "$T/wp.log"; }
check "cut off, the worker stops its attempt: it will not commit" wait_for 20 fenced
fenced_ts=$(grep "job $p attempt $old stopped" "$T/wp.log" | head -1 | cut -d' ' -f1)
worker w6 "$CONNINFO"
check "w6 takes the job over once the lease lapsed" wait_state "$p" succeeded 60
replaced "$p" "$old" w6 "connection cut"
echo "# stopped at $fenced_ts, $(q "SELECT extract(epoch FROM '$lease_expires'::timestamptz - '$fenced_ts'::timestamptz)") s before the lease it last renewed expired ($lease_expires)"
check_eq "the worker had stopped it before the lease it last renewed expired" \
	"$(q "SELECT '$fenced_ts'::timestamptz < '$lease_expires'::timestamptz")" t
verify "$p" p.bin
check "the cut-off attempt's staging is cleaned" wait_for 60 staging_gone "$old"
n=$(grep -c "connected to" "$T/wp.log")
tcpproxy "$CT" allow >/dev/null
back() { [ "$(grep -c "connected to" "$T/wp.log")" -gt "$n" ]; }
check "when the network is back the worker reconnects" wait_for 30 back
check "and its incarnation goes on" live wp
stop_worker w6
check_eq "SIGTERM: w6 exits 0" "$RC" 0
make_file after.bin 100000
a=$(q "SELECT remora_submit('$SRC/after.bin')")
check "the reconnected worker finishes a new job" wait_state "$a" succeeded 30
check_eq "in its own incarnation" "$(label_of "$(q "SELECT attempt_id FROM remora.results WHERE job_id = $a")")" wp

e2e_finish
