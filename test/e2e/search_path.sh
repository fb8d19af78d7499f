#!/usr/bin/env bash
#
# Names planted in a schema a user can write to never run in a session
# Remora opens over libpq (CVE-2018-1058's family).  A remora_user with
# CREATE on public (clusters upgraded from PostgreSQL 14 or earlier grant
# it to everyone) plants there what a search_path hijack would reach:
# to_json and to_jsonb overloads for the row types of the views the API
# reads (an exact-type match PostgreSQL would prefer to pg_catalog's
# anyelement one), json_agg and jsonb_agg aggregates over json and jsonb,
# and operators =, <, > and || on text, bigint, uuid and jsonb.  Each one
# writes down that it ran and, as whoever calls it, tries to give its
# author a target grant.  Then an administrator and a user drive the whole
# HTTP API (sign-in, job list in every order and filter, one job, submit,
# result, presigned URL, cancel, delete, events, exports, stats, workers,
# grants) and remora-worker (the only worker: remora.max_workers = 0) runs
# the jobs and the export.  Nothing planted ever ran, no grant appeared,
# and the answers are the right ones.
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/http.sh"
e2e_begin search_path
# the worker's log is kept as /tmp/search_path-w.log
e2e_at_exit 'cp "$T/w.log" /tmp/search_path$E2E_TAG-w.log'
stack_up
curl() { command curl --max-time 30 "$@"; }

q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
http_up </dev/null
q "CREATE ROLE rw LOGIN PASSWORD 'rw-pw'; GRANT remora_worker TO rw;
   CREATE ROLE mallory LOGIN PASSWORD 'mallory-pw'; GRANT remora_user TO mallory;
   GRANT CREATE ON SCHEMA public TO mallory" >/dev/null

# --- what mallory plants in public -------------------------------------------
PGPASSWORD=mallory-pw psql -X -q -v ON_ERROR_STOP=1 -d postgres -U mallory >"$T/plant.log" 2>&1 <<'SQL' ||
CREATE TABLE public.hijack_log (who name, what text,
	at timestamptz DEFAULT pg_catalog.now());
