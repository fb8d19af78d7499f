#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib and bench/lib sourced at run time
#
# adaptive.sh: adaptive connections per object (src/engine/transfer/adapt.h) at
# the default settings, against the fixed count of before and rclone.
#
# Random data is served capped per connection at /capped/ by
# test/lib/paced_source.py (nginx's limit_rate caps a request and lets each
# one send its first second's worth at once: ranges shorter than that
# would not be capped at all) and uncapped at /open/ by nginx; the engine (test/engine/fetch, -O2, part size
# 16 MiB and 16 connections a host as the defaults) copies it into the
# test S3 server, all on 127.0.0.1:
#
#   A    adaptive (REMORA_CONNECTIONS=adapt: what a job without
#        options.connections gets: from remora.object_connections, 4)
#   P4   pinned at 4 (options.connections 4: the fixed count of before)
#   B    adaptive, the engine of another commit (--baseline REV), to
#        compare before and after in the same run on a busy machine
#   D    rclone copyurl (one stream), SIZE capped and BIG open
#
# Cases: SIZE capped (A B P4 D), BIG capped (A B P4) and BIG open
# (A B P4 D), interleaved for RUNS rounds (B only with --baseline); every copy read back with the AWS CLI and
# its SHA-256 compared.  Medians of wall seconds; the engine's changes of
# the count (its log lines) in round 1 become doc/adaptive-connections.png.
#
# Usage (root, Debian 12; about 7 minutes):
#   bench/adaptive.sh [--size 64M] [--big 256M] [--rate 2m] [--runs 3]
#                     [--baseline REV] [--write]
# --write puts the report into doc/benchmarks.md under "## Adaptive
# connections per object" (replacing that section), and the plot.
#
set -Eeuo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECTION="## Adaptive connections per object"
SIZE=64M
BIG=256M
RATE=2m
RUNS=3
PART=16M
WRITE=0
BASE=
usage="usage: bench/adaptive.sh [--size 64M] [--big 256M] [--rate 2m] [--runs 3] [--baseline REV] [--write]"
while [ $# -gt 0 ]; do
	case $1 in
	--size) SIZE=$2; shift 2 ;;
	--big) BIG=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	--baseline) BASE=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	*) echo "$usage" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "adaptive: FAIL: $*" >&2; exit 1; }
bytes() { numfmt --from=iec "${1^^}"; }

. "$ROOT/test/lib/deps.sh"
. "$ROOT/test/lib/services.sh"
. "$ROOT/bench/lib.sh"
install_deps >/dev/null
for c in gcc nginx node rclone /usr/bin/aws /usr/bin/time; do
	command -v "$c" >/dev/null || die "missing $c"
done

WORK=$(mktemp -d /tmp/remora-bench.XXXXXX)
chmod 755 "$WORK"
SERVICES_DIR=$WORK
trap 'stop_services; rm -rf "$WORK"' EXIT

# build_fetch DIR OUT: test/engine/fetch of the checkout in DIR, -O2
build_fetch() {
	# shellcheck disable=SC2046
	# (the engine's files: in layer folders, or flat in an older checkout)
	(cd "$1" && shopt -s nullglob && gcc -O2 -Isrc $(pkg-config --cflags libcurl openssl libxml-2.0) -o "$2" \
		test/engine/fetch.c src/engine/*.c src/engine/*/*.c $(pkg-config --libs libcurl openssl libxml-2.0)) ||
		die "could not build fetch in $1"
}
log "building test/engine/fetch.c with -O2"
FETCH=$WORK/fetch
build_fetch "$ROOT" "$FETCH"
if [ -n "$BASE" ]; then
	log "building the baseline's ($BASE) test/engine/fetch.c with -O2"
	mkdir -p "$WORK/base"
	git -C "$ROOT" archive "$BASE" src test/engine | tar -x -C "$WORK/base" ||
		die "no commit $BASE"
	build_fetch "$WORK/base" "$WORK/fetch-base"
fi

