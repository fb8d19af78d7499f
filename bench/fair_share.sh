#!/usr/bin/env bash
#
# The workers' share between owners under contention, over time: how many
# running attempts each owner holds while several wait (doc/operator-guide.md,
# "Sharing the workers between users").
#
# One PostgreSQL with the extension and no built-in workers
# (remora.max_workers = 0); LEASES sessions act as workers through the SQL
# protocol directly: each one loops remora.claim(its incarnation, 1), a
# "transfer" that is pg_sleep of 2 to 4 seconds, then remora.commit, so
# remora.max_active_leases = LEASES caps the running attempts and each
# freed slot goes to whoever the claim picks.  Nothing is downloaded: the
# transfer's length is what makes the slots turn over, and the claim and
# commit are the real ones.  Three owners: bench_heavy (weight 3) and
# bench_light (weight 1) have many jobs queued from the start,
# bench_late (weight 1) submits its jobs JOIN seconds in.  (The jobs are
# submitted by the superuser and given to the owners, as
# bench/claim_cpu.sh does: the claim reads the owner, nothing else.)
#
# Every 0.5 s a session records
#   SELECT owner, count(*) FROM remora_jobs WHERE state = 'running' GROUP BY 1
# for SECONDS seconds; the plot is running attempts per owner over time,
# the table each owner's mean running attempts and share of them, beside
# its weight's share, before and after bench_late joins (each window
# without its first WARMUP seconds, while the slots turn over).
#
# Usage: bench/fair_share.sh [--leases 8] [--seconds 60] [--join 20] [--write]
#   --write  put the section "Sharing the workers under contention" into
#            doc/benchmarks.md and the plot into doc/fair_share.png
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LEASES=8
SECONDS_RUN=60
JOIN=20
WARMUP=5
WRITE=0
while [ $# -gt 0 ]; do
	case $1 in
	--leases) LEASES=$2; shift 2 ;;
	--seconds) SECONDS_RUN=$2; shift 2 ;;
	--join) JOIN=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	*) sed -n '/^# Usage/,/^#            doc\/benchmarks/p' "$0" >&2; exit 2 ;;
	esac
done
if [ "$JOIN" -le "$WARMUP" ] || [ "$SECONDS_RUN" -le $((JOIN + WARMUP)) ]; then
	echo "fair_share.sh: --join must be above $WARMUP and --seconds above --join + $WARMUP" >&2
	exit 2
fi
log() { echo "[$(date +%T)] $*" >&2; }

