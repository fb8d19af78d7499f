#!/usr/bin/env bash
#
# SQL-surface fuzzing: sqlsmith (Debian) sends random queries, built from
# the catalog (Remora's functions and views among everything else), to a
# cluster with the extension and jobs in every state, once as a member of
# remora_user and once as a member of remora_admin, for SQLSMITH_SECONDS
# each (default 30).  Then: the server is up and never crashed (no
# "terminated by signal", PANIC or TRAP in its log), and no error of
# SQLSTATE XX000 (internal_error) came from Remora: raised in one of its C
# files (LOCATION, with log_error_verbosity = verbose), in one of its SQL
# functions (CONTEXT), or in a statement that called one.  Bad input to
# Remora's functions must end in a proper SQLSTATE, never an internal
# error.  SQLSMITH_SEED fixes the seeds (the default is random; the seeds
# used are printed, to replay a finding).  A second pass calls Remora's
# own functions with random arguments (SQLSMITH_CALLS per role), which
# sqlsmith reaches only now and then.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin sqlsmith

SECS=${SQLSMITH_SECONDS:-30}
SEED=${SQLSMITH_SEED:-$RANDOM}
command -v sqlsmith >/dev/null || { not_ok "sqlsmith is installed"; exit 1; }

# No workers: nothing is downloaded, the jobs stay as they are set up.
# Every error is logged with its SQLSTATE (%e) and where it was raised.
e2e_cluster <<'CONF'
remora.max_workers = 0
remora.default_bucket = 'target'
log_error_verbosity = verbose
log_line_prefix = '%m [%p] %e %b '
track_functions = 'all'
CONF

psql -X -q -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE EXTENSION remora;
CREATE ROLE smith_user LOGIN IN ROLE remora_user;
CREATE ROLE smith_admin LOGIN IN ROLE remora_admin;
-- a random query must not hold the run up (nor a lock another waits on)
ALTER ROLE smith_user SET statement_timeout = '2s';
ALTER ROLE smith_admin SET statement_timeout = '2s';
ALTER ROLE smith_user SET lock_timeout = '1s';
ALTER ROLE smith_admin SET lock_timeout = '1s';
SELECT remora.grant_target('smith_user', 'target', '*');
SELECT remora.grant_target('smith_user', 'stable', '*');
-- jobs of the user in every state: queued, running, retrying, succeeded
-- (with a result and an export of it), failed, cancelled, deleted
-- jobs of the user in every state: running, retrying, succeeded (with a
-- result, and an export of it), failed, cancelled, deleted, queued
SET ROLE smith_user;
SELECT remora_submit('https://example.com/running.bin', options => '{"label": "r"}');
SELECT remora_submit('https://example.com/retrying.bin', options => '{"max_attempts": 3}');
SELECT remora_submit('https://example.com/done.bin', idempotency_key => 'k-done');
SELECT remora_submit('https://example.com/failed.bin');
SELECT remora_submit('https://example.com/cancelled.bin');
SELECT remora_submit('https://example.com/deleted.bin');
SELECT remora_cancel(5);
SELECT remora_delete(6, hard => true);
RESET ROLE;
UPDATE remora.queue SET not_before = now() - interval '1 minute';
SELECT count(*) FROM remora.claim('11111111-1111-1111-1111-111111111111', 10);
DO $$
DECLARE
	a	record;
BEGIN
	FOR a IN SELECT j.job_id, j.current_attempt AS att, j.fencing_token AS tok, j.prefix
			   FROM remora.jobs j WHERE j.state = 'running' ORDER BY j.job_id LOOP
		CASE a.job_id
		WHEN 2 THEN PERFORM remora.fail(a.att, a.tok, '{"class": "http", "http_status": 503}', true);
		WHEN 3 THEN
			PERFORM remora.checkpoint(a.att, a.tok, jsonb_build_object('members', jsonb_build_array(
				jsonb_build_object('path', 'done.bin', 'bucket', 'target',
					'key', remora._staging_prefix(a.prefix, a.job_id, a.att) || 'done.bin',
					'size', 3, 'sha256', repeat('cd', 32), 'etag', '"e"'))));
			PERFORM remora.commit(a.att, a.tok, jsonb_build_object(
				'key', remora._staging_prefix(a.prefix, a.job_id, a.att) || 'manifest.json',
				'etag', '"m"', 'sha256', repeat('ab', 32), 'members', 1, 'bytes', 3));
		WHEN 4 THEN PERFORM remora.fail(a.att, a.tok, '{"class": "http", "http_status": 404}', false);
		ELSE NULL;
		END CASE;
	END LOOP;
