#!/usr/bin/env bash
#
# scale.sh: what a long history costs (doc/benchmarks.md, "Scale: the
# history").  A history of H ended jobs (each with its attempt, result
# and one member, owned by OWNERS roles in turn, ended two days ago) is
# written straight into the tables, for each H of --history; then, each
# ROUNDS times:
#
#   P  a user's first page of jobs, as GET /api/jobs asks for it (the
#      page's ids from remora.jobs under row-level security, then those
#      rows of the view remora_jobs), 50 rows
#   p  the peer: the same page of a plain table of the same rows, its
#      primary key walked backwards (WHERE owner = ... ORDER BY id DESC)
#   M  remora.metrics_text(), what GET /metrics answers
#   R  retention: remora.prune(1000) of jobs past remora.retention (one
#      batch; the history is made past it)
#   r  the peer: DELETE of the 1,000 oldest rows of the plain table
#
# Milliseconds (psql's \timing, the server's answer to the client),
# medians over the rounds, and each beside its value at the smallest H.
# What a claim costs against the number of owners and of claimers is
# bench/claim_cpu.sh's "Claims shared between owners" for now.
#
# Usage (root, Debian 12):
#   bench/scale.sh [--history "2000 20000 200000"] [--owners 20]
#                  [--rounds 5] [--write]
# --write puts the table into doc/benchmarks.md under "## Scale: the
# history".
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HISTORY="2000 20000 200000"
OWNERS=20
ROUNDS=5
WRITE=0
while [ $# -gt 0 ]; do
	case $1 in
	--history) HISTORY=$2; shift 2 ;;
	--owners) OWNERS=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	*) sed -n '/^# Usage/,/^# history"/p' "$0" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "scale: FAIL: $*" >&2; exit 1; }

cd "$ROOT"
. test/lib/e2e.sh
. bench/lib.sh
install_deps >/dev/null
make -s >/dev/null && make -s install >/dev/null
e2e_begin scale
e2e_cluster <<CONF
fsync = on
shared_buffers = '256MB'
remora.max_workers = 0
remora.default_bucket = 'target'
remora.retention = '1d'
CONF
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
q "CREATE EXTENSION remora" >/dev/null
q "INSERT INTO remora.incarnations (incarnation) VALUES ('00000000-0000-4000-8000-00000000000a')" >/dev/null
for i in $(seq 0 $((OWNERS - 1))); do
	q "CREATE ROLE scale_u$i LOGIN; GRANT remora_user TO scale_u$i" >/dev/null
done
q "CREATE TABLE plain_jobs (id bigserial PRIMARY KEY, owner text NOT NULL, state text NOT NULL,
	source text NOT NULL, finished_at timestamptz NOT NULL, payload jsonb NOT NULL)" >/dev/null

# grow_to H: the history holds H jobs (and the plain table as many rows)
HAVE=0
grow_to() {
	local n=$(($1 - HAVE))
	[ "$n" -gt 0 ] || return 0
	q "WITH j AS (
		INSERT INTO remora.jobs (owner, source, source_kind, bucket, prefix, spec, priority,
			max_attempts, request_hash, definition_hash, access_digest, provenance, state,
			attempts_used, fencing_token, submitted_at, started_at, finished_at)
		SELECT ('scale_u' || (g % $OWNERS))::regrole, 'https://example.com/f/' || g || '.bin', 'http',
			   'target', 'remora', '{\"options\": {}}', 0, 5, 'r', 'd', 'a', '{}', 'succeeded', 1, 1,
			   now() - interval '2 days', now() - interval '2 days', now() - interval '2 days'
		  FROM generate_series($HAVE + 1, $1) g
		RETURNING job_id), a AS (
		INSERT INTO remora.attempts (attempt_id, job_id, attempt_no, fencing_token, incarnation,
			state, definition_hash, request_hash, access_digest, provenance, started_at,
			finished_at, cleaned_at)
		SELECT md5(j.job_id::text)::uuid, j.job_id, 1, 1, '00000000-0000-4000-8000-00000000000a',
			   'succeeded', 'd', 'r', 'a', '{}', now() - interval '2 days',
			   now() - interval '2 days', now() - interval '2 days'
		  FROM j RETURNING attempt_id, job_id), r AS (
		INSERT INTO remora.results (job_id, attempt_id, fencing_token, manifest_key,
			manifest_etag, manifest_sha256, members, bytes, descriptor)
		SELECT a.job_id, a.attempt_id, 1, 'remora/' || a.job_id || '/m', 'e', repeat('0', 64), 1, 1, '{}'
		  FROM a)
	INSERT INTO remora.members (attempt_id, path, bucket, key, size, sha256, etag)
	SELECT a.attempt_id, 'f.bin', 'target', 'remora/' || a.job_id || '/f.bin', 1, repeat('0', 64), 'e'
	  FROM a" >/dev/null
	q "INSERT INTO plain_jobs (owner, state, source, finished_at, payload)
	   SELECT 'scale_u' || (g % $OWNERS), 'succeeded', 'https://example.com/f/' || g || '.bin',
			  now() - interval '2 days', '{}' FROM generate_series($HAVE + 1, $1) g" >/dev/null
	q "VACUUM ANALYZE remora.jobs, remora.attempts, remora.results, remora.members, plain_jobs" >/dev/null
	HAVE=$1
}

