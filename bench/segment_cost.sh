#!/usr/bin/env bash
# shellcheck disable=SC2016,SC1091  # awk/JMESPath in single quotes; test/lib sourced at run time
#
# segment_cost.sh: what the engine's segments cost on the happy path.
#
# For engines before parts went straight into the member's upload (commit
# a019314): run it with --rev and a commit before that one.  Since then
# there are no segments; bench/one_object.sh measures the current engine
# end to end, and refuses to measure a tree without src/engine/segments.c.
#
# Such an engine cuts a source into segment objects of part_size bytes, then
# assembles the member with a multipart upload whose parts are server-side
# UploadPartCopy from the segments, then deletes the segments.  An object
# that fits in one buffer is PUT once instead.  This bench moves the same
# object of random data from nginx to an S3 store, all on 127.0.0.1, with:
#
#   A  the engine, segmented path  (fetch, part size PART)
#   B  the engine, single PUT      (fetch, part size SIZE + 1 KiB)
#   C  curl URL | aws s3 cp - s3://...   (the AWS CLI's streaming multipart)
#   D  rclone copyurl URL remote:bucket/key  (when rclone is installed)
#
# against each store chosen with --store: the test S3 server
# (@20minutes/s3rver, which checks signatures) and Ceph's RADOS Gateway
# (test/lib/rgw.sh: one mon, one BlueStore OSD on a sparse file, radosgw),
# interleaved (s3rver A B C D, RGW A B C D, s3rver A B C D ...), RUNS
# rounds after WARMUP discarded rounds.  Per run: wall seconds, client CPU
# seconds (user+sys of the client's process tree), the store's CPU seconds
# and bytes it wrote (from /proc/PID/stat and /proc/PID/io; for RGW the sum
# of radosgw, ceph-osd and ceph-mon), and the CPU the rest of the machine
# used meanwhile (/proc/stat), to tell a busy machine.  Every result is
# downloaded again with the AWS CLI and its SHA-256 compared with the
# source: a mismatch fails the bench.  Then one untimed "census" run of each method through a
# logging nginx reverse proxy counts the S3 requests each one makes.
#
# Usage (root, Debian 12, from anywhere):
#   bench/segment_cost.sh [--size 256M] [--part 16M] [--runs 5] [--warmup 1]
#                         [--store s3rver|rgw|both] [--no-rclone] [--no-census]
#                         [--rev COMMIT] [--write]
# The same settings as environment variables: SIZE PART RUNS WARMUP STORE
# RCLONE=0 CENSUS=0 REV; --store (default both) picks the stores; --rev builds the engine from that commit instead
# of the work tree.  A round is done again (at most 2 × RUNS times) when
# something else on the machine used more than OTHER_LIMIT of a core
# (default 0.5) during one of its runs.  DEADLINE (seconds, default 3600)
# bounds the whole run.
# Sizes take a K/M/G suffix (binary: 16M = 16 MiB).  The Markdown report
# goes to stdout, progress to stderr; --write also puts it into
# doc/benchmarks.md under "## Segment cost on the happy path" (replacing
# that section, leaving the rest of the file alone).
#
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECTION="## Segment cost on the happy path"

SIZE=${SIZE:-256M}
PART=${PART:-16M}
RUNS=${RUNS:-5}
WARMUP=${WARMUP:-1}
RCLONE=${RCLONE:-auto}
CENSUS=${CENSUS:-1}
DEADLINE=${DEADLINE:-3600}
OTHER_LIMIT=${OTHER_LIMIT:-0.5}
REV=${REV:-}
STORE=${STORE:-both}
WRITE=0

usage() {
	sed -n '/^# Usage/,/^# that section/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--size) SIZE=$2; shift 2 ;;
	--part) PART=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	--warmup) WARMUP=$2; shift 2 ;;
	--store) STORE=$2; shift 2 ;;
	--no-rclone) RCLONE=0; shift ;;
	--no-census) CENSUS=0; shift ;;
	--rev) REV=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	-h | --help) usage ;;
	*) echo "segment_cost: unknown argument $1" >&2; usage ;;
	esac
done

log() { echo "[$(date +%T)] $*" >&2; }
die() {
	echo "segment_cost: FAIL: $*" >&2
	exit 1
}

# 256M -> bytes (binary suffixes)
to_bytes() {
	local v=${1%[iI][bB]} n mult=1
	v=${v%[bB]}
	case $v in
	*[kK]) mult=1024; n=${v%?} ;;
	*[mM]) mult=$((1024 * 1024)); n=${v%?} ;;
	*[gG]) mult=$((1024 * 1024 * 1024)); n=${v%?} ;;
	*) n=$v ;;
	esac
	[[ $n =~ ^[0-9]+$ ]] || die "not a size: $1"
	echo $((n * mult))
}

# bytes -> "256 MiB"
human() {
	awk -v b="$1" 'BEGIN {
		if (b >= 1073741824 && b % 1073741824 == 0) printf "%d GiB", b / 1073741824
		else if (b >= 1048576 && b % 1048576 == 0) printf "%d MiB", b / 1048576
		else if (b >= 1048576) printf "%.1f MiB", b / 1048576
		else printf "%d bytes", b }'
}

