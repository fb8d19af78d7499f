#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib and bench/lib sourced at run time
#
# submit.sh: submits per second, beside a floor and a peer on the same
# PostgreSQL server in the same run (fsync on, synchronous_commit on):
#
#   A  remora_submit(url), called by a plain member of remora_user (not
#      an administrator: every check a user's submit passes is made)
#   F  the floor: a plpgsql function in the bench's own schema that
#      inserts a job row and a queue row (tables shaped like remora's
#      essentials: an identity key, owner, source, spec, state, times; an
#      unlogged queue, as remora's, a row with its priority) and
#      notifies, one statement each
#   D  graphile-worker's graphile_worker.add_job (bench/graphile, npm ci
#      of a pinned version), a no-op task
#
# One submit a transaction from CLIENTS pgbench sessions, TXS each; then
# one statement submitting BULK: SELECT remora_submit(url) FROM urls (A)
# and the floor's function over the same rows (F).  The methods run
# interleaved (A F D, A F D, ...) for RUNS rounds; the report has medians
# and the ratios A ÷ F and A ÷ D.
#
# Then the WAL a submit writes (pg_current_wal_insert_lsn before and after
# WALN submits of A and of F, one a transaction, one session): what each
# commit waits on at fsync = on, background writes of the server (the
# launcher's round) included.
#
# --profile instead runs PROFILE submits of A alone with
# pg_stat_statements (track = all, track_planning) and prints where they
# spent their time, statement by statement (nested ones included).
#
# Usage (root, Debian 12):
#   bench/submit.sh [--runs 5] [--clients 4] [--txs 500] [--bulk 10000]
#                   [--write]
#   bench/submit.sh --profile [--txs 2000]
#   bench/submit.sh --waits [--runs 3] [--clients 4]
#   bench/submit.sh --hold [--runs 3] [--clients 4]
#   bench/submit.sh --split [--runs 5] [--clients 4]
#   bench/submit.sh --row [--runs 5] [--clients 4]
#
# --waits instead runs A, F and D from CLIENTS sessions for 10 s each while one more
# session samples what the submitting sessions do (pg_stat_activity's
# wait events every 2 ms: running, or waiting on the lock every notifying
# commit takes, on the WAL flush, on the client), and reads the machine's
# CPU time from /proc/stat around each run: whether a method is bound by
# CPU or by the commits that notify, which PostgreSQL runs one at a time.
# --hold instead asks what lengthens the time a notifying commit holds
# that lock: beside A and F, A with its NOTIFY triggers disabled one at a
# time and both (A-e: no remora_events, A-q: no remora_jobs, A-eq: none),
# the floor with a row padded to A's WAL bytes (F-pad) and with a second
# NOTIFY (F-2); CLIENTS sessions for 10 s each, RUNS interleaved rounds
# (a CHECKPOINT before each), then each one's WAL bytes a submit.
# --split instead asks which part of a submit costs what, by giving
# remora._submit a part of its work at a time (the server is the bench's
# own; A runs the real function, and it is put back at the end): A-min
# inserts the same job and queue rows without the checks, digests and
# provenance _submit computes (constants of about the same sizes); A-rj remora's job row
# and the floor's queue row; A-fj the floor's job row and remora's queue
# row; A-fb the floor's body.  Each notifies on both of remora's channels
# (A-fb on the floor's); CLIENTS sessions for 10 s each, RUNS
# interleaved rounds, with the machine's CPU a submit (/proc/stat), then
# WALN submits in one session and that backend's CPU a submit.
# --row instead runs the real remora._submit with one of the job row's
# features taken away at a time, as --split measures: A-p without the
# web client's index by priority, A-u with the index of idempotency keys
# holding only the jobs that have one, A-c without the CHECK constraints,
# A-t without the events trigger of an insert, A-x without all four;
# then A-mx, --split's A-min without the four, A-mtc and A-mpu, A-min
# without two of them (the CHECKs and the trigger, whose NOTIFY the
# body sends instead; the two indexes), and --split's A-fj.  Each is put
# back after its run.  ROW_METHODS chooses some of them (A and F first
# and last).
# --write puts the report into doc/benchmarks.md under "## Submits"
# (replacing it).  DEADLINE (seconds, default 1800) bounds it; REMORA_REV
# names the code measured (default: the checkout's commit).
#
set -Eeuo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECTION="## Submits"
RUNS=5
CLIENTS=4
TXS=500
BULK=10000
WALN=1000
WAIT_SECS=10
WRITE=0
PROFILE=0
DEADLINE=${DEADLINE:-1800}
while [ $# -gt 0 ]; do
	case $1 in
	--runs) RUNS=$2; shift 2 ;;
	--clients) CLIENTS=$2; shift 2 ;;
	--txs) TXS=$2; shift 2 ;;
	--bulk) BULK=$2; shift 2 ;;
	--write) WRITE=1; shift ;;
	--profile) PROFILE=1; shift ;;
	--waits) PROFILE=2; shift ;;
	--hold) PROFILE=3; shift ;;
	--split) PROFILE=4; shift ;;
	--row) PROFILE=5; shift ;;
	*) sed -n '/^# Usage/,/^# (replacing/p' "$0" >&2; exit 2 ;;
	esac
