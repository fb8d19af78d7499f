#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib and bench/lib sourced at run time
#
# protocol.sh: the SQL worker protocol against the backlog, beside peers
# on the same PostgreSQL server in the same run.  One unit of work is a
# queued no-op job claimed and completed:
#
#   A  remora, batched: remora.claim(incarnation, K) in one transaction,
#      then one call of remora.commit_many that commits the K attempts
#      (a one-member descriptor each), as a worker does when several
#      finish in one round; the claims are kept by the client (pgbench
#      variables), as a worker keeps them in memory
#   B  remora, one at a time: remora.claim(incarnation, 1), remora.commit
#   C  the floor: a plain table, claim by UPDATE ... WHERE id = (SELECT ...
#      ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED) on a
#      partial index of the queued rows, complete by UPDATE
#   D  graphile-worker (bench/graphile, npm ci of a pinned version), -j 10,
#      a no-op task, its unbatched defaults
#
# A, B and C run under pgbench with CLIENTS connections; every run takes
# PAIRS units from the head of a backlog that is topped up to its size
# again after each run (outside the timed window); before a backlog's
# timed rounds each method runs once untimed, then VACUUM ANALYZE and
# CHECKPOINT.  For each backlog (its
# size: BACKLOGS), each number of clients and synchronous_commit setting,
# the methods run interleaved (A B C D, A B C D, ...) for RUNS rounds;
# the report has medians and ratios.  fsync is on.
#
# Then, with synchronous_commit on: the latency from a submit's commit to
# its claim by an idle worker (remora.max_workers = 1; SUBMITS submits one
# after another, median and 99th percentile).  Submit throughput is
# measured by bench/submit.sh.
#
# Usage (root, Debian 12):
#   bench/protocol.sh [--runs 3] [--backlogs "2000 20000 100000"]
#                     [--clients "1 4 8"] [--sync "on off"] [--pairs 2000]
#                     [--batch 16] [--submits 200] [--write]
#   bench/protocol.sh --dead [--runs 6] [--backlogs 20000] [--pairs 2000]
# --dead instead runs A alone, 4 clients, synchronous_commit on, RUNS
# rounds at the first backlog with autovacuum off on remora.queue, and
# reports each round's rate, the index blocks a claim read in
# queue_owner_idx and the queue's dead tuples: what the entries of the
# jobs claimed since the last vacuum cost a claim.
# --write puts the report into doc/benchmarks.md under "## Claims against
# the backlog" (replacing it) and the plot into doc/claims.png.  DEADLINE
# (seconds, default 3600) bounds it.
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECTION="## Claims against the backlog"
RUNS=3
BACKLOGS="2000 20000 100000"
CLIENTS_LIST="1 4 8"
SYNCS="on off"
PAIRS=2000
BATCH=16
SUBMITS=200
WRITE=0
DEAD=0
DEADLINE=${DEADLINE:-3600}
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift 2 ;;
	--backlogs) BACKLOGS=$2; shift 2 ;;
	--clients) CLIENTS_LIST=$2; shift 2 ;;
	--sync) SYNCS=$2; shift 2 ;;
	--pairs) PAIRS=$2; shift 2 ;;
	--batch) BATCH=$2; shift 2 ;;
	--submits) SUBMITS=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	--dead) DEAD=1; shift ;;
	*) sed -n '/^# Usage/,/^# (seconds/p' "$0" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "protocol: FAIL: $*" >&2; exit 1; }

cd "$ROOT"
. test/lib/e2e.sh
. bench/lib.sh
install_deps >/dev/null
make -s >/dev/null && make -s install >/dev/null
(cd bench/graphile && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
	die "npm ci in bench/graphile failed"
e2e_begin protocol-bench
( sleep "$DEADLINE"; log "deadline reached"; kill -TERM $$ ) &
WATCHDOG=$!
e2e_at_exit "pkill -P $WATCHDOG; kill $WATCHDOG 2>/dev/null"

e2e_cluster <<CONF
fsync = on
synchronous_commit = on
shared_buffers = '512MB'
max_connections = 100
remora.max_workers = 0
remora.max_active_leases = 100000
remora.default_bucket = 'target'
remora.allow_networks = '127.0.0.1/32'
remora.allow_ports = '443,9'
log_autovacuum_min_duration = 0
log_checkpoints = on
CONF
q "CREATE EXTENSION remora" >/dev/null
q "CREATE TABLE bench_floor (id bigserial PRIMARY KEY, priority integer NOT NULL DEFAULT 0,
	state text NOT NULL DEFAULT 'queued', payload jsonb NOT NULL DEFAULT '{}');
   CREATE INDEX bench_floor_queued ON bench_floor (priority DESC, id) WHERE state = 'queued'"