SIZE_B=$(to_bytes "$SIZE")
PART_B=$(to_bytes "$PART")
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive integer"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer"
[[ $DEADLINE =~ ^[1-9][0-9]*$ ]] || die "DEADLINE must be a positive number of seconds"
case $STORE in
s3rver | rgw) STORES=$STORE ;;
both) STORES="s3rver rgw" ;;
*) die "--store must be s3rver, rgw or both, not '$STORE'" ;;
esac
[[ $OTHER_LIMIT =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "OTHER_LIMIT must be a fraction of one core, e.g. 0.5"
[ "$SIZE_B" -gt "$PART_B" ] ||
	die "the object ($SIZE_B bytes) must be larger than the part size ($PART_B), or A is not segmented"
[ "$PART_B" -ge 1048576 ] || die "the part size must be at least 1 MiB"
case " $STORES " in *" rgw "*)
	# RGW refuses parts below rgw_multipart_min_part_size (EntityTooSmall)
	[ "$PART_B" -ge $((5 * 1048576)) ] || die "the part size must be at least 5 MiB on RGW (S3's minimum, which RGW enforces)" ;;
esac
NSEG=$(((SIZE_B + PART_B - 1) / PART_B))
[ "$NSEG" -le 10000 ] || die "$NSEG segments: more than S3's 10000 parts"
[ $((PART_B % 1024)) = 0 ] || die "the part size must be a multiple of 1 KiB (the engine refuses others)"
# B: strictly larger than the object, and a multiple of 1 KiB (the engine
# refuses others).  A buffer that fills exactly is sealed as a segment, so
# part_size == size would still take the segmented path (one segment, one
# UploadPartCopy).
SINGLE_PART_B=$(((SIZE_B / 1024 + 1) * 1024))
# per-run bound: generous for s3rver (~100 MB/s here), still finite
RUN_TIMEOUT=$((120 + SIZE_B * 2 / 1048576))

if [ -n "$REV" ]; then
	REV=$(git -C "$ROOT" rev-parse --verify --quiet "$REV^{commit}") || die "no such commit: $REV"
fi
[ "$(id -u)" -eq 0 ] || die "run as root (nginx and apt-get, as the project's tests)"

# ------------------------------------------------------------------ deps
. "$ROOT/test/lib/deps.sh"
. "$ROOT/test/lib/services.sh"
. "$ROOT/bench/lib.sh"

need=""
for c in gcc pkg-config nginx node curl sha256sum; do
	command -v "$c" >/dev/null || need="$need $c"
done
[ -x /usr/bin/aws ] || need="$need /usr/bin/aws"
[ -x /usr/bin/time ] || need="$need /usr/bin/time"
[ -z "$need" ] || die "missing:$need (test/run installs the project's dependencies; apt-get install time for /usr/bin/time)"
case " $STORES " in *" rgw "*)
	need=""
	for c in ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool monmaptool; do
		command -v "$c" >/dev/null || need="$need $c"
	done
	if [ -n "$need" ]; then
		log "installing Ceph (Debian packages) for RGW:$need missing"
		DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q --no-install-recommends \
			ceph-mon ceph-osd radosgw ceph-common >/dev/null 2>&1 ||
			die "Ceph could not be installed (apt-get install ceph-mon ceph-osd radosgw ceph-common), or use --store s3rver"
	fi
	;;
esac
if [ "$RCLONE" != 0 ] && ! command -v rclone >/dev/null; then
	log "installing rclone (Debian package)"
	if ! DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q rclone >/dev/null 2>&1; then
		[ "$RCLONE" = 1 ] && die "rclone requested but could not be installed"
		log "rclone could not be installed: method D skipped"
	fi
fi
if [ "$RCLONE" != 0 ] && command -v rclone >/dev/null; then
	HAVE_RCLONE=1
	METHODS="A B C D"
else
	HAVE_RCLONE=0
	METHODS="A B C"
fi

# ------------------------------------------------------------- lifecycle
WORK=$(mktemp -d /tmp/remora-bench.XXXXXX)
chmod 755 "$WORK"				# nginx workers run as nobody
SERVICES_DIR=$WORK
WATCHDOG=""
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$WATCHDOG" ]; then kill "$WATCHDOG" 2>/dev/null || true; fi
	stop_services
	# the S3 server exits on SIGTERM after closing; give it a moment
	sleep 0.5
	if [ "${KEEP:-0}" = 1 ]; then
		log "kept $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM
# The whole bench stops by itself: at the deadline a watchdog signals this
# script and stops the servers, so that whatever runs in the foreground
# fails at once and the EXIT trap cleans up.  (Every client command also
# has its own timeout.)
(
	trap 'kill "$s" 2>/dev/null; exit 0' TERM
	sleep "$DEADLINE" &
	s=$!
	wait "$s"
	echo "segment_cost: FAIL: the deadline of ${DEADLINE}s passed" >&2
	kill -TERM $$ 2>/dev/null
	stop_services
) &
WATCHDOG=$!

# ----------------------------------------------------------------- build
# the engine from the work tree, or (--rev) from a commit, so that edits in
# progress do not end up in the measurement
TREE=$ROOT
if [ -n "$REV" ]; then
	TREE=$WORK/tree
	mkdir -p "$TREE"
	git -C "$ROOT" archive "$REV" src/engine test/engine | tar -x -C "$TREE" ||
		die "cannot read src/engine and test/engine at $REV"
fi
[ -f "$TREE/src/engine/segments.c" ] ||
	die "the engine of ${REV:-the work tree} has no segments (parts go straight into the member's upload): give --rev a commit before a019314, or see bench/one_object.sh"