# ms_out ROLE SQL: the milliseconds of one statement, as the role
ms_out() {
	psql -X -q -d postgres -v ON_ERROR_STOP=1 -c "SET ROLE $1" -c '\timing on' -c "$2" 2>/dev/null |
		sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1
}
PAGE="WITH page AS (SELECT job_id FROM remora.jobs WHERE deleted_at IS NULL AND source_kind <> 'export'
	ORDER BY job_id DESC LIMIT 50)
	SELECT json_agg(to_json(j) ORDER BY j.job_id DESC) FROM remora_jobs j
	 WHERE j.job_id = ANY (SELECT job_id FROM page)"
PEER="SELECT json_agg(to_json(p)) FROM (SELECT * FROM plain_jobs WHERE owner = 'scale_u1'
	ORDER BY id DESC LIMIT 50) p"

RESULTS=$T/results.tsv # method history ms
: >"$RESULTS"
for h in $HISTORY; do
	log "a history of $h jobs"
	grow_to "$h"
	for r in $(seq 1 "$ROUNDS"); do
		echo "P $h $(ms_out scale_u1 "$PAGE")" >>"$RESULTS"
		echo "p $h $(ms_out postgres "$PEER")" >>"$RESULTS"
		echo "M $h $(ms_out postgres "SELECT length(remora.metrics_text())")" >>"$RESULTS"
	done
	# retention: a batch of 1,000, what the launcher asks for; after each,
	# the pruned jobs are made prunable again and the deleted rows written
	# again (not timed), so that every batch meets H jobs
	for r in $(seq 1 "$ROUNDS"); do
		echo "R $h $(ms_out postgres "SELECT remora.prune(1000)")" >>"$RESULTS"
		[ "$(q "SELECT count(*) FROM remora.jobs WHERE pruned_at IS NOT NULL")" = 1000 ] ||
			die "prune did not prune a batch of 1,000 at $h"
		q "UPDATE remora.jobs SET pruned_at = NULL WHERE pruned_at IS NOT NULL" >/dev/null
		echo "r $h $(ms_out postgres "DELETE FROM plain_jobs WHERE id IN (SELECT id FROM plain_jobs ORDER BY finished_at, id LIMIT 1000)")" >>"$RESULTS"
		q "INSERT INTO plain_jobs (owner, state, source, finished_at, payload)
		   SELECT 'scale_u' || (g % $OWNERS), 'succeeded', 'x', now() - interval '2 days', '{}'
			 FROM generate_series(1, 1000) g" >/dev/null
	done
done

med() { awk -v m="$1" -v h="$2" '$1 == m && $2 == h { print $3 }' "$RESULTS" | median; }
FIRST=$(echo "$HISTORY" | awk '{ print $1 }')
REPORT=$T/report.md
{
	echo "## Scale: the history"
	echo
	echo "\`bench/scale.sh\` ($(date -u +%Y-%m-%d), $(git -C "$ROOT" rev-parse --short HEAD)): a history of"
	echo "ended jobs (each with an attempt, a result and a member) of $OWNERS owners;"
	echo "milliseconds as psql times them, medians of $ROUNDS; × the figure at $FIRST jobs; load"
	echo "average $LOADAVG before."
	echo
	echo "| jobs in the history | first page (a user's) | × | plain table's | metrics | × | prune 1,000 | × | plain DELETE 1,000 |"
	echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	for h in $HISTORY; do
		echo "| $h | $(med P "$h") | $(ratio "$(med P "$h")" "$(med P "$FIRST")") | $(med p "$h") |" \
			"$(med M "$h") | $(ratio "$(med M "$h")" "$(med M "$FIRST")") |" \
			"$(med R "$h") | $(ratio "$(med R "$h")" "$(med R "$FIRST")") | $(med r "$h") |"
	done
	echo
	echo "A user's first page costs the same at any history size (its ids come from the"
	echo "primary key, walked backwards, and only the page's rows go through the view)."
	echo "A retention batch of 1,000 jobs is found through the index of the jobs not yet"
	echo "pruned, and each of its statements goes by the batch's ids. metrics_text()"
	echo "counts the whole history at every scrape (jobs by state, attempts, failures,"
	echo "committed bytes, the claim-wait histogram): its time grows with the history."
} >"$REPORT"
cat "$REPORT"
if [ "$WRITE" = 1 ]; then
	put_section "$REPORT"
	log "written to doc/benchmarks.md"
fi
e2e_finish