cd "$ROOT"
. test/lib/e2e.sh
. bench/lib.sh
install_deps >/dev/null
make -s >/dev/null && make -s install >/dev/null
e2e_begin fair-share
e2e_cluster <<CONF
remora.max_workers = 0
remora.max_active_leases = $LEASES
remora.default_bucket = 'target'
max_connections = $((LEASES + 20))
CONF
q "CREATE EXTENSION remora" >/dev/null
q "SET client_min_messages = warning;
   CREATE ROLE bench_heavy; CREATE ROLE bench_light; CREATE ROLE bench_late;
   SELECT remora.set_role_limits('bench_heavy', weight => 3);
   SELECT remora.set_role_limits('bench_light', weight => 1);
   SELECT remora.set_role_limits('bench_late', weight => 1);
   CREATE TABLE bench_samples (t float8, owner name, running bigint);
   -- bench_jobs OWNER N: N jobs queued for OWNER, in one transaction
   CREATE PROCEDURE bench_jobs(who name, n integer) LANGUAGE plpgsql AS \$\$
   DECLARE ids bigint[];
   BEGIN
	SELECT array_agg(remora_submit('https://example.com/' || who || '/' || g || '.bin'))
	  INTO ids FROM generate_series(1, n) g;
	UPDATE remora.jobs j SET owner = who::regrole WHERE j.job_id = ANY (ids);
	UPDATE remora.queue q SET owner = who::regrole WHERE q.job_id = ANY (ids);
   END \$\$;
   -- a worker: claim one job, transfer (sleep 2 to 4 s), commit, until the end
   CREATE PROCEDURE bench_worker(w integer, seconds float8) LANGUAGE plpgsql AS \$\$
   DECLARE
	stop timestamptz := clock_timestamp() + seconds * interval '1 second';
	inc uuid := ('00000000-0000-0000-0000-' || lpad(w::text, 12, '0'))::uuid;
	c record;
	p text;
   BEGIN
	WHILE clock_timestamp() < stop LOOP
		SELECT * INTO c FROM remora.claim(inc, 1);
		COMMIT;
		IF c.attempt_id IS NULL THEN
			PERFORM pg_sleep(0.1);
			CONTINUE;
		END IF;
		PERFORM pg_sleep(2 + 2 * random());
		p := c.spec ->> 'staging_prefix';
		IF NOT remora.commit(c.attempt_id, c.fencing_token, jsonb_build_object(
				'key', p || 'manifest.json', 'etag', 'm', 'sha256', repeat('0', 64),
				'members', 1, 'bytes', 1, 'entries', jsonb_build_array(jsonb_build_object(
					'path', 'a.bin', 'bucket', 'target', 'key', p || 'data/a.bin',
					'etag', 'e', 'sha256', repeat('0', 64), 'size', 1)))) THEN
			RAISE 'commit refused';
		END IF;
		COMMIT;
	END LOOP;
   END \$\$;
   -- the sampler: running attempts per owner every 0.5 s
   CREATE PROCEDURE bench_sample(seconds float8) LANGUAGE plpgsql AS \$\$
   DECLARE t0 timestamptz := clock_timestamp(); ts float8;
   BEGIN
	WHILE clock_timestamp() < t0 + seconds * interval '1 second' LOOP
		ts := extract(epoch FROM clock_timestamp() - t0);
		INSERT INTO bench_samples
		SELECT ts, o.owner, coalesce(c.running, 0)
		  FROM unnest('{bench_heavy,bench_light,bench_late}'::name[]) o(owner)
		  LEFT JOIN (SELECT j.owner, count(*) AS running FROM remora_jobs j
					  WHERE j.state = 'running' GROUP BY 1) c ON c.owner = o.owner;
		COMMIT;
		PERFORM pg_sleep(0.5);
	END LOOP;
   END \$\$" >/dev/null

# enough jobs that no owner runs out: a slot turns over every 3 s or so
PER=$((SECONDS_RUN * LEASES / 2))
q "CALL bench_jobs('bench_heavy', $PER)" >/dev/null
q "CALL bench_jobs('bench_light', $PER)" >/dev/null
log "$PER jobs each queued for bench_heavy and bench_light; $LEASES workers for ${SECONDS_RUN}s"
pids=()
q "CALL bench_sample($SECONDS_RUN)" >/dev/null &
pids+=($!)
for w in $(seq 1 "$LEASES"); do
	q "CALL bench_worker($w, $SECONDS_RUN)" >/dev/null &
	pids+=($!)
done
sleep "$JOIN"
q "CALL bench_jobs('bench_late', $PER)" >/dev/null
log "bench_late joined"
for p in "${pids[@]}"; do wait "$p" || { echo "fair_share.sh: a session failed" >&2; exit 1; }; done

# the samples, one line per sample: t heavy light late
q "SELECT round(t::numeric, 2),
		  sum(running) FILTER (WHERE owner = 'bench_heavy'),
		  sum(running) FILTER (WHERE owner = 'bench_light'),
		  sum(running) FILTER (WHERE owner = 'bench_late')
	 FROM bench_samples GROUP BY t ORDER BY t" | tr '|' ' ' >"$T/plot.dat"

