#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib sourced at run time
#
# scaleout.sh: throughput with 0, 1, 2 and 3 remora-worker processes beside
# one background worker, on the test S3 server, and where the time goes.
#
# Two workloads, each submitted at once and timed from the first submit to
# the last finish (remora_jobs):
#   P  a prefix of OBJECTS small objects (SIZE each) in the target store,
#      split into PREFIXES jobs (a prefix job is one attempt on one worker:
#      several jobs are what several workers can share)
#   H  HTTP_JOBS objects of HTTP_SIZE from nginx
# For each number of external workers (--concurrency 4 each, the
# background worker's remora.worker_concurrency 4), RUNS rounds, medians.
# CPU seconds over the same span: the background worker, the external
# workers (from /proc), PostgreSQL's other processes, the store (s3rver's
# node process) and nginx: the busiest one says where the limit is.
#
# Usage (root, Debian 12):
#   bench/scaleout.sh [--objects 2000] [--size 64K] [--prefixes 8]
#                     [--http-jobs 20] [--http-size 64M] [--runs 3]
#                     [--workers "0 1 2 3"] [--write]
# --write puts the report into doc/benchmarks.md under "## Scaling out"
# (replacing that section).  DEADLINE (seconds, default 3600) bounds it.
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OBJECTS=2000
SIZE=64K
PREFIXES=8
HTTP_JOBS=20
HTTP_SIZE=64M
RUNS=3
WORKERS="0 1 2 3"
WRITE=0
DEADLINE=${DEADLINE:-3600}
while [ $# -gt 0 ]; do
	case $1 in
	--objects) OBJECTS=$2; shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	--prefixes) PREFIXES=$2; shift 2 ;;
	--http-jobs) HTTP_JOBS=$2; shift 2 ;;
	--http-size) HTTP_SIZE=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	--workers) WORKERS=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	*) sed -n '/^# Usage/,/^# (replacing/p' "$0" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "scaleout: FAIL: $*" >&2; exit 1; }
bytes() { numfmt --from=iec "$1"; }

cd "$ROOT"
. test/lib/e2e.sh
. bench/lib.sh
install_deps >/dev/null
make -s >/dev/null && make -s install >/dev/null
e2e_begin scaleout-bench
( sleep "$DEADLINE"; log "deadline reached"; kill -TERM $$ ) &
WATCHDOG=$!
e2e_at_exit "pkill -P $WATCHDOG; kill $WATCHDOG 2>/dev/null"
stack_up
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
HZ=$(getconf CLK_TCK)

# the bench talks to the store directly (not through the fault proxy), one
# background worker, leases for everyone
for s in "remora.s3_endpoint = 'http://127.0.0.1:$S3_PORT'" "remora.max_workers = 1" \
	"remora.max_active_leases = 64" "remora.lease_duration = '30s'" "remora.part_size = '16MB'"; do
	q "ALTER SYSTEM SET $s" >/dev/null
done
q "SELECT pg_reload_conf()" >/dev/null
q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw" >/dev/null
CONNINFO="host=$T/pg port=$PG_PORT dbname=postgres user=rw"
bgworker() { q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora worker'"; }
# a fresh background worker, which reads the settings above
for p in $(bgworker); do kill "$p"; done
one_bgworker() { [ "$(bgworker | grep -c .)" = 1 ] && [ "$(q "SHOW remora.part_size")" = 16MB ]; }
wait_for 60 one_bgworker || die "no background worker with the new settings"

# the workloads' sources
log "populating $OBJECTS objects of $SIZE and $HTTP_JOBS of $HTTP_SIZE"
per=$((OBJECTS / PREFIXES))
for k in $(seq 1 "$PREFIXES"); do
	mkdir -p "$T/pop/p$k"
	for i in $(seq -w 1 "$per"); do head -c "$(bytes "$SIZE")" /dev/urandom >"$T/pop/p$k/o$i"; done
done
aws_s3 s3 cp --recursive --quiet "$T/pop" s3://target/src/
rm -rf "$T/pop"
for i in $(seq 1 "$HTTP_JOBS"); do make_file "h$i.bin" "$(bytes "$HTTP_SIZE")"; done

store_pid() {
	local p
	while read -r p _; do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "server.js $T/store " && { echo "$p"; return; }
	done <"$T/pids"
}
STORE_PID=$(store_pid)
[ -n "$STORE_PID" ] || die "cannot find the store's process"
ticks_of() {	# ticks_of PID...: their CPU ticks (0 for one that is gone)
	local p t=0
	for p in "$@"; do
		t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null || echo 0)))
	done
	echo "$t"
}
# this cluster's processes (others may run on the machine), nginx's
pg_pids() {
	local pm
	pm=$(head -1 "$T/pg/data/postmaster.pid")
	echo "$pm $(pgrep -P "$pm" | tr '\n' ' ')"
}
nginx_pids() {
	local m
	m=$(cat "$T/nginx/nginx.pid" 2>/dev/null) || return 0
	echo "$m $(pgrep -P "$m" | tr '\n' ' ')"
}
secs() { printf '%.2f' "$(echo "scale=4; $1 / $HZ" | bc)"; }