CONN="postgresql:///postgres?host=$PGHOST&port=$PGPORT&user=postgres"
# graphile-worker's schema: all its migrations, before anything is timed
node bench/graphile/drain.js "$CONN" 0 1 >"$T/graphile-install.log" 2>&1 ||
	{ cat "$T/graphile-install.log" >&2; die "graphile-worker did not install its schema"; }
PG_VERSION=$(q "SHOW server_version")
GW_VERSION=$(node -p 'require("./bench/graphile/node_modules/graphile-worker/package.json").version')

# ---------------------------------------------------------------- scripts
S=$T/scripts
mkdir -p "$S"
INC="('00000000-0000-0000-0000-' || lpad(:client_id::text, 12, '0'))::uuid"
DESCRIPTOR="jsonb_build_object('key', p || 'manifest.json', 'etag', '\"m\"',
	'sha256', repeat('0', 64), 'members', 1, 'bytes', 1,
	'entries', jsonb_build_array(jsonb_build_object('path', 'a.bin',
	'bucket', 'target', 'key', p || 'data/a.bin', 'etag', '\"e\"',
	'sha256', repeat('0', 64), 'size', 1)))"
cat >"$S/A.sql" <<SQL
SET client_min_messages = warning;
SELECT coalesce(array_agg(attempt_id), '{}') AS ids, coalesce(array_agg(fencing_token), '{}') AS toks,
	   coalesce(array_agg(spec ->> 'staging_prefix'), '{}') AS ps
  FROM remora.claim($INC, $BATCH) \gset
SELECT count(*) FILTER (WHERE NOT committed) AS refused
  FROM remora.commit_many(':ids', ':toks',
	(SELECT coalesce(array_agg($(tr -d '\n' <<<"$DESCRIPTOR") ORDER BY o), '{}')
	   FROM unnest(':ps'::text[]) WITH ORDINALITY u(p, o))) \gset
\if :refused > 0
SELECT 1 / 0;
\endif
SQL
# a claim may find nothing while jobs are queued (the candidates it read
# were all taken by claims that committed meanwhile, a race a busy machine
# makes likelier): that transaction commits nothing
cat >"$S/B.sql" <<SQL
SELECT coalesce(c.attempt_id::text, '') AS a, coalesce(c.fencing_token, 0) AS t,
	   coalesce(c.spec ->> 'staging_prefix', '') AS p
  FROM (SELECT) one LEFT JOIN LATERAL remora.claim($INC, 1) c ON true \gset
\if :t > 0
SELECT remora.commit(':a', :t, $(tr -d '\n' <<<"$DESCRIPTOR" | sed "s/p || /':p' || /g"))::int AS ok \gset
\if :ok = 0
SELECT 1 / 0;
\endif
\endif
SQL
cat >"$S/C.sql" <<'SQL'
UPDATE bench_floor SET state = 'running'
 WHERE id = (SELECT id FROM bench_floor WHERE state = 'queued'
			  ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id AS fid \gset
UPDATE bench_floor SET state = 'done' WHERE id = :fid;
SQL

# ---------------------------------------------------------------- backlog
queued() {	# queued METHOD
	case $1 in
	A | B) q "SELECT count(*) FROM remora.queue" ;;
	C) q "SELECT count(*) FROM bench_floor WHERE state = 'queued'" ;;
	D) q "SELECT count(*) FROM graphile_worker.jobs WHERE locked_at IS NULL" ;;
	esac
}
top_up() {	# top_up METHOD SIZE: queue more jobs until SIZE are waiting
	local n
	n=$(($2 - $(queued "$1")))
	[ "$n" -gt 0 ] || return 0
	case $1 in
	A | B) q "SELECT count(remora_submit('https://example.com/b/' || g || '-' || random() || '.bin'))
			 FROM generate_series(1, $n) g" >/dev/null ;;
	C) q "INSERT INTO bench_floor (payload) SELECT '{}' FROM generate_series(1, $n)" ;;
	D) q "SELECT count(graphile_worker.add_job('noop', '{}'::json)) FROM generate_series(1, $n)" >/dev/null ;;
	esac
}

# pgbench_rate SCRIPT CLIENTS TRANSACTIONS SYNC: transactions per second
pgbench_rate() {
	local out
	out=$(PGOPTIONS="-c synchronous_commit=$4" pgbench -n -c "$2" -j "$2" -t "$3" -f "$1" postgres 2>&1) ||
		{ echo "$out" >&2; die "pgbench $(basename "$1") failed"; }
	grep -q "number of failed transactions: 0 " <<<"$out" ||
		{ echo "$out" >&2; die "pgbench $(basename "$1"): transactions failed"; }
	grep -oP 'tps = \K[0-9.]+(?= \(without)' <<<"$out"
}

