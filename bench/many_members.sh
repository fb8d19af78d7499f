#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib sourced at run time
#
# many_members.sh: a prefix of many small objects, S3 to S3 on the same
# store, through PostgreSQL end to end, against the AWS CLI and rclone, on
# each store chosen with --store: the test S3 server (@20minutes/s3rver)
# and Ceph's RADOS Gateway (test/lib/rgw.sh, BlueStore OSD).
#
#   A  remora, same store: a member of a part size or more read once to
#      hash it, then copied inside the store (CopyObject); a smaller one
#      (all of them at the default --size) streamed, GET hashed into a PUT
#   B  remora, streamed: the same store registered as a source endpoint,
#      so every member is read and written again (GET + PUT)
#   C  aws s3 sync s3://source/P/ s3://target/Q/ (CopyObject, no hashing)
#   D  rclone copy --transfers 8 (server-side copy), when installed
#
# interleaved across stores for RUNS rounds, the order of the methods
# rotated by one each round (s3rver A B C D, RGW A B C D; s3rver B C D A,
# RGW B C D A; ...), after one untimed remora job per store: a store
# process's first reads of a run (s3rver's Node.js code, cold) cost it about
# twice the CPU of later ones, and the job after the worker's restart (on a
# change of store) opens its connections anew, so neither falls on one
# method every round; wall seconds from submit to succeeded (A, B:
# remora_jobs.finished_at - submitted_at), the client's CPU seconds (the
# worker's utime+stime from /proc; the CLI's process tree from GNU time),
# and the store's CPU seconds and bytes written (/proc/PID/stat and io of
# s3rver's node process, or of radosgw + ceph-osd + ceph-mon) from just
# before the run until the store is idle again.  The one worker is pointed
# at a store by ALTER SYSTEM and restarted when the store changes.  Every
# result is listed again with the AWS CLI and its object count compared.
# Then, on the first store only, the worker's memory: the peak of its
# private resident memory (RssAnon) above idle while it copies a prefix of
# N1 and of N2 members (sampled every 100 ms), each with a fresh worker.
#
# Usage (root, Debian 12):
#   bench/many_members.sh [--objects 2000] [--size 64K] [--runs 3]
#                         [--store s3rver|rgw|both] [--rss "2000 20000"]
#                         [--no-rclone] [--write]
# --store picks the stores (default both); --rss "" skips the memory
# measurement.  --write puts the report into doc/benchmarks.md under
# "## Many members" and, when memory was measured, "## Worker memory over
# many members" (replacing those sections).  DEADLINE (seconds, default
# 3600) bounds it.
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECTION="## Many members"
RSS_SECTION="## Worker memory over many members"
OBJECTS=2000
SIZE=64K
RUNS=3
RSS_COUNTS="2000 20000"
RCLONE=auto
STORE=${STORE:-both}
WRITE=0
DEADLINE=${DEADLINE:-3600}
while [ $# -gt 0 ]; do
	case $1 in
	--objects) OBJECTS=$2; shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	--store) STORE=$2; shift 2 ;;
	--rss) RSS_COUNTS=$2; shift 2 ;;
	--no-rclone) RCLONE=0; shift ;;
	--write) WRITE=1; shift ;;
	*) sed -n '/^# Usage/,/^# 3600/p' "$0" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "many_members: FAIL: $*" >&2; exit 1; }
bytes() { numfmt --from=iec "$1"; }
case $STORE in
s3rver | rgw) STORES=$STORE ;;
both) STORES="s3rver rgw" ;;
*) die "--store must be s3rver, rgw or both, not '$STORE'" ;;
esac
FIRST=${STORES%% *}

cd "$ROOT"
. test/lib/e2e.sh
. bench/lib.sh
install_deps >/dev/null
make -s >/dev/null && make -s install >/dev/null
if [ "$RCLONE" != 0 ] && ! command -v rclone >/dev/null; then
	DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q rclone >/dev/null 2>&1 || true
