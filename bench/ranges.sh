#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib and bench/lib sourced at run time
#
# ranges.sh: many connections for one large object.
#
# One object of random data served with a rate limit per connection
# (test/lib/paced_source.py: nginx's limit_rate caps a request and lets
# each one send its first second's worth at once, which would leave
# sub-ranges uncapped), copied into the test S3 server (s3rver), all on
# 127.0.0.1, by:
#
#   R1  the engine, one GET            (test/engine/fetch, REMORA_CONNECTIONS=1)
#   R8  the engine, 8 ranged GETs      (REMORA_CONNECTIONS=8)
#   C   curl URL | aws s3 cp - s3://...
#   D   rclone copyurl URL remote:bucket/key
#
# interleaved (R1 R8 C D, R1 R8 C D, ...) for RUNS rounds; every result is
# read back with the AWS CLI and its SHA-256 compared with the source.
# Reports median wall seconds and ratios against R8.
#
# Usage (root, Debian 12):
#   bench/ranges.sh [--size 256M] [--rate 8m] [--part 16M] [--runs 3] [--write]
# --write puts the report into doc/benchmarks.md under "## Many connections
# for one object" (replacing that section).
#
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECTION="## Many connections for one object"
SIZE=${SIZE:-256M}
RATE=${RATE:-8m}
PART=${PART:-16M}
RUNS=${RUNS:-3}
WRITE=0
while [ $# -gt 0 ]; do
	case $1 in
	--size) SIZE=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--part) PART=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	*) echo "usage: bench/ranges.sh [--size 256M] [--rate 8m] [--part 16M] [--runs 3] [--write]" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "ranges: FAIL: $*" >&2; exit 1; }
bytes() { numfmt --from=iec "${1^^}"; }
SIZE_B=$(bytes "$SIZE")
PART_B=$(bytes "$PART")

. "$ROOT/test/lib/deps.sh"
. "$ROOT/test/lib/services.sh"
. "$ROOT/bench/lib.sh"
install_deps >/dev/null
for c in gcc python3 node curl rclone /usr/bin/aws /usr/bin/time; do
	command -v "$c" >/dev/null || die "missing $c"
done

WORK=$(mktemp -d /tmp/remora-bench.XXXXXX)
chmod 755 "$WORK"
SERVICES_DIR=$WORK
trap 'stop_services; rm -rf "$WORK"' EXIT

