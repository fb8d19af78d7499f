#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib and bench/lib sourced at run time
#
# one_object.sh: one large object from an HTTP source into the target
# store, through PostgreSQL end to end, against the AWS CLI and rclone on
# the same servers: nginx serving a file of random data, and the store
# chosen with --store (the test S3 server, @20minutes/s3rver, by default;
# Ceph's RADOS Gateway, test/lib/rgw.sh, with a BlueStore OSD).
#
#   A  remora: remora_submit(URL), timed from submit to succeeded
#      (remora_jobs.finished_at - submitted_at), with Remora's defaults
#      (remora.part_size, remora.object_connections)
#   C  curl -s URL | aws s3 cp - s3://target/KEY   (streaming multipart)
#   D  rclone copyurl URL bench:target/KEY
#
# interleaved (A C D, A C D, ...) for RUNS rounds after one discarded
# warm-up round.  Per run: wall seconds, the client's CPU seconds (the
# remora worker's utime+stime from /proc, the whole job included: hashing,
# signing, the manifest; the peers' process trees from GNU time), and the
# store's CPU seconds and bytes written (/proc of s3rver's node process, or
# of radosgw + ceph-osd + ceph-mon) from just before the run until the
# store is idle again.  Every copy is read back with the AWS CLI and its
# SHA-256 compared with the source.  Reports medians and ratios against
# rclone (D), the faster peer.
#
# Usage (root, Debian 12):
#   bench/one_object.sh [--size 1G] [--runs 3] [--store s3rver|rgw] [--write]
# --write puts the report into doc/benchmarks.md under "## One large
# object, end to end" (replacing that section).  DEADLINE (seconds,
# default 3600) bounds it.
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECTION="## One large object, end to end"
SIZE=1G
RUNS=3
STORE=${STORE:-s3rver}
WRITE=0
DEADLINE=${DEADLINE:-3600}
while [ $# -gt 0 ]; do
	case $1 in
	--size) SIZE=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	--store) STORE=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	*) sed -n '/^# Usage/,/^# default 3600/p' "$0" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "one_object: FAIL: $*" >&2; exit 1; }
case $STORE in s3rver | rgw) ;; *) die "--store must be s3rver or rgw" ;; esac
SIZE_B=$(numfmt --from=iec "$SIZE")

cd "$ROOT"
. test/lib/e2e.sh
. bench/lib.sh
install_deps >/dev/null
make -s >/dev/null && make -s install >/dev/null
command -v rclone >/dev/null ||
	DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q rclone >/dev/null 2>&1 ||
	die "rclone could not be installed"
( sleep "$DEADLINE"; log "deadline reached"; kill -TERM $$ ) &
WATCHDOG=$!

REMORA_RGW_OSD=bluestore REMORA_STORE=$STORE stack_up one_object
trap 'kill $WATCHDOG 2>/dev/null; cluster_stop "$T/pg" immediate; stop_services; rm -rf "$T"' EXIT
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)

# Remora as a user would run it: the store directly (no fault proxy), the
# documented defaults of what the test stack sets otherwise, one worker
q "ALTER SYSTEM SET remora.part_size = '16MB'" >/dev/null
q "ALTER SYSTEM SET remora.object_connections = 4" >/dev/null
q "ALTER SYSTEM SET remora.lease_duration = '30s'" >/dev/null
q "ALTER SYSTEM SET remora.stall_timeout = '60s'" >/dev/null
q "ALTER SYSTEM SET remora.max_workers = 1" >/dev/null
q "ALTER SYSTEM SET remora.s3_endpoint = 'http://127.0.0.1:$S3_PORT'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
reloaded() { [ "$(q "SHOW remora.s3_endpoint")" = "http://127.0.0.1:$S3_PORT" ] && [ "$(q "SHOW remora.part_size")" = 16MB ]; }
wait_for 30 reloaded || die "the configuration was not reloaded"
fresh_worker

if [ "$STORE" = s3rver ]; then
	SPIDS=$(while read -r p _; do
		if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "server.js $T/store "; then
			echo "$p"
			break
		fi
	done <"$T/pids")
	SIDLE=0
