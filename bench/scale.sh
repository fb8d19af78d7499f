#!/usr/bin/env bash
#
# scale.sh: what a claim costs against the number of owners and of
# claimers, and what a long history costs (doc/benchmarks.md, "Scale:
# claims" and "Scale: the history").  Parts, each side by side with the
# same work on a plain table in the same run:
#
#   owners     claims of CLIENTS clients (a claim of 16, then commit_many)
#              from a backlog of BACKLOG jobs of 1 ... 10,000 owners; the
#              rate, beside the one owner's, and the plain SKIP LOCKED
#              queue's with the same clients
#   claimers   one owner's 200,000 queued jobs, 1 ... 32 clients: the rate,
#              and the claims that came back empty
#   retention  the claim rate of 4 clients while remora.prune(1000) runs
#              flat out through a history of 200,000 ended jobs, beside
#              the rate without
#   history    a history of H ended jobs (each with its attempt, result and
#              one member, of OWNERS roles, ended two days ago) for each H
#              of --history, then ROUNDS times:
#                P  a user's first page of jobs, as GET /api/jobs asks for
#                   it (the ids from remora.jobs under row-level security,
#                   then those rows of the view remora_jobs), 50 rows
#                p  the peer: the same page of a plain table of the same
#                   rows, its primary key walked backwards
#                M  remora.metrics_text(), what GET /metrics answers
#                R  retention: remora.prune(1000) (one batch; the history
#                   is past remora.retention)
#                r  the peer: DELETE of the 1,000 oldest rows of the plain
#                   table
#              milliseconds (psql's \timing), medians over the rounds, and
#              each beside its value at the smallest H
#
# Usage (root, Debian 12):
#   bench/scale.sh [--parts "owners claimers retention history"]
#                  [--owners-list "1 10 100 1000 2000 10000"]
#                  [--claimers "1 2 4 8 16 32"] [--clients 4] [--secs 5]
#                  [--history "2000 20000 200000 1000000"] [--owners 20]
#                  [--rounds 3] [--write]
# --write puts the tables into doc/benchmarks.md, and the plot into
# doc/scale-claims.png.
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PARTS="owners claimers retention history"
OWNERS_LIST="1 10 100 1000 2000 10000"
CLAIMERS="1 2 4 8 16 32"
CLIENTS=4
SECS=5
BACKLOG=40000
HISTORY="2000 20000 200000 1000000"
OWNERS=20
ROUNDS=3
WRITE=0
while [ $# -gt 0 ]; do
	case $1 in
	--parts) PARTS=$2; shift 2 ;;
	--owners-list) OWNERS_LIST=$2; shift 2 ;;
	--claimers) CLAIMERS=$2; shift 2 ;;
	--clients) CLIENTS=$2; shift 2 ;;
	--secs) SECS=$2; shift 2 ;;
	--history) HISTORY=$2; shift 2 ;;
	--owners) OWNERS=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	*) sed -n '/^# Usage/,/^# doc.scale-claims.png/p' "$0" >&2; exit 2 ;;
	esac
done
part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
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
max_connections = 100
autovacuum_naptime = '5s'
remora.max_workers = 0
remora.max_active_leases = 100000
remora.default_bucket = 'target'
remora.retention = '1d'
CONF
LOADAVG=$(cut -d' ' -f1-3 /proc/loadavg)
q "CREATE EXTENSION remora" >/dev/null
for i in $(seq 0 $((OWNERS - 1))); do
	q "CREATE ROLE scale_u$i LOGIN; GRANT remora_user TO scale_u$i" >/dev/null
done
q "CREATE TABLE plain_jobs (id bigserial PRIMARY KEY, owner text NOT NULL, state text NOT NULL,
	source text NOT NULL, finished_at timestamptz NOT NULL, payload jsonb NOT NULL)" >/dev/null