END
$$;
SET ROLE smith_user;
SELECT remora_submit('https://example.com/queued.bin');
SELECT remora_export(3, 'stable', 'models/done');
RESET ROLE;
SQL
check_eq "the jobs are in every state" \
	"$(q "SELECT string_agg(DISTINCT state, ',' ORDER BY state) FROM remora.jobs")" \
	"cancelled,failed,queued,retrying,running,succeeded"

# ours LINE: an error's LOCATION line ("LOCATION:  func, file.c:N") names a
# function Remora's sources define in that file (file names alone are not
# enough: guc.c, launcher.c, json.c... are PostgreSQL's too)
ours() {
	local fn file
	fn=$(sed -n 's/.*LOCATION: *\([A-Za-z_0-9]*\), \([A-Za-z_0-9]*\.c\):.*/\1/p' <<<"$1")
	file=$(sed -n 's/.*LOCATION: *\([A-Za-z_0-9]*\), \([A-Za-z_0-9]*\.c\):.*/\2/p' <<<"$1")
	[ -n "$fn" ] && find src -name "$file" -exec grep -qE "^$fn\(" {} \; -print | grep -q .
}

# xx000_records LOG: each XX000 error of LOG on one line, its parts
# joined by a unit separator: the ERROR line, the LOCATION line, the
# CONTEXT and the STATEMENT (their continuation lines, which begin with a
# tab, joined on)
xx000_records() {
	awk '
	function flush() {
		if (err != "")
			printf "%s\037%s\037%s\037%s\n", err, loc, ctx, stmt
		err = loc = ctx = stmt = part = ""
	}
	/^\t/ {
		if (part == "ctx") ctx = ctx " " $0
		else if (part == "stmt") stmt = stmt " " $0
		next
	}
	/^[^[]*\[[0-9]+\] XX000 .*(ERROR|FATAL): / { flush(); err = $0; part = "err"; next }
	/^[^[]*\[[0-9]+\] XX000 / && err != "" {
		if ($0 ~ /LOCATION: /) { loc = $0; part = "loc" }
		else if ($0 ~ /CONTEXT: /) { ctx = $0; part = "ctx" }
		else if ($0 ~ /STATEMENT: /) { stmt = $0; part = "stmt" }
		else part = ""
		next
	}
	{ flush() }
	END { flush() }' "$1"
}

# PostgreSQL's parser and planner: the source files (src/backend/parser/,
# src/backend/optimizer/) whose errors a statement meets before anything
# it calls runs
PG_FRONT='(parse_[a-z_]+|analyze|parser|gram|scan|scansup|planner|planmain|planagg|createplan|setrefs|subselect|initsplan|analyzejoins|prepjointree|prepqual|preptlist|prepunion|prepagg|clauses|pathnode|allpaths|costsize|indxpath|joinpath|joinrels|equivclass|pathkeys|tidpath|plancat|relnode|restrictinfo|tlist|var|appendinfo|inherit|paramassign|placeholder|orclauses)\.[cly]'

# remora_errors LOG: the XX000 errors of LOG that come from Remora, their
# ERROR and LOCATION lines: raised in its C code, inside one of its SQL
# functions or triggers (CONTEXT), or by a statement that called one of
# its functions.  Not one that PostgreSQL raised in a function the
# statement called itself, or in a statement that only named Remora's
# tables: sqlsmith calls pg_catalog.intervaltypmodout(13), say, in an
# UPDATE of remora.checkpoints, and that XX000 is PostgreSQL's (raised in
# intervaltypmodleastfield, which the statement names not, when a call of
# Remora's stands beside it).  Nor one
# that PostgreSQL's parser or planner raised outside Remora's functions
# (no CONTEXT names one): the statement failed before it called any,
# however many it names (coerce_type's "failed to find conversion
# function from unknown to text", for a value sqlsmith built with
# pg_catalog.unknownin beside a call of remora.reconcile()).
remora_errors() {
	local err loc ctx stmt fn
	xx000_records "$1" | while IFS=$'\037' read -r err loc ctx stmt; do
		fn=$(sed -n 's/.*LOCATION: *\([A-Za-z_0-9]*\), .*/\1/p' <<<"$loc")
		if { [ -n "$loc" ] && ours "$loc"; } ||
			grep -qE 'CONTEXT: .*function "?remora' <<<"$ctx" ||
			{ grep -qE 'remora(_|\.)[A-Za-z_0-9]+ *\(' <<<"$stmt" &&
				! grep -qE "LOCATION: *[A-Za-z_0-9]+, $PG_FRONT:" <<<"$loc" &&
				! { grep -q 'invalid INTERVAL typmod' <<<"$err" &&
					grep -qE 'typmodout *\(' <<<"$stmt"; } &&
				! { [ -n "$fn" ] && grep -qE "(^|[^A-Za-z_0-9])$fn *\(" <<<"$stmt"; }; }; then
			printf '%s %s\n' "$err" "${loc#*LOCATION: }"
		fi
	done | head -n 10
}

# judge_log LOCATION CONTEXT CALL: an XX000 error as the server logs
# it, raised at LOCATION, with CONTEXT (none if empty), in sqlsmith's
# UPDATE of remora.checkpoints that returns CALL; then another error
judge_log() {
	local p='2026-12-04 21:32:02.353 UTC [7302] XX000 client backend'
	echo "$p ERROR:  XX000: invalid INTERVAL typmod: 0xd"
	echo "$p LOCATION:  $1"
	[ -z "$2" ] || echo "$p CONTEXT:  $2"
	echo "$p STATEMENT:  update remora.checkpoints set "
	printf '\t  state = remora.checkpoints.state\n'
	printf '\treturning %s as c4\n' "$3"
	echo '2026-12-04 21:32:02.357 UTC [7302] 42883 client backend ERROR:  42883: operator does not exist'
}
# judged LOCATION CONTEXT CALL: what remora_errors makes of that error
judged() { judge_log "$@" >"$T/judge.log"; remora_errors "$T/judge.log"; }
PG_RAISED='intervaltypmodout, timestamp.c:1165'
check_eq "the judge: an XX000 that PostgreSQL raised in a function a statement on Remora's tables called is not Remora's" \
	"$(judged "$PG_RAISED" '' 'pg_catalog.intervaltypmodout(cast(13 as int4))')" ""
check_eq "the judge: nor when the statement also called one of Remora's" \
	"$(judged "$PG_RAISED" '' 'remora_result(1), pg_catalog.intervaltypmodout(13)')" ""
check_eq "the judge: nor when PostgreSQL raised it in a helper of the typmod output function the statement called" \
	"$(judged 'intervaltypmodleastfield, timestamp.c:1225' '' 'remora_result(1), pg_catalog.intervaltypmodout(76)')" ""
check "the judge: an XX000 raised in Remora's C code is Remora's" \
	grep -q 'remora_submit, submit.c' <<<"$(judged 'remora_submit, submit.c:457' '' 'pg_catalog.intervaltypmodout(13)')"
check "the judge: an XX000 raised inside one of Remora's SQL functions is Remora's" \
	grep -q 'invalid INTERVAL typmod' <<<"$(judged "$PG_RAISED" \
		'PL/pgSQL function remora._submit(oid,jsonb,jsonb,text,text) line 3 at SQL statement' \
		'pg_catalog.intervaltypmodout(13)')"
check "the judge: an XX000 that PostgreSQL raised below a call of Remora's is Remora's" \
	grep -q 'numeric_in, numeric.c' <<<"$(judged 'numeric_in, numeric.c:100' '' 'remora_result(1)')"
check_eq "the judge: nor one that PostgreSQL's parser raised in a statement that calls one of Remora's" \
	"$(judged 'coerce_type, parse_coerce.c:542' '' 'remora.reconcile(), pg_catalog.unknownin(cast(null as cstring))')" ""
check "the judge: but one the parser raised inside one of Remora's SQL functions is Remora's" \
	grep -q 'parse_coerce.c' <<<"$(judged 'coerce_type, parse_coerce.c:542' \
		'SQL function "remora_result" during inlining' 'remora_result(1)')"

server_up() { q "SELECT 1" >/dev/null; }

calls_before=0
for role in smith_user smith_admin; do
	seed=$((SEED + ${#role}))
	log_from=$(wc -l <"$LOG")
	out=$T/$role.sqlsmith
	rc=0
	timeout "$SECS" sqlsmith --target="host=$PGHOST port=$PGPORT dbname=postgres user=$role" \
		--seed="$seed" --verbose >"$out" 2>&1 || rc=$?
	# progress: one character a query
	queries=$(grep -oE '^[.a-zA-Z]+$' "$out" | tr -d '\n' | wc -c)
	echo "# $role: sqlsmith --seed=$seed ran $SECS s, about $queries queries (status $rc)"
	check "sqlsmith as $role ran until its time was up" test "$rc" -eq 124
	check "the server is up after sqlsmith as $role" server_up
	tail -n +"$((log_from + 1))" "$LOG" >"$T/$role.log"
	crash=$(grep -E 'terminated by signal|PANIC|TRAP:|was terminated|server process .* exited' "$T/$role.log" | head -n 5 || true)
	check_eq "no server crash while sqlsmith ran as $role" "$crash" ""
	# every line of an XX000 error carries the SQLSTATE in its prefix
	internal=$(remora_errors "$T/$role.log")
	check_eq "no internal error (XX000) from Remora while sqlsmith ran as $role" "$internal" ""
	calls=$(q "SELECT coalesce(sum(calls), 0) FROM pg_stat_user_functions
				WHERE funcname LIKE 'remora%' OR schemaname = 'remora'")
	echo "# $role: $((calls - calls_before)) calls of Remora's functions"
	calls_before=$calls
done
check "sqlsmith's queries called Remora's functions" test "$calls_before" -gt 0

# sqlsmith picks among thousands of functions and seldom calls one of
# Remora's with bad arguments: a second pass calls Remora's own functions
# (every one the role may execute, in schema remora or named remora_*) with
# arguments of the same kind (NULLs, extremes, existing and unknown ids,
# odd text, malformed and deeply nested JSON), SQLSMITH_CALLS times per
# role, in one session.  Each call must end in a result or a proper
# SQLSTATE, never XX000 nor a crash.
for role in smith_user smith_admin; do
	res=$(psql -X -q -A -t -v ON_ERROR_STOP=1 -U "$role" -d postgres 2>&1 <<SQL
SET statement_timeout = 0;
SELECT setseed(($SEED % 1000) / 1000.0);
CREATE TEMP TABLE fuzz (fn text, call text, st text);
DO \$fuzz\$
DECLARE
	f		record;
	call	text;
	st		text;
	ids		text[] := ARRAY['NULL', '0', '-1', '1', '2', '3', '4', '5', '6', '7', '8', '99',
							'9223372036854775807', '-9223372036854775808'];
	ints	text[] := ARRAY['NULL', '0', '-1', '1', '1000', '1001', '2147483647', '-2147483648'];
	texts	text[] := ARRAY['NULL', \$\$''\$\$, \$\$'*'\$\$, \$\$'target'\$\$, \$\$'stable'\$\$,
							\$\$'models/*'\$\$, \$\$'https://example.com/x.bin'\$\$,
							\$\$'http://127.0.0.1/'\$\$, \$\$'https://u:p@example.com/'\$\$,
							\$\$'s3://target/a/'\$\$, \$\$'hf://org/repo'\$\$, \$\$'hf://org/repo@main'\$\$,
							\$\$'verify'\$\$, \$\$'retry'\$\$, \$\$'fail'\$\$, \$\$'../..'\$\$, \$\$'%'\$\$,
							\$\$'done.bin'\$\$, \$\$'smith_user'\$\$, \$\$repeat('x', 100000)\$\$,
							\$\$('a' || chr(1))\$\$, \$\$'é'\$\$, \$\$'remora/3/'\$\$, \$\$'/'\$\$];
	jsons	text[] := ARRAY['NULL', \$\$'{}'\$\$, \$\$'[]'\$\$, \$\$'null'\$\$, \$\$'1'\$\$, \$\$'"s"'\$\$,
							\$\$'{"max_attempts": -1}'\$\$, \$\$'{"max_attempts": 1e100}'\$\$,
							\$\$'{"priority": "x"}'\$\$, \$\$'{"include": [1]}'\$\$, \$\$'{"exclude": "*"}'\$\$,
							\$\$'{"connections": 65}'\$\$, \$\$'{"endpoint": "nope"}'\$\$,
							\$\$'{"expected_sha256": "zz"}'\$\$, \$\$'{"if_exists": "maybe"}'\$\$,
							\$\$'{"members": [{}]}'\$\$, \$\$'{"members": [{"path": "a", "size": -1}]}'\$\$,
							\$\$'{"state": []}'\$\$, \$\$'{"bytes_done": 1.5}'\$\$,
							\$\$'{"references": [{"path": 1}]}'\$\$, \$\$'{"references": {}}'\$\$,
							\$\$'{"key": 1, "members": "x"}'\$\$, \$\$'{"sha256": "zz", "references": []}'\$\$,
							\$\$'{"class": "outcome_unknown"}'\$\$, \$\$'{"retry_after": -5}'\$\$,
							\$\$repeat('[', 5000) || repeat(']', 5000)\$\$,
							\$\$(SELECT jsonb_object_agg(i::text, i) FROM generate_series(1, 10000) i)::text\$\$];
	uuids	text[] := ARRAY['NULL', \$\$'00000000-0000-0000-0000-000000000000'\$\$,
							'gen_random_uuid()::text',
							'(SELECT attempt_id::text FROM remora.attempts ORDER BY random() LIMIT 1)'];
	bools	text[] := ARRAY['NULL', 'true', 'false'];
	ivals	text[] := ARRAY['NULL', \$\$'0'\$\$, \$\$'-1 day'\$\$, \$\$'1 second'\$\$,
							\$\$'1000 years'\$\$, \$\$'15 minutes'\$\$];
BEGIN
	FOR i IN 1..${SQLSMITH_CALLS:-3000} LOOP
		SELECT p.oid::regproc::text AS name, p.proargtypes::regtype[]::text[] AS types INTO f
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		 WHERE (n.nspname = 'remora' OR p.proname LIKE 'remora%') AND p.prokind = 'f'
		   AND p.prorettype <> 'trigger'::regtype
		   AND has_function_privilege(p.oid, 'EXECUTE')
		 ORDER BY random() LIMIT 1;
		SELECT format('SELECT %s(%s)', f.name, coalesce(string_agg(
				CASE t WHEN 'bigint' THEN ids[1 + floor(random() * cardinality(ids))] || '::bigint'
					   WHEN 'integer' THEN ints[1 + floor(random() * cardinality(ints))] || '::integer'
					   WHEN 'text' THEN texts[1 + floor(random() * cardinality(texts))] || '::text'
					   WHEN 'name' THEN texts[1 + floor(random() * cardinality(texts))] || '::name'
					   WHEN 'jsonb' THEN '(' || jsons[1 + floor(random() * cardinality(jsons))] || ')::jsonb'
					   WHEN 'uuid' THEN '(' || uuids[1 + floor(random() * cardinality(uuids))] || ')::uuid'
					   WHEN 'boolean' THEN bools[1 + floor(random() * cardinality(bools))] || '::boolean'
					   WHEN 'interval' THEN ivals[1 + floor(random() * cardinality(ivals))] || '::interval'
					   ELSE 'NULL::' || t END, ', ' ORDER BY o), ''))
		  INTO call FROM unnest(f.types) WITH ORDINALITY AS a(t, o);
		st := '00000';
		BEGIN
			EXECUTE call;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
		END;
		INSERT INTO fuzz VALUES (f.name, left(call, 300), st);
	END LOOP;
END
\$fuzz\$;
SELECT 'calls ' || count(*) || ', functions ' || count(DISTINCT fn) || ', outcomes '
	   || (SELECT string_agg(st || ' ' || n, ', ' ORDER BY n DESC)
			 FROM (SELECT st, count(*) n FROM fuzz GROUP BY st) s) FROM fuzz;
SELECT 'INTERNAL ' || call FROM fuzz WHERE st = 'XX000' LIMIT 10;
SQL
	) || true
	echo "# $role, Remora's functions with random arguments: $(grep -E "^calls |ERROR" <<<"$res" | head -n 3)"
	check "Remora's functions called by $role with random arguments: every call ended" grep -q '^calls ' <<<"$res"
	internal=$(grep -E '^INTERNAL ' <<<"$res" || true)
	check_eq "no internal error (XX000) from Remora's functions called by $role with random arguments" "$internal" ""
	check "the server is up after the random calls as $role" server_up
done
crash=$(grep -E 'terminated by signal|PANIC|TRAP:|was terminated|server process .* exited' "$LOG" | head -n 5 || true)
check_eq "no server crash in the whole run" "$crash" ""

# the scan itself: it reads the SQLSTATE and LOCATION of the log's lines,
# and tells Remora's functions from PostgreSQL's
check "the server log carries SQLSTATEs and locations" grep -qE '^[^[]*\[[0-9]+\] 42501 .*LOCATION: ' "$LOG"
check "the scan knows Remora's C functions" ours "x LOCATION:  remora_submit, submit.c:1"
theirs() { ! ours "$1"; }
check "the scan knows PostgreSQL's from Remora's (guc.c)" theirs "x LOCATION:  set_config_option, guc.c:1"

e2e_finish
