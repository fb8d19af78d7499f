#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib sourced at run time
#
# export_memory.sh: the worker's private memory while it exports a
# committed result of many members (remora_export), by member count.  The
# engine gets an export's members a page of 1,000 at a time
# (remora.export_members) and holds at most two pages, so its memory does
# not grow with the member count (invariant 8 of doc/protocol.md): this measures
# that the peak above idle grows by at most GROWTH_LIMIT_MIB (4) from the
# smallest count to the largest.
#
# The results are made through the worker protocol by hand (made_result in
# test/lib/stack.sh: claim, checkpoint, commit), N members whose paths
# differ and which all name one small object of the store (src/one.bin),
# so that a result of 20,000 members costs one upload; the
# export copies it to N keys (if_exists = overwrite: one CopyObject a
# member, no HEAD).  One worker, one attempt at a time: the background
# worker (remora.max_workers = 1, a fresh one for each run: SIGTERM, the
# launcher starts a new one) or remora-worker (--concurrency 1, started
# for each run).  Its RssAnon (private memory, without the shared buffers
# VmRSS would count) is read from /proc every 100 ms from remora_export to
# succeeded.  Each export's references are counted (N), and one exported
# key is read back with the AWS CLI and its SHA-256 compared.
#
# The installed build is measured (make install first): run it against an
# older build to compare.
#
# Usage (root, Debian 12):
#   bench/export_memory.sh [--counts "2000 20000"]
#                          [--workers "background external"] [--write]
# --write puts the report into doc/benchmarks.md under "## Export memory".
# DEADLINE (seconds, default 1800) bounds it; REMORA_STORE=rgw runs it on
# RGW instead of s3rver.
#
set -Euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECTION="## Export memory"
COUNTS=${COUNTS:-2000 20000}
WORKERS=${WORKERS:-background external}
GROWTH_LIMIT_MIB=${GROWTH_LIMIT_MIB:-4}
DEADLINE=${DEADLINE:-1800}
WRITE=0
while [ $# -gt 0 ]; do
	case $1 in
	--counts) COUNTS=$2; shift 2 ;;
	--workers) WORKERS=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	*) sed -n '/^# Usage/,/^# RGW/p' "$0" >&2; exit 2 ;;
	esac
done

. "$ROOT/test/lib/e2e.sh"
. "$ROOT/bench/lib.sh"
install_deps >/dev/null
e2e_begin export-memory
stack_up
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "export_memory: FAIL: $*" >&2; exit 1; }
( sleep "$DEADLINE"; log "deadline reached"; kill -TERM $$ ) &
WATCHDOG=$!
e2e_at_exit "kill $WATCHDOG 2>/dev/null"