done
log() { echo "[$(date +%T)] $*" >&2; }
die() { echo "submit: FAIL: $*" >&2; exit 1; }

cd "$ROOT"
. test/lib/e2e.sh
. bench/lib.sh
install_deps >/dev/null
make -s >/dev/null && make -s install >/dev/null
(cd bench/graphile && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
	die "npm ci in bench/graphile failed"
GW_VERSION=$(node -p 'require("./bench/graphile/node_modules/graphile-worker/package.json").version')
e2e_begin submit-bench
( sleep "$DEADLINE"; log "deadline reached"; kill -TERM $$ ) &
WATCHDOG=$!
e2e_at_exit "pkill -P $WATCHDOG; kill $WATCHDOG 2>/dev/null"

PROFILE_CONF=
if [ "$PROFILE" = 1 ]; then
	export CLUSTER_PRELOAD=remora,pg_stat_statements
	PROFILE_CONF="pg_stat_statements.track = all
pg_stat_statements.track_planning = on"
fi
e2e_cluster <<CONF
fsync = on
synchronous_commit = on
shared_buffers = '512MB'
max_connections = 100
remora.max_workers = 0
remora.default_bucket = 'target'
$PROFILE_CONF
CONF
q "CREATE EXTENSION remora" >/dev/null
q "CREATE ROLE bench_user LOGIN IN ROLE remora_user" >/dev/null

# the floor: remora's essentials, one INSERT each and a NOTIFY
q "CREATE SCHEMA bench_floor AUTHORIZATION bench_user" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -U bench_user -d postgres <<'SQL'
CREATE TABLE bench_floor.jobs (
	job_id		bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	owner		oid NOT NULL,
	source		text NOT NULL,
	spec		jsonb NOT NULL,
	priority	integer NOT NULL DEFAULT 0,
	state		text NOT NULL DEFAULT 'queued',
	submitted_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNLOGGED TABLE bench_floor.queue (
	job_id		bigint PRIMARY KEY,
	priority	integer NOT NULL,
	not_before	timestamptz NOT NULL DEFAULT now()
);
CREATE FUNCTION bench_floor.submit(url text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	id	bigint;
BEGIN
	INSERT INTO bench_floor.jobs (owner, source, spec)
	VALUES ((SELECT oid FROM pg_roles WHERE rolname = current_user), url,
			jsonb_build_object('source', url))
	RETURNING job_id INTO id;
	INSERT INTO bench_floor.queue (job_id, priority) VALUES (id, 0);
	PERFORM pg_notify('bench_floor', id::text);
	RETURN id;
END
$$;
SQL

CONN="postgresql:///postgres?host=$PGHOST&port=$PGPORT&user=postgres"
node bench/graphile/drain.js "$CONN" 0 1 >"$T/graphile-install.log" 2>&1 ||
	{ cat "$T/graphile-install.log" >&2; die "graphile-worker did not install its schema"; }
PG_VERSION=$(q "SHOW server_version")
REV=${REMORA_REV:-$(git rev-parse --short HEAD 2>/dev/null || echo "an unknown commit")}

S=$T/scripts
mkdir -p "$S"
URL="'https://example.com/s/' || :client_id || '-' || random() || '.bin'"
echo "SELECT remora_submit($URL) IS NOT NULL;" >"$S/A.sql"
echo "SELECT bench_floor.submit($URL) IS NOT NULL;" >"$S/F.sql"
echo "SELECT graphile_worker.add_job('noop', '{}'::json) IS NOT NULL;" >"$S/D.sql"
BURL="'https://example.com/b/' || g || '-' || random() || '.bin'"
echo "SELECT count(remora_submit($BURL)) FROM generate_series(1, $BULK) g;" >"$S/bulkA.sql"
echo "SELECT count(bench_floor.submit($BURL)) FROM generate_series(1, $BULK) g;" >"$S/bulkF.sql"

# pgbench_rate SCRIPT CLIENTS TRANSACTIONS USER: transactions per second
pgbench_rate() {
	local out
	out=$(pgbench -n -U "$4" -c "$2" -j "$2" -t "$3" -f "$1" postgres 2>&1) ||
		{ echo "$out" >&2; die "pgbench $(basename "$1") failed"; }
	grep -q "number of failed transactions: 0 " <<<"$out" ||
		{ echo "$out" >&2; die "pgbench $(basename "$1"): transactions failed"; }
	grep -oP 'tps = \K[0-9.]+(?= \(without)' <<<"$out"
}

# busy: the machine's busy CPU ticks so far (/proc/stat);
# machine_ms B0 B1 N: the ms of them between B0 and B1, a submit of N
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
machine_ms() {
	awk -v b="$(($2 - $1))" -v n="$3" -v hz="$(getconf CLK_TCK)" \
		'BEGIN { printf "%.3f", b * 1000 / hz / n }'
}

# measure METHOD: submits per second
measure() {
	case $1 in
	A | F) pgbench_rate "$S/$1.sql" "$CLIENTS" "$TXS" bench_user ;;
	D) pgbench_rate "$S/D.sql" "$CLIENTS" "$TXS" postgres ;;
	bulkA | bulkF) awk -v r="$(pgbench_rate "$S/$1.sql" 1 1 bench_user)" -v n="$BULK" \
		'BEGIN { printf "%.1f\n", r * n }' ;;
	esac
}

