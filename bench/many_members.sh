#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib sourced at run time
#
# many_members.sh: a prefix of many small objects, S3 to S3 on the same
# store, through PostgreSQL end to end, against the AWS CLI and rclone.
#
#   A  remora, same store: every member read once to hash it, then copied
#      inside the store (CopyObject)
#   B  remora, streamed: the same store registered as a source endpoint,
#      so every member is read and written again (GET + PUT)
#   C  aws s3 sync s3://source/P/ s3://target/Q/ (CopyObject, no hashing)
#   D  rclone copy --transfers 8 (server-side copy), when installed
#
# interleaved (A B C D A B C D ...) for RUNS rounds; wall seconds from
# submit to succeeded (A, B: remora_jobs.finished_at - submitted_at), and
# the client's CPU seconds (the worker's utime+stime from /proc; the CLI's
# process tree from GNU time).  Every result is listed again with the AWS
# CLI and its object count compared.  Then the worker's memory: the peak of
# its private resident memory (RssAnon) above idle while it copies a prefix
# of N1 and of N2 members (sampled every 100 ms), each with a fresh worker.
#
# Usage (root, Debian 12):
#   bench/many_members.sh [--objects 2000] [--size 64K] [--runs 3]
#                         [--rss "2000 20000"] [--no-rclone] [--write]
# --write puts the report into doc/benchmarks.md under "## Many members"
# (replacing that section).  DEADLINE (seconds, default 3600) bounds it.
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECTION="## Many members"
OBJECTS=2000
SIZE=64K
RUNS=3
RSS_COUNTS="2000 20000"
RCLONE=auto
WRITE=0
DEADLINE=${DEADLINE:-3600}
while [ $# -gt 0 ]; do
	case $1 in
	--objects) OBJECTS=$2; shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	--rss) RSS_COUNTS=$2; shift 2 ;;
	--no-rclone) RCLONE=0; shift ;;
	--write) WRITE=1; shift ;;
	*) sed -n '/^# Usage/,/^# --write/p' "$0" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "many_members: FAIL: $*" >&2; exit 1; }
bytes() { numfmt --from=iec "$1"; }

cd "$ROOT"
. test/lib/deps.sh
. test/lib/cluster.sh
. test/lib/e2e.sh
. test/lib/services.sh
. test/lib/stack.sh
install_deps >/dev/null
make -s >/dev/null && make -s install >/dev/null
if [ "$RCLONE" != 0 ] && ! command -v rclone >/dev/null; then
	DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q rclone >/dev/null 2>&1 || true
fi
HAVE_RCLONE=0
[ "$RCLONE" != 0 ] && command -v rclone >/dev/null && HAVE_RCLONE=1
( sleep "$DEADLINE"; log "deadline reached"; kill -TERM $$ ) &
WATCHDOG=$!

stack_up many_members
trap 'kill $WATCHDOG 2>/dev/null; cluster_stop "$T/pg" immediate; stop_services; rm -rf "$T"' EXIT
# the workers talk to the store directly, as the CLIs do
q "ALTER SYSTEM SET remora.s3_endpoint = 'http://127.0.0.1:$S3_PORT'" >/dev/null
q "ALTER SYSTEM SET remora.max_workers = 1" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
q "SELECT remora.register_source_endpoint('same', 'http://127.0.0.1:$S3_PORT', 'us-east-1', true, 'S3RVER', 'S3RVER')" >/dev/null
export RCLONE_CONFIG=$T/rclone.conf RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Other \
	RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=S3RVER RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=S3RVER \
	RCLONE_CONFIG_BENCH_REGION=us-east-1 RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE=true \
	RCLONE_CONFIG_BENCH_ENDPOINT="http://127.0.0.1:$S3_PORT"
: >"$RCLONE_CONFIG"