# run_workload KIND N: submit the workload with N external workers up,
# wait for it; prints "wall bg ext pg store nginx" (seconds)
run_workload() {
	local kind=$1 n=$2 ids="" j w pids=() t_bg t_ext t_pg t_st t_ng bgp ext=0 wall
	for w in $(seq 1 "$n"); do
		start_remora_worker "w$w" --concurrency 4 --label "bench$w" "$CONNINFO"
		pids+=("$REMORA_WORKER_PID")
	done
	live() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label LIKE 'bench%' AND stopped_at IS NULL")" = "$n" ]; }
	wait_for 30 live || die "$n external workers did not start"
	bgp=$(bgworker)
	t_bg=$(ticks_of "$bgp") t_pg=$(ticks_of $(pg_pids)) t_st=$(ticks_of "$STORE_PID") t_ng=$(ticks_of $(nginx_pids))
	for w in "${pids[@]}"; do ext=$((ext - $(ticks_of "$w"))); done
	case $kind in
	P) for k in $(seq 1 "$PREFIXES"); do ids+="$(q "SELECT remora_submit('s3://target/src/p$k/')"),"; done ;;
	H) for i in $(seq 1 "$HTTP_JOBS"); do ids+="$(q "SELECT remora_submit('$SRC/h$i.bin')"),"; done ;;
	esac
	ids=${ids%,}
	all_done() { [ "$(q "SELECT count(*) FILTER (WHERE state NOT IN ('succeeded')) FROM remora.jobs WHERE job_id IN ($ids)")" = 0 ]; }
	wait_for 1200 all_done || die "$kind with $n workers: not every job succeeded: $(q "SELECT string_agg(DISTINCT state, ',') FROM remora.jobs WHERE job_id IN ($ids)")"
	for w in "${pids[@]}"; do ext=$((ext + $(ticks_of "$w"))); done
	wall=$(q "SELECT round(extract(epoch FROM max(finished_at) - min(submitted_at))::numeric, 2) FROM remora.jobs WHERE job_id IN ($ids)")
	[ "$(q "SELECT sum(result_members) FROM remora_jobs WHERE job_id IN ($ids)")" = "$([ "$kind" = P ] && echo $((per * PREFIXES)) || echo "$HTTP_JOBS")" ] ||
		die "$kind with $n workers: wrong member count"
	echo "$wall $(secs $(($(ticks_of "$bgp") - t_bg))) $(secs "$ext") $(secs $(($(ticks_of $(pg_pids)) - t_pg - $(ticks_of "$bgp") + t_bg))) $(secs $(($(ticks_of "$STORE_PID") - t_st))) $(secs $(($(ticks_of $(nginx_pids)) - t_ng)))"
	for w in "${pids[@]}"; do kill -TERM "$w"; wait "$w" 2>/dev/null || true; done
}

RESULTS=$T/results.tsv
: >"$RESULTS"
for round in $(seq 1 "$RUNS"); do
	for kind in P H; do
		for n in $WORKERS; do
			r=$(run_workload "$kind" "$n")
			log "round $round, $kind, $n external: wall bg ext pg store nginx = $r"
			printf '%s\t%s\t%s\n' "$kind" "$n" "$r" | tr ' ' '\t' >>"$RESULTS"
		done
	done
done

med() { awk -F'\t' -v k="$1" -v n="$2" -v c="$3" '$1 == k && $2 == n { print $c }' "$RESULTS" | median; }
out=$T/section.md
{
	echo "## Scaling out"
	echo
	echo "\`bench/scaleout.sh\` ($(date +%F), $(nproc) cores, load average $LOADAVG at the start; s3rver"
	echo "and nginx on 127.0.0.1): one background worker (\`remora.worker_concurrency\` 4) and 0 to 3"
	echo "\`remora-worker\` processes (\`--concurrency 4\` each) on one PostgreSQL; medians of $RUNS interleaved"
	echo "rounds; wall seconds from the first submit to the last finish; CPU seconds over the same span."
	echo
	for kind in P H; do
		if [ "$kind" = P ]; then
			echo "P: $((per * PREFIXES)) objects of $SIZE in $PREFIXES prefix jobs, inside the target store."
		else
			echo "H: $HTTP_JOBS objects of $HTTP_SIZE from nginx, one job each."
		fi
		echo
		echo "| external workers | wall s | ÷ none | background worker CPU s | external workers CPU s | PostgreSQL CPU s | s3rver CPU s | nginx CPU s |"
		echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
		base=$(med "$kind" "$(echo "$WORKERS" | cut -d' ' -f1)" 3)
		for n in $WORKERS; do
			echo "| $n | $(med "$kind" "$n" 3) | $(ratio "$(med "$kind" "$n" 3)" "$base") | $(med "$kind" "$n" 4) | $(med "$kind" "$n" 5) | $(med "$kind" "$n" 6) | $(med "$kind" "$n" 7) | $(med "$kind" "$n" 8) |"
		done
		echo
	done
} >"$out"
cat "$out"
[ "$WRITE" = 1 ] && put_section "$out" && log "doc/benchmarks.md updated"
exit 0