# measure METHOD CLIENTS SYNC: units (claim + complete) per second
measure() {
	local m=$1 c=$2 sync=$3
	case $m in
	A) awk -v r="$(pgbench_rate "$S/A.sql" "$c" $((PAIRS / BATCH / c)) "$sync")" -v k="$BATCH" \
		'BEGIN { printf "%.1f\n", r * k }' ;;
	B) pgbench_rate "$S/B.sql" "$c" $((PAIRS / c)) "$sync" ;;
	C) pgbench_rate "$S/C.sql" "$c" $((PAIRS / c)) "$sync" ;;
	D) node bench/graphile/drain.js "$CONN&options=-c%20synchronous_commit%3D$sync" "$PAIRS" 10 ;;
	esac
}

if [ "$DEAD" = 1 ]; then
	backlog=${BACKLOGS%% *}
	top_up A "$backlog"
	q "VACUUM ANALYZE" >/dev/null
	q "ALTER TABLE remora.queue SET (autovacuum_enabled = false)" >/dev/null
	q "CHECKPOINT" >/dev/null
	# index_reads: blocks and scans of queue_owner_idx so far
	index_reads() {
		q "SELECT s.idx_blks_hit + s.idx_blks_read, i.idx_scan
			 FROM pg_statio_user_indexes s JOIN pg_stat_user_indexes i USING (indexrelid)
			WHERE s.indexrelname = 'queue_owner_idx'"
	}
	# shellcheck disable=SC2317  # called by wait_for
	reported() { [ "$(index_reads | cut -d'|' -f2)" != "$s0" ]; }
	echo "| round | A /s | queue_owner_idx blocks a claim | scans a claim | dead tuples in remora.queue after |"
	echo "|---:|---:|---:|---:|---:|"
	claims=$((PAIRS / BATCH))
	for r in $(seq 1 "$RUNS"); do
		IFS='|' read -r b0 s0 <<<"$(index_reads)"
		v=$(measure A 4 on)
		# the sessions report their statistics as they end: wait for them
		wait_for 10 reported || true
		IFS='|' read -r b1 s1 <<<"$(index_reads)"
		dead=$(q "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'remora.queue'::regclass")
		echo "| $r | $v | $(((b1 - b0) / claims)) | $(awk -v s=$((s1 - s0)) -v c="$claims" 'BEGIN { printf "%.1f", s / c }') | $dead |"
		top_up A "$backlog"
	done
	exit 0
fi

RESULTS=$T/results.tsv	# backlog clients sync method round units/s
: >"$RESULTS"
for backlog in $BACKLOGS; do
	for m in A B C D; do top_up "$m" "$backlog"; done
	# one untimed run of each method, then the writes the top-ups left
	# (VACUUM, CHECKPOINT) before the timed rounds: without them the
	# first timed run met them, and A, run first, had 0.6 of its later
	# rounds (1,436 a second against 2,380 and 2,568)
	for m in A B C D; do
		measure "$m" "${CLIENTS_LIST%% *}" "${SYNCS%% *}" >/dev/null
		top_up "$m" "$backlog"
	done
	q "VACUUM ANALYZE" >/dev/null
	q "CHECKPOINT" >/dev/null
	for c in $CLIENTS_LIST; do
		for sync in $SYNCS; do
			for r in $(seq 1 "$RUNS"); do
				for m in A B C D; do
					v=$(measure "$m" "$c" "$sync")
					printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$backlog" "$c" "$sync" "$m" "$r" "$v" >>"$RESULTS"
					log "backlog $backlog, $c clients, sync $sync, round $r: $m $v/s"
					top_up "$m" "$backlog"
				done
			done
		done
	done
done

# ---------------------------------------------------------------- latency
# an idle worker; the queue emptied first (the backlog's jobs cancelled)
q "SELECT count(remora_cancel(job_id)) FROM remora.jobs WHERE state IN ('queued', 'retrying')" >/dev/null
q "ALTER SYSTEM SET remora.max_workers = 1" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
worker_idle() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" -ge 1 ]; }
wait_for 30 worker_idle || die "no remora worker started"
: >"$T/latency"
for i in $(seq 1 "$SUBMITS"); do
	j=$(q "SELECT remora_submit('http://127.0.0.1:9/l/$i.bin', options => '{\"max_attempts\": 1}')")
	claimed() { [ "$(q "SELECT started_at IS NOT NULL FROM remora.jobs WHERE job_id = $j")" = t ]; }
	wait_for 10 claimed || die "job $j was not claimed within 10 s"
	q "SELECT round(extract(epoch FROM started_at - submitted_at) * 1000, 2) FROM remora.jobs WHERE job_id = $j" >>"$T/latency"