NGINX_PORT=$(free_port)
S3_PORT=$(free_port)
WWW=$WORK/nginx/www
mkdir -p "$WWW" "$WORK/nginx/tmp"
chmod 755 "$WORK/nginx" "$WWW"
cat >"$WORK/nginx/nginx.conf" <<CONF
worker_processes 1;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/error.log;
events { worker_connections 256; }
http {
	access_log off;
	client_body_temp_path $WORK/nginx/tmp/body;
	proxy_temp_path $WORK/nginx/tmp/proxy;
	fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
	uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
	scgi_temp_path $WORK/nginx/tmp/scgi;
	sendfile on;
	server {
		listen 127.0.0.1:$NGINX_PORT;
		location /open/ { alias $WWW/; }
	}
}
CONF
nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g 'daemon off;' >"$WORK/nginx/out" 2>&1 &
service_pid $!
wait_port "$NGINX_PORT"
PACED_PORT=$(free_port)
python3 "$ROOT/test/lib/paced_source.py" "$WWW" "$PACED_PORT" "$(bytes "$RATE")" >"$WORK/paced.out" 2>&1 &
service_pid $!
wait_port "$PACED_PORT"
BUCKET=bench
start_s3 "$WORK/s3" "$S3_PORT" "$BUCKET"
EP="http://127.0.0.1:$S3_PORT"