# ---------------------------------------------------------------------------
# Claims: CLIENTS sessions of pgbench, each calling scale_claim(16) over and
# over (a claim of 16, then remora.commit_many of what it took, each its own
# transaction, as a worker does), for SECS seconds; the rate is the jobs
# that succeeded in that time.  Beside it, the same clients on a plain
# SKIP LOCKED queue (scale_plain: an UPDATE of up to 16 rows chosen FOR
# UPDATE SKIP LOCKED, then one that marks them done).  A claim that comes
# back empty while the backlog is far from drained is counted.
q "CREATE TABLE scale_empty (what text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
   CREATE TABLE plain_queue (id bigserial PRIMARY KEY, owner integer NOT NULL,
	priority integer NOT NULL DEFAULT 0, state text NOT NULL DEFAULT 'queued', payload jsonb NOT NULL DEFAULT '{}');
   CREATE INDEX plain_queue_queued ON plain_queue (priority DESC, id) WHERE state = 'queued';
   CREATE PROCEDURE scale_claim(batch integer, client integer) LANGUAGE plpgsql AS \$\$
   DECLARE ids uuid[]; toks bigint[]; ps text[]; ds jsonb[];
   BEGIN
	SELECT array_agg(c.attempt_id), array_agg(c.fencing_token), array_agg(c.spec ->> 'staging_prefix')
	  INTO ids, toks, ps
	  FROM remora.claim(('00000000-0000-4000-8000-' || lpad(client::text, 12, '0'))::uuid, batch) c;
	COMMIT;
	IF ids IS NULL THEN
		INSERT INTO scale_empty (what) VALUES ('remora');
		COMMIT;
		RETURN;
	END IF;
	SELECT array_agg(jsonb_build_object(
				'key', p || 'manifest.json', 'etag', 'm', 'sha256', repeat('0', 64),
				'members', 1, 'bytes', 1, 'entries', jsonb_build_array(jsonb_build_object(
					'path', 'a.bin', 'bucket', 'target', 'key', p || 'data/a.bin',
					'etag', 'e', 'sha256', repeat('0', 64), 'size', 1))) ORDER BY o)
	  INTO ds FROM unnest(ps) WITH ORDINALITY u(p, o);
	IF EXISTS (SELECT 1 FROM remora.commit_many(ids, toks, ds) WHERE NOT committed) THEN
		RAISE 'commit refused';
	END IF;
	COMMIT;
   END \$\$;
   CREATE PROCEDURE scale_plain(batch integer) LANGUAGE plpgsql AS \$\$
   DECLARE ids bigint[];
   BEGIN
	WITH t AS (UPDATE plain_queue SET state = 'running'
				WHERE id IN (SELECT id FROM plain_queue WHERE state = 'queued'
							  ORDER BY priority DESC, id LIMIT batch FOR UPDATE SKIP LOCKED)
			   RETURNING id)
	SELECT array_agg(id) INTO ids FROM t;
	COMMIT;
	IF ids IS NULL THEN
		INSERT INTO scale_empty (what) VALUES ('plain');
		COMMIT;
		RETURN;
	END IF;
	UPDATE plain_queue SET state = 'done' WHERE id = ANY (ids);
	COMMIT;
   END \$\$" >/dev/null

# backlog OWNERS N: the queue holds N jobs of OWNERS owners (roles
# scale_o1 ...), given round robin, and nothing else (the plain queue is
# filled with 400,000 rows before each of its runs: its clients are quick)
ROLES=0
backlog() {
	local owners=$1 n=$2
	if [ "$owners" -gt "$ROLES" ]; then
		q "DO \$\$ BEGIN FOR k IN $((ROLES + 1)) .. $owners LOOP
			EXECUTE format('CREATE ROLE %I', 'scale_o' || k); END LOOP; END \$\$" >/dev/null
		ROLES=$owners
	fi
	q "SET client_min_messages = warning;
	   TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
	   TRUNCATE remora.queue, remora.leases, scale_empty, plain_queue;
	   DELETE FROM remora.queue_owners;
	   SELECT remora.reconcile();
	   WITH j AS (
		INSERT INTO remora.jobs (owner, source, source_kind, bucket, prefix, spec, priority,
			max_attempts, request_hash, definition_hash, access_digest, provenance)
		SELECT ('scale_o' || (g % $owners + 1))::regrole, 'https://example.com/q/' || g || '.bin',
			   'http', 'target', 'remora', '{\"options\": {}}', 0, 5, 'r', 'd', 'a', '{}'
		  FROM generate_series(1, $n) g
		RETURNING job_id)
	   INSERT INTO remora.queue (job_id, priority, not_before) SELECT job_id, 0, now() FROM j" >/dev/null
	q "VACUUM ANALYZE remora.jobs, remora.queue, remora.queue_owners" >/dev/null
	q "CHECKPOINT" >/dev/null
}