# a prefix of N objects of SIZE bytes each
populate() {	# populate PREFIX N SIZE
	local dir=$T/pop.$1
	mkdir -p "$dir"
	for i in $(seq -w 1 "$2"); do head -c "$(bytes "$3")" /dev/urandom >"$dir/o$i"; done
	aws_s3 s3 cp --recursive --quiet "$dir" "s3://source/$1/"
	rm -rf "$dir"
}
count() { aws_s3 s3 ls --recursive "s3://target/$1" | wc -l; }
worker_pid() { q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora worker'" | head -1; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
succeeded() { [ "$(q "SELECT state FROM remora.jobs WHERE job_id = $1")" = succeeded ]; }
job_secs() { q "SELECT round(extract(epoch FROM finished_at - submitted_at)::numeric, 2) FROM remora.jobs WHERE job_id = $1"; }

# run_remora PREFIX OPTIONS: "wall cpu" of one job, checked
run_remora() {
	local pid t0 j
	pid=$(worker_pid)
	t0=$(ticks "$pid")
	j=$(q "SELECT remora_submit('s3://source/$1/', options => '$2')")
	wait_for 1800 succeeded "$j" || die "job $j did not succeed: $(q "SELECT last_error FROM remora.jobs WHERE job_id = $j")"
	[ "$(q "SELECT result_members FROM remora_jobs WHERE job_id = $j")" = "$OBJECTS" ] || die "job $j: wrong member count"
	[ "$(count "remora/$j/")" -ge "$OBJECTS" ] || die "job $j: the AWS CLI does not list every member"
	echo "$(job_secs "$j") $(echo "($(ticks "$pid") - $t0) / $(getconf CLK_TCK)" | bc -l)"
}
# run_cli NAME CMD...: "wall cpu" from GNU time
run_cli() {
	local out=$T/time.$1
	/usr/bin/time -f "%e %U %S" -o "$out" "${@:2}" >/dev/null 2>&1 || die "$1 failed"
	awk '{printf "%s %s\n", $1, $2 + $3}' "$out"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

log "populating s3://source/bench/ with $OBJECTS × $SIZE"
aws_s3 s3 mb s3://source >/dev/null
populate bench "$OBJECTS" "$SIZE"
declare -A WALLS CPUS
methods="A B C"
[ "$HAVE_RCLONE" = 1 ] && methods="$methods D"
for r in $(seq 1 "$RUNS"); do
	for m in $methods; do
		log "round $r: $m"
		case $m in
		A) res=$(run_remora bench '{}') ;;
		B) res=$(run_remora bench '{"endpoint": "same"}') ;;
		C) res=$(run_cli aws env AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1 \
			/usr/bin/aws --endpoint-url "http://127.0.0.1:$S3_PORT" s3 sync --quiet s3://source/bench/ "s3://target/aws-$r/")
			[ "$(count "aws-$r/")" = "$OBJECTS" ] || die "aws sync: wrong count" ;;
		D) res=$(run_cli rclone env -u AWS_CA_BUNDLE rclone copy --transfers 8 --checkers 8 bench:source/bench "bench:target/rclone-$r")
			[ "$(count "rclone-$r/")" = "$OBJECTS" ] || die "rclone: wrong count" ;;
		esac
		WALLS[$m]="${WALLS[$m]:-} ${res% *}"
		CPUS[$m]="${CPUS[$m]:-} ${res#* }"
	done
done