log "building test/engine/fetch.c with -O2 (no sanitizers) from ${REV:-the work tree}"
FETCH=$WORK/fetch
# shellcheck disable=SC2046
(cd "$TREE" && gcc -O2 -Isrc $(pkg-config --cflags libcurl openssl libxml-2.0) -o "$FETCH" \
	test/engine/fetch.c src/engine/*.c \
	$(pkg-config --libs libcurl openssl libxml-2.0)) || die "could not build fetch"

# -------------------------------------------------------------- services
# Per store: its port, its processes (whose CPU and writes are the
# store's), its key, the idle CPU ticks it may use in 0.5 s and still count
# as idle, and its name in the report.
declare -A SPORT SPIDS SKEY SSECRET SIDLE SNAME
NGINX_PORT=$(free_port)
log "starting nginx on 127.0.0.1:$NGINX_PORT"
start_nginx "$WORK/nginx" "$NGINX_PORT"
BUCKET=bench
for st in $STORES; do
	SPORT[$st]=$(free_port)
	case $st in
	s3rver)
		log "starting s3rver on 127.0.0.1:${SPORT[$st]}"
		start_s3 "$WORK/s3" "${SPORT[$st]}" "$BUCKET"
		SPIDS[$st]=$(tail -n 1 "$WORK/pids" | cut -d" " -f1)
		[ "$(cat "/proc/${SPIDS[$st]}/comm" 2>/dev/null)" = node ] || die "cannot find the S3 server's process"
		SKEY[$st]=S3RVER SSECRET[$st]=S3RVER SIDLE[$st]=0 SNAME[$st]=s3rver
		;;
	rgw)
		# BlueStore on a sparse file: the object's copies stay on disk, not
		# in the OSD's memory
		log "starting RGW (mon, BlueStore OSD, radosgw) on 127.0.0.1:${SPORT[$st]}"
		SKEY[$st]=REMORABENCH SSECRET[$st]="bench-$RANDOM$RANDOM$RANDOM" SNAME[$st]=RGW
		REMORA_RGW_OSD=bluestore start_rgw "$WORK/rgw" "${SPORT[$st]}" "${SKEY[$st]}" "${SSECRET[$st]}" \
			"$BUCKET" >&2 || die "RGW did not start"
		SPIDS[$st]=$(tr '\n' ' ' <"$WORK/rgw/daemons")
		# the monitor and the OSD tick in the background (a few ms a second)
		SIDLE[$st]=1
		;;
	esac
done

log "writing $(human "$SIZE_B") of random data"
head -c "$SIZE_B" /dev/urandom >"$WORK/nginx/www/obj"
chmod 644 "$WORK/nginx/www/obj"
SRC_SHA=$(sha256sum "$WORK/nginx/www/obj" | cut -d' ' -f1)
URL="http://127.0.0.1:$NGINX_PORT/obj"
curl -sfI "$URL" >/dev/null || die "nginx does not serve the source"

# clients: defaults only (no user config), no silent retries
export AWS_DEFAULT_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true AWS_MAX_ATTEMPTS=1
export AWS_CONFIG_FILE=$WORK/aws-config AWS_SHARED_CREDENTIALS_FILE=$WORK/aws-credentials
: >"$AWS_CONFIG_FILE"
: >"$AWS_SHARED_CREDENTIALS_FILE"
export RCLONE_CONFIG=$WORK/rclone.conf
: >"$RCLONE_CONFIG"
export RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Other
export RCLONE_CONFIG_BENCH_REGION=us-east-1 RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE=true
# use_store STORE: every client, and the helpers below, talk to that store
use_store() {
	CUR=$1
	S3_PORT=${SPORT[$CUR]}
	export S3_PORT
	export AWS_ACCESS_KEY_ID=${SKEY[$CUR]} AWS_SECRET_ACCESS_KEY=${SSECRET[$CUR]}
	export REMORA_KEY=${SKEY[$CUR]} REMORA_SECRET=${SSECRET[$CUR]}
	export RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=${SKEY[$CUR]} RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=${SSECRET[$CUR]}
}

# ------------------------------------------------------------ server stats
# utime+stime of the current store's processes, in clock ticks
s3_ticks() {
	local s p t=0
	for p in ${SPIDS[$CUR]}; do
		s=$(cat "/proc/$p/stat") || die "a process of ${SNAME[$CUR]} ($p) died"
		s=${s##*) }
		# after "pid (comm) ": field 3 is state, utime is field 14, stime 15
		t=$((t + $(echo "$s" | awk '{ print $12 + $13 }')))
	done
	echo "$t"
}
# bytes the current store's processes wrote to files and devices
s3_wbytes() {
	local p
	for p in ${SPIDS[$CUR]}; do cat "/proc/$p/io"; done | awk '/^write_bytes:/ { s += $2 } END { printf "%.0f\n", s }'
}
TICK=$(getconf CLK_TCK)
# busy time of the whole machine (all CPUs), in clock ticks
sys_busy() {
	awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}
# wait until the store is idle: its CPU time unchanged for 0.5 s, or for
# RGW grown by no more than its background ticks (requests the client did
# not wait for, e.g. segment deletes, and the OSD's flushes, finish)
s3_quiesce() {
	local last now i
	last=$(s3_ticks)
	for i in $(seq 1 80); do
		sleep 0.25
		now=$(s3_ticks)
		if [ $((now - last)) -le "${SIDLE[$CUR]}" ]; then
			sleep 0.25
			[ $(($(s3_ticks) - last)) -le "${SIDLE[$CUR]}" ] && return 0
		fi
		last=$now
	done
	log "warning: ${SNAME[$CUR]} did not go idle within 20 s"
}

# ------------------------------------------------------------------ runs
RESULTS=$WORK/results.tsv		# method round wall user sys s3cpu s3wbytes leftover othercpu store
: >"$RESULTS"

# client_cmd METHOD KEY_PREFIX ENDPOINT: the command line of a method
client_run() {
	local m=$1 prefix=$2 ep=$3 out=$4 err=$5 tf=$6
	case $m in
	A)
		/usr/bin/time -f '%e %U %S' -o "$tf" timeout "$RUN_TIMEOUT" \
			"$FETCH" "$ep" "$BUCKET" "$prefix" "$URL" obj.bin "$PART_B" >"$out" 2>"$err"
		;;
	B)
		/usr/bin/time -f '%e %U %S' -o "$tf" timeout "$RUN_TIMEOUT" \
			"$FETCH" "$ep" "$BUCKET" "$prefix" "$URL" obj.bin "$SINGLE_PART_B" >"$out" 2>"$err"
		;;
	C)
		# shellcheck disable=SC2016
		/usr/bin/time -f '%e %U %S' -o "$tf" timeout "$RUN_TIMEOUT" \
			bash -c 'set -o pipefail; curl -sfS "$1" | /usr/bin/aws --endpoint-url "$2" --no-cli-pager s3 cp - "$3"' \
			_ "$URL" "$ep" "s3://$BUCKET/${prefix}obj.bin" >"$out" 2>"$err"
		;;
	D)
		# rclone refuses to start with AWS_CA_BUNDLE set (LoadCustomCABundleError)
		/usr/bin/time -f '%e %U %S' -o "$tf" timeout "$RUN_TIMEOUT" \
			env -u AWS_CA_BUNDLE RCLONE_CONFIG_BENCH_ENDPOINT="$ep" \
			rclone copyurl --retries 1 --low-level-retries 1 -q \
			"$URL" "bench:$BUCKET/${prefix}obj.bin" >"$out" 2>"$err"
		;;
	esac
}

# The AWS CLI for verification and clean-up, straight to the server, with
# the CLI's default retries (the clients measured get none).
aws_local() {
	AWS_MAX_ATTEMPTS=5 timeout "$RUN_TIMEOUT" /usr/bin/aws --endpoint-url "http://127.0.0.1:$S3_PORT" \
		--no-cli-pager "$@"
}

# objects under a prefix
count_objects() {
	aws_local s3api list-objects-v2 --bucket "$BUCKET" --prefix "$1" \
		--query 'length(Contents || `[]`)' --output text
}

# delete everything under a prefix.  s3rver answers InternalError when two
# DELETEs race to remove the same emptied directory (the object is gone
# all the same), so check the listing rather than the exit status.
purge() {
	local i
	for i in 1 2 3; do
		aws_local s3 rm --quiet --recursive "s3://$BUCKET/$1" >/dev/null 2>&1 || true
		if [ "$(count_objects "$1")" = 0 ]; then
			# RGW only queues a deleted object's data for its garbage
			# collector (after rgw_gc_obj_min_wait, 2 h): reclaim it now, so
			# that the OSD's file does not fill up over the rounds.  This is
			# outside the timed window (the next run waits for the store to
			# be idle first).
			if [ "$CUR" = rgw ]; then
				rgw_admin "$WORK/rgw" gc process --include-all >/dev/null 2>&1 ||
					log "warning: radosgw-admin gc process failed"
			fi
			return 0
		fi
	done
	die "could not delete s3://$BUCKET/$1"
}

# run_one METHOD TAG ENDPOINT RECORD(0/1): one timed transfer to the
# current store (use_store), verified
run_one() {
	local m=$1 tag=$2 ep=$3 record=$4
	local prefix="runs/$CUR/$m$tag/" out=$WORK/out err=$WORK/err tf=$WORK/time
	local t0 t1 tm w0 w1 b0 b1 other got left wall user sys key expect size sha

	sync						# earlier runs' dirty pages are not this run's
	s3_quiesce
	t0=$(s3_ticks)
	w0=$(s3_wbytes)
	b0=$(sys_busy)
	if ! client_run "$m" "$prefix" "$ep" "$out" "$err" "$tf"; then
		die "method $m run $tag failed: $(cat "$tf" "$out" "$err" 2>/dev/null | tail -n 8)"
	fi
	b1=$(sys_busy)
	tm=$(s3_ticks)
	s3_quiesce
	t1=$(s3_ticks)
	w1=$(s3_wbytes)
	read -r wall user sys <"$tf" || die "no timing for $m $tag"
	# CPU the machine spent, while the client ran, on anything but the
	# client and the S3 server (nginx, kernel writeback, other users)
	other=$(awk -v b=$((b1 - b0)) -v s=$((tm - t0)) -v t="$TICK" -v u="$user" -v y="$sys" \
		'BEGIN { o = (b - s) / t - u - y; printf "%.2f", o < 0 ? 0 : o }')

	# the result must be the source, byte for byte
	key="${prefix}obj.bin"
	expect=1					# objects the method leaves under its prefix
	if [ "$m" = A ] || [ "$m" = B ]; then
		# the engine chooses the member's key under the staging prefix
		read -r _ key _ size _ sha _ < <(grep -m 1 '^member ' "$out") ||
			die "method $m run $tag: the engine printed no result: $(head -n 2 "$out")"
		if [ "$size" != "$SIZE_B" ] || [ "$sha" != "$SRC_SHA" ]; then
			die "method $m run $tag: the engine reported size $size sha256 $sha"
		fi
		case $key in "$prefix"*) ;; *) die "method $m run $tag: member $key outside $prefix" ;; esac
		expect=2				# the member and the manifest
	fi
	got=$(aws_local s3 cp "s3://$BUCKET/$key" - | sha256sum | cut -d' ' -f1)
	[ "$got" = "$SRC_SHA" ] ||
		die "method $m run $tag: the stored object's SHA-256 is $got, the source's $SRC_SHA"
	# anything more under the prefix was left behind (segments, for A)
	left=$(($(count_objects "$prefix") - expect))
	if [ "$left" != 0 ]; then
		log "warning: $m $tag left $left object(s) besides its result:"
		aws_local s3 ls --recursive "s3://$BUCKET/$prefix" >&2 || true
	fi
	purge "$prefix"
	if [ "$record" = 1 ]; then
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$m" "$tag" "$wall" "$user" "$sys" \
			"$(awk -v d=$((t1 - t0)) -v t="$TICK" 'BEGIN { printf "%.2f", d / t }')" \
			$((w1 - w0)) "$left" "$other" "$CUR" >>"$ROUND"
	fi
	log "${SNAME[$CUR]} $m $tag: wall ${wall}s, client CPU $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')s, ${SNAME[$CUR]} CPU $(awk -v d=$((t1 - t0)) -v t="$TICK" 'BEGIN { printf "%.2f", d / t }')s, ${SNAME[$CUR]} wrote $(((w1 - w0) / 1048576)) MiB, other CPU ${other}s, verified"
}

# run_round TAG RECORD: every method on every store, interleaved
run_round() {
	local st m
	for st in $STORES; do
		use_store "$st"
		for m in $METHODS; do run_one "$m" "$1" "http://127.0.0.1:$S3_PORT" "$2"; done
	done
}
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
log "$STORES × $METHODS: $(human "$SIZE_B"), part size $(human "$PART_B") ($NSEG segments), $WARMUP warm-up + $RUNS rounds, run timeout ${RUN_TIMEOUT}s"
for w in $(seq 1 "$WARMUP"); do run_round "w$w" 0; done
# A round in which something else used more than OTHER_LIMIT of a core
# (its CPU seconds over the client's wall seconds) during one of its runs
# is discarded and done again, at most 2 × RUNS times in all; after that,
# such rounds are kept and the report says so.
ROUND=$WORK/round.tsv
DISCARDED=0
i=0
while [ "$i" -lt "$RUNS" ]; do
	: >"$ROUND"
	tag=$((i + 1))
	[ "$DISCARDED" = 0 ] || tag="$tag.$DISCARDED"
	run_round "$tag" 1
	if [ "$DISCARDED" -lt $((2 * RUNS)) ] &&
		awk -F'\t' -v l="$OTHER_LIMIT" '$9 > l * $3 { busy = 1 } END { exit !busy }' "$ROUND"; then
		DISCARDED=$((DISCARDED + 1))
		log "round $tag discarded: something else used more than $OTHER_LIMIT of a core during a run"
		continue
	fi
	cat "$ROUND" >>"$RESULTS"
	i=$((i + 1))
done

# ---------------------------------------------------------------- census
# One untimed run of each method through a logging reverse proxy: the S3
# requests each one makes.  The proxy passes Host and the URI unchanged,
# so the signatures still hold.
CENSUS_TSV=$WORK/census.tsv		# store/method op count
: >"$CENSUS_TSV"
if [ "$CENSUS" = 1 ]; then for st in $STORES; do
	use_store "$st"
	PROXY_PORT=$(free_port)
	P=$WORK/proxy-$st
	mkdir -p "$P/tmp"
	cat >"$P/nginx.conf" <<CONF
worker_processes 1;
pid $P/nginx.pid;
error_log $P/error.log;
events { worker_connections 256; }
http {
	log_format census '\$request_method \$request_uri \$status \$request_length "\$http_x_amz_copy_source"';
	access_log $P/census.log census;
	client_body_temp_path $P/tmp/body;
	proxy_temp_path $P/tmp/proxy;
	fastcgi_temp_path $P/tmp/fastcgi;
	uwsgi_temp_path $P/tmp/uwsgi;
	scgi_temp_path $P/tmp/scgi;
	client_max_body_size 0;
	server {
		listen 127.0.0.1:$PROXY_PORT;
		location / {
			proxy_pass http://127.0.0.1:$S3_PORT;
			proxy_http_version 1.1;
			proxy_set_header Host \$http_host;
			proxy_set_header Connection "";
			proxy_request_buffering off;
			proxy_buffering off;
			proxy_read_timeout 600s;
			proxy_send_timeout 600s;
		}
	}
}
CONF
	nginx -p "$P" -c "$P/nginx.conf" -g 'daemon off;' >"$P/nginx.out" 2>&1 &
	service_pid $!
	wait_port "$PROXY_PORT"
	for m in $METHODS; do
		: >"$P/census.log"
		run_one "$m" census "http://127.0.0.1:$PROXY_PORT" 0
		# the verification download and cleanup went to the server directly
		awk -v m="$st/$m" '
		{
			meth = $1; uri = $2; status = $3; copy = $5
			# a connection closed without a request (nginx logs a 400)
			if (meth == "-") next
			path = uri; sub(/\?.*/, "", path)
			bucketop = (path ~ /^\/[^\/]*\/?$/)
			if (bucketop && meth == "PUT") op = "CreateBucket"
			else if (bucketop && meth == "HEAD") op = "HeadBucket"
			else if (bucketop && meth == "GET") op = "ListObjects"
			else if (meth == "PUT" && uri ~ /[?&]partNumber=/ && copy != "\"-\"") op = "UploadPartCopy"
			else if (meth == "PUT" && uri ~ /[?&]partNumber=/) op = "UploadPart"
			else if (meth == "PUT" && copy != "\"-\"") op = "CopyObject"
			else if (meth == "PUT") op = "PutObject"
			else if (meth == "POST" && uri ~ /[?&]uploads/) op = "CreateMultipartUpload"
			else if (meth == "POST" && uri ~ /[?&]uploadId=/) op = "CompleteMultipartUpload"
			else if (meth == "POST" && uri ~ /[?&]delete/) op = "DeleteObjects"
			else if (meth == "DELETE") op = "DeleteObject"
			else if (meth == "HEAD") op = "HEAD"
			else if (meth == "GET") op = "GET/List"
			else op = meth
			# 499: the client closed the connection before the answer
			if (status == 499) op = op " (not waited for)"
			else if (status !~ /^2/) op = op " (answered " status ")"
			n[op]++; total++; bytes += $4
		}
		END {
			for (op in n) printf "%s\t%s\t%d\n", m, op, n[op]
			printf "%s\t_total\t%d\n%s\t_bytes\t%d\n", m, total, m, bytes
		}' "$P/census.log" >>"$CENSUS_TSV"
	done
