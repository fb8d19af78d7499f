#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib sourced at run time
#
# mirror.sh: a nightly mirror of an S3 prefix (doc/user-guide.md,
# "Mirrors"), through PostgreSQL end to end, against rclone sync, on the
# store chosen with --store (the test S3 server or Ceph's RADOS Gateway).
# The prefix holds OBJECTS objects of SIZE bytes; before each round CHANGED
# of them get new content.  The source is read as a remote bucket would be:
# through a source endpoint (Remora streams what it downloads through the
# worker, GET and PUT) and a second rclone remote (rclone streams what it
# copies through itself), both on the same store.  Then, in an order
# rotated each round:
#
#   M  remora, a mirror: remora_submit with options.reuse_from the
#      previous round's mirror job: the unchanged members copied inside
#      the store (CopyObject), the changed ones downloaded
#   F  remora, a full pull of the same prefix (no reuse_from)
#   R  rclone sync --transfers 8 --checkers 8 of the prefix into a copy
#      that the previous round's sync made (it lists both sides, compares
#      sizes and times, and copies what changed)
#   C  rclone copy --transfers 16 of that copy into a new prefix of the
#      same remote: a server-side CopyObject of every object, what the
#      mirror's copies cost the store at the same concurrency (a floor)
#
# Wall seconds (M, F: remora_jobs.finished_at - submitted_at; R, C: GNU
# time), medians over RUNS rounds after an untimed job and sync, ratios M/F,
# M/R and M/C.  Every mirror's result is checked: OBJECTS members, of which the
# changed ones downloaded and the others copied (remora_result.action).
#
# Usage (root, Debian 12):
#   bench/mirror.sh [--objects 200] [--size 5M] [--changed 2] [--runs 3]
#                   [--store s3rver|rgw] [--write]
# --write puts the report into doc/benchmarks.md under "## Mirrors
# (STORE)".  DEADLINE (seconds, default 3600) bounds it.
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OBJECTS=200
SIZE=5M
CHANGED=2
RUNS=3
STORE=${STORE:-rgw}
WRITE=0
DEADLINE=${DEADLINE:-3600}
while [ $# -gt 0 ]; do
	case $1 in
	--objects) OBJECTS=$2; shift 2 ;;
	--size) SIZE=$2; shift 2 ;;
	--changed) CHANGED=$2; shift 2 ;;
	--runs) RUNS=$2; shift 2 ;;
	--store) STORE=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	*) sed -n '/^# Usage/,/^# (STORE)/p' "$0" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "mirror: FAIL: $*" >&2; exit 1; }
case $STORE in s3rver | rgw) ;; *) die "--store must be s3rver or rgw, not '$STORE'" ;; esac
[ "$CHANGED" -lt "$OBJECTS" ] || die "--changed must be below --objects"

cd "$ROOT"
. test/lib/e2e.sh
. bench/lib.sh
install_deps >/dev/null
command -v rclone >/dev/null ||
	DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q rclone >/dev/null 2>&1 ||
	die "rclone could not be installed"
make -s >/dev/null && make -s install >/dev/null
( sleep "$DEADLINE"; log "deadline reached"; kill -TERM $$ ) &
WATCHDOG=$!

REMORA_RGW_OSD=bluestore REMORA_STORE=$STORE stack_up mirror_bench
trap 'kill $WATCHDOG 2>/dev/null; cluster_stop "$T/pg" immediate; stop_services; rm -rf "$T"' EXIT
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
# the workers and the CLIs talk to the store directly (not its proxy)
q "ALTER SYSTEM SET remora.s3_endpoint = 'http://127.0.0.1:$S3_PORT'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
reload_workers || die "the workers did not take the store's address"
# two rclone remotes on the one store: a copy between them goes through
# rclone, as from another account's bucket
export RCLONE_CONFIG=$T/rclone.conf
for r in SRC DST; do
	export "RCLONE_CONFIG_${r}_TYPE=s3" "RCLONE_CONFIG_${r}_PROVIDER=Other" \
		"RCLONE_CONFIG_${r}_REGION=us-east-1" "RCLONE_CONFIG_${r}_FORCE_PATH_STYLE=true" \
		"RCLONE_CONFIG_${r}_ACCESS_KEY_ID=$S3_ACCESS_KEY" "RCLONE_CONFIG_${r}_SECRET_ACCESS_KEY=$S3_SECRET_KEY" \
		"RCLONE_CONFIG_${r}_ENDPOINT=http://127.0.0.1:$S3_PORT"