# memory: peak RSS above idle while copying N members, a fresh worker each
declare -A RSS
for n in $RSS_COUNTS; do
	log "memory: a prefix of $n members"
	populate "rss$n" "$n" 1K
	pid=$(worker_pid)
	kill "$pid"	# SIGTERM: the launcher starts a fresh worker
	fresh() { p=$(worker_pid); [ -n "$p" ] && [ "$p" != "$pid" ]; }
	wait_for 60 fresh || die "no fresh worker"
	sleep 2
	pid=$(worker_pid)
	idle=$(awk '/RssAnon/ {print $2}' "/proc/$pid/status")
	j=$(q "SELECT remora_submit('s3://source/rss$n/')")
	peak=$idle
	while ! succeeded "$j"; do
		cur=$(awk '/RssAnon/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
		[ "$cur" -gt "$peak" ] && peak=$cur
		[ "$(q "SELECT state FROM remora.jobs WHERE job_id = $j")" = failed ] && die "rss job $j failed"
		sleep 0.1
	done
	[ "$(q "SELECT result_members FROM remora_jobs WHERE job_id = $j")" = "$n" ] || die "rss job $j: wrong count"
	RSS[$n]="$idle $peak $(job_secs "$j")"
done

# ------------------------------------------------------------------ report
declare -A NAME=(
	[A]="remora, same store (hash by GET, then CopyObject)"
	[B]="remora, streamed (GET + PUT, through a registered endpoint)"
	[C]="\`aws s3 sync\` (CopyObject, no hashing)"
	[D]="\`rclone copy --transfers 8\` (server-side copy)"
)
report() {
	local ref wall cpu
	echo "$SECTION"
	echo
	echo "Measured by \`bench/many_members.sh\` on $(date -u +%F) ($(nproc) cores): a prefix of"
	echo "$OBJECTS objects of $SIZE each copied from one bucket to another of the"
	echo "test S3 server (@20minutes/s3rver), $RUNS interleaved rounds, medians; CPU is"
	echo "the client's own (the remora worker's process; the CLI's process tree)."
	echo "Remora's wall time runs from submit to the committed result, so it"
	echo "includes claiming, listing, hashing every member, writing the manifest and"
	echo "the commit."
	echo
	echo "| method | wall s | objects/s | × aws wall | client CPU s |"
	echo "| --- | --- | --- | --- | --- |"
	ref=$(echo "${WALLS[C]}" | tr ' ' '\n' | grep . | median)
	for m in $methods; do
		wall=$(echo "${WALLS[$m]}" | tr ' ' '\n' | grep . | median)
		cpu=$(echo "${CPUS[$m]}" | tr ' ' '\n' | grep . | median)
		printf '| %s | %.2f | %.0f | %.2f | %.2f |\n' "${NAME[$m]}" "$wall" \
			"$(echo "$OBJECTS / $wall" | bc -l)" "$(echo "$wall / $ref" | bc -l)" "$cpu"
	done
	echo
	echo "The worker's own memory while copying a prefix of 1 KiB objects (a fresh"
	echo "worker each time; RssAnon sampled every 100 ms: the process's private"
	echo "memory, without the shared buffers it touches while writing member rows,"
	echo "which VmRSS would count):"
	echo
	echo "| members | idle MiB | peak MiB | growth MiB | job s |"
	echo "| --- | --- | --- | --- | --- |"
	for n in $RSS_COUNTS; do
		read -r idle peak secs <<<"${RSS[$n]}"
		printf '| %s | %.1f | %.1f | %.1f | %s |\n' "$n" "$(echo "$idle / 1024" | bc -l)" \
			"$(echo "$peak / 1024" | bc -l)" "$(echo "($peak - $idle) / 1024" | bc -l)" "$secs"
	done
	echo
	echo "What the worker holds for a set: the listing window (at most 2,048"
	echo "entries), completed members not yet checkpointed (at most 4,096; checkpoints"
	echo "run every second), the manifest's unsent text (at most about two of its 5 MiB"
	echo "parts, whatever remora.part_size is; reached at roughly 25,000 members of"
	echo "this size) and the duplicate detector's table, the one thing that grows with"
	echo "the member count: 32 bytes a member (about 1.5 MiB at 50,000)."
}
report >"$T/report.md"
cat "$T/report.md"
if [ "$WRITE" = 1 ]; then
	python3 - "$ROOT/doc/benchmarks.md" "$T/report.md" "$SECTION" <<'EOF'
import sys
path, rep, section = sys.argv[1:]
doc = open(path).read()
new = open(rep).read().rstrip('\n') + '\n'
if section in doc:
    i = doc.index(section)
    j = doc.find('\n## ', i + len(section))
    doc = doc[:i] + new + (doc[j:] if j >= 0 else '')
else:
    doc = doc.rstrip('\n') + '\n\n' + new
open(path, 'w').write(doc)
EOF
	log "doc/benchmarks.md updated"
fi