done; fi

# ---------------------------------------------------------------- report
[ -s "$RESULTS" ] || die "no run was recorded"
col() {	# col STORE METHOD EXPR: one value per run of METHOD on STORE
	awk -F'\t' -v st="$1" -v m="$2" "\$10 == st && \$1 == m { print $3 }" "$RESULTS"
}
census() {	# census STORE/METHOD OP: requests of that operation, whatever the answer
	awk -F'\t' -v m="$1" -v op="$2" '$1 == m && ($2 == op || index($2, op " (") == 1) { v += $3 }
		END { print v + 0 }' "$CENSUS_TSV"
}
census_failed() {	# census_failed STORE/METHOD OP: those answered with an error
	awk -F'\t' -v m="$1" -v op="$2" '$1 == m && index($2, op " (answered") == 1 { v += $3 } END { print v + 0 }' "$CENSUS_TSV"
}
# medians per store and method, keyed "store/method"
declare -A WALL CPU SCPU SW LEFT WALLS
for st in $STORES; do
	for m in $METHODS; do
		k=$st/$m
		WALL[$k]=$(col "$st" "$m" '$3' | median)
		CPU[$k]=$(col "$st" "$m" '$4 + $5' | median)
		SCPU[$k]=$(col "$st" "$m" '$6' | median)
		SW[$k]=$(col "$st" "$m" '$7' | median)
		LEFT[$k]=$(col "$st" "$m" '$8' | awk '{ s += $1 } END { print s + 0 }')
		WALLS[$k]=$(col "$st" "$m" '$3' | tr '\n' ' ' | sed 's/ $//')
	done