# rate WHAT CLIENTS: jobs a second that CLIENTS sessions take and complete
# in SECS seconds (WHAT: remora or plain)
rate() {
	local what=$1 c=$2 before after call
	if [ "$what" = remora ]; then
		call="CALL scale_claim(16, :client_id);"
		before=$(q "SELECT count(*) FROM remora.jobs WHERE state = 'succeeded'")
	else
		call="CALL scale_plain(16);"
		before=$(q "SELECT count(*) FROM plain_queue WHERE state = 'done'")
	fi
	echo "$call" >"$T/$what.pgb"
	pgbench -n -c "$c" -j "$c" -T "$SECS" -f "$T/$what.pgb" postgres >"$T/pgbench.out" 2>&1 ||
		{ cat "$T/pgbench.out" >&2; die "pgbench of $what"; }
	if [ "$what" = remora ]; then
		after=$(q "SELECT count(*) FROM remora.jobs WHERE state = 'succeeded'")
	else
		after=$(q "SELECT count(*) FROM plain_queue WHERE state = 'done'")
	fi
	awk -v a="$after" -v b="$before" -v s="$SECS" 'BEGIN { printf "%.0f", (a - b) / s }'
}
empties() { q "SELECT count(*) FROM scale_empty WHERE what = '$1'"; }

# grow_to H: the history holds H jobs (and the plain table as many rows)
HAVE=0
grow_to() {
	local n=$(($1 - HAVE))
	[ "$n" -gt 0 ] || return 0
	q "INSERT INTO remora.incarnations (incarnation) VALUES ('00000000-0000-4000-8000-00000000000a')
	   ON CONFLICT DO NOTHING" >/dev/null
	q "WITH j AS (
		INSERT INTO remora.jobs (owner, source, source_kind, bucket, prefix, spec, priority,
			max_attempts, request_hash, definition_hash, access_digest, provenance, state,
			attempts_used, fencing_token, submitted_at, started_at, finished_at)
		SELECT ('scale_u' || (g % $OWNERS))::regrole, 'https://example.com/f/' || g || '.bin', 'http',
			   'target', 'remora', '{\"options\": {}}', 0, 5, 'r', 'd', 'a', '{}', 'succeeded', 1, 1,
			   now() - interval '12 hours', now() - interval '12 hours', now() - interval '12 hours'
		  FROM generate_series($HAVE + 1, $1) g
		RETURNING job_id), a AS (
		INSERT INTO remora.attempts (attempt_id, job_id, attempt_no, fencing_token, incarnation,
			state, definition_hash, request_hash, access_digest, provenance, started_at,
			finished_at, cleaned_at)
		SELECT md5(j.job_id::text)::uuid, j.job_id, 1, 1, '00000000-0000-4000-8000-00000000000a',
			   'succeeded', 'd', 'r', 'a', '{}', now() - interval '12 hours',
			   now() - interval '12 hours', now() - interval '12 hours'
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
	# the metrics' changes the triggers wrote, folded, and the tables
	# vacuumed, as reconcile and autovacuum would be by the next scrape
	q "SELECT remora.reconcile()" >/dev/null
	q "VACUUM ANALYZE remora.jobs, remora.attempts, remora.results, remora.members, plain_jobs,
		remora.metric_deltas, remora.metric_counts" >/dev/null
	HAVE=$1
}