done
: >"$RCLONE_CONFIG"
q "SELECT remora.register_source_endpoint('remote', 'http://127.0.0.1:$S3_PORT',
	access_key_id => '$S3_ACCESS_KEY', secret_access_key => '$S3_SECRET_KEY')" >/dev/null

SRCDIR=$T/src
mkdir -p "$SRCDIR"
log "$STORE: s3://source/bench/ with $OBJECTS × $SIZE"
python3 -c 'import os, sys
for i in range(1, int(sys.argv[2]) + 1):
    with open(f"{sys.argv[1]}/o{i:04d}", "wb") as f:
        f.write(os.urandom(int(sys.argv[3])))' "$SRCDIR" "$OBJECTS" "$(numfmt --from=iec "$SIZE")"
aws_s3 s3 mb s3://source >/dev/null
aws_s3 s3 cp --recursive --quiet "$SRCDIR" s3://source/bench/

succeeded() { [ "$(q "SELECT state FROM remora.jobs WHERE job_id = $1")" = succeeded ]; }
job_secs() { q "SELECT round(extract(epoch FROM finished_at - submitted_at)::numeric, 2) FROM remora.jobs WHERE job_id = $1"; }
run_job() {	# run_job OPTIONS: the job id, once it succeeded
	local j
	j=$(q "SELECT remora_submit('s3://source/bench/', options => '$1'::jsonb || '{\"endpoint\": \"remote\"}')")
	wait_for 1800 succeeded "$j" || die "job $j did not succeed: $(q "SELECT last_error FROM remora.jobs WHERE job_id = $j")"
	echo "$j"
}
# reclaim JOB: its objects deleted (a hard delete, by the workers), then,
# on RGW, the garbage collected (a DELETE only queues it), outside the
# timed runs: a round writes two results of the prefix, and the OSD's file
# would fill up
reclaim() {
	q "SELECT remora_delete($1, true)" >/dev/null
	gone() { [ "$(q "SELECT hard_deleted_at IS NOT NULL FROM remora.jobs WHERE job_id = $1")" = t ]; }
	wait_for 300 gone "$1" || die "the objects of job $1 were not deleted"
	if [ "$STORE" = rgw ]; then
		rgw_admin "$T/store" gc process --include-all >/dev/null 2>&1 ||
			log "warning: radosgw-admin gc process failed"
	fi
}
rclone_sync() {	# "wall" of one sync, from GNU time
	/usr/bin/time -f "%e" -o "$T/time.rclone" env -u AWS_CA_BUNDLE rclone sync --transfers 8 --checkers 8 \
		src:source/bench dst:target/rclone >/dev/null 2>&1 || die "rclone sync failed"
	cat "$T/time.rclone"
}

rclone_copy() {	# "wall" of server-side copies of every object, into a new prefix
	/usr/bin/time -f "%e" -o "$T/time.rclone" env -u AWS_CA_BUNDLE rclone copy --transfers 16 --checkers 16 \
		dst:target/rclone "dst:target/copy$1" >/dev/null 2>&1 || die "rclone copy failed"
	env -u AWS_CA_BUNDLE rclone purge "dst:target/copy$1" >/dev/null 2>&1 || die "rclone purge failed"
	cat "$T/time.rclone"
}