done
r() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
f2() { awk -v a="$1" 'BEGIN { printf "%.2f", a }'; }
# para: the lines on stdin as one paragraph of at most 88 columns
para() { tr '\n' ' ' | fold -s -w 88 | sed 's/ *$//'; echo; }
declare -A WHAT=(
	[A]="engine, segmented: $NSEG segment PUTs, UploadPartCopy assembly, segment deletes"
	[B]="engine, single PUT (part size = object size + 1 KiB)"
	[C]="\`curl -s URL \\| aws s3 cp - s3://…\` (AWS CLI streaming multipart, defaults)"
	[D]="\`rclone copyurl URL remote:bucket/key\` (rclone defaults)"
)

cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem_gib=$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)
fs_type=$(df -T "$WORK" | awk 'NR == 2 { print $2 }')
s3rver_v=$(node -p "require('$ROOT/test/s3/node_modules/@20minutes/s3rver/package.json').version" 2>/dev/null || echo "?")
ceph_v=$(ceph --version 2>/dev/null | awk '{ print $3 }' || true)
aws_v=$(/usr/bin/aws --version 2>&1 | cut -d' ' -f1)
rclone_v=$([ "$HAVE_RCLONE" = 1 ] && rclone version 2>/dev/null | head -n 1 | cut -d' ' -f2 || echo "-")
nginx_v=$(nginx -v 2>&1 | sed 's/.*nginx\///')
curl_v=$(curl --version | head -n 1 | cut -d' ' -f2)
NBUF=$(($(awk '$1 == "#define" && $2 == "REMORA_SEGMENTS_IN_FLIGHT" { print $3 }' "$TREE/src/engine/engine.h") + 1))
if [ -n "$REV" ]; then
	commit=$(git -C "$ROOT" rev-parse --short "$REV^{commit}")