fi
HAVE_RCLONE=0
[ "$RCLONE" != 0 ] && command -v rclone >/dev/null && HAVE_RCLONE=1
case " $STORES " in *" rgw "*)
	command -v radosgw >/dev/null && command -v ceph-osd >/dev/null && command -v ceph-mon >/dev/null ||
		DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q --no-install-recommends \
			ceph-mon ceph-osd radosgw ceph-common >/dev/null 2>&1 ||
		die "Ceph could not be installed (apt-get install ceph-mon ceph-osd radosgw ceph-common), or use --store s3rver"
	;;
esac
( sleep "$DEADLINE"; log "deadline reached"; kill -TERM $$ ) &
WATCHDOG=$!

# the stack (PostgreSQL, nginx, proxies) with the first store as its target
REMORA_RGW_OSD=bluestore REMORA_STORE=$FIRST stack_up many_members
trap 'kill $WATCHDOG 2>/dev/null; cluster_stop "$T/pg" immediate; stop_services; rm -rf "$T"' EXIT
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)

# Per store: port, key, the processes whose CPU and writes are the
# store's, the background ticks it may use in 0.5 s and count as idle
declare -A SPORT SKEY SSECRET SPIDS SIDLE SNAME=([s3rver]=s3rver [rgw]=RGW)
store_pids() {	# store_pids STORE DIR
	local p
	case $1 in
	s3rver)
		while read -r p _; do
			if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "server.js $2 "; then
				echo "$p"
				break
			fi
		done <"$T/pids"
		;;
	rgw) tr '\n' ' ' <"$2/daemons" ;;
	esac
}
for st in $STORES; do
	if [ "$st" = "$FIRST" ]; then
		dir=$T/store
		SPORT[$st]=$S3_PORT
	else
		dir=$T/store-$st
		SPORT[$st]=$(free_port)
		log "starting $st on 127.0.0.1:${SPORT[$st]}"
		REMORA_RGW_OSD=bluestore REMORA_STORE=$st start_store "$dir" "${SPORT[$st]}" target >&2 ||
			die "$st did not start"
	fi
	SKEY[$st]=$S3_ACCESS_KEY SSECRET[$st]=$S3_SECRET_KEY
	SPIDS[$st]=$(store_pids "$st" "$dir")
	[ -n "${SPIDS[$st]}" ] || die "cannot find the processes of $st"
	if [ "$st" = rgw ]; then SIDLE[$st]=1; else SIDLE[$st]=0; fi
done

q "ALTER SYSTEM SET remora.max_workers = 1" >/dev/null
export RCLONE_CONFIG=$T/rclone.conf RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Other \
	RCLONE_CONFIG_BENCH_REGION=us-east-1 RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE=true
: >"$RCLONE_CONFIG"

# use_store STORE: the worker (its target store), the AWS CLI (aws_s3) and
# rclone talk to that store
CUR=""
use_store() {
	[ "$CUR" = "$1" ] && return 0
	CUR=$1
	S3_PORT=${SPORT[$CUR]} S3_ACCESS_KEY=${SKEY[$CUR]} S3_SECRET_KEY=${SSECRET[$CUR]}
	export RCLONE_CONFIG_BENCH_ACCESS_KEY_ID=$S3_ACCESS_KEY RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY=$S3_SECRET_KEY \
		RCLONE_CONFIG_BENCH_ENDPOINT="http://127.0.0.1:$S3_PORT"
	# the workers talk to the store directly, as the CLIs do
	q "ALTER SYSTEM SET remora.s3_endpoint = 'http://127.0.0.1:$S3_PORT'" >/dev/null
	q "ALTER SYSTEM SET remora.s3_access_key_id = '$S3_ACCESS_KEY'" >/dev/null
	q "ALTER SYSTEM SET remora.s3_secret_access_key = '$S3_SECRET_KEY'" >/dev/null
	q "SELECT pg_reload_conf()" >/dev/null
	# the postmaster has read it (a new session sees it) before the worker
	# is replaced
	reloaded() {
		[ "$(q "SHOW remora.s3_endpoint")" = "http://127.0.0.1:$S3_PORT" ] &&
			[ "$(q "SHOW remora.max_workers")" = 1 ]
	}
	wait_for 30 reloaded || die "the configuration was not reloaded"
	fresh_worker
}
for st in $STORES; do
	q "SELECT remora.register_source_endpoint('same-$st', 'http://127.0.0.1:${SPORT[$st]}', 'us-east-1', true, '${SKEY[$st]}', '${SSECRET[$st]}')" >/dev/null
