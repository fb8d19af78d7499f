#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib sourced at run time
#
# memory.sh: the worker's private memory while it moves one large object,
# by object size.  The engine holds at most (connections + 2) part buffers
# for an object, whatever its size (doc/data-plane.md); this measures that
# the growth from a small object to a large one stays within
# GROWTH_LIMIT_MIB (16).
#
# One background worker (remora.max_workers = 1, one attempt at a time,
# remora.part_size 16MB), a fresh worker for every run (SIGTERM; the
# launcher starts a new one, which reads the configuration anew); an
# object of random data from nginx into the test S3 server, both on
# 127.0.0.1; the worker's RssAnon (its private memory, without the shared
# buffers it touches while writing rows, which VmRSS would count) read
# from /proc every 100 ms from submit to succeeded.  Each result's SHA-256
# is checked against the source's (remora_result).
#
# Usage (root, Debian 12):
#   bench/memory.sh [--sizes "256M 4G"] [--connections "1 4"] [--write]
# --write puts the report into doc/benchmarks.md under "## Worker memory
# over object size"; the memory over many members is many_members.sh's
# (--rss).
#
set -Euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECTION="## Worker memory over object size"
SIZES=${SIZES:-256M 4G}
CONNECTIONS=${CONNECTIONS:-1 4}
GROWTH_LIMIT_MIB=${GROWTH_LIMIT_MIB:-16}
WRITE=0
while [ $# -gt 0 ]; do
	case $1 in
	--sizes) SIZES=$2; shift 2 ;;
	--connections) CONNECTIONS=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	*) echo "usage: bench/memory.sh [--sizes \"256M 4G\"] [--connections \"1 4\"] [--write]" >&2; exit 2 ;;
	esac
done

. "$ROOT/test/lib/e2e.sh"
. "$ROOT/bench/lib.sh"
install_deps >/dev/null
e2e_begin memory-bench
stack_up
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "memory: FAIL: $*" >&2; exit 1; }

q "ALTER SYSTEM SET remora.max_workers = 1" >/dev/null
q "ALTER SYSTEM SET remora.worker_concurrency = 1" >/dev/null
q "ALTER SYSTEM SET remora.part_size = '16MB'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null

rss_kib() { awk '/RssAnon/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }

RESULTS=$T/results
: >"$RESULTS"
for size in $SIZES; do
	log "an object of $size"
	head -c "$(numfmt --from=iec "$size")" /dev/urandom >"$WWW/m.bin"
	chmod 644 "$WWW/m.bin"
	want=$(sha256sum "$WWW/m.bin" | cut -d' ' -f1)
	for c in $CONNECTIONS; do
		fresh_worker
		pid=$(worker_pids)
		sleep 2 # the new worker's start-up allocations settle
		idle=$(rss_kib "$pid")
		peak=$idle
		j=$(q "SELECT remora_submit('$SRC/m.bin', options => '{\"connections\": $c}')")
		until [ "$(state "$j")" = succeeded ]; do
			[ "$(state "$j")" = failed ] && die "job $j failed: $(q "SELECT last_error FROM remora.jobs WHERE job_id = $j")"
			cur=$(rss_kib "$pid")
			[ "$cur" -gt "$peak" ] && peak=$cur
			sleep 0.1
		done
		[ "$(q "SELECT sha256 FROM remora_result($j)")" = "$want" ] || die "job $j: wrong SHA-256"
		secs=$(q "SELECT round(extract(epoch FROM finished_at - submitted_at)::numeric, 1) FROM remora.jobs WHERE job_id = $j")
		printf '%s\t%s\t%s\t%s\t%s\n' "$size" "$c" "$idle" "$peak" "$secs" >>"$RESULTS"
		log "$size, $c connection(s): idle $(mib "$idle") MiB, peak $(mib "$peak") MiB, $secs s"
		aws_s3 s3 rm --quiet --recursive "s3://target/remora/$j/"
	done
	rm -f "$WWW/m.bin"
done

report() {
	echo "$SECTION"
	echo
	echo "\`bench/memory.sh --sizes \"$SIZES\" --connections \"$CONNECTIONS\"\` ($(date -u +%Y-%m-%d), 2 cores;"
	echo "nginx and s3rver on 127.0.0.1; \`remora.part_size\` 16MB; one attempt at a time, a fresh"
	echo "worker for each run).  The worker's RssAnon, sampled every 100 ms:"
	echo
	echo "| object | connections | idle MiB | peak MiB | growth MiB | job s |"
	echo "| --- | --- | --- | --- | --- | --- |"
	awk -F'\t' '{ printf "| %s | %s | %.1f | %.1f | %.1f | %s |\n", $1, $2, $3 / 1024, $4 / 1024, ($4 - $3) / 1024, $5 }' "$RESULTS"
	echo
	local first last c g1 g2
	first=${SIZES%% *} last=${SIZES##* }
	for c in $CONNECTIONS; do
		g1=$(awk -F'\t' -v s="$first" -v c="$c" '$1 == s && $2 == c { print $4 - $3 }' "$RESULTS")
		g2=$(awk -F'\t' -v s="$last" -v c="$c" '$1 == s && $2 == c { print $4 - $3 }' "$RESULTS")
		echo "- $c connection(s): the peak above idle grows by $(mib $((g2 - g1))) MiB from $first to $last" \
			"(target ≤ $GROWTH_LIMIT_MIB MiB: $(awk -v d=$((g2 - g1)) -v l="$GROWTH_LIMIT_MIB" 'BEGIN { print (d / 1024 <= l) ? "met" : "missed" }'))."
	done
	echo
	echo "The bound is (connections + 2) part buffers of \`remora.part_size\` whatever the"
	echo "object's size: the parts in flight to the store and the one being filled; ranges"
	echo "beyond them wait in curl's queue (doc/data-plane.md)."
}
report | tee "$T/report.md"
if [ "$WRITE" = 1 ]; then put_section "$T/report.md"; fi