else
	SPIDS=$(tr '\n' ' ' <"$T/store/daemons")
	SIDLE=1
fi
[ -n "$SPIDS" ] || die "cannot find the store's processes"
store_ticks() {
	local p s t=0
	for p in $SPIDS; do
		s=$(cat "/proc/$p/stat") || die "a process of the store ($p) died"
		s=${s##*) }
		t=$((t + $(echo "$s" | awk '{ print $12 + $13 }')))
	done
	echo "$t"
}
store_wbytes() { for p in $SPIDS; do cat "/proc/$p/io"; done | awk '/^write_bytes:/ { s += $2 } END { printf "%.0f\n", s }'; }
store_quiesce() {
	local last
	for _ in $(seq 1 40); do
		last=$(store_ticks)
		sleep 0.5
		[ $(($(store_ticks) - last)) -le "$SIDLE" ] && return 0
	done
	log "warning: the store did not go idle within 20 s"
}

log "writing $SIZE of random data"
make_file obj.bin "$SIZE_B"
SRC_SHA=$(sha256sum "$WWW/obj.bin" | cut -d' ' -f1)
URL="$SRC/obj.bin"
EP="http://127.0.0.1:$S3_PORT"
export RCLONE_CONFIG=$T/rclone.conf RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Other \
	RCLONE_CONFIG_BENCH_REGION=us-east-1 RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE=true \
	RCLONE_CONFIG_BENCH_ENDPOINT=$EP RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=$S3_ACCESS_KEY \
	RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=$S3_SECRET_KEY
: >"$RCLONE_CONFIG"
export AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY AWS_DEFAULT_REGION=us-east-1 \
	AWS_EC2_METADATA_DISABLED=true AWS_MAX_ATTEMPTS=1
TICK=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
succeeded() { [ "$(q "SELECT state FROM remora.jobs WHERE job_id = $1")" = succeeded ]; }

# run METHOD ROUND: "wall cpu key" of one copy
run() {
	local m=$1 n=$2 out=$T/time pid t0 j
	case $m in
	A)
		pid=$(worker_pid)
		t0=$(ticks "$pid")
		j=$(q "SELECT remora_submit('$URL')")
		wait_for 600 succeeded "$j" || die "job $j: $(q "SELECT last_error FROM remora.jobs WHERE job_id = $j")"
		echo "$(q "SELECT round(extract(epoch FROM finished_at - submitted_at)::numeric, 2) FROM remora.jobs WHERE job_id = $j")" \
			"$(echo "($(ticks "$pid") - $t0) / $TICK" | bc -l)" "$(q "SELECT key FROM remora_result($j)")"
		;;
	C)
		/usr/bin/time -f '%e %U %S' -o "$out" sh -c \
			'curl -sf "$1" | /usr/bin/aws --endpoint-url "$2" s3 cp --only-show-errors - "s3://target/$3"' \
			sh "$URL" "$EP" "runs/C$n/obj.bin" || die "C failed"
		echo "$(awk '{print $1, $2 + $3}' "$out") runs/C$n/obj.bin"
		;;
	D)
		/usr/bin/time -f '%e %U %S' -o "$out" env -u AWS_CA_BUNDLE \
			rclone copyurl --retries 1 --low-level-retries 1 -q "$URL" "bench:target/runs/D$n/obj.bin" || die "D failed"
		echo "$(awk '{print $1, $2 + $3}' "$out") runs/D$n/obj.bin"
		;;
	esac
}