declare -A SHA
for f in small:$SIZE big:$BIG; do
	log "writing ${f#*:} of random data"
	head -c "$(bytes "${f#*:}")" /dev/urandom >"$WWW/${f%%:*}"
	chmod 644 "$WWW/${f%%:*}"
	SHA[${f%%:*}]=$(sha256sum "$WWW/${f%%:*}" | cut -d' ' -f1)
done

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

# run CASE METHOD ROUND: one timed copy; prints its wall seconds; checks
# the result; keeps the engine's log of an adaptive copy as CASE.log
run() {
	local c=$1 m=$2 n=$3 key tf=$WORK/time file path url
	file=${c%-*}   # small-capped -> small
	path=${c#*-}   # -> capped
	url="http://127.0.0.1:$NGINX_PORT/$path/$file"
	[ "$path" = capped ] && url="http://127.0.0.1:$PACED_PORT/$path/$file"
	case $m in
	A | B | P4)
		key="runs/$c$m$n/data/obj.bin"
		REMORA_CONNECTIONS=$([ "$m" = P4 ] && echo 4 || echo adapt) \
			/usr/bin/time -f '%e' -o "$tf" \
			"$([ "$m" = B ] && echo "$WORK/fetch-base" || echo "$FETCH")" "$EP" "$BUCKET" "runs/$c$m$n/" "$url" obj.bin "$(bytes $PART)" \
			>/dev/null 2>"$WORK/err" || die "$c $m: $(tail -n 3 "$WORK/err")"
		[ "$m" = A ] && [ "$n" = 1 ] && grep -F 'ranged connections' "$WORK/err" >"$WORK/$c.log"
		;;
	D)
		key="runs/$c$m$n/obj.bin"
		/usr/bin/time -f '%e' -o "$tf" env -u AWS_CA_BUNDLE \
			rclone copyurl --retries 1 --low-level-retries 1 -q "$url" "bench:$BUCKET/$key" ||
			die "D failed"
		;;
	esac
	[ "$(aws --endpoint-url "$EP" s3 cp --only-show-errors "s3://$BUCKET/$key" - | sha256sum | cut -d' ' -f1)" = "${SHA[$file]}" ] ||
		die "$c $m round $n: the copy's SHA-256 is not the source's"
	aws --endpoint-url "$EP" s3 rm --quiet --recursive "s3://$BUCKET/runs/" >/dev/null 2>&1 || true
	[ "$m" = A ] && [ "$n" = 1 ] && cp "$tf" "$WORK/$c.wall"
	cat "$tf"
}

CASES="small-capped:A,B,P4,D big-capped:A,B,P4 big-open:A,B,P4,D"
[ -n "$BASE" ] || CASES=${CASES//,B/}
declare -A WALLS
for n in $(seq 1 "$RUNS"); do
	for cm in $CASES; do
		c=${cm%%:*}
		for m in $(echo "${cm#*:}" | tr , ' '); do
			w=$(run "$c" "$m" "$n")
			log "round $n $c $m: $w s"
			WALLS[$c $m]="${WALLS[$c $m]:-} $w"
		done
	done
done
med() { echo "${WALLS[$1]}" | tr ' ' '\n' | grep . | median; }

# the count over time: "T N" steps from the log lines ("... N -> M at T s")
series() {
	awk '{ for (i = 1; i < NF; i++) if ($i == "->") { n = $(i + 1); t = $(i + 3) }
		print t, n }' "$WORK/$1.log"
	echo "$(cat "$WORK/$1.wall") $(awk '{ for (i = 1; i < NF; i++) if ($i == "->") n = $(i + 1) } END { print n }' "$WORK/$1.log")"
}
most() { series "$1" | sort -k2,2n | tail -n 1 | cut -d' ' -f2; }
for c in big-capped big-open small-capped; do series "$c" >"$WORK/$c.dat"; done

# vs_base CASE: ", R× the baseline's" (A against B), or nothing
vs_base() { [ -z "$BASE" ] || echo ", $(ratio "$(med "$1 B")" "$(med "$1 A")")× the baseline's"; }

REPORT=$WORK/report.md
S=$(med "small-capped A")
{
	echo "$SECTION"
	echo
	echo "Measured $(date -u +%Y-%m-%d) with \`bench/adaptive.sh --size $SIZE --big $BIG --rate $RATE --runs $RUNS${BASE:+ --baseline $BASE}\`:"
	echo "random data served at \`/capped/\` by \`test/lib/paced_source.py\`, $RATE/s per connection however"
	echo "its bytes are split into requests, and at \`/open/\` by nginx $(nginx -v 2>&1 | cut -d/ -f2) without a cap,"
	echo "copied into s3rver, all on 127.0.0.1; $RUNS"
	echo "interleaved rounds, every copy read back and its SHA-256 checked.  The engine"
	echo "runs as \`test/engine/fetch\` (\`gcc -O2\`) at the defaults (part size $PART, 16"
	echo "connections a host) at commit $(git -C "$ROOT" rev-parse --short HEAD): A adapts"
	echo "(a job without \`options.connections\`, from \`remora.object_connections\` 4),"
	[ -z "$BASE" ] || echo "B adapts as A with the engine of commit $(git -C "$ROOT" rev-parse --short "$BASE"),"
	echo "P4 is pinned at 4 (the default before); D is rclone $(rclone version | head -n 1 | cut -d' ' -f2) \`copyurl\`."
	echo "Machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."
	echo
	echo "| Case | Method | Median wall s | Wall per run | Most connections (round 1) |"
	echo "|---|---|---:|---|---:|"
	for cm in $CASES; do
		c=${cm%%:*}
		for m in $(echo "${cm#*:}" | tr , ' '); do
			mc=-
			[ "$m" = A ] && mc=$(most "$c")
			[ "$m" = P4 ] && mc=4
			[ "$m" = D ] && mc=1
			echo "| $c | $m | $(med "$c $m") |${WALLS[$c $m]} | $mc |"
		done
	done
	echo
	echo "- $SIZE capped at $RATE/s a connection: adaptive $(ratio "$(med "small-capped D")" "$S")× rclone's speed,"
	echo "  $(ratio "$(med "small-capped P4")" "$S")× the fixed four's.  The object is $(($(bytes "$SIZE") / $(bytes $PART))) parts of $PART,"
	echo "  read in sub-ranges (src/engine/transfer/subranges.h), so more GETs than parts can run at once."
	[ -z "$BASE" ] || echo "- $SIZE capped, the baseline: adaptive $(ratio "$(med "small-capped D")" "$(med "small-capped B")")× rclone's speed; A is $(ratio "$(med "small-capped B")" "$S")× B's."
	echo "- $BIG capped: adaptive $(ratio "$(med "big-capped P4")" "$(med "big-capped A")")× the fixed four's speed$(vs_base big-capped)."
	echo "- $BIG uncapped (the store is the limit): adaptive $(ratio "$(med "big-open D")" "$(med "big-open A")")× rclone's speed, $(ratio "$(med "big-open P4")" "$(med "big-open A")")× the fixed four's$(vs_base big-open)."
	echo
	echo "Each round runs the methods in the order of the table (A first of each case)."
	echo
	echo "![Ranged connections over time, round 1](adaptive-connections.png)"
} >"$REPORT"
cat "$REPORT"
for c in big-capped big-open small-capped; do echo "# $c:"; cat "$WORK/$c.log"; done

if [ "$WRITE" = 1 ]; then
	gnuplot <<GP || die "gnuplot failed"
set terminal pngcairo size 900,360 font "sans,10" noenhanced
set output "$ROOT/doc/adaptive-connections.png"
set title "Ranged connections of one object over time (adaptive, round 1)"
set xlabel "seconds since the copy began"
set ylabel "connections allowed"
set yrange [0:*]
set key top left
set grid
plot "$WORK/big-capped.dat" using 1:2 with steps lw 2 title "$BIG, $RATE/s per connection", \
     "$WORK/big-open.dat" using 1:2 with steps lw 2 title "$BIG, uncapped (store-bound)", \
     "$WORK/small-capped.dat" using 1:2 with steps lw 2 dt 2 title "$SIZE, $RATE/s per connection"
GP
	put_section "$REPORT"
	log "wrote doc/benchmarks.md and doc/adaptive-connections.png"
fi
