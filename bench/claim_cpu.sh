#!/usr/bin/env bash
#
# Server CPU per claimed and completed job: what one claim and one commit
# cost the PostgreSQL backend that runs them, beside the plain SKIP LOCKED
# floor, measured in the same run.  CPU time (the backend's time on a CPU,
# in nanoseconds from /proc/<pid>/schedstat: utime and stime count ticks
# of 10 ms, a noise of a tenth over a round) is what a busy machine
# disturbs least, so these figures hold where the throughput of
# bench/protocol.sh does not.
#
#   A  remora.claim(incarnation, 16), then remora.commit_many of the 16
#   B  remora.claim(incarnation, 1), then remora.commit: one job at a time
#   C  the floor: UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED)
#      and UPDATE ... SET state = 'done', a partial index on the queued rows
#
# Each method runs JOBS jobs in one session (one transaction per claim and
# one per completion, as a worker does), ROUNDS times interleaved; the
# table has the medians and the ratios to the floor.
#
# Then the claims' share between owners: method A against a backlog of
# BACKLOG queued jobs from OWNERS owners, for each OWNERS:BACKLOG of
# --owners (the jobs are submitted by one role and given to the owners
# round robin, which is what the claim reads), ROUNDS times interleaved;
# the table has the claim rate of each beside the one owner's.
#
# Usage: bench/claim_cpu.sh [--jobs N] [--rounds N] [--owners "1:20000 200:20000"]
#                           [--no-methods] [--write]
#   --owners      the backlogs of the share table (default "1:20000
#                 200:20000 2000:20000"; "1000:100000" is 100,000 jobs of
#                 1,000 owners); "" none
#   --no-methods  only the share table
#   --write  put the tables into doc/benchmarks.md ("Server CPU per job",
#            "Claims shared between owners")
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=1600
ROUNDS=5
WRITE=0
OWNERS="1:20000 200:20000 2000:20000"
METHODS=1
while [ $# -gt 0 ]; do
	case $1 in
	--jobs) JOBS=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--owners) OWNERS=$2; shift 2 ;;
	--no-methods) METHODS=0; shift ;;
	--write) WRITE=1; shift ;;
	*) sed -n '/^# Usage/,/^#            "Claims/p' "$0" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }

cd "$ROOT"
. test/lib/e2e.sh
. bench/lib.sh
install_deps >/dev/null
make -s >/dev/null && make -s install >/dev/null
e2e_begin claim-cpu
e2e_cluster <<CONF
fsync = on
synchronous_commit = on
shared_buffers = '256MB'
remora.max_workers = 0
remora.max_active_leases = 100000
remora.default_bucket = 'target'
CONF
q "CREATE EXTENSION remora" >/dev/null
q "CREATE TABLE bench_floor (id bigserial PRIMARY KEY, priority integer NOT NULL DEFAULT 0,
	state text NOT NULL DEFAULT 'queued', payload jsonb NOT NULL DEFAULT '{}');
   CREATE INDEX bench_floor_queued ON bench_floor (priority DESC, id) WHERE state = 'queued'" >/dev/null

# cpu_per_job METHOD: backend CPU milliseconds per job, one session.  The
# jobs are queued first (not counted); each claim and each completion is a
# transaction of its own, from a procedure.
q "CREATE FUNCTION pg_temp_cpu_ns() RETURNS bigint LANGUAGE sql AS
	\$\$ SELECT split_part(pg_read_file('/proc/' || pg_backend_pid() || '/schedstat'), ' ', 1)::bigint \$\$;
   CREATE PROCEDURE run_remora(batch integer, jobs integer) LANGUAGE plpgsql AS \$\$
   DECLARE done integer := 0; n integer; ids uuid[]; toks bigint[]; ps text[]; ds jsonb[];
   BEGIN
	WHILE done < jobs LOOP
		SELECT array_agg(c.attempt_id), array_agg(c.fencing_token), array_agg(c.spec ->> 'staging_prefix')
		  INTO ids, toks, ps
		  FROM remora.claim('00000000-0000-0000-0000-000000000001', batch) c;
		COMMIT;
		n := coalesce(array_length(ids, 1), 0);
		SELECT array_agg(jsonb_build_object(
					'key', p || 'manifest.json', 'etag', 'm', 'sha256', repeat('0', 64),
					'members', 1, 'bytes', 1, 'entries', jsonb_build_array(jsonb_build_object(
						'path', 'a.bin', 'bucket', 'target', 'key', p || 'data/a.bin',
						'etag', 'e', 'sha256', repeat('0', 64), 'size', 1))) ORDER BY o)
		  INTO ds FROM unnest(ps) WITH ORDINALITY u(p, o);
		-- as the worker does: several in one call, one alone
		IF n > 1 AND EXISTS (SELECT 1 FROM remora.commit_many(ids, toks, ds) WHERE NOT committed) THEN
			RAISE 'commit refused';
		ELSIF n = 1 AND NOT remora.commit(ids[1], toks[1], ds[1]) THEN
			RAISE 'commit refused';
		END IF;
		done := done + greatest(n, 1);
		COMMIT;
	END LOOP;
   END \$\$;
   CREATE PROCEDURE run_floor(jobs integer) LANGUAGE plpgsql AS \$\$
   DECLARE fid bigint;
   BEGIN
	FOR k IN 1 .. jobs LOOP
		UPDATE bench_floor SET state = 'running'
		 WHERE id = (SELECT id FROM bench_floor WHERE state = 'queued'
					  ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING id INTO fid;
		COMMIT;
		UPDATE bench_floor SET state = 'done' WHERE id = fid;
		COMMIT;
	END LOOP;
   END \$\$" >/dev/null

cpu_per_job() {
	case $1 in
	A | B) q "SELECT count(remora_submit('https://example.com/b/' || g || '-' || random() || '.bin'))
			 FROM generate_series(1, $JOBS) g" >/dev/null ;;
	C) q "INSERT INTO bench_floor (payload) SELECT '{}' FROM generate_series(1, $JOBS)" ;;
	esac
	q "CHECKPOINT" >/dev/null
	case $1 in
	A) call="CALL run_remora(16, $JOBS)" ;;
	B) call="CALL run_remora(1, $JOBS)" ;;
	C) call="CALL run_floor($JOBS)" ;;
	esac
	psql -X -A -t -q -v ON_ERROR_STOP=1 -d postgres <<SQL