GRANT INSERT, SELECT ON public.hijack_log TO PUBLIC;
-- what every planted object does: write down who ran it, and try to
-- give mallory a target grant with that role's rights
CREATE FUNCTION public.hijacked(what text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO public.hijack_log (who, what)
		VALUES (pg_catalog.current_user(), what);
	BEGIN
		PERFORM remora.grant_target('mallory', 'target', 'stolen/*');
	EXCEPTION WHEN OTHERS THEN
		NULL;
	END;
END $$;
DO $$
DECLARE
	t text;
	o record;
BEGIN
	FOREACH t IN ARRAY ARRAY['remora_jobs', 'remora_attempts',
		'remora_progress', 'remora_exports', 'remora_export_attempts',
		'remora_stats', 'remora_checkpoint_stats', 'remora_workers',
		'remora_target_grants', 'remora_source_grants'] LOOP
		EXECUTE pg_catalog.format($f$
			CREATE FUNCTION public.to_json(r public.%1$I) RETURNS json
			LANGUAGE plpgsql AS $b$
			BEGIN
				PERFORM public.hijacked('to_json(%1$s)');
				RETURN pg_catalog.to_json(r);
			END $b$;
			CREATE FUNCTION public.to_jsonb(r public.%1$I) RETURNS jsonb
			LANGUAGE plpgsql AS $b$
			BEGIN
				PERFORM public.hijacked('to_jsonb(%1$s)');
				RETURN pg_catalog.to_jsonb(r);
			END $b$;$f$, t);
	END LOOP;
	FOR o IN SELECT * FROM (VALUES
		('=', 'text', 'texteq', 'boolean'), ('=', 'bigint', 'int8eq', 'boolean'),
		('=', 'uuid', 'uuid_eq', 'boolean'), ('=', 'jsonb', 'jsonb_eq', 'boolean'),
		('<', 'bigint', 'int8lt', 'boolean'), ('>', 'bigint', 'int8gt', 'boolean'),
		('>', 'integer', 'int4gt', 'boolean'),
		('||', 'text', 'textcat', 'text'), ('||', 'jsonb', 'jsonb_concat', 'jsonb')
	) v(op, typ, fn, ret) LOOP
		EXECUTE pg_catalog.format($f$
			CREATE FUNCTION public.%1$I(a %2$s, b %2$s) RETURNS %3$s
			LANGUAGE plpgsql AS $b$
			BEGIN
				PERFORM public.hijacked('%4$s(%2$s, %2$s)');
				RETURN pg_catalog.%5$I(a, b);
			END $b$;
			CREATE OPERATOR public.%4$s (LEFTARG = %2$s, RIGHTARG = %2$s,
				FUNCTION = public.%1$I);$f$,
			'hijack_' || o.fn, o.typ, o.ret, o.op, o.fn);
	END LOOP;
END $$;
CREATE FUNCTION public.hijack_json_agg(s json, v json) RETURNS json
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.hijacked('json_agg(json)');
	RETURN s;
END $$;
CREATE AGGREGATE public.json_agg(json) (SFUNC = public.hijack_json_agg,
	STYPE = json, INITCOND = '[]');
CREATE FUNCTION public.hijack_jsonb_agg(s jsonb, v jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM public.hijacked('jsonb_agg(jsonb)');
	RETURN s;
END $$;
CREATE AGGREGATE public.jsonb_agg(jsonb) (SFUNC = public.hijack_jsonb_agg,
	STYPE = jsonb, INITCOND = '[]');
SQL
	{ cat "$T/plant.log"; not_ok "mallory plants her objects in public"; exit 1; }
ok "mallory, with CREATE on public, plants to_json/to_jsonb overloads, json_agg/jsonb_agg and operators there"
# the planted objects work: called as a hijack would call them, they write
# down the call (then the log is emptied again)
PGPASSWORD=alice-pw psql -X -A -t -q -d postgres -U alice -c "SET search_path = pg_catalog, public;
	SELECT to_json(NULL::public.remora_jobs)" >/dev/null
check_eq "  a planted overload does run when public is searched after pg_catalog" \
	"$(q "SELECT string_agg(what, ',') FROM public.hijack_log")" "to_json(remora_jobs)"
PGPASSWORD=alice-pw psql -X -A -t -q -d postgres -U alice -c "SET search_path = public, pg_catalog;
	SELECT 'a'::text = 'a'::text" >/dev/null
check_eq "  and a planted operator when public comes first" \
	"$(q "SELECT count(*) FROM public.hijack_log")" 2
q "TRUNCATE public.hijack_log" >/dev/null

# --- the HTTP API, as a user and as an administrator -------------------------
B=$T/body
HDR=$T/headers
call() {
	local m=$1 p=$2
	shift 2
	curl -s -o "$B" -D "$HDR" -w '%{http_code}' -X "$m" "$@" "$H$p"
}
field() { jq -r "$1" "$B"; }
as() { local who=$1; shift; call "$@" -u "$who:$who-pw"; }

make_file sp-a.bin 300000
make_file sp-b.bin 200000
SHA_A=$(sha256sum "$WWW/sp-a.bin" | cut -d' ' -f1)

check_eq "sign-in with a JSON body (carol, an admin)" \
	"$(call POST /api/session -H 'Content-Type: application/json' \
		-d '{"user":"carol","password":"carol-pw"}' -c "$T/cookies")" 200
check_eq "  says she is an admin" "$(field .admin)" true
CSRF=$(field .csrf)
check_eq "POST /api/jobs as alice: 201" \
	"$(as alice POST /api/jobs -H 'Content-Type: application/json' \
		-d "{\"source\":\"$SRC/sp-a.bin\",\"options\":{\"label\":\"sp-a\",\"priority\":5}}")" 201
JA=$(field .job_id)
check_eq "a second one with options null: 201" \
	"$(as alice POST /api/jobs -H 'Content-Type: application/json' \
		-d "{\"source\":\"$SRC/sp-b.bin\",\"options\":null,\"idempotency_key\":\"spb\"}")" 201
JB=$(field .job_id)
check_eq "a third, as carol through her session: 201" \
	"$(call POST /api/jobs -b "$T/cookies" -H "X-CSRF-Token: $CSRF" \
		-H 'Content-Type: application/json' -d "{\"source\":\"$SRC/sp-b.bin\"}")" 201
JC=$(field .job_id)

# remora-worker, the only worker, runs them
start_remora_worker w --label sp "host=$T/pg port=$PG_PORT dbname=postgres user=rw password=rw-pw"
job_is() {	# job_is WHO JOB STATE: seen through the API
	[ "$(as "$1" GET "/api/jobs/$2")" = 200 ] && [ "$(field .state)" = "$3" ]
}
check "remora-worker finishes alice's first job (GET /api/jobs/$JA)" wait_for 60 job_is alice "$JA" succeeded
check "  and her second" wait_for 60 job_is alice "$JB" succeeded
check "  and carol's (seen by carol)" wait_for 60 job_is carol "$JC" succeeded
as alice GET "/api/jobs/$JA" >/dev/null
check_eq "GET /api/jobs/$JA: its label, attempts and size" \
	"$(jq -r '[.label, (.attempts | length), .attempts[0].state, .bytes_total] | @tsv' "$B")" \
	"$(printf 'sp-a\t1\tsucceeded\t300000')"

check_eq "GET /api/jobs as alice: 200" "$(as alice GET '/api/jobs?limit=10')" 200
check_eq "  her two jobs, newest first" "$(jq -c '[.jobs[].job_id]' "$B")" "[$JB,$JA]"
check_eq "  with state and q filters" \
	"$(as alice GET '/api/jobs?state=succeeded,failed&q=sp-a')/$(jq -c '[.jobs[].job_id]' "$B")" "200/[$JA]"
check_eq "  q over the source" "$(as alice GET "/api/jobs?q=SP-B.bin")/$(jq -c '[.jobs[].job_id]' "$B")" "200/[$JB]"
check_eq "  keyset paging: limit 1, then after" \
	"$(as alice GET '/api/jobs?limit=1')/$(jq -c '[.jobs[].job_id]' "$B")/$(as alice GET "/api/jobs?limit=1&after=$(field .next)")/$(jq -c '[.jobs[].job_id]' "$B")" \
	"200/[$JB]/200/[$JA]"
check_eq "  oldest first" "$(as alice GET '/api/jobs?dir=asc')/$(jq -c '[.jobs[].job_id]' "$B")" "200/[$JA,$JB]"
check_eq "  by priority, both ways, and paged" \
	"$(as alice GET '/api/jobs?sort=priority&dir=desc')/$(jq -c '[.jobs[].job_id]' "$B")/$(as alice GET '/api/jobs?sort=priority&dir=asc&limit=1')/$(jq -c '[.jobs[].job_id]' "$B")/$(as alice GET "/api/jobs?sort=priority&dir=asc&limit=1&after=$(field .next)")/$(jq -c '[.jobs[].job_id]' "$B")" \
	"200/[$JA,$JB]/200/[$JB]/200/[$JA]"
check_eq "GET /api/jobs as carol sees all three" \
	"$(call GET /api/jobs -b "$T/cookies")/$(jq -c '[.jobs[].job_id]' "$B")" "200/[$JC,$JB,$JA]"
check_eq "GET /api/jobs/$JA/result: the member with its SHA-256" \
	"$(as alice GET "/api/jobs/$JA/result")/$(jq -r '.members[] | .path + " " + .sha256' "$B")" \
	"200/sp-a.bin $SHA_A"
check_eq "GET /api/jobs/$JA/result/url: a URL that reads the bytes back" \
	"$(as alice GET "/api/jobs/$JA/result/url?path=sp-a.bin&ttl=120")" 200
check_eq "  (the same SHA-256)" "$(curl -s "$(field .url)" | sha256sum | cut -d' ' -f1)" "$SHA_A"
check_eq "  a ttl as an interval" "$(as alice GET "/api/jobs/$JA/result/url?path=sp-a.bin&ttl=2%20minutes")" 200
check_eq "POST /api/jobs/$JB/cancel of a finished job: its state" \
	"$(as alice POST "/api/jobs/$JB/cancel")/$(field .state)" "200/succeeded"
check_eq "DELETE /api/jobs/$JB: 204" "$(as alice DELETE "/api/jobs/$JB?hard=false")" 204
check_eq "  and it is gone from the list" "$(as alice GET /api/jobs)/$(jq -c '[.jobs[].job_id]' "$B")" "200/[$JA]"

# an export, run by remora-worker
check_eq "POST /api/jobs/$JA/export: 201" \
	"$(as alice POST "/api/jobs/$JA/export" -H 'Content-Type: application/json' \
		-d '{"bucket":"target","prefix":"spx","if_exists":"overwrite","options":{},"idempotency_key":"spx1"}')" 201
EX=$(field .export_id)
export_is() { [ "$(as alice GET "/api/exports/$1")" = 200 ] && [ "$(field .state)" = "$2" ]; }
check "the export succeeds (GET /api/exports/$EX)" wait_for 60 export_is "$EX" succeeded
check_eq "  its attempts are there" "$(jq '.attempts | length' "$B")" 1
check_eq "  the AWS CLI reads the exported member back" \
	"$(aws_s3 s3 cp s3://target/spx/sp-a.bin - 2>/dev/null | sha256sum | cut -d' ' -f1)" "$SHA_A"
check_eq "GET /api/exports?job=$JA: that export" \
	"$(as alice GET "/api/exports?job=$JA&state=succeeded")/$(jq -c '[.exports[].export_id]' "$B")" "200/[$EX]"
check_eq "POST /api/exports/$EX/resolve verify: 409 (its outcome is known)" \
	"$(as alice POST "/api/exports/$EX/resolve" -H 'Content-Type: application/json' -d '{"action":"verify"}')" 409
check_eq "POST /api/exports/$EX/cancel: its state" \
	"$(as alice POST "/api/exports/$EX/cancel")/$(field .state)" "200/succeeded"

# events, as a user (Basic) and as the admin (session)
curl -s -N --max-time 4 -u alice:alice-pw "$H/api/events" >"$T/events-alice" 2>/dev/null || true
curl -s -N --max-time 4 -b "$T/cookies" "$H/api/events" >"$T/events-carol" 2>/dev/null || true
check "GET /api/events as alice answers" grep -q "^retry: 3000" "$T/events-alice"
check "GET /api/events as carol answers" grep -q "^retry: 3000" "$T/events-carol"

# administration
check_eq "GET /api/stats as carol: 200 with the job counts" \
	"$(call GET /api/stats -b "$T/cookies")/$(jq -r 'has("checkpoints")' "$B")" "200/true"
check_eq "GET /api/workers as carol: remora-worker is there" \
	"$(call GET /api/workers -b "$T/cookies")/$(jq -r '[.workers[] | select(.label == "sp")] | length' "$B")" "200/1"
check_eq "GET /api/admin/grants as carol: alice's and bob's target grants" \
	"$(call GET /api/admin/grants -b "$T/cookies")/$(jq -c '[.targets[].role] | sort' "$B")" \
	'200/["alice","bob"]'
check_eq "GET /api/stats as alice: 403" "$(as alice GET /api/stats)" 403
check_eq "GET /api/session as carol" "$(call GET /api/session -b "$T/cookies")/$(field .user)" "200/carol"

# --- nothing planted ran --------------------------------------------------------
check_eq "no planted function, aggregate or operator ever ran" \
	"$(q "SELECT count(*) FROM public.hijack_log")" 0
if [ "$(q "SELECT count(*) FROM public.hijack_log")" != 0 ]; then
	q "SELECT who, what, count(*) FROM public.hijack_log GROUP BY 1, 2 ORDER BY 1, 2" | sed 's/^/#   /'
fi
check_eq "mallory got no target grant" \
	"$(q "SELECT count(*) FROM remora_target_grants WHERE role = 'mallory'")" 0

e2e_finish