done

# the current store's CPU ticks and bytes written, over its processes
store_ticks() {
	local p s t=0
	for p in ${SPIDS[$CUR]}; do
		s=$(cat "/proc/$p/stat") || die "a process of $CUR ($p) died"
		s=${s##*) }
		t=$((t + $(echo "$s" | awk '{ print $12 + $13 }')))
	done
	echo "$t"
}
store_wbytes() {
	local p
	for p in ${SPIDS[$CUR]}; do cat "/proc/$p/io"; done | awk '/^write_bytes:/ { s += $2 } END { printf "%.0f\n", s }'
}
# wait until the store is idle: its CPU time grown by no more than its
# background ticks in 0.5 s (at most 20 s)
store_quiesce() {
	local last i
	for i in $(seq 1 40); do
		last=$(store_ticks)
		sleep 0.5
		[ $(($(store_ticks) - last)) -le "${SIDLE[$CUR]}" ] && return 0
	done
	log "warning: $CUR did not go idle within 20 s"
}

# a prefix of N objects of SIZE bytes each, on the current store
populate() {	# populate PREFIX N SIZE
	local dir=$T/pop.$1
	mkdir -p "$dir"
	for i in $(seq -w 1 "$2"); do head -c "$(bytes "$3")" /dev/urandom >"$dir/o$i"; done
	aws_s3 s3 cp --recursive --quiet "$dir" "s3://source/$1/"
	rm -rf "$dir"
}
count() { aws_s3 s3 ls --recursive "s3://target/$1" | wc -l; }
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
	echo "$(job_secs "$j") $(echo "($(ticks "$pid") - $t0) / $(getconf CLK_TCK)" | bc -l) $j"
}
# run_cli NAME CMD...: "wall cpu" from GNU time
run_cli() {
	local out=$T/time.$1
	/usr/bin/time -f "%e %U %S" -o "$out" "${@:2}" >/dev/null 2>&1 || die "$1 failed"
	awk '{printf "%s %s\n", $1, $2 + $3}' "$out"
}

methods="A B C"
[ "$HAVE_RCLONE" = 1 ] && methods="$methods D"
for st in $STORES; do
	use_store "$st"
	log "$st: populating s3://source/bench/ with $OBJECTS × $SIZE"
	aws_s3 s3 mb s3://source >/dev/null
	populate bench "$OBJECTS" "$SIZE"
done
# the untimed job of each store (see the header)
for st in $STORES; do
	use_store "$st"
	log "$st: a remora job before the rounds, not measured"
	run_remora bench '{}' >/dev/null