# ms_out ROLE SQL: the milliseconds of one statement, as the role
ms_out() {
	psql -X -q -d "${E2E_DB:-postgres}" -v ON_ERROR_STOP=1 -c "SET ROLE $1" -c '\timing on' -c "$2" 2>/dev/null |
		sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1
}
CLAIMS=$T/claims.tsv # part x round remora plain empty_remora empty_plain
: >"$CLAIMS"
# claims_point PART X CLIENTS: one measurement of remora and the peer
claims_point() {
	local r p
	q "TRUNCATE scale_empty, plain_queue;
	   INSERT INTO plain_queue (owner) SELECT g FROM generate_series(1, 400000) g" >/dev/null
	q "VACUUM ANALYZE plain_queue" >/dev/null
	r=$(rate remora "$3")
	p=$(rate plain "$3")
	echo "$1 $2 $r $p $(empties remora) $(empties plain)" >>"$CLAIMS"
	log "$1 $2: remora $r jobs/s, plain $p jobs/s, empty claims $(empties remora) and $(empties plain)"
}
if part owners; then
	for round in $(seq 1 "$ROUNDS"); do
		for o in $OWNERS_LIST; do
			backlog "$o" "$BACKLOG"
			claims_point owners "$o" "$CLIENTS"
		done
	done
fi
if part claimers; then
	for round in $(seq 1 "$ROUNDS"); do
		backlog 1 200000
		for c in $CLAIMERS; do
			claims_point claimers "$c" "$c"
		done
	done
fi
# cmed PART X COLUMN: the median of a column (3 remora, 4 plain, 5 and 6
# the empty claims) over the rounds
cmed() { awk -v p="$1" -v x="$2" -v c="$3" '$1 == p && $2 == x { print $c }' "$CLAIMS" | median; }
csum() { awk -v p="$1" -v x="$2" -v c="$3" '$1 == p && $2 == x { s += $c } END { print s + 0 }' "$CLAIMS"; }

PAGE="WITH page AS (SELECT job_id FROM remora.jobs WHERE deleted_at IS NULL AND source_kind <> 'export'
	ORDER BY job_id DESC LIMIT 50)
	SELECT json_agg(to_json(j) ORDER BY j.job_id DESC) FROM remora_jobs j
	 WHERE j.job_id = ANY (SELECT job_id FROM page)"
PEER="SELECT json_agg(to_json(p)) FROM (SELECT * FROM plain_jobs WHERE owner = 'scale_u1'
	ORDER BY id DESC LIMIT 50) p"

RESULTS=$T/results.tsv # method history ms
: >"$RESULTS"
part history || HISTORY=""
if [ -n "$HISTORY" ]; then
	# the history alone, in a database of its own: the launcher, which
	# prunes too, runs in the other one (it would take the batches this
	# part ages to prune and times, before it could); reconcile, which
	# folds the metrics' changes, is called here after each growth
	q "CREATE DATABASE scale_history" >/dev/null
	export E2E_DB=scale_history
	q "CREATE EXTENSION remora" >/dev/null
	q "CREATE TABLE plain_jobs (id bigserial PRIMARY KEY, owner text NOT NULL, state text NOT NULL,
		source text NOT NULL, finished_at timestamptz NOT NULL, payload jsonb NOT NULL)" >/dev/null
	HAVE=0