rss_kib() { awk '/RssAnon/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
bg_workers() { q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'"; }
set_workers() {	# set_workers N: remora.max_workers = N, and wait for N
	q "ALTER SYSTEM SET remora.max_workers = $1" >/dev/null
	q "SELECT pg_reload_conf()" >/dev/null
	n_workers() { [ "$(bg_workers)" = "$1" ]; }
	wait_for 60 n_workers "$1" || die "the background workers are not $1"
}
q "ALTER SYSTEM SET remora.worker_concurrency = 1" >/dev/null
set_workers 0	# the results are made by hand, nobody else claims

# the one object every member of the results names
head -c 1000 /dev/urandom >"$T/one.bin"
aws_s3 s3 cp --quiet "$T/one.bin" s3://target/src/one.bin
SHA=$(sha256sum "$T/one.bin" | cut -d' ' -f1)

RESULTS=$T/results
: >"$RESULTS"
for w in $WORKERS; do
	for n in $COUNTS; do
		log "$w worker, a result of $n members"
		job=$(made_result "$n" src/one.bin)
		[ -n "$job" ] || die "no result of $n members"
		case $w in
		background)
			set_workers 1
			fresh_worker
			pid=$(worker_pid)
			;;
		external)
			q "DO \$\$ BEGIN CREATE ROLE bench_rw LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END \$\$;
			   GRANT remora_worker TO bench_rw" >/dev/null
			start_remora_worker "w$n" --label bench --concurrency 1 \
				"host=$T/pg port=$PG_PORT dbname=postgres user=bench_rw"
			pid=$REMORA_WORKER_PID
			up() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = 'bench' AND stopped_at IS NULL")" = 1 ]; }
			wait_for 30 up || die "remora-worker did not start"
			;;
		*) die "--workers: background or external, not '$w'" ;;
		esac
		sleep 2 # start-up allocations settle
		idle=$(rss_kib "$pid")
		peak=$idle
		ex=$(q "SELECT remora_export($job, 'target', 'stable/$w$n', '{\"if_exists\": \"overwrite\"}')")
		until [ "$(state "$ex")" = succeeded ]; do
			case $(state "$ex") in failed | outcome_unknown | cancelled)
				die "export $ex: $(state "$ex"): $(q "SELECT last_error FROM remora.jobs WHERE job_id = $ex")" ;;
			esac
			kill -0 "$pid" 2>/dev/null || die "the worker $pid is gone"
			cur=$(rss_kib "$pid")
			[ "$cur" -gt "$peak" ] && peak=$cur
			sleep 0.1
		done
		[ "$(q "SELECT jsonb_array_length(\"references\") FROM remora_exports WHERE export_id = $ex")" = "$n" ] ||
			die "export $ex: not $n references"
		got=$(aws_s3 s3 cp "s3://target/stable/$w$n/d7/m$(printf %06d 7).bin" - 2>/dev/null | sha256sum | cut -d' ' -f1)
		[ "$got" = "$SHA" ] || die "export $ex: stable/$w$n/d7/m000007.bin is not the member"
		secs=$(q "SELECT round(extract(epoch FROM finished_at - submitted_at)::numeric, 1) FROM remora.jobs WHERE job_id = $ex")
		printf '%s\t%s\t%s\t%s\t%s\n' "$w" "$n" "$idle" "$peak" "$secs" >>"$RESULTS"
		log "$w, $n members: idle $(mib "$idle") MiB, peak $(mib "$peak") MiB, $secs s"
		case $w in
		background) set_workers 0 ;;
		external)
			kill -TERM "$pid"
			gone() { ! kill -0 "$pid" 2>/dev/null; }
			wait_for 30 gone || die "remora-worker $pid did not stop"
			;;
		esac
	done
done

report() {
	local first=${COUNTS%% *} last=${COUNTS##* } w g1 g2
	echo "$SECTION"
	echo
	echo "\`bench/export_memory.sh --counts \"$COUNTS\" --workers \"$WORKERS\"\` ($(date -u +%Y-%m-%d), 2 cores;"
	echo "${REMORA_STORE:-s3rver} on 127.0.0.1; one attempt at a time).  An export of a result of N"
	echo "members (made through the protocol, every member naming one 1,000-byte object;"
	echo "\`if_exists\` overwrite: one CopyObject a member), the worker's RssAnon sampled"
	echo "every 100 ms from \`remora_export\` to \`succeeded\`:"
	echo
	echo "| worker | members | idle MiB | peak MiB | growth MiB | export s |"
	echo "| --- | --- | --- | --- | --- | --- |"
	awk -F'\t' '{ printf "| %s | %s | %.1f | %.1f | %.1f | %s |\n", $1, $2, $3 / 1024, $4 / 1024, ($4 - $3) / 1024, $5 }' "$RESULTS"
	echo
	for w in $WORKERS; do
		g1=$(awk -F'\t' -v w="$w" -v n="$first" '$1 == w && $2 == n { print $4 - $3 }' "$RESULTS")
		g2=$(awk -F'\t' -v w="$w" -v n="$last" '$1 == w && $2 == n { print $4 - $3 }' "$RESULTS")
		echo "- $w worker: the peak above idle grows by $(mib $((g2 - g1))) MiB from $first to $last members" \
			"(target ≤ $GROWTH_LIMIT_MIB MiB: $(awk -v d=$((g2 - g1)) -v l="$GROWTH_LIMIT_MIB" 'BEGIN { print (d / 1024 <= l) ? "met" : "missed" }'))."
	done
	echo
	echo "What the worker holds for an export: at most two pages of 1,000 members"
	echo "(\`remora.export_members\`, keyset by path), the answers not yet"
	echo "checkpointed (no member starts while 2,000 wait) and the requests in"
	echo "flight.  The background worker's figure includes its backend's memory for"
	echo "the protocol's SQL, which remora-worker's leaves to a backend of its own."
}
report | tee "$T/report.md"
if [ "$WRITE" = 1 ]; then put_section "$T/report.md"; fi