done
RESULTS=$T/results.tsv	# store method round wall cpu store_cpu store_bytes
: >"$RESULTS"
TICK=$(getconf CLK_TCK)
for r in $(seq 1 "$RUNS"); do
	# round r starts with the r-th method
	order=$(echo "$methods" | awk -v r="$r" '{ for (i = 0; i < NF; i++) printf "%s ", $((i + r - 1) % NF + 1) }')
	for st in $STORES; do
		use_store "$st"
		for m in $order; do
			log "round $r: $st $m"
			store_quiesce
			s0=$(store_ticks) w0=$(store_wbytes)
			case $m in
			A) res=$(run_remora bench '{}') ;;
			B) res=$(run_remora bench "{\"endpoint\": \"same-$st\"}") ;;
			C) res=$(run_cli aws env AWS_ACCESS_KEY_ID="$S3_ACCESS_KEY" AWS_SECRET_ACCESS_KEY="$S3_SECRET_KEY" AWS_DEFAULT_REGION=us-east-1 \
				/usr/bin/aws --endpoint-url "http://127.0.0.1:$S3_PORT" s3 sync --quiet s3://source/bench/ "s3://target/aws-$r/") ;;
			D) res=$(run_cli rclone env -u AWS_CA_BUNDLE rclone copy --transfers 8 --checkers 8 bench:source/bench "bench:target/rclone-$r") ;;
			esac
			store_quiesce
			s1=$(store_ticks) w1=$(store_wbytes)
			# the check, outside the store's measurement
			case $m in
			A | B) [ "$(count "remora/${res##* }/")" -ge "$OBJECTS" ] ||
				die "job ${res##* }: the AWS CLI does not list every member"
				res=${res% *} ;;
			C) [ "$(count "aws-$r/")" = "$OBJECTS" ] || die "aws sync: wrong count" ;;
			D) [ "$(count "rclone-$r/")" = "$OBJECTS" ] || die "rclone: wrong count" ;;
			esac
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$st" "$m" "$r" "${res% *}" "${res#* }" \
				"$(echo "($s1 - $s0) / $TICK" | bc -l)" $((w1 - w0)) >>"$RESULTS"
			log "$st $m: wall ${res% *}s, client CPU ${res#* }s, store CPU $(echo "($s1 - $s0) / $TICK" | bc -l | xargs printf '%.2f')s, store wrote $(((w1 - w0) / 1048576)) MiB"
		done
	done
done

# memory, on the first store: peak RSS above idle while copying N members,
# a fresh worker each
declare -A RSS
if [ -n "$RSS_COUNTS" ]; then use_store "$FIRST"; fi
for n in $RSS_COUNTS; do
	log "memory: a prefix of $n members"
	populate "rss$n" "$n" 1K
	fresh_worker
	sleep 2
	pid=$(worker_pid)
	[ -n "$pid" ] || die "no worker"
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
	[A]="A: remora, same store (below a part: GET + PUT; from a part up: hash by GET, then CopyObject)"
	[B]="B: remora, streamed (GET + PUT, through a registered endpoint)"
	[C]="C: \`aws s3 sync\` (CopyObject, no hashing)"
	[D]="D: \`rclone copy --transfers 8\` (server-side copy)"
)
# med STORE METHOD COLUMN: the median of that column over the rounds
med() { awk -F'\t' -v s="$1" -v m="$2" -v c="$3" '$1 == s && $2 == m { print $c }' "$RESULTS" | median; }
para() { tr '\n' ' ' | fold -s -w 80 | sed 's/ *$//'; echo; }
declare -A WALL CPU SCPU SW
for st in $STORES; do
	for m in $methods; do
		WALL[$st/$m]=$(med "$st" "$m" 4) CPU[$st/$m]=$(med "$st" "$m" 5)
		SCPU[$st/$m]=$(med "$st" "$m" 6) SW[$st/$m]=$(med "$st" "$m" 7)
	done