fi
for h in $HISTORY; do
	log "a history of $h jobs"
	grow_to "$h"
	for r in $(seq 1 "$ROUNDS"); do
		echo "P $h $(ms_out scale_u1 "$PAGE")" >>"$RESULTS"
		echo "p $h $(ms_out postgres "$PEER")" >>"$RESULTS"
		echo "M $h $(ms_out postgres "SELECT length(remora.metrics_text())")" >>"$RESULTS"
	done
	# retention: a batch of 1,000, what the launcher asks for, of jobs just
	# aged past remora.retention; after each, the batch's jobs are made
	# prunable again (not timed; prune keeps a succeeded job's attempt and
	# result), so that every batch meets H jobs
	for r in $(seq 1 "$ROUNDS"); do
		out=$(psql -X -A -t -q -d "$E2E_DB" -v ON_ERROR_STOP=1 <<SQL
UPDATE remora.jobs SET finished_at = now() - interval '2 days'
 WHERE job_id IN (SELECT job_id FROM remora.jobs WHERE pruned_at IS NULL AND finished_at IS NOT NULL
				   ORDER BY job_id LIMIT 1000);
\\timing on
SELECT remora.prune(1000);
SQL
)
		[ "$(echo "$out" | head -1)" = 1000 ] || die "prune did not prune a batch of 1,000 at $h: $out"
		echo "R $h $(echo "$out" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')" >>"$RESULTS"
		q "UPDATE remora.jobs SET pruned_at = NULL, finished_at = now() - interval '12 hours'
		   WHERE pruned_at IS NOT NULL" >/dev/null
		echo "r $h $(ms_out postgres "DELETE FROM plain_jobs WHERE id IN (SELECT id FROM plain_jobs ORDER BY finished_at, id LIMIT 1000)")" >>"$RESULTS"
		q "INSERT INTO plain_jobs (owner, state, source, finished_at, payload)
		   SELECT 'scale_u' || (g % $OWNERS), 'succeeded', 'x', now() - interval '2 days', '{}'
			 FROM generate_series(1, 1000) g" >/dev/null
	done
done

unset E2E_DB
PRUNED=$T/pruned.tsv # round pruned-at-the-launcher's-pace pruned-flat-out
: >"$PRUNED"
if part retention; then
	echo 'SELECT remora.prune(1000);' >"$T/prune.pgb"
	for round in $(seq 1 "$ROUNDS"); do
		backlog 1 100000	# more than 4 clients take in three runs
		HAVE=0
		grow_to 300000	# job ids go on from the backlog's
		q "CHECKPOINT" >/dev/null
		q "TRUNCATE scale_empty" >/dev/null
		without=$(rate remora "$CLIENTS")
		# the history ended past remora.retention: pruned at the launcher's
		# pace (a batch of 1,000 a second while batches come back full;
		# the launcher itself may join in, as it would)
		q "UPDATE remora.jobs SET finished_at = now() - interval '2 days' WHERE finished_at IS NOT NULL" >/dev/null
		q "VACUUM remora.jobs" >/dev/null
		p0=$(q "SELECT count(*) FROM remora.jobs WHERE pruned_at IS NOT NULL")
		pgbench -n -c 1 -R 1 -T "$SECS" -f "$T/prune.pgb" postgres >"$T/prune.out" 2>&1 &
		pruner=$!
		paced=$(rate remora "$CLIENTS")
		wait "$pruner" || die "the pruner failed: $(cat "$T/prune.out")"
		p1=$(q "SELECT count(*) FROM remora.jobs WHERE pruned_at IS NOT NULL")
		# and one session more, pruning flat out
		pgbench -n -c 1 -T "$SECS" -f "$T/prune.pgb" postgres >"$T/prune.out" 2>&1 &
		pruner=$!
		flat=$(rate remora "$CLIENTS")
		wait "$pruner" || die "the pruner failed: $(cat "$T/prune.out")"
		p2=$(q "SELECT count(*) FROM remora.jobs WHERE pruned_at IS NOT NULL")
		echo "retention $round $paced $without $(empties remora) $flat" >>"$CLAIMS"
		echo "$round $((p1 - p0)) $((p2 - p1))" >>"$PRUNED"
		log "retention: $without jobs/s; $paced while the launcher pruned $((p1 - p0)); $flat while $((p2 - p1)) more were pruned flat out"
	done
	q "SET client_min_messages = warning; TRUNCATE remora.jobs RESTART IDENTITY CASCADE;
	   TRUNCATE plain_jobs" >/dev/null
	HAVE=0