if [ "$PROFILE" = 1 ]; then
	q "CREATE EXTENSION pg_stat_statements" >/dev/null
	measure A >/dev/null	# warm: the statements' first plans are not the cost
	q "SELECT pg_stat_statements_reset()" >/dev/null
	pgbench_rate "$S/A.sql" 1 "$TXS" bench_user >/dev/null
	echo "$TXS submits, one session: per submit, ms (exec + plan), calls per submit, statement"
	q "SELECT round(((total_exec_time + total_plan_time) / $TXS)::numeric, 4) || ' | ' ||
			  round((total_plan_time / $TXS)::numeric, 4) || ' plan | ' ||
			  round(calls::numeric / $TXS, 2) || ' | ' || regexp_replace(left(query, 140), '\s+', ' ', 'g')
		 FROM pg_stat_statements WHERE calls >= $TXS
		ORDER BY total_exec_time + total_plan_time DESC LIMIT 30"
	exit 0
fi

if [ "$PROFILE" = 2 ]; then
	# what the client sessions of WHO do, sampled from 1 s to SECS - 1 s
	q "CREATE FUNCTION bench_floor.sample(who name, secs float8) RETURNS jsonb
	   LANGUAGE plpgsql AS \$\$
	   DECLARE
		   counts jsonb := '{}';
		   t0 timestamptz := clock_timestamp();
		   r record;
	   BEGIN
		   PERFORM pg_sleep(1);
		   WHILE clock_timestamp() - t0 < make_interval(secs => secs - 1) LOOP
			   PERFORM pg_stat_clear_snapshot();
			   FOR r IN SELECT CASE WHEN state <> 'active' THEN 'idle in the client'
								   WHEN wait_event IS NULL THEN 'running'
								   WHEN wait_event_type = 'Lock' AND wait_event = 'object'
								   THEN 'waiting for the notify lock'
								   ELSE wait_event_type || ':' || wait_event END AS ev
						  FROM pg_stat_activity
						 WHERE usename = who AND backend_type = 'client backend'
						   AND pid <> pg_backend_pid() LOOP
				   counts := counts || jsonb_build_object(r.ev, coalesce((counts ->> r.ev)::int, 0) + 1);
			   END LOOP;
			   PERFORM pg_sleep(0.002);
		   END LOOP;
		   RETURN counts;
	   END \$\$" >/dev/null
	echo "| method | submits /s | machine CPU ms a submit | what the $CLIENTS sessions were doing (share of samples) |"
	echo "|---|---:|---:|---|"
	for r in $(seq 1 "$RUNS"); do
		for m in A F D; do
			who=bench_user; [ "$m" = D ] && who=postgres
			q "SELECT bench_floor.sample('$who', $WAIT_SECS)" >"$T/waits.json" &
			sampler=$!
			b0=$(busy)
			out=$(pgbench -n -U "$who" -c "$CLIENTS" -j "$CLIENTS" -T "$WAIT_SECS" \
				-f "$S/$m.sql" postgres 2>&1) || { echo "$out" >&2; die "pgbench $m failed"; }
			b1=$(busy)
			n=$(grep -oP 'number of transactions actually processed: \K[0-9]+' <<<"$out")
			rate=$(grep -oP 'tps = \K[0-9.]+(?= \(without)' <<<"$out")
			wait "$sampler"
			cpu=$(machine_ms "$b0" "$b1" "$n")
			shares=$(python3 -c 'import json,sys
c = json.load(open(sys.argv[1])); t = sum(c.values()) or 1
print(", ".join("%s %d %%" % (k, round(100 * v / t)) for k, v in sorted(c.items(), key=lambda kv: -kv[1]) if v >= t / 100))' "$T/waits.json")
			echo "| $m (round $r) | $(awk -v v="$rate" 'BEGIN { printf "%.0f", v }') | $cpu | $shares |"
		done
	done
	exit 0
fi

if [ "$PROFILE" = 3 ]; then
	psql -X -q -v ON_ERROR_STOP=1 -U bench_user -d postgres <<'SQL'
CREATE TABLE bench_floor.jobs_pad (LIKE bench_floor.jobs INCLUDING ALL, pad text NOT NULL);
-- the floor with a row of A's size (A's is about 760 bytes: hex digests,
-- the URI in the spec as well, provenance), md5s so that nothing compresses
CREATE FUNCTION bench_floor.submit_pad(url text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	id	bigint;
BEGIN
	INSERT INTO bench_floor.jobs_pad (owner, source, spec, pad)
	VALUES ((SELECT oid FROM pg_roles WHERE rolname = current_user), url,
			jsonb_build_object('source', url),
			md5(url) || md5(url || 'a') || repeat(md5(url || 'b'), 18))
	RETURNING job_id INTO id;
	INSERT INTO bench_floor.queue (job_id, priority) VALUES (-id, 0);
	PERFORM pg_notify('bench_floor', id::text);
	RETURN id;
END
$$;
CREATE FUNCTION bench_floor.submit_2(url text) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	id	bigint := bench_floor.submit(url);
BEGIN
	PERFORM pg_notify('bench_floor_2', id::text);
	RETURN id;
END
$$;
SQL
	echo "SELECT bench_floor.submit_pad($URL) IS NOT NULL;" >"$S/F-pad.sql"
	echo "SELECT bench_floor.submit_2($URL) IS NOT NULL;" >"$S/F-2.sql"
	# triggers EVENTS QUEUE: ENABLE or DISABLE remora's two NOTIFY triggers
	triggers() {
		q "ALTER TABLE remora.jobs $1 TRIGGER jobs_event_insert" >/dev/null
		q "ALTER TABLE remora.queue $2 TRIGGER queue_notify" >/dev/null
	}
	# variant METHOD: set the triggers up for METHOD, print its script's name
	variant() {
		case $1 in
		A-e) triggers DISABLE ENABLE ;;
		A-q) triggers ENABLE DISABLE ;;
		A-eq) triggers DISABLE DISABLE ;;
		*) triggers ENABLE ENABLE ;;
		esac
		echo "${1%%-[eq]*}"
	}
	HOLD=$T/hold.tsv	# method round submits/s
	: >"$HOLD"
	METHODS="A A-e A-q A-eq F F-pad F-2"
	for r in $(seq 1 "$RUNS"); do
		for m in $METHODS; do
			script=$(variant "$m")
			q "CHECKPOINT" >/dev/null
			out=$(pgbench -n -U bench_user -c "$CLIENTS" -j "$CLIENTS" -T "$WAIT_SECS" \
				-f "$S/$script.sql" postgres 2>&1) || { echo "$out" >&2; die "pgbench $m failed"; }
			v=$(grep -oP 'tps = \K[0-9.]+(?= \(without)' <<<"$out")
			printf '%s\t%s\t%s\n' "$m" "$r" "$v" >>"$HOLD"
			log "round $r: $m $v/s"
		done
	done
	echo "| method | submits /s (median of $RUNS) | per run | ÷ F | WAL bytes a submit |"
	echo "|---|---:|---|---:|---:|"
	F=$(awk -F'\t' '$1 == "F" { print $3 }' "$HOLD" | median)
	for m in $METHODS; do
		script=$(variant "$m")
		before=$(q "SELECT pg_current_wal_insert_lsn()")
		pgbench_rate "$S/$script.sql" 1 "$WALN" bench_user >/dev/null
		after=$(q "SELECT pg_current_wal_insert_lsn()")
		wal=$(q "SELECT round(pg_wal_lsn_diff('$after', '$before') / $WALN)")
		v=$(awk -F'\t' -v m="$m" '$1 == m { print $3 }' "$HOLD" | median)
		runs=$(awk -F'\t' -v m="$m" '$1 == m { printf "%.0f ", $3 }' "$HOLD")
		echo "| $m | $(awk -v v="$v" 'BEGIN { printf "%.0f", v }') | ${runs% } | $(ratio "$v" "$F") | $wal |"
	done
	exit 0