else
	commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "?")
	git -C "$ROOT" diff --quiet HEAD -- src/engine test/engine 2>/dev/null ||
		commit="$commit + uncommitted changes to the engine"
fi
store_names=$(for st in $STORES; do printf '%s and ' "${SNAME[$st]}"; done | sed 's/ and $//')
order=$(for st in $STORES; do printf '%s %s, ' "${SNAME[$st]}" "$(echo "$METHODS" | tr -d ' ')"; done | sed 's/, $//')

# store_section STORE: the tables and the reading of one store's numbers
store_section() {
	local st=$1 n=${SNAME[$1]} m k A B C D
	A=$st/A B=$st/B C=$st/C D=$st/D
	echo "### On $n"
	echo
	echo "| Method | What | Median wall s | Median client CPU s | Wall ÷ A | Client CPU ÷ A | Median $n CPU s | $n CPU ÷ A |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|"
	for m in $METHODS; do
		k=$st/$m
		echo "| $m | ${WHAT[$m]} | $(f2 "${WALL[$k]}") | $(f2 "${CPU[$k]}") | $(r "${WALL[$k]}" "${WALL[$A]}") | $(r "${CPU[$k]}" "${CPU[$A]}") | $(f2 "${SCPU[$k]}") | $(r "${SCPU[$k]}" "${SCPU[$A]}") |"
	done
	echo
	echo "Wall seconds per run, in order:"
	echo
	for m in $METHODS; do echo "- $m: ${WALLS[$st/$m]}"; done
	echo
	if [ "$CENSUS" = 1 ]; then
		echo "| Method | $n bytes written ÷ object size (median) | S3 requests | Of which |"
		echo "|---|---:|---:|---|"
		for m in $METHODS; do
			detail=$(awk -F'\t' -v m="$st/$m" '$1 == m && $2 !~ /^_/ { printf "%s%d %s", sep, $3, $2; sep = ", " }' \
				<(sort -t$'\t' -k3,3nr "$CENSUS_TSV"))
			echo "| $m | $(r "${SW[$st/$m]}" "$SIZE_B") | $(census "$st/$m" _total) | $detail |"
		done
	else
		echo "| Method | $n bytes written ÷ object size (median) |"
		echo "|---|---:|"
		for m in $METHODS; do echo "| $m | $(r "${SW[$st/$m]}" "$SIZE_B") |"; done
	fi
	echo
	case $st in
	s3rver)
		para <<TXT
Bytes written are the s3rver process's \`write_bytes\` (/proc/PID/io): what it put
into files.  s3rver stores every part as a file and concatenates the parts into
the object at CompleteMultipartUpload, so a multipart upload writes the object
twice on s3rver, and A writes it three times: the segments, the parts copied from
them, the concatenation.
TXT
		;;
	rgw)
		para <<TXT