log "untimed: a full pull and an rclone sync"
PREV=$(run_job '{}')
rclone_sync >/dev/null
RESULTS=$T/results.tsv # method round wall
: >"$RESULTS"
methods="M F R C"
for r in $(seq 1 "$RUNS"); do
	for i in $(seq 1 "$CHANGED"); do
		f=$(printf 'o%04d' $(((r * 37 + i * 11) % OBJECTS + 1)))
		head -c "$(numfmt --from=iec "$SIZE")" /dev/urandom >"$SRCDIR/$f"
		aws_s3 s3 cp --quiet "$SRCDIR/$f" "s3://source/bench/$f"
	done
	order=$(echo "$methods" | awk -v r="$r" '{ for (i = 0; i < NF; i++) printf "%s ", $((i + r - 1) % NF + 1) }')
	for m in $order; do
		log "round $r: $m"
		case $m in
		M)
			j=$(run_job "{\"reuse_from\": $PREV}")
			got=$(q "SELECT count(*) FILTER (WHERE action = 'download') || ' ' || count(*) FROM remora_result($j)")
			[ "$got" = "$CHANGED $OBJECTS" ] || die "mirror job $j: $got downloaded/members, want $CHANGED $OBJECTS"
			echo "M $r $(job_secs "$j")" >>"$RESULTS"
			reclaim "$PREV"
			PREV=$j
			;;
		F)
			j=$(run_job '{}')
			echo "F $r $(job_secs "$j")" >>"$RESULTS"
			reclaim "$j"
			;;
		R) echo "R $r $(rclone_sync)" >>"$RESULTS" ;;
		C) echo "C $r $(rclone_copy "$r")" >>"$RESULTS" ;;
		esac
	done
done
[ "$(aws_s3 s3 ls --recursive s3://target/rclone/ | wc -l)" = "$OBJECTS" ] || die "rclone's copy is not whole"

med() { awk -v m="$1" '$1 == m { print $3 }' "$RESULTS" | median; }
M=$(med M) F=$(med F) R=$(med R) C=$(med C)
SNAME=$([ "$STORE" = rgw ] && echo "Ceph RGW" || echo s3rver)
REPORT=$T/report.md
{
	echo "## Mirrors ($SNAME)"
	echo
	echo "\`bench/mirror.sh --store $STORE\` ($(date -u +%Y-%m-%d), $(git -C "$ROOT" rev-parse --short HEAD)):"
	echo "a prefix of $OBJECTS objects of $SIZE, read through a source endpoint (Remora) and a"
	echo "second remote (rclone) as from another account, $CHANGED of them changed before each of"
	echo "$RUNS rounds; medians of wall seconds; load average $LOADAVG before."
	echo
	echo "| method | wall s (median) | min | max | × the mirror |"
	echo "| --- | ---: | ---: | ---: | ---: |"
	for m in M F R C; do
		case $m in
		M) name="remora, a mirror (\`reuse_from\` the previous run)" ;;
		F) name="remora, a full pull" ;;
		R) name="rclone sync (through rclone)" ;;
		C) name="rclone copy, server-side, of all $OBJECTS (the store's copies alone)" ;;
		esac
		v=$(awk -v m="$m" '$1 == m { print $3 }' "$RESULTS" | sort -g)
		echo "| $name | $(med "$m") | $(echo "$v" | head -1) | $(echo "$v" | tail -1) | $(ratio "$(med "$m")" "$M") |"
	done
	echo
	echo "The mirror took $(ratio "$M" "$F") of a full pull's time, $(ratio "$M" "$R") of"
	echo "rclone sync's, and $(ratio "$M" "$C") of the time the store takes for a"
	echo "server-side copy of every object at 16 at once (C).  That last figure is the"
	echo "mirror's floor: it publishes a new, verified result of every member, a"
	echo "server-side copy of each unchanged one under its own key (its SHA-256"
	echo "carried over from the earlier result) and a manifest, so that deleting the"
	echo "earlier job takes nothing from it; rclone sync updates one copy in place"
	echo "and writes only what changed.  Listing, deciding and committing add little"
	echo "to the copies.  A full pull moves every byte, which on one machine's"
	echo "loopback costs far less than from a remote bucket: the mirror reads none of"
	echo "the unchanged bytes, so its share of a full pull falls as the source gets"
	echo "farther away, while its time stays that of the store's copies."
} >"$REPORT"
cat "$REPORT"
if [ "$WRITE" = 1 ]; then
	put_section "$REPORT"
	log "written to doc/benchmarks.md"
fi