RESULTS=$T/results.tsv
: >"$RESULTS"
METHODS="A C D"
for n in $(seq 0 "$RUNS"); do
	for m in $METHODS; do
		store_quiesce
		s0=$(store_ticks) w0=$(store_wbytes)
		read -r wall cpu key < <(run "$m" "$n")
		store_quiesce
		s1=$(store_ticks) w1=$(store_wbytes)
		[ "$(aws_s3 s3 cp "s3://target/$key" - | sha256sum | cut -d' ' -f1)" = "$SRC_SHA" ] ||
			die "$m round $n: the copy's SHA-256 is not the source's"
		aws_s3 s3 rm --quiet "s3://target/$key" >/dev/null 2>&1 || true
		[ "$STORE" = rgw ] && { rgw_admin "$T/store" gc process --include-all >/dev/null 2>&1 || true; }
		scpu=$(echo "($s1 - $s0) / $TICK" | bc -l)
		log "round $n $m: ${wall} s wall, ${cpu} s client CPU, $(printf '%.2f' "$scpu") s store CPU"
		[ "$n" = 0 ] && continue # the warm-up round
		printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$n" "$wall" "$cpu" "$scpu" $((w1 - w0)) >>"$RESULTS"
	done
done

med() { awk -F'\t' -v m="$1" -v c="$2" '$1 == m { print $c }' "$RESULTS" | median; }
declare -A WALL CPU SCPU SW PER
for m in $METHODS; do
	WALL[$m]=$(med "$m" 3) CPU[$m]=$(med "$m" 4) SCPU[$m]=$(med "$m" 5) SW[$m]=$(med "$m" 6)
	PER[$m]=$(awk -F'\t' -v m="$m" '$1 == m { printf " %s", $3 }' "$RESULTS")
done
declare -A WHAT=([A]="remora: \`remora_submit\`, submit to succeeded" [C]="\`curl -s URL \\| aws s3 cp - …\`" [D]="\`rclone copyurl URL …\`")
STORE_NAME=s3rver
[ "$STORE" = rgw ] && STORE_NAME="Ceph RGW"
REPORT=$T/report.md
{
	echo "$SECTION"
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/one_object.sh --size $SIZE --runs $RUNS --store $STORE\`"
	echo "at commit $(git rev-parse --short HEAD): one object of $SIZE of random data served by"
	echo "nginx, copied into $STORE_NAME, all on 127.0.0.1; $RUNS interleaved rounds (A C D) after"
	echo "a discarded warm-up, medians; every copy read back with the AWS CLI and"
	echo "its SHA-256 compared.  Remora runs with its defaults (\`remora.part_size\` $(q "SHOW remora.part_size"),"
	echo "\`remora.object_connections\` $(q "SHOW remora.object_connections"), one worker); its client CPU is the"
	echo "worker process's over the whole job.  rclone $(rclone version | head -n 1 | cut -d' ' -f2),"
	echo "AWS CLI $(/usr/bin/aws --version 2>&1 | cut -d' ' -f1 | cut -d/ -f2).  $(nproc) cores; load average $LOADAVG before, $(cut -d' ' -f1-3 /proc/loadavg) after."
	echo
	echo "| method | what | wall s | wall ÷ D | client CPU s | client CPU ÷ D | store CPU s | store MiB written | wall per run |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
	for m in $METHODS; do
		echo "| $m | ${WHAT[$m]} | ${WALL[$m]} | $(ratio "${WALL[$m]}" "${WALL[D]}") | $(printf '%.2f' "${CPU[$m]}") | $(ratio "${CPU[$m]}" "${CPU[D]}") | $(printf '%.2f' "${SCPU[$m]}") | $(echo "${SW[$m]} / 1048576" | bc) |${PER[$m]} |"
	done
	echo
	echo "Remora took $(ratio "${WALL[A]}" "${WALL[D]}")× rclone's wall time and $(ratio "${WALL[A]}" "${WALL[C]}")× the AWS CLI's,"
	echo "with $(ratio "${CPU[A]}" "${CPU[D]}")× rclone's and $(ratio "${CPU[A]}" "${CPU[C]}")× the AWS CLI's client CPU, for the whole job"
	echo "(claim, hashing every byte with SHA-256 for the manifest and for each"
	echo "part's signature, the manifest, the commit).  The store spent"
	echo "$(ratio "${SCPU[A]}" "${SCPU[D]}")× rclone's CPU on Remora's copy and wrote $(ratio "${SW[A]}" "${SW[D]}")× what it wrote for rclone's."
} >"$REPORT"
cat "$REPORT"
if [ "$WRITE" = 1 ]; then
	put_section "$REPORT"
	log "wrote doc/benchmarks.md"
fi