done
DATA_MIB=$(echo "$OBJECTS * $(bytes "$SIZE") / 1048576" | bc -l | xargs printf '%.1f')
mib() { echo "$1 / 1048576" | bc -l | xargs printf '%.1f'; }
# store_words STORE: what one store's table says
store_words() {
	local st=$1 n=${SNAME[$1]} peers peer_cpu
	peers="$(ratio "${WALL[$st/A]}" "${WALL[$st/C]}")× the wall time of \`aws s3 sync\` (C)"
	peer_cpu="$(ratio "${CPU[$st/A]}" "${CPU[$st/C]}")× C's"
	if [ "$HAVE_RCLONE" = 1 ]; then
		peers="$peers and $(ratio "${WALL[$st/A]}" "${WALL[$st/D]}")× rclone's (D)"
		peer_cpu="$peer_cpu and $(ratio "${CPU[$st/A]}" "${CPU[$st/D]}")× D's"
	fi
	cat <<TXT
On $n, remora's same-store job (A) took $peers, the peers that
copy inside the store, with $peer_cpu client CPU; the store's CPU for A
was $(ratio "${SCPU[$st/A]}" "${SCPU[$st/C]}")× C's, since A reads every member once (GET) to hash it.
Streaming every byte through a registered endpoint (B: GET and PUT, no copy)
took $(ratio "${WALL[$st/B]}" "${WALL[$st/A]}")× A's wall time and $(ratio "${SCPU[$st/B]}" "${SCPU[$st/A]}")× A's store CPU here.  The store
wrote $(mib "${SW[$st/A]}") MiB for A and $(mib "${SW[$st/B]}") MiB for B, for $DATA_MIB MiB of data.
TXT
}
# both_words: what the side-by-side table says about the stores
both_words() {
	local copies="" m
	for m in $methods; do
		[ "$m" = B ] && continue
		copies="$copies, $m $(ratio "${WALL[rgw/$m]}" "${WALL[s3rver/$m]}")×"
	done
	cat <<TXT
Which costs come from the store: the methods that copy inside the store took,
on RGW, ${copies#, } their wall time on s3rver, and B, which reads and
writes every byte itself, $(ratio "${WALL[rgw/B]}" "${WALL[s3rver/B]}")×.
TXT
	if awk -v c="${WALL[rgw/C]}" -v b="${WALL[rgw/B]}" 'BEGIN { exit !(c > b) }'; then
		cat <<TXT
On RGW a CopyObject of an object this small took longer than a GET and a PUT
of it, whichever client sent it (C, which only copies, took $(printf '%.2f' "${WALL[rgw/C]}") s; B
$(printf '%.2f' "${WALL[rgw/B]}") s), and it was not by reference: RGW wrote about as much for the
copies (A: $(mib "${SW[rgw/A]}") MiB, C: $(mib "${SW[rgw/C]}") MiB) as for B's PUTs ($(mib "${SW[rgw/B]}") MiB), as
it keeps an object's first 4 MiB in the object's head (\`rgw_max_chunk_size\`),
which a copy writes anew; only the part beyond is shared by reference.
TXT
	fi
	cat <<TXT
The clients' own CPU moved much less than their wall time (A: $(printf '%.2f' "${CPU[s3rver/A]}") s on
s3rver, $(printf '%.2f' "${CPU[rgw/A]}") s on RGW; C: $(printf '%.2f' "${CPU[s3rver/C]}") s and $(printf '%.2f' "${CPU[rgw/C]}") s): the differences
in wall time are the store's.
TXT
}
report() {
	local st m k
	echo "$SECTION"
	echo
	echo "Measured by \`bench/many_members.sh --objects $OBJECTS --size $SIZE --runs $RUNS --store $STORE\`"
	echo "on $(date -u +%F) ($(nproc) cores; load average $LOADAVG before, $(cut -d' ' -f1-3 /proc/loadavg) after):"
	echo "a prefix of $OBJECTS objects of $SIZE each copied from one bucket to another"
	echo "of the same store, on $(for st in $STORES; do printf '%s and ' "${SNAME[$st]}"; done | sed 's/ and $//'),"
	echo "$RUNS rounds interleaved across methods and stores, the methods' order"
	echo "rotated by one each round, after one untimed Remora job per store;"
	echo "medians.  CPU is the"
	echo "client's own (the remora worker's process; the CLI's process tree); the"
	echo "store's CPU and bytes written are those of s3rver's node process, or of"
	echo "radosgw + ceph-osd + ceph-mon, from just before the run until the store is"
	echo "idle again.  Remora's wall time runs from submit to the committed result,"
	echo "so it includes claiming, listing, hashing every member, writing the"
	echo "manifest and the commit.  Ratios are against A on the same store."
	for st in $STORES; do
		echo
		echo "### On ${SNAME[$st]}"
		echo
		echo "| method | wall s | objects/s | wall ÷ A | client CPU s | client CPU ÷ A | store CPU s | store CPU ÷ A | store MiB written |"
		echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
		for m in $methods; do
			k=$st/$m
			printf '| %s | %.2f | %.0f | %s | %.2f | %s | %.2f | %s | %.1f |\n' "${NAME[$m]}" "${WALL[$k]}" \
				"$(echo "$OBJECTS / ${WALL[$k]}" | bc -l)" "$(ratio "${WALL[$k]}" "${WALL[$st/A]}")" \
				"${CPU[$k]}" "$(ratio "${CPU[$k]}" "${CPU[$st/A]}")" "${SCPU[$k]}" \
				"$(ratio "${SCPU[$k]}" "${SCPU[$st/A]}")" "$(echo "${SW[$k]} / 1048576" | bc -l)"
		done
		echo
		store_words "$st" | para
	done
	if [ "$(echo "$STORES" | wc -w)" = 2 ]; then
		echo
		echo "### Both stores side by side"
		echo
		echo "| method | wall s, s3rver | wall s, RGW | RGW ÷ s3rver wall | client CPU s, s3rver | client CPU s, RGW | store CPU s, s3rver | store CPU s, RGW | MiB written, s3rver | MiB written, RGW |"
		echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
		for m in $methods; do
			printf '| %s | %.2f | %.2f | %s | %.2f | %.2f | %.2f | %.2f | %.1f | %.1f |\n' "$m" \
				"${WALL[s3rver/$m]}" "${WALL[rgw/$m]}" "$(ratio "${WALL[rgw/$m]}" "${WALL[s3rver/$m]}")" \
				"${CPU[s3rver/$m]}" "${CPU[rgw/$m]}" "${SCPU[s3rver/$m]}" "${SCPU[rgw/$m]}" \
				"$(echo "${SW[s3rver/$m]} / 1048576" | bc -l)" "$(echo "${SW[rgw/$m]} / 1048576" | bc -l)"
		done
		echo
		both_words | para
	fi
	echo
	echo "Wall seconds per run, in order:"
	echo
	for st in $STORES; do
		for m in $methods; do
			echo "- ${SNAME[$st]} $m: $(awk -F'\t' -v s="$st" -v m="$m" '$1 == s && $2 == m { printf "%s ", $4 }' "$RESULTS" | sed 's/ $//')"
		done
	done
}
rss_report() {
	local idle peak secs
	echo "$RSS_SECTION"
	echo
	echo "Measured by \`bench/many_members.sh --rss \"$RSS_COUNTS\"\` on $(date -u +%F),"
	echo "on ${SNAME[$FIRST]}.  The worker's own memory while copying a prefix of 1 KiB objects (a fresh"
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
	local first=${RSS_COUNTS%% *} last=${RSS_COUNTS##* } g1 met i1 p1 i2 p2
	if [ "$first" != "$last" ]; then
		read -r i1 p1 _ <<<"${RSS[$first]}"
		read -r i2 p2 _ <<<"${RSS[$last]}"
		g1=$(echo "($p2 - $i2 - $p1 + $i1) / 1024" | bc -l)
		met=$(echo "$g1 <= 16" | bc -l)
		printf 'From %s to %s members the peak above idle grows by %.1f MiB (target ≤ 16 MiB: %s).\n\n' \
			"$first" "$last" "$g1" "$([ "$met" = 1 ] && echo met || echo missed)"
	fi
	echo "What the worker holds for a set: the listing window (at most 2,048"
	echo "entries), completed members not yet checkpointed (at most 4,096; checkpoints"
	echo "run every second), the manifest's text (at most two of its 5 MiB parts, one"
	echo "being sent and one filling, whatever remora.part_size is) and the duplicate"
	echo "detector's table, the one thing that grows with the member count: 32 bytes"
	echo "a member (about 1.5 MiB at 50,000)."
}
report >"$T/report.md"
cat "$T/report.md"
if [ -n "$RSS_COUNTS" ]; then
	rss_report >"$T/rss.md"
	echo
	cat "$T/rss.md"
fi
if [ "$WRITE" = 1 ]; then
	put_section "$T/report.md"
	if [ -n "$RSS_COUNTS" ]; then put_section "$T/rss.md"; fi
	log "doc/benchmarks.md updated"
fi