log "building test/engine/fetch.c with -O2"
FETCH=$WORK/fetch
# shellcheck disable=SC2046
(cd "$ROOT" && gcc -O2 -Isrc $(pkg-config --cflags libcurl openssl libxml-2.0) -o "$FETCH" \
	test/engine/fetch.c src/engine/*/*.c $(pkg-config --libs libcurl openssl libxml-2.0)) ||
	die "could not build fetch"

SRC_PORT=$(free_port)
WWW=$WORK/www
mkdir -p "$WWW"
python3 "$ROOT/test/lib/paced_source.py" "$WWW" "$SRC_PORT" "$(bytes "$RATE")" >"$WORK/paced.out" 2>&1 &
service_pid $!
wait_port "$SRC_PORT"
S3_PORT=$(free_port)
BUCKET=bench
start_s3 "$WORK/s3" "$S3_PORT" "$BUCKET"

log "writing $SIZE of random data"
head -c "$SIZE_B" /dev/urandom >"$WWW/obj"
chmod 644 "$WWW/obj"
SRC_SHA=$(sha256sum "$WWW/obj" | cut -d' ' -f1)
URL="http://127.0.0.1:$SRC_PORT/obj"
EP="http://127.0.0.1:$S3_PORT"

export AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true AWS_MAX_ATTEMPTS=1
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER
export AWS_CONFIG_FILE=$WORK/aws-config AWS_SHARED_CREDENTIALS_FILE=$WORK/aws-credentials
: >"$AWS_CONFIG_FILE"
: >"$AWS_SHARED_CREDENTIALS_FILE"
export RCLONE_CONFIG=$WORK/rclone.conf
: >"$RCLONE_CONFIG"
export RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Other RCLONE_CONFIG_BENCH_REGION=us-east-1
export RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE=true RCLONE_CONFIG_BENCH_ENDPOINT=$EP
export RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=S3RVER RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=S3RVER

# run METHOD ROUND: one timed copy; prints "wall user+sys"; checks the result
run() {
	local m=$1 n=$2 key tf=$WORK/time
	case $m in
	R1 | R8)
		key="runs/$m$n/data/obj.bin"
		REMORA_CONNECTIONS=${m#R} /usr/bin/time -f '%e %U %S' -o "$tf" \
			"$FETCH" "$EP" "$BUCKET" "runs/$m$n/" "$URL" obj.bin "$PART_B" >/dev/null 2>"$WORK/err" ||
			die "$m: $(tail -n 3 "$WORK/err")"
		;;
	C)
		key="runs/C$n/obj.bin"
		/usr/bin/time -f '%e %U %S' -o "$tf" sh -c \
			'curl -sf "$1" | aws --endpoint-url "$2" s3 cp --only-show-errors - "s3://$3/$4"' \
			sh "$URL" "$EP" "$BUCKET" "$key" || die "C failed"
		;;
	D)
		key="runs/D$n/obj.bin"
		# rclone's S3 client refuses AWS_CA_BUNDLE with its own transport
		/usr/bin/time -f '%e %U %S' -o "$tf" env -u AWS_CA_BUNDLE \
			rclone copyurl --retries 1 --low-level-retries 1 -q "$URL" "bench:$BUCKET/$key" ||
			die "D failed"
		;;
	esac
	[ "$(aws --endpoint-url "$EP" s3 cp --only-show-errors "s3://$BUCKET/$key" - | sha256sum | cut -d' ' -f1)" = "$SRC_SHA" ] ||
		die "$m round $n: the copy's SHA-256 is not the source's"
	aws --endpoint-url "$EP" s3 rm --quiet --recursive "s3://$BUCKET/runs/" >/dev/null 2>&1 || true
	awk '{ print $1, $2 + $3 }' "$tf"
}

declare -A WALLS CPUS
METHODS="R1 R8 C D"
for n in $(seq 1 "$RUNS"); do
	for m in $METHODS; do
		read -r w c < <(run "$m" "$n")
		log "round $n $m: ${w} s wall, ${c} s CPU"
		WALLS[$m]="${WALLS[$m]:-} $w"
		CPUS[$m]="${CPUS[$m]:-} $c"
	done
done

declare -A WALL CPU
for m in $METHODS; do
	WALL[$m]=$(echo "${WALLS[$m]}" | tr ' ' '\n' | grep . | median)
	CPU[$m]=$(echo "${CPUS[$m]}" | tr ' ' '\n' | grep . | median)
done
declare -A WHAT=([R1]="engine, one GET" [R8]="engine, 8 ranged GETs" [C]="curl \\| aws s3 cp -" [D]="rclone copyurl")
REPORT=$WORK/report.md
{
	echo "$SECTION"
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/ranges.sh --size $SIZE --rate $RATE --part $PART --runs $RUNS\`:"
	echo "one object of $SIZE of random data served by \`test/lib/paced_source.py\` at $RATE/s"
	echo "per connection, copied into s3rver, all on 127.0.0.1; $RUNS interleaved rounds, every"
	echo "copy read back and its SHA-256 checked.  The engine runs as \`test/engine/fetch\`"
	echo "(\`gcc -O2\`, part size $PART) at commit $(git -C "$ROOT" rev-parse --short HEAD); rclone"
	echo "$(rclone version | head -n 1 | cut -d' ' -f2), AWS CLI $(aws --version 2>&1 | cut -d' ' -f1 | cut -d/ -f2)."
	echo "Machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."
	echo
	echo "| Method | What | Median wall s | Median client CPU s | Wall ÷ R8 | Wall per run |"
	echo "|---|---|---:|---:|---:|---|"
	for m in $METHODS; do
		echo "| $m | ${WHAT[$m]} | ${WALL[$m]} | ${CPU[$m]} | $(ratio "${WALL[$m]}" "${WALL[R8]}") |${WALLS[$m]} |"
	done
	echo
	echo "Eight connections took $(ratio "${WALL[R8]}" "${WALL[D]}")× the wall time of \`rclone copyurl\`"
	echo "($(ratio "${WALL[D]}" "${WALL[R8]}")× faster), $(ratio "${WALL[R8]}" "${WALL[C]}")× that of \`curl | aws s3 cp -\`"
	echo "($(ratio "${WALL[C]}" "${WALL[R8]}")× faster) and $(ratio "${WALL[R8]}" "${WALL[R1]}")× that of one GET: the"
	echo "one-connection methods are held at $RATE/s by the source, eight ranges are"
	echo "not, and the rest of R8's time is the store's (its parts and their"
	echo "completion)."
} >"$REPORT"
cat "$REPORT"
if [ "$WRITE" = 1 ]; then
	put_section "$REPORT"
	log "wrote doc/benchmarks.md"
fi
