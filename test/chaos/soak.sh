#!/usr/bin/env bash
#
# The soak: every nemesis of doc/reliability.md's table, with the chaos
# run's checks across each (exactly one result per job, from an attempt
# that held the lease; nothing published twice; staging cleaned; no
# multipart upload left open where the store lists them).  Two phases,
# one summary:
#
# 1. test/chaos/run.sh --soak: CHAOS_SECONDS (1500) of kills, pauses and
#    restarts, partitions, a skewed clock, faults of the sources, the store
#    and the Hub, and full disks (fill_disk: PostgreSQL's data directory on
#    a small file system of the run's own, filled until writes fail), under
#    216 jobs and 60 exports;
# 2. test/e2e/patroni.sh with CHAOS_SOAK=1: the chaos run's job mix, three
#    times patroni.sh's own, across a Patroni switchover and a kill of the
#    leader (a failover under load), with the same checks.
#
#   test/chaos/soak.sh          run both, print the summary
#   test/chaos/soak.sh --doc    and write it into doc/reliability.md's
#                               "latest soak" section (also when a check
#                               failed: the record says so)
#
# CHAOS_SEED (drawn if unset), CHAOS_SECONDS and REMORA_STORE go to both
# phases.  It exits 0 when every check of both held.  About 40 minutes.
set -Euo pipefail
cd "$(dirname "$0")/../.."
DOC=
for arg in "$@"; do
	case $arg in
	--doc) DOC=doc/reliability.md ;;
	*)
		echo "usage: $0 [--doc]" >&2
		exit 2
		;;
	esac
done
export CHAOS_SEED=${CHAOS_SEED:-$(((RANDOM << 15) | RANDOM))}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

t0=$(date +%s)
echo "# soak, seed $CHAOS_SEED: the chaos run"
CHAOS_SUMMARY=$OUT/chaos.md bash test/chaos/run.sh --soak
chaos=$?
t1=$(date +%s)
echo "# soak, seed $CHAOS_SEED: a failover under load"
CHAOS_SOAK=1 PATRONI_SUMMARY=$OUT/patroni.md bash test/e2e/patroni.sh
failover=$?
t2=$(date +%s)

{
	echo "Soak of $(git rev-parse --short HEAD) ($(date -u +%Y-%m-%d), seed $CHAOS_SEED," \
		"store ${REMORA_STORE:-s3rver}): the chaos run ($(((t1 - t0) / 60)) min, exit $chaos)," \
		"then a failover under load ($(((t2 - t1) / 60)) min, exit $failover)."
	echo
	echo "#### The chaos run"
	echo
	cat "$OUT/chaos.md" 2>/dev/null || echo "(no summary: the run stopped before its checks)"
	echo
	echo "#### A failover under load"
	echo
	cat "$OUT/patroni.md" 2>/dev/null || echo "(no summary: the run stopped before its checks)"
} >"$OUT/summary.md"
cat "$OUT/summary.md"
if [ -n "$DOC" ]; then
	# between the chaos markers of the "latest soak" section
	awk -v f="$OUT/summary.md" '
		/<!-- chaos:begin -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next }
		/<!-- chaos:end -->/ { skip = 0 }
		!skip' "$DOC" >"$OUT/doc" && cp "$OUT/doc" "$DOC"
fi
[ "$chaos" = 0 ] && [ "$failover" = 0 ]