SELECT pg_temp_cpu_ns() AS t0 \gset
$call;
SELECT round((pg_temp_cpu_ns() - :t0) / 1e6 / $JOBS, 4);
SQL
}

declare -A R
med() { tr ' ' '\n' <<<"${R[$1]}" | grep . | median; }
if [ "$METHODS" = 1 ]; then
	for round in $(seq 1 "$ROUNDS"); do
		for m in A B C; do
			v=$(cpu_per_job "$m")
			R[$m]+="$v "
			log "round $round: $m $v ms per job"
		done
	done
	A=$(med A) B=$(med B) C=$(med C)
	out=$T/section.md
	{
		echo "## Server CPU per job"
		echo
		echo "\`bench/claim_cpu.sh\` ($(date +%F), $(nproc) cores, PostgreSQL $(q "SHOW server_version" | cut -d' ' -f1)):"
		echo "CPU time of the one backend that claims and completes $JOBS queued no-op jobs, each claim and each"
		echo "completion a transaction of its own, medians of $ROUNDS interleaved rounds.  CPU time is what a busy"
		echo "machine disturbs least; the throughput of several clients is in \"Claims against the backlog\"."
		echo
		echo "| method | ms of backend CPU per job | ÷ floor |"
		echo "|---|---:|---:|"
		echo "| A: \`remora.claim(…, 16)\`, then \`remora.commit_many\` of the 16 | $A | $(ratio "$A" "$C") |"
		echo "| B: \`remora.claim(…, 1)\`, then \`remora.commit\` | $B | $(ratio "$B" "$C") |"
		echo "| C: the floor (SKIP LOCKED claim, an UPDATE to complete) | $C | 1.00 |"
	} >"$out"
	cat "$out"
	[ "$WRITE" = 1 ] && put_section "$out" && log "doc/benchmarks.md updated"
fi

# shared_backlog OWNERS BACKLOG: the queue holds BACKLOG jobs of OWNERS
# owners (roles bench_owner_1 ...), and nothing else
shared_backlog() {
	q "SET client_min_messages = warning;
	   TRUNCATE remora.jobs, remora.incarnations RESTART IDENTITY CASCADE;
	   TRUNCATE remora.queue, remora.leases;
	   DO \$\$ BEGIN
		FOR k IN 1 .. $1 LOOP
			IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'bench_owner_' || k) THEN
				EXECUTE format('CREATE ROLE %I', 'bench_owner_' || k);
			END IF;
		END LOOP;
	   END \$\$;
	   SELECT count(remora_submit('https://example.com/s/' || g || '.bin'))
		 FROM generate_series(1, $2) g;
	   UPDATE remora.jobs j SET owner = ('bench_owner_' || (j.job_id % $1 + 1))::regrole;
	   UPDATE remora.queue q SET owner = j.owner FROM remora.jobs j WHERE j.job_id = q.job_id" >/dev/null
	q "VACUUM ANALYZE remora.queue" >/dev/null
	q "CHECKPOINT" >/dev/null
}
claim_cpu_per_job() {
	psql -X -A -t -q -v ON_ERROR_STOP=1 -d postgres <<SQL
SELECT pg_temp_cpu_ns() AS t0 \gset
CALL run_remora(16, $JOBS);
SELECT round((pg_temp_cpu_ns() - :t0) / 1e6 / $JOBS, 4);
SQL
}
if [ -n "$OWNERS" ]; then
	for round in $(seq 1 "$ROUNDS"); do
		for ob in $OWNERS; do
			shared_backlog "${ob%%:*}" "${ob##*:}"
			v=$(claim_cpu_per_job)
			R[$ob]+="$v "
			log "round $round: $ob $v ms per job"
		done
	done
	first=${OWNERS%% *}
	base=$(med "$first")
	out=$T/share.md
	{
		echo "## Claims shared between owners"
		echo
		echo "\`bench/claim_cpu.sh --owners \"$OWNERS\"\` ($(date +%F), $(nproc) cores, PostgreSQL $(q "SHOW server_version" | cut -d' ' -f1)):"
		echo "method A (\`remora.claim(…, 16)\`, then \`remora.commit_many\`) taking $JOBS jobs from a backlog of queued"
		echo "jobs of one or many owners (given round robin), CPU time of the one backend, medians of $ROUNDS rounds."
		echo "The claim finds the owners with nothing running in their turns' order by the index of"
		echo "\`remora.queue_owners\`, as far as its batch needs (\"Scale: claims\" has the rate of several claimers)."
		echo
		echo "| owners | queued | ms of backend CPU per job | claim rate ÷ ${first%%:*} owner's |"
		echo "|---:|---:|---:|---:|"
		for ob in $OWNERS; do
			v=$(med "$ob")
			echo "| ${ob%%:*} | ${ob##*:} | $v | $(ratio "$base" "$v") |"
		done
	} >"$out"
	cat "$out"
	[ "$WRITE" = 1 ] && put_section "$out" && log "doc/benchmarks.md updated"
fi
exit 0