fi
med() { awk -v m="$1" -v h="$2" '$1 == m && $2 == h { print $3 }' "$RESULTS" | median; }
# plot_claims: doc/scale-claims.png, the claim rate against the owners (as a
# share of the one owner's) and against the claimers, beside the plain queue
plot_claims() {
	local o1
	o1=$(echo "$OWNERS_LIST" | awk '{ print $1 }')
	for o in $OWNERS_LIST; do
		echo "$o $(ratio "$(cmed owners "$o" 3)" "$(cmed owners "$o1" 3)") $(ratio "$(cmed owners "$o" 4)" "$(cmed owners "$o1" 4)")"
	done >"$T/owners.dat"
	for c in $CLAIMERS; do
		echo "$c $(cmed claimers "$c" 3) $(cmed claimers "$c" 4)"
	done >"$T/claimers.dat"
	gnuplot <<PLOT || die "gnuplot failed"
set terminal pngcairo size 1100,420 noenhanced
set output "$T/scale-claims.png"
set multiplot layout 1,2 title "bench/scale.sh: claims of 16, then commit_many"
set grid
set key bottom left
set logscale x
set title "against the owners with queued jobs ($CLIENTS clients)"
set xlabel "owners"
set ylabel "jobs/s, x the rate with one owner"
set yrange [0:1.3]
plot "$T/owners.dat" using 1:2 with linespoints lw 2 title "remora.claim", \
     "" using 1:3 with linespoints lw 2 dashtype 2 title "plain SKIP LOCKED queue"
set logscale x 2
set logscale y 10
set key top left
set title "against the claimers (one owner)"
set xlabel "claimers"
set ylabel "jobs/s (log scale)"
set yrange [500:100000]
plot "$T/claimers.dat" using 1:2 with linespoints lw 2 title "remora.claim", \
     "" using 1:3 with linespoints lw 2 dashtype 2 title "plain SKIP LOCKED queue"
unset multiplot
PLOT
	cp "$T/scale-claims.png" "$ROOT/doc/scale-claims.png"
}

HEAD="\`bench/scale.sh\` ($(date -u +%Y-%m-%d), $(git -C "$ROOT" rev-parse --short HEAD), $(nproc) cores, fsync on; load average $LOADAVG before)"
if [ -n "$HISTORY" ]; then
	FIRST=$(echo "$HISTORY" | awk '{ print $1 }')
	REPORT=$T/history.md
	{
		echo "## Scale: the history"
		echo
		echo "$HEAD: a history of"
		echo "ended jobs (each with an attempt, a result and a member) of $OWNERS owners;"
		echo "milliseconds as psql times them, medians of $ROUNDS; × the figure at $FIRST jobs."
		echo
		echo "| jobs in the history | first page (a user's) | × | plain table's | metrics | × | prune 1,000 | × | plain DELETE 1,000 |"
		echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
		for h in $HISTORY; do
			echo "| $h | $(med P "$h") | $(ratio "$(med P "$h")" "$(med P "$FIRST")") | $(med p "$h") |" \
				"$(med M "$h") | $(ratio "$(med M "$h")" "$(med M "$FIRST")") |" \
				"$(med R "$h") | $(ratio "$(med R "$h")" "$(med R "$FIRST")") | $(med r "$h") |"
		done
		echo
		cat "$ROOT/bench/scale_history.md"
	} >"$REPORT"
	cat "$REPORT"
	[ "$WRITE" = 1 ] && put_section "$REPORT"