fi

if [ "$PROFILE" = 4 ] || [ "$PROFILE" = 5 ]; then
	q "GRANT USAGE ON SCHEMA bench_floor TO postgres" >/dev/null
	q "SELECT pg_get_functiondef('remora._submit(oid, jsonb, jsonb, text, text)'::regprocedure) || ';'" \
		>"$S/body-A.sql"
	HEAD="CREATE OR REPLACE FUNCTION remora._submit(caller oid, spec jsonb, request jsonb,
	idem_key text, source_url text) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS \$\$
DECLARE
	new_id	bigint;
BEGIN"
	# remora's job row with constants where _submit derives a value:
	# digests of 64 hex digits, a provenance of the same keys but
	# application_name (about 30 bytes fewer)
	JOBROW="INSERT INTO remora.jobs
		(owner, source, source_kind, bucket, prefix, spec, label, priority,
		 max_attempts, request_hash, definition_hash, access_digest, provenance)
	VALUES (caller, spec #>> '{source,uri}', 'http', spec ->> 'bucket',
			spec ->> 'prefix', spec, NULL, 0, 5, repeat('a', 64), repeat('b', 64),
			repeat('c', 64), '{\"role\": \"bench_user\", \"backend_pid\": 10000,
			\"session_user\": \"bench_user\", \"submitted_at\":
			\"2026-12-04T00:00:00.000000+00:00\"}')
	RETURNING job_id INTO new_id;"
	QUEUEROW="INSERT INTO remora.queue (job_id, priority, not_before, owner)
	VALUES (new_id, 0, now(), caller);"
	FLOORJOB="INSERT INTO bench_floor.jobs (owner, source, spec)
	VALUES (caller, spec #>> '{source,uri}', jsonb_build_object('source', spec #>> '{source,uri}'))
	RETURNING job_id INTO new_id;"
	# the floor's ids are its own sequence's: negated, they never meet
	# remora's (A-fj puts them in remora's queue, A-rj remora's in the floor's)
	FLOORQUEUE="INSERT INTO bench_floor.queue (job_id, priority) VALUES (-new_id, 0);"
	TAIL="RETURN new_id;
END
\$\$;"
	printf '%s\n%s\n%s\n%s\n' "$HEAD" "$JOBROW" "$QUEUEROW" "$TAIL" >"$S/body-A-min.sql"
	printf '%s\n%s\n%s\n%s\n%s\n' "$HEAD" "$JOBROW" "$FLOORQUEUE" \
		"PERFORM pg_notify('remora_jobs', '');" "$TAIL" >"$S/body-A-rj.sql"
	printf '%s\n%s\n%s\n%s\n%s\n' "$HEAD" "$FLOORJOB" "${QUEUEROW/(new_id,/(-new_id,}" \
		"PERFORM pg_notify('remora_events', new_id::text);" "$TAIL" >"$S/body-A-fj.sql"
	printf '%s\n%s\n%s\n' "$HEAD" "new_id := bench_floor.submit(spec #>> '{source,uri}');" \
		"$TAIL" >"$S/body-A-fb.sql"
	# backend_us SCRIPT: the backend's CPU µs a submit over WALN submits of
	# SCRIPT's statement in one session, one a transaction: its time on a
	# CPU in ns from /proc/<pid>/schedstat (utime and stime count 10 ms ticks)
	backend_us() {
		local stmt
		stmt=$(sed "s/:client_id/1/" "$S/$1.sql")
		{
			echo "SELECT pg_backend_pid() AS pid \\gset"
			echo "\\setenv PID :pid"
			echo "$stmt"
			echo "\\! cut -d' ' -f1 /proc/\$PID/schedstat >$T/cpu0"
			for _ in $(seq 1 "$WALN"); do echo "$stmt"; done
			echo "\\! cut -d' ' -f1 /proc/\$PID/schedstat >$T/cpu1"
		} >"$T/backend.sql"
		psql -X -q -v ON_ERROR_STOP=1 -U bench_user -d postgres -f "$T/backend.sql" >/dev/null ||
			die "the one-session run of $1 failed"
		awk -v n="$WALN" 'NR == FNR { a = $1; next } { printf "%.1f\n", ($1 - a) / 1000 / n }' \
			"$T/cpu0" "$T/cpu1"
	}
	SPLIT=$T/split.tsv	# method round submits/s cpu-ms backend-µs
	: >"$SPLIT"
	# each method but A and F is set up by $S/setup-M.sql and taken away
	# by $S/undo-M.sql
	if [ "$PROFILE" = 4 ]; then
		METHODS="A A-min A-rj A-fj A-fb F"
		for m in A-min A-rj A-fj A-fb; do
			mv "$S/body-$m.sql" "$S/setup-$m.sql"
			cp "$S/body-A.sql" "$S/undo-$m.sql"
		done
	else
		METHODS=${ROW_METHODS:-"A A-p A-u A-c A-t A-x A-mx A-mtc A-mpu A-fj F"}
		P_SET="DROP INDEX remora.jobs_priority_idx;"
		P_UNDO="CREATE INDEX jobs_priority_idx ON remora.jobs (priority, job_id)
	WHERE deleted_at IS NULL;"
		U_SET="ALTER TABLE remora.jobs DROP CONSTRAINT jobs_owner_idempotency_key_key;
CREATE UNIQUE INDEX jobs_owner_idempotency_key_key ON remora.jobs (owner, idempotency_key)
	WHERE idempotency_key IS NOT NULL;"
		U_UNDO="DROP INDEX remora.jobs_owner_idempotency_key_key;
ALTER TABLE remora.jobs ADD UNIQUE (owner, idempotency_key);"
		C_SET="ALTER TABLE remora.jobs DROP CONSTRAINT jobs_state_check,
	DROP CONSTRAINT jobs_max_attempts_check;"
		C_UNDO="ALTER TABLE remora.jobs ADD CONSTRAINT jobs_state_check
	CHECK (state IN ('queued', 'running', 'retrying', 'succeeded', 'failed',
					 'cancelled', 'outcome_unknown')),
	ADD CONSTRAINT jobs_max_attempts_check CHECK (max_attempts >= 1);"
		T_SET="ALTER TABLE remora.jobs DISABLE TRIGGER jobs_event_insert;"
		T_UNDO="ALTER TABLE remora.jobs ENABLE TRIGGER jobs_event_insert;"
		echo "$P_SET" >"$S/setup-A-p.sql"; echo "$P_UNDO" >"$S/undo-A-p.sql"
		echo "$U_SET" >"$S/setup-A-u.sql"; echo "$U_UNDO" >"$S/undo-A-u.sql"
		echo "$C_SET" >"$S/setup-A-c.sql"; echo "$C_UNDO" >"$S/undo-A-c.sql"
		echo "$T_SET" >"$S/setup-A-t.sql"; echo "$T_UNDO" >"$S/undo-A-t.sql"
		printf '%s\n' "$P_SET" "$U_SET" "$C_SET" "$T_SET" >"$S/setup-A-x.sql"
		printf '%s\n' "$P_UNDO" "$U_UNDO" "$C_UNDO" "$T_UNDO" >"$S/undo-A-x.sql"
		# the bounds: --split's A-min without the four, and its A-fj
		cat "$S/setup-A-x.sql" "$S/body-A-min.sql" >"$S/setup-A-mx.sql"
		cat "$S/undo-A-x.sql" "$S/body-A.sql" >"$S/undo-A-mx.sql"
		# and A-mx with the indexes kept (A-mtc: its NOTIFY on
		# remora_events sent by the body, not by the trigger) or the
		# CHECKs and the trigger kept (A-mpu)
		printf '%s\n' "$C_SET" "$T_SET" >"$S/setup-A-mtc.sql"
		sed 's/^RETURN new_id;$/PERFORM pg_notify('"'"'remora_events'"'"', new_id::text);\n&/' \
			"$S/body-A-min.sql" >>"$S/setup-A-mtc.sql"
		printf '%s\n' "$C_UNDO" "$T_UNDO" | cat - "$S/body-A.sql" >"$S/undo-A-mtc.sql"
		printf '%s\n' "$P_SET" "$U_SET" | cat - "$S/body-A-min.sql" >"$S/setup-A-mpu.sql"
		printf '%s\n' "$P_UNDO" "$U_UNDO" | cat - "$S/body-A.sql" >"$S/undo-A-mpu.sql"
		mv "$S/body-A-fj.sql" "$S/setup-A-fj.sql"
		cp "$S/body-A.sql" "$S/undo-A-fj.sql"
	fi
	for r in $(seq 1 "$RUNS"); do
		for m in $METHODS; do
			script=A
			[ "$m" != F ] || script=F
			if [ -f "$S/setup-$m.sql" ]; then
				psql -X -q -v ON_ERROR_STOP=1 -U postgres -d postgres -f "$S/setup-$m.sql" ||
					die "could not set up $m"
			fi
			q "CHECKPOINT" >/dev/null
			b0=$(busy)
			out=$(pgbench -n -U bench_user -c "$CLIENTS" -j "$CLIENTS" -T "$WAIT_SECS" \
				-f "$S/$script.sql" postgres 2>&1) || { echo "$out" >&2; die "pgbench $m failed"; }
			b1=$(busy)
			n=$(grep -oP 'number of transactions actually processed: \K[0-9]+' <<<"$out")
			v=$(grep -oP 'tps = \K[0-9.]+(?= \(without)' <<<"$out")
			cpu=$(machine_ms "$b0" "$b1" "$n")
			us=$(backend_us "$script")
			if [ -f "$S/undo-$m.sql" ]; then
				psql -X -q -v ON_ERROR_STOP=1 -U postgres -d postgres -f "$S/undo-$m.sql" ||
					die "could not take $m away"
			fi
			printf '%s\t%s\t%s\t%s\t%s\n' "$m" "$r" "$v" "$cpu" "$us" >>"$SPLIT"
			log "round $r: $m $v/s, $cpu ms of the machine's CPU a submit, $us µs of one backend's"
		done
	done
	echo "| method | submits /s, $CLIENTS sessions (median of $RUNS) | per run | ÷ F | machine CPU ms a submit | ÷ F | one backend's CPU µs a submit | ÷ F |"
	echo "|---|---:|---|---:|---:|---:|---:|---:|"
	col() { awk -F'\t' -v m="$1" -v c="$2" '$1 == m { print $c }' "$SPLIT" | median; }
	F=$(col F 3); FC=$(col F 4); FU=$(col F 5)
	for m in $METHODS; do
		v=$(col "$m" 3); c=$(col "$m" 4); u=$(col "$m" 5)
		runs=$(awk -F'\t' -v m="$m" '$1 == m { printf "%.0f ", $3 }' "$SPLIT")
		echo "| $m | $(awk -v v="$v" 'BEGIN { printf "%.0f", v }') | ${runs% } | $(ratio "$v" "$F") | $c | $(ratio "$c" "$FC") | $u | $(ratio "$u" "$FU") |"
	done
	exit 0
fi

RESULTS=$T/results.tsv	# method round submits/s
: >"$RESULTS"
for r in $(seq 1 "$RUNS"); do
	for m in A F D bulkA bulkF; do
		v=$(measure "$m")
		printf '%s\t%s\t%s\n' "$m" "$r" "$v" >>"$RESULTS"
		log "round $r: $m $v/s"
	done
done

# wal_bytes METHOD: WAL bytes a submit over WALN of them
wal_bytes() {
	local before after
	before=$(q "SELECT pg_current_wal_insert_lsn()")
	pgbench_rate "$S/$1.sql" 1 "$WALN" bench_user >/dev/null
	after=$(q "SELECT pg_current_wal_insert_lsn()")
	q "SELECT round(pg_wal_lsn_diff('$after', '$before') / $WALN)"
}
WA=$(wal_bytes A); WF=$(wal_bytes F)
log "WAL a submit: A $WA, F $WF bytes"

med() { awk -F'\t' -v m="$1" '$1 == m { print $3 }' "$RESULTS" | median; }
f0() { awk -v v="$1" 'BEGIN { printf "%.0f", v }'; }
A=$(med A); F=$(med F); D=$(med D); BA=$(med bulkA); BF=$(med bulkF)
{
	echo "$SECTION"
	echo
	echo "\`bench/submit.sh\` ($(date -u +%Y-%m-%d), $(nproc) cores, PostgreSQL $PG_VERSION with \`fsync = on\` and"
	echo "\`synchronous_commit = on\`, graphile-worker $GW_VERSION, Remora at $REV): medians of $RUNS interleaved rounds."
	echo "A: \`remora_submit(url)\` by a plain member of \`remora_user\`; F: the floor, a plpgsql function"
	echo "that inserts a job row and a queue row and notifies; D: graphile-worker's \`add_job\`."
	echo
	echo "| submits | A: Remora /s | F: floor /s | D: graphile-worker /s | A ÷ F | A ÷ D |"
	echo "|---|---:|---:|---:|---:|---:|"
	echo "| one a transaction, $CLIENTS sessions × $TXS | $(f0 "$A") | $(f0 "$F") | $(f0 "$D") | $(ratio "$A" "$F") | $(ratio "$A" "$D") |"
	echo "| one statement of $BULK, 1 session | $(f0 "$BA") | $(f0 "$BF") | | $(ratio "$BA" "$BF") | |"
	echo "| WAL bytes a submit (one a transaction, 1 session × $WALN) | $WA | $WF | | $(ratio "$WA" "$WF") | |"
} >"$T/report.md"
cat "$T/report.md"
if [ "$WRITE" = 1 ]; then
	put_section "$T/report.md"
	log "doc/benchmarks.md updated"
fi