done
LAT_MEDIAN=$(median <"$T/latency")
LAT_P99=$(sort -g "$T/latency" | awk -v n="$SUBMITS" '{ v[NR] = $1 } END { i = int(n * 0.99 + 0.999); print v[i] }')
log "submit -> claim: median $LAT_MEDIAN ms, p99 $LAT_P99 ms"

# ---------------------------------------------------------------- report
med() {	# med BACKLOG CLIENTS SYNC METHOD
	awk -F'\t' -v b="$1" -v c="$2" -v s="$3" -v m="$4" '$1 == b && $2 == c && $3 == s && $4 == m { print $6 }' "$RESULTS" | median
}
f0() { awk -v v="$1" 'BEGIN { printf "%.0f", v }'; }
FIRST_B=${BACKLOGS%% *}
LAST_B=${BACKLOGS##* }
{
	echo "$SECTION"
	echo
	echo "\`bench/protocol.sh\` ($(date -u +%Y-%m-%d), $(nproc) cores, PostgreSQL $PG_VERSION with \`fsync = on\`,"
	echo "graphile-worker $GW_VERSION): claims and completions of queued no-op jobs per second, medians of"
	echo "$RUNS interleaved rounds of $PAIRS each, drawn from the head of a backlog kept at its size."
	echo "A: Remora, \`remora.claim(…, $BATCH)\` then one \`remora.commit_many\` of the $BATCH attempts; B: Remora, one"
	echo "job a claim and a commit; C: the floor, a plain table with \`FOR UPDATE SKIP LOCKED\` and a partial"
	echo "index; D: graphile-worker \`-j 10\`, a no-op task, unbatched."
	echo
	echo "| backlog | clients | synchronous_commit | A: Remora batched /s | B: Remora one by one /s | C: floor /s | D: graphile-worker /s | A ÷ C | A ÷ D | B ÷ C |"
	echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
	for sync in $SYNCS; do for c in $CLIENTS_LIST; do for b in $BACKLOGS; do
		a=$(med "$b" "$c" "$sync" A); bb=$(med "$b" "$c" "$sync" B)
		cc=$(med "$b" "$c" "$sync" C); d=$(med "$b" "$c" "$sync" D)
		echo "| $b | $c | $sync | $(f0 "$a") | $(f0 "$bb") | $(f0 "$cc") | $(f0 "$d") | $(ratio "$a" "$cc") | $(ratio "$a" "$d") | $(ratio "$bb" "$cc") |"
	done; done; done
	echo
	echo "Flatness, A at a backlog of $LAST_B ÷ A at $FIRST_B (1.00 is flat):"
	for sync in $SYNCS; do for c in $CLIENTS_LIST; do
		echo "$c clients, synchronous_commit $sync: $(ratio "$(med "$LAST_B" "$c" "$sync" A)" "$(med "$FIRST_B" "$c" "$sync" A)");"
	done; done
	echo
	echo "From a submit's commit to its claim by an idle worker, over $SUBMITS submits one after"
	echo "another: median $LAT_MEDIAN ms, 99th percentile $LAT_P99 ms."
	echo
	echo "![claims against the backlog](claims.png)"
} >"$T/report.md"
cat "$T/report.md"

# the plot: the methods at 4 clients (or the first number given), sync on
PC=4
case " $CLIENTS_LIST " in *" 4 "*) ;; *) PC=${CLIENTS_LIST%% *} ;; esac
PS=${SYNCS%% *}
for b in $BACKLOGS; do
	echo "$b $(med "$b" "$PC" "$PS" A) $(med "$b" "$PC" "$PS" B) $(med "$b" "$PC" "$PS" C) $(med "$b" "$PC" "$PS" D)"
done >"$T/plot.dat"
gnuplot <<PLOT
set terminal pngcairo size 1000,520 noenhanced
set output "$T/claims.png"
set title "claim + complete per second against the backlog\n($PC clients, synchronous_commit $PS, fsync on; bench/protocol.sh)"
set xlabel "jobs queued"
set ylabel "jobs per second (median of $RUNS)"
set logscale x
set yrange [0:*]
set key outside right
set grid
plot "$T/plot.dat" using 1:2 with linespoints title "A: Remora, batched ($BATCH)", \
     "" using 1:3 with linespoints title "B: Remora, one by one", \
     "" using 1:4 with linespoints title "C: floor (SKIP LOCKED)", \
     "" using 1:5 with linespoints title "D: graphile-worker -j 10"
PLOT
if [ "$WRITE" = 1 ]; then
	put_section "$T/report.md"
	cp "$T/claims.png" "$ROOT/doc/claims.png"
	log "doc/benchmarks.md and doc/claims.png updated"
fi