fi
if part owners || part claimers; then
	REPORT=$T/claims.md
	{
		echo "## Scale: claims"
		echo
		echo "$HEAD: jobs a second"
		echo "that succeed (a claim of 16, then \`remora.commit_many\`, each a transaction, as a worker"
		echo "does; pgbench sessions for $SECS s), medians of $ROUNDS rounds, beside a plain \`SKIP LOCKED\`"
		echo "queue (an \`UPDATE\` of up to 16 rows chosen \`FOR UPDATE SKIP LOCKED\`, then one that marks"
		echo "them done) with the same clients in the same round. Empty claims are summed over the rounds."
		if part owners; then
			o1=$(echo "$OWNERS_LIST" | awk '{ print $1 }')
			echo
			echo "Against the number of owners with queued jobs: $CLIENTS clients, $BACKLOG queued jobs given to"
			echo "the owners round robin."
			echo
			echo "| owners | claims: jobs/s | × $o1 owner | plain queue: jobs/s | × $o1 owner | claims ÷ plain | empty claims |"
			echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
			for o in $OWNERS_LIST; do
				echo "| $o | $(cmed owners "$o" 3) | $(ratio "$(cmed owners "$o" 3)" "$(cmed owners "$o1" 3)") |" \
					"$(cmed owners "$o" 4) | $(ratio "$(cmed owners "$o" 4)" "$(cmed owners "$o1" 4)") |" \
					"$(ratio "$(cmed owners "$o" 3)" "$(cmed owners "$o" 4)") | $(csum owners "$o" 5) |"
			done
		fi
		if part claimers; then
			echo
			echo "Against the number of claimers: one owner's 200,000 queued jobs."
			echo
			echo "| claimers | claims: jobs/s | plain queue: jobs/s | claims ÷ plain | empty claims | plain: empty |"
			echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
			for c in $CLAIMERS; do
				echo "| $c | $(cmed claimers "$c" 3) | $(cmed claimers "$c" 4) |" \
					"$(ratio "$(cmed claimers "$c" 3)" "$(cmed claimers "$c" 4)") |" \
					"$(csum claimers "$c" 5) | $(csum claimers "$c" 6) |"
			done
		fi
		echo
		part owners && part claimers && echo && echo "![claims against owners and claimers](scale-claims.png)"
		echo
		cat "$ROOT/bench/scale_claims.md"
	} >"$REPORT"
	cat "$REPORT"
	if [ "$WRITE" = 1 ]; then
		put_section "$REPORT"
		part owners && part claimers && plot_claims
	fi
fi
if [ -s "$PRUNED" ]; then
	REPORT=$T/retention.md
	pp=$(awk '{ print $2 }' "$PRUNED" | median)
	pf=$(awk '{ print $3 }' "$PRUNED" | median)
	w=$(awk '$1 == "retention" { print $4 }' "$CLAIMS" | median)
	wp=$(awk '$1 == "retention" { print $3 }' "$CLAIMS" | median)
	wf=$(awk '$1 == "retention" { print $6 }' "$CLAIMS" | median)
	e=$(awk '$1 == "retention" { s += $5 } END { print s + 0 }' "$CLAIMS")
	{
		echo "## Scale: claims while retention prunes"
		echo
		echo "$HEAD: $CLIENTS clients"
		echo "claim (as in \"Scale: claims\") from 100,000 queued jobs beside a history of 200,000 ended jobs;"
		echo "first before the history is past \`remora.retention\`, then while it is pruned at the launcher's"
		echo "pace (a batch of 1,000 a second while batches come back full; the launcher itself may join in),"
		echo "then while one session more runs \`remora.prune(1000)\` over and over. Jobs a second and jobs"
		echo "pruned in the $SECS s, medians of $ROUNDS rounds; empty claims summed: $e."
		echo
		echo "| pruning | claims: jobs/s | × without | jobs pruned |"
		echo "| --- | ---: | ---: | ---: |"
		echo "| none | $w | 1.00 | 0 |"
		echo "| the launcher's pace | $wp | $(ratio "$wp" "$w") | $pp |"
		echo "| and a session flat out | $wf | $(ratio "$wf" "$w") | $pf |"
		echo
		cat "$ROOT/bench/scale_retention.md"
	} >"$REPORT"
	cat "$REPORT"
	[ "$WRITE" = 1 ] && put_section "$REPORT"
fi
[ "$WRITE" = 1 ] && log "written to doc/benchmarks.md"
e2e_finish