Bytes written are the sum of \`write_bytes\` (/proc/PID/io) of radosgw, ceph-osd and
ceph-mon: almost all of it is the OSD's BlueStore writing data, its RocksDB log and
metadata to its file.  RGW keeps the parts of a multipart upload as RADOS objects,
and CompleteMultipartUpload only writes a manifest that refers to them, so a
multipart upload writes the object once, as a single PUT does.  UploadPartCopy,
on the other hand, is a real copy in RGW: radosgw reads every byte of the source
segment back from the OSD and writes it again, so A writes the object twice (a
CopyObject of a whole object would be by reference).  A DELETE only queues the
object's data for RGW's garbage collector (\`rgw_gc_obj_min_wait\`, 2 hours by
default); the bench reclaims it with \`radosgw-admin gc process\` after each run,
outside the measurement, so the segments' deletion shows here as requests only.
TXT
		;;
	esac
	if [ "$CENSUS" = 1 ]; then
		para <<TXT
Requests were counted in one extra, untimed run of each method through a logging
nginx reverse proxy (requests answered with an error are marked; "not waited for"
are requests whose client closed the connection before the answer, which nginx logs
as 499: the engine driver exits without waiting for the answers to its segment
DELETEs).
TXT
		echo
	fi
	local reqs del_failed peers peer_cpu least_cpu cpu_note fastest fast_note cpu_words
	if [ "$CENSUS" = 1 ]; then
		reqs="$(census "$A" _total) requests instead of $(census "$B" _total)"
		del_failed=$(census_failed "$A" DeleteObject)
		if [ "$del_failed" != 0 ]; then
			reqs="$reqs ($del_failed segment DELETEs answered with an error, see the notes)"
		fi
	else
		reqs="$((3 * NSEG + 3)) requests instead of 2 (not counted: --no-census)"
	fi
	peers="A took $(r "${WALL[$A]}" "${WALL[$C]}")× the wall time of the AWS CLI (C)"
	peer_cpu="$(r "${CPU[$A]}" "${CPU[$C]}")× C's"
	if [ "$HAVE_RCLONE" = 1 ]; then
		peers="$peers and $(r "${WALL[$A]}" "${WALL[$D]}")× rclone's (D)"
		peer_cpu="$peer_cpu and $(r "${CPU[$A]}" "${CPU[$D]}")× D's"
	fi
	least_cpu=$(for m in $METHODS; do echo "$m ${CPU[$st/$m]}"; done | sort -g -k2 | head -n 1 | cut -d' ' -f1)
	if [ "$least_cpu" = A ]; then cpu_note=", the least of all methods"; else cpu_note=""; fi
	fastest=$(for m in $METHODS; do echo "$m ${WALL[$st/$m]}"; done | sort -g -k2 | head -n 1 | cut -d' ' -f1)
	if [ "$fastest" = B ]; then fast_note="and is the fastest method on $n"; else fast_note="(the fastest method on $n is $fastest)"; fi
	cpu_words=$(awk -v x="$(r "${CPU[$A]}" "${CPU[$B]}")" 'BEGIN {
		if (x >= 0.9 && x <= 1.1) print "about the same"; else if (x < 1) print "lower"; else print "higher" }')
	para <<TXT
On $n the segmented path (A) took $(r "${WALL[$A]}" "${WALL[$B]}")× the wall time of the engine's own
single PUT (B; median $(f2 "${WALL[$A]}") s against $(f2 "${WALL[$B]}") s for $(human "$SIZE_B")), while the client's CPU was
$cpu_words ($(r "${CPU[$A]}" "${CPU[$B]}")× B's; both paths read, hash and send each byte once).
The difference is the store's work: $n spent $(r "${SCPU[$A]}" "${SCPU[$B]}")× B's CPU on A and wrote
$(r "${SW[$A]}" "$SIZE_B")× the object size against $(r "${SW[$B]}" "$SIZE_B")× for B, over $reqs.
Against the peers, which send each byte once and never copy, $peers,
while its client CPU was $peer_cpu$cpu_note; without the copy (B) the engine
needs $(r "${WALL[$B]}" "${WALL[$A]}")× A's wall time $fast_note.
TXT
	echo
}

# the plot: with --write, when both stores ran and gnuplot is installed
PLOT_REF=""
if [ "$WRITE" = 1 ] && [ "$STORE" = both ] && command -v gnuplot >/dev/null; then
	PLOT_DAT=$WORK/plot.dat
	for m in $METHODS; do
		printf '%s %s %s %s %s %s %s\n' "$m" "${WALL[s3rver/$m]}" "${WALL[rgw/$m]}" \
			"${SCPU[s3rver/$m]}" "${SCPU[rgw/$m]}" \
			"$(awk -v b="${SW[s3rver/$m]}" -v s="$SIZE_B" 'BEGIN { print b / s }')" \
			"$(awk -v b="${SW[rgw/$m]}" -v s="$SIZE_B" 'BEGIN { print b / s }')"
	done >"$PLOT_DAT"
	if gnuplot 2>"$WORK/gnuplot.err" <<GP; then
set terminal pngcairo size 1200,420 font "sans,10" noenhanced
set output "$ROOT/doc/segment_cost.png"
set multiplot layout 1,3 title "segment_cost.sh: $(human "$SIZE_B"), part $(human "$PART_B"), medians of $RUNS runs (A, B: Remora's engine; C: aws s3 cp; D: rclone)"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key top right
set grid ytics
set yrange [0:*]
set title "wall seconds"
plot "$PLOT_DAT" using 2:xtic(1) title "s3rver" lc rgb "#4e79a7", "" using 3 title "RGW" lc rgb "#e15759"
set title "store CPU seconds"
plot "$PLOT_DAT" using 4:xtic(1) title "s3rver" lc rgb "#4e79a7", "" using 5 title "RGW (radosgw+osd+mon)" lc rgb "#e15759"
set title "store bytes written ÷ object size"
plot "$PLOT_DAT" using 6:xtic(1) title "s3rver" lc rgb "#4e79a7", "" using 7 title "RGW" lc rgb "#e15759"
unset multiplot
GP
		PLOT_REF="![Wall seconds, store CPU seconds and store bytes written per method on s3rver and RGW](segment_cost.png)"
		log "wrote $ROOT/doc/segment_cost.png"
	else
		log "warning: gnuplot failed: $(tail -n 3 "$WORK/gnuplot.err")"
	fi
fi

REPORT=$WORK/report.md
{
	echo "$SECTION"
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/segment_cost.sh --size $SIZE --part $PART --runs $RUNS --store $STORE${REV:+ --rev ${REV:0:7}}\`:"
	echo "one object of $(human "$SIZE_B") ($SIZE_B bytes) of random data, served by nginx and"
	echo "stored in $store_names, all on 127.0.0.1; engine part size $(human "$PART_B")"
	echo "($NSEG segments); N = $RUNS runs of each method on each store, interleaved"
	echo "(($order) × $RUNS) after $WARMUP discarded warm-up round(s), every result downloaded"
	echo "again and its SHA-256 checked.  Ratios are between methods on the same store."
	echo
	echo "Machine: $(nproc) cores ($cpu_model), $mem_gib GiB RAM, Debian $(cat /etc/debian_version),"
	echo "kernel $(uname -r); load average $LOADAVG before the runs, $(cut -d' ' -f1-3 /proc/loadavg) after;"
	echo "the stores' data on $fs_type."
	for st in $STORES; do
		case $st in
		s3rver)
			echo "s3rver: Node $(node --version) running @20minutes/s3rver $s3rver_v (checks SigV4;"
			echo "single-threaded, the wall-clock bottleneck here; its CPU is the node process's)."
			;;
		rgw)
			echo "RGW: Ceph $ceph_v (Debian) started by \`test/lib/rgw.sh\`: one ceph-mon, one ceph-osd"
			echo "(BlueStore on a sparse file, 128 MiB cache, no replication), radosgw with its beast"
			echo "front end; its CPU and bytes written are those three processes'."
			;;
		esac
	done
	echo "Clients: nginx $nginx_v, curl $curl_v, AWS CLI ${aws_v#aws-cli/} (Debian), rclone $rclone_v; the engine driver"
	echo "\`test/engine/fetch.c\` built with \`gcc -O2\`, no sanitizers, at commit $commit."
	echo
	para <<TXT
Client CPU is user + system time of the client's whole process tree (for C: curl,
the shell and the AWS CLI, whose Python start-up is part of it).  The store's CPU
is its processes' user + system time from just before the run until the store is
idle again, so it includes work the client did not wait for.
TXT
	echo
	for st in $STORES; do store_section "$st"; done
	if [ "$(echo "$STORES" | wc -w)" = 2 ]; then
		echo "### Both stores side by side"
		echo
		echo "| Method | Wall s, s3rver | Wall s, RGW | RGW ÷ s3rver wall | Client CPU s, s3rver | Client CPU s, RGW | Store CPU s, s3rver | Store CPU s, RGW | Written ÷ object, s3rver | Written ÷ object, RGW |"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		for m in $METHODS; do
			echo "| $m | $(f2 "${WALL[s3rver/$m]}") | $(f2 "${WALL[rgw/$m]}") | $(r "${WALL[rgw/$m]}" "${WALL[s3rver/$m]}") | $(f2 "${CPU[s3rver/$m]}") | $(f2 "${CPU[rgw/$m]}") | $(f2 "${SCPU[s3rver/$m]}") | $(f2 "${SCPU[rgw/$m]}") | $(r "${SW[s3rver/$m]}" "$SIZE_B") | $(r "${SW[rgw/$m]}" "$SIZE_B") |"
		done
		echo
		[ -n "${PLOT_REF:-}" ] && { echo "$PLOT_REF"; echo; }
		# within 15 % on every method: the client's work does not depend on the store
		if for m in $METHODS; do echo "${CPU[rgw/$m]} ${CPU[s3rver/$m]}"; done |
			awk '{ x = $1 / $2; if (x < 0.85 || x > 1.18) bad = 1 } END { exit bad }'; then
			cpu_same_words="hardly depends on the store: what the engine and the peers spend themselves is the same wherever they write"
		else
			cpu_same_words="differs between the stores for some methods"
		fi
		same_cpu=$(for m in $METHODS; do printf '%s %s on RGW against %s on s3rver, ' "$m" "$(f2 "${CPU[rgw/$m]}")" "$(f2 "${CPU[s3rver/$m]}")"; done | sed 's/, $//')
		para <<TXT
What the segments cost depends on the store.  The extra work of A over B, per
transfer: store CPU $(r "${SCPU[s3rver/A]}" "${SCPU[s3rver/B]}")× on s3rver and
$(r "${SCPU[rgw/A]}" "${SCPU[rgw/B]}")× on RGW; bytes written $(r "${SW[s3rver/A]}" "${SW[s3rver/B]}")× on s3rver
and $(r "${SW[rgw/A]}" "${SW[rgw/B]}")× on RGW; wall time $(r "${WALL[s3rver/A]}" "${WALL[s3rver/B]}")× on s3rver and
$(r "${WALL[rgw/A]}" "${WALL[rgw/B]}")× on RGW.  The second write of a multipart upload is
s3rver's: C, the AWS CLI's multipart upload, wrote $(r "${SW[s3rver/C]}" "$SIZE_B")× the object on s3rver
and $(r "${SW[rgw/C]}" "$SIZE_B")× on RGW, which assembles the parts by reference; so is the third write
of A on s3rver, while the copy of UploadPartCopy remains on both.  The client's CPU,
on the other hand, $cpu_same_words (median client CPU seconds: $same_cpu).
TXT
		echo
	fi
	other_med=$(awk -F'\t' '{ print $9 }' "$RESULTS" | median)
	other_max=$(awk -F'\t' '{ print $9 }' "$RESULTS" | sort -g | tail -n 1)
	busy_runs=$(awk -F'\t' -v l="$OTHER_LIMIT" '$9 > l * $3 { n++ } END { print n + 0 }' "$RESULTS")
	{
		echo "Other CPU use on the machine while each client ran (all CPUs' busy time minus the"
		echo "client's and the store's: nginx, kernel writeback, anything else running): median"
		echo "$(f2 "$other_med") s per run, at most $(f2 "$other_max") s."
		if [ "$DISCARDED" != 0 ]; then
			echo "$DISCARDED round(s) were discarded and done again because in one of their runs it"
			echo "exceeded $OTHER_LIMIT of a core (other CPU seconds ÷ wall seconds): another program was"
			echo "busy on the machine."
		fi
		if [ "$busy_runs" != 0 ]; then
			echo "It still exceeded $OTHER_LIMIT of a core in $busy_runs of the $(wc -l <"$RESULTS") runs kept: something"
			echo "else competed for the cores, so trust these medians and ratios less, or run again"
			echo "on an idle machine."
		fi
	} | para
	echo
	left_all=""
	for st in $STORES; do for m in $METHODS; do left_all="$left_all, ${SNAME[$st]} $m ${LEFT[$st/$m]}"; done; done
	para <<TXT
Notes: B is a lower bound, not a setting to use for large objects: it holds the
whole object in memory (the engine allocates $NBUF buffers of part_size and fills one) and
starts uploading only when the download has ended, where A overlaps the two.  Timings
exclude the verification download and the clean-up; \`sync\` runs before every run so
that one run's dirty pages are not flushed during the next.  Objects left behind
besides the results (segments whose DELETE did not happen), over all timed runs:
${left_all#, }.  s3rver answers InternalError when two DELETEs race to remove the
same emptied directory (the objects are gone all the same); the engine does not
look at the answers to its segment DELETEs, and the bench checks the listing
afterwards instead.
TXT
} >"$REPORT"

cat "$REPORT"

if [ "$WRITE" = 1 ]; then
	put_section "$REPORT"
	log "wrote $ROOT/doc/benchmarks.md"
fi