# window FROM TO: per owner, "owner|weight|mean running|share|weight share"
# over the samples in [FROM, TO), among the owners with jobs then
window() {
	q "WITH s AS (SELECT owner, avg(running) AS mean FROM bench_samples
				   WHERE t >= $1 AND t < $2 GROUP BY owner),
			w AS (SELECT l.role AS owner, l.weight FROM remora_role_limits l
				   WHERE l.role IN (SELECT owner FROM s WHERE $3))
	   SELECT s.owner, w.weight, round(s.mean, 2),
			  round(100 * s.mean / nullif(sum(s.mean) OVER (), 0), 1) || ' %',
			  round(100.0 * w.weight / sum(w.weight) OVER (), 1) || ' %'
		 FROM s JOIN w USING (owner) ORDER BY w.weight DESC, s.owner"
}
TWO=$(window "$WARMUP" "$JOIN" "owner <> 'bench_late'")
THREE=$(window "$((JOIN + WARMUP))" "$SECONDS_RUN" "true")
out=$T/section.md
{
	echo "## Sharing the workers under contention"
	echo
	echo "\`bench/fair_share.sh --leases $LEASES --seconds $SECONDS_RUN --join $JOIN\` ($(date +%F), $(nproc) cores, PostgreSQL $(q "SHOW server_version" | cut -d' ' -f1)):"
	echo "$LEASES sessions act as workers through the SQL protocol (\`remora.claim(…, 1)\`, a transfer that is"
	echo "\`pg_sleep\` of 2 to 4 s, \`remora.commit\`) under \`remora.max_active_leases = $LEASES\`; bench_heavy"
	echo "(weight 3) and bench_light (weight 1) have $PER jobs queued each from the start, bench_late (weight 1)"
	echo "submits $PER at ${JOIN} s.  Running attempts per owner sampled every 0.5 s from \`remora_jobs\`;"
	echo "the means leave out the first $WARMUP s of each window, while the slots turn over.  Shares are whole"
	echo "attempts: a freed slot goes to the owner with the fewest running attempts for its weight, so where"
	echo "the weights' share of the $LEASES slots is not whole (3:1:1 of 8 is 4.8, 1.6, 1.6) each owner holds"
	echo "one of the whole numbers next to it, and keeps it: bench_heavy's fifth would be a slot that a light"
	echo "owner takes back first (1 running per unit of weight against bench_heavy's 4/3)."
	echo
	echo "| window | owner | weight | mean running | share of running | weight's share |"
	echo "|---|---|---:|---:|---:|---:|"
	while IFS='|' read -r o w m s ws; do
		echo "| $WARMUP–$JOIN s | $o | $w | $m | $s | $ws |"
	done <<<"$TWO"
	while IFS='|' read -r o w m s ws; do
		echo "| $((JOIN + WARMUP))–$SECONDS_RUN s | $o | $w | $m | $s | $ws |"
	done <<<"$THREE"
	echo
	echo "![running attempts per owner over time](fair_share.png)"
} >"$out"
cat "$out"

gnuplot <<PLOT
set terminal pngcairo size 1000,480 noenhanced
set output "$T/fair_share.png"
set title "running attempts per owner, $LEASES leases (bench/fair_share.sh)"
set xlabel "seconds"
set ylabel "running attempts"
set yrange [0:$((LEASES + 1))]
set ytics 1
set key outside right
set grid
set arrow from $JOIN, graph 0 to $JOIN, graph 1 nohead dashtype 2
plot "$T/plot.dat" using 1:2 with steps lw 2 title "bench_heavy (weight 3)", \
     "" using 1:3 with steps lw 2 title "bench_light (weight 1)", \
     "" using 1:4 with steps lw 3 dashtype 2 title "bench_late (weight 1, dashed)"
PLOT
if [ "$WRITE" = 1 ]; then
	put_section "$out"
	cp "$T/fair_share.png" "$ROOT/doc/fair_share.png"
	log "doc/benchmarks.md and doc/fair_share.png updated"
fi
exit 0
