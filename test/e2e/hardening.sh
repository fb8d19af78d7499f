#!/usr/bin/env bash
#
# Nothing a user does subverts or stalls the workers,
# end to end with real workers:
#   - operators and functions a user creates in public (#>>, ->>,
#     array_position, now()), also with a database search_path that puts
#     public first, are never called by the launcher or a worker, whether
#     the workers run as the bootstrap superuser or as remora.worker_role;
#   - a user holding their job's row (an open BEGIN; remora_cancel) and
#     the claim's advisory lock for three leases does not make the other
#     jobs' attempts lost; SIGTERM ends a worker's lock wait at once;
#   - a checkpoint call that raises (a trigger) fails alone: the other
#     jobs on the same worker checkpoint and finish;
#   - members handed to checkpoints and a commit whose transactions did not
#     commit are offered again: the result has every member;
#   - a malformed checkpoint row (a part without size, a state that is
#     not an object) makes the next attempt start from zero, no crash;
#   - a URL's query string is not in the server log when a submit fails,
#     nor in pg_stat_activity of an idle session; the target's secret can
#     come from a file, and then pg_read_all_settings members cannot read
#     it.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin hardening

stack_up
qa() { psql -X -A -t -q -v ON_ERROR_STOP=1 -U alice -d postgres -c "$1"; }
restart() { cluster_stop "$T/pg" fast; cluster_start "$T/pg"; }
workers_as() {	# workers_as ROLE: every remora worker runs as ROLE
	[ "$(q "SELECT count(*) FILTER (WHERE usename = '$1') || ' ' || count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = "1 1" ]
}
no_workers() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 0 ]; }
attempts_of() { q "SELECT attempts_used FROM remora.jobs WHERE job_id = $1"; }

q "CREATE ROLE alice LOGIN; GRANT remora_user TO alice; GRANT CREATE ON SCHEMA public TO alice" >/dev/null
q "CREATE ROLE rworker LOGIN; GRANT remora_worker TO rworker" >/dev/null

# --- traps: a user's operators and functions that record who calls them
q "CREATE TABLE public.trap_calls (who name, backend text, what text);
   GRANT SELECT, INSERT ON public.trap_calls TO PUBLIC" >/dev/null
qa "CREATE FUNCTION public.trap_note(what text) RETURNS void LANGUAGE sql AS
	\$\$ INSERT INTO public.trap_calls SELECT current_user, (SELECT a.backend_type
	     FROM pg_catalog.pg_stat_activity a WHERE a.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()), what \$\$;
    CREATE FUNCTION public.trap_path_text(j jsonb, p text) RETURNS text LANGUAGE sql AS
	\$\$ SELECT public.trap_note('#>>'); SELECT j OPERATOR(pg_catalog.#>>) p::pg_catalog.text[] \$\$;
    CREATE OPERATOR public.#>> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = public.trap_path_text);
    CREATE FUNCTION public.trap_get_text(j jsonb, k text) RETURNS text LANGUAGE sql AS
	\$\$ SELECT public.trap_note('->>'); SELECT j OPERATOR(pg_catalog.->>) k \$\$;
    CREATE OPERATOR public.->> (LEFTARG = jsonb, RIGHTARG = text, FUNCTION = public.trap_get_text);
    CREATE FUNCTION public.array_position(a text[], e text) RETURNS integer LANGUAGE sql AS
	\$\$ SELECT public.trap_note('array_position'); SELECT pg_catalog.array_position(a, e) \$\$;
    CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql AS
	\$\$ SELECT public.trap_note('now()'); SELECT pg_catalog.now() \$\$"
# the database's owner puts public first for every new session
q "ALTER DATABASE postgres SET search_path = public, pg_catalog" >/dev/null
check_eq "the traps work: a session that resolves them records the call" \
	"$(qa "SELECT '{\"a\": {\"b\": 7}}'::jsonb #>> '{a,b}'") $(qa "SELECT count(*) FROM public.trap_calls WHERE backend = 'client backend'")" "7 1"
trapped() { q "SELECT count(*) FROM public.trap_calls WHERE backend LIKE 'remora%'"; }

# the launcher and one worker start again, in a database that says so
cat >>"$T/pg/data/postgresql.conf" <<CONF
remora.max_workers = 1
CONF
restart

# a set whose second attempt looks up the members of the first one
mkdir -p "$T/setsrc"
for i in $(seq -w 1 20); do head -c 100000 /dev/urandom >"$T/setsrc/m$i.bin"; done
aws_s3 s3 cp --recursive --quiet "$T/setsrc" s3://target/setsrc/
make_file small.bin 300000
h=$(q "SELECT remora_submit('$SRC/small.bin')")
check "as superuser: an http job succeeds" wait_state "$h" succeeded 30
rule "$S3_PROXY" "match=GET%20/target/setsrc/m15.bin&action=hold&count=1"
s=$(q "SELECT remora_submit('s3://target/setsrc/')")
recorded() { [ "$(q "SELECT count(*) FROM remora.members m JOIN remora.attempts a USING (attempt_id) WHERE a.job_id = $s")" -ge 10 ]; }
check "as superuser: a set records members as they complete" wait_for 60 recorded
# the worker hands the attempt back; the next one reuses what was recorded
q "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'remora worker'" >/dev/null
curl -s "http://127.0.0.1:$S3_PROXY/__release" >/dev/null
check "as superuser: the set's replacement attempt succeeds" wait_state "$s" succeeded 60
check "as superuser: it reused members of the first attempt (looked up by array_position)" \
	test "$(q "SELECT descriptor ->> 'members_reused' FROM remora.results WHERE job_id = $s")" -ge 10
check_eq "as superuser: no trap was called by the launcher or a worker" "$(trapped)" "0"

# --- the workers as a dedicated role
cat >>"$T/pg/data/postgresql.conf" <<CONF
remora.worker_role = 'rworker'
CONF
restart
check "the worker connects as remora.worker_role" wait_for 30 workers_as rworker
check_eq "a non-superuser cannot read remora.worker_role" \
	"$(qa "SELECT current_setting('remora.worker_role')" 2>&1 | grep -c 'must be superuser\|permission denied')" "1"
h=$(q "SELECT remora_submit('$SRC/small.bin')")
check "as rworker: an http job succeeds" wait_state "$h" succeeded 30
s2=$(q "SELECT remora_submit('s3://target/setsrc/', prefix => 'again')")
check "as rworker: a set succeeds" wait_state "$s2" succeeded 60
q "SELECT remora.register_source_endpoint('direct', 'http://127.0.0.1:$S3_PORT', 'us-east-1', true, '$S3_ACCESS_KEY', '$S3_SECRET_KEY')" >/dev/null
e=$(q "SELECT remora_submit('s3://target/setsrc/m01.bin', prefix => 'ep', options => '{\"endpoint\": \"direct\"}')")
check "as rworker: a job on a registered endpoint succeeds" wait_state "$e" succeeded 60

# --- a user holds their own job's row and the claim's lock for 3 leases
make_file big1.bin 16000000
make_file big2.bin 16000000
make_file big3.bin 16000000
j1=$(qa "SELECT remora_submit('$SRC/slow/big1.bin')")
j2=$(q "SELECT remora_submit('$SRC/slow/big2.bin')")
j3=$(q "SELECT remora_submit('$SRC/slow/big3.bin')")
running3() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE job_id IN ($j1, $j2, $j3) AND state = 'running'")" = 3 ]; }
check "three slow jobs run on the one worker" wait_for 30 running3
psql -X -q -U alice -d postgres -v ON_ERROR_STOP=1 >"$T/holder.log" 2>&1 <<SQL &
BEGIN;
SELECT remora_cancel($j1);
SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext('remora.claim'));
SELECT pg_catalog.pg_sleep(12);
COMMIT;
SQL
holder=$!
holding() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE usename = 'alice' AND query LIKE '%pg_sleep%' AND state = 'active'")" = 1 ]; }
check "alice holds her job's row and the claim lock" wait_for 10 holding
blocked() { grep -q "job $j1: renewing the lease failed: canceling statement due to lock timeout" "$LOG"; }
check "the worker's renewal of alice's job gives up after lock_timeout" wait_for 10 blocked
wait "$holder"
check "alice's job ends cancelled" wait_state "$j1" cancelled 20
check "the other jobs succeed" wait_state "$j2" succeeded 60
check "the other jobs succeed (2)" wait_state "$j3" succeeded 60
check_eq "their attempts were never lost: one attempt each" "$(attempts_of "$j2") $(attempts_of "$j3")" "1 1"

# --- SIGTERM interrupts a worker's lock wait
q "ALTER SYSTEM SET remora.lease_duration = '60s'" >/dev/null
settings_seen=$(grep -c "new settings in effect" "$LOG" || true)
q "SELECT pg_reload_conf()" >/dev/null
new_engine() { [ "$(grep -c "new settings in effect" "$LOG" || true)" -gt "$settings_seen" ]; }
check "the worker takes a 60 s lease (lock_timeout 6 s)" wait_for 30 new_engine
make_file w.bin 16000000
w=$(qa "SELECT remora_submit('$SRC/slow/w.bin')")
check "a slow job runs" wait_state "$w" running 30
psql -X -q -U alice -d postgres >/dev/null 2>&1 <<SQL &
BEGIN;
SELECT remora_cancel($w);
SELECT pg_catalog.pg_sleep(8);
COMMIT;
SQL
holder=$!
lock_wait() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker' AND wait_event_type = 'Lock'")" = 1 ]; }
check "the worker waits on the row alice holds" wait_for 20 lock_wait
wpid=$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora worker'")
t0=$(date +%s%N)
q "SELECT pg_terminate_backend($wpid)" >/dev/null
gone() { ! kill -0 "$wpid" 2>/dev/null; }
wait_for 20 gone
check "SIGTERM ends the lock wait at once (well before lock_timeout)" test $((($(date +%s%N) - t0) / 1000000)) -lt 3000
wait "$holder" 2>/dev/null
q "ALTER SYSTEM RESET remora.lease_duration" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null

# --- a checkpoint call that raises fails alone
q "CREATE TABLE public.raise_for (job_id bigint);
   CREATE FUNCTION public.raise_checkpoint() RETURNS trigger LANGUAGE plpgsql AS
   \$\$ BEGIN IF NEW.job_id IN (SELECT job_id FROM public.raise_for) THEN
        RAISE EXCEPTION 'injected checkpoint failure'; END IF; RETURN NEW; END \$\$;
   CREATE TRIGGER raise_checkpoint BEFORE INSERT OR UPDATE ON remora.checkpoints
   FOR EACH ROW EXECUTE FUNCTION public.raise_checkpoint()" >/dev/null
make_file x.bin 9000000
make_file y.bin 9000000
x=$(q "SELECT remora_submit('$SRC/slow/x.bin')")
q "INSERT INTO public.raise_for VALUES ($x)" >/dev/null
y=$(q "SELECT remora_submit('$SRC/slow/y.bin')")
check "a job beside the one whose checkpoints raise records its checkpoint" \
	wait_for 30 validated_at_least "$y" 5242880
check "the job whose checkpoints raise succeeds" wait_state "$x" succeeded 40
check "and so does the other" wait_state "$y" succeeded 40
check_eq "one attempt each" "$(attempts_of "$x") $(attempts_of "$y")" "1 1"
check "the failed call is in the log, for its job" grep -q "job $x: checkpointing failed: injected checkpoint failure" "$LOG"
q "DROP TRIGGER raise_checkpoint ON remora.checkpoints" >/dev/null

# --- members whose checkpoint or commit did not commit are offered again
q "CREATE SEQUENCE public.member_failures;
   CREATE FUNCTION public.raise_member() RETURNS trigger LANGUAGE plpgsql AS
   \$\$ BEGIN IF pg_catalog.nextval('public.member_failures') <= 4 THEN
        RAISE EXCEPTION 'injected member failure'; END IF; RETURN NEW; END \$\$;
   CREATE TRIGGER raise_member BEFORE INSERT ON remora.members
   FOR EACH ROW EXECUTE FUNCTION public.raise_member()" >/dev/null
rule "$S3_PROXY" "match=GET%20/target/setsrc/&action=slow"
m=$(q "SELECT remora_submit('s3://target/setsrc/', prefix => 'offered')")
check "a set whose first member records fail succeeds" wait_state "$m" succeeded 90
check_eq "its result has every member, in one attempt" \
	"$(q "SELECT count(*) FROM remora_result($m)") $(attempts_of "$m")" "20 1"
check_eq "the injected failures happened" "$(q "SELECT last_value >= 4 FROM public.member_failures")" "t"
q "DROP TRIGGER raise_member ON remora.members" >/dev/null
curl -s "http://127.0.0.1:$S3_PROXY/__reset" >/dev/null

# --- a malformed checkpoint row handed back by claim
make_file m1.bin 14000000
make_file m2.bin 14000000
m1=$(q "SELECT remora_submit('$SRC/slow/m1.bin')")
m2=$(q "SELECT remora_submit('$SRC/slow/m2.bin')")
check "two slow jobs checkpoint a first part" wait_for 30 validated_at_least "$m1" 5242880
check "two slow jobs checkpoint a first part (2)" wait_for 30 validated_at_least "$m2" 5242880
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
check "the worker stops and hands the attempts back" wait_for 30 no_workers
q "UPDATE remora.checkpoints SET state = jsonb_set(state, '{parts,0}', (state #> '{parts,0}') - 'size') WHERE job_id = $m1;
   UPDATE remora.checkpoints SET state = '\"not an object\"' WHERE job_id = $m2" >/dev/null
# a spec a submit cannot have made (read by key, every type checked)
bad=$(q "SELECT remora_submit('$SRC/small.bin', options => '{\"max_attempts\": 1}')")
q "UPDATE remora.jobs SET spec = jsonb_set(spec, '{source,kind}', '\"ftp\"') WHERE job_id = $bad" >/dev/null
q "ALTER SYSTEM RESET remora.max_workers" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
check "with a part missing its size, the job still succeeds" wait_state "$m1" succeeded 60
check "with a state that is not an object, the job still succeeds" wait_state "$m2" succeeded 60
verify "$m1" m1.bin
verify "$m2" m2.bin
check_eq "both restarted from zero and said why" \
	"$(q "SELECT count(*) FROM remora.attempts WHERE job_id IN ($m1, $m2) AND restart_reason LIKE '%malformed%'")" "2"
check "a job whose spec names no kind of source fails" wait_state "$bad" failed 30
check_eq "its error says which key, as an attempt's error" \
	"$(q "SELECT last_error ->> 'message' FROM remora.jobs WHERE job_id = $bad")" \
	'the job'"'"'s specification could not be read: invalid job specification: the key "source.kind" names no kind of source'
check_eq "no process crashed" "$(grep -c 'terminated by signal' "$LOG" || true)" "0"

# --- secrets: a presigned source's query string, the target's secret
SIG="X-Amz-Signature=e2eSig$RANDOM$RANDOM"
qa "SELECT remora_submit('ftp://127.0.0.1/x.bin?$SIG')" >/dev/null 2>&1 || true
check_eq "a failed submit's query string is not in the server log" "$(grep -c "$SIG" "$LOG" || true)" "0"
check "its STATEMENT line is there, redacted" grep -q "STATEMENT:.*ftp://127.0.0.1/x.bin?(redacted)" "$LOG"
# a session that submitted stays idle, its last statement on view
{ echo "SELECT remora_submit('$SRC/small.bin?$SIG&n=2');"; sleep 30; } |
	psql -X -q -U alice -d postgres >/dev/null 2>&1 &
feeder=$!
idle_after_submit() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE usename = 'alice' AND state = 'idle' AND query LIKE '%remora_submit%'")" = 1 ]; }
check "a session that submitted is idle" wait_for 20 idle_after_submit
check_eq "pg_stat_activity shows its statement without the query string" \
	"$(q "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%$SIG%' AND pid <> pg_backend_pid()") $(q "SELECT count(*) FROM pg_stat_activity WHERE usename = 'alice' AND query LIKE '%small.bin?(redacted)%'")" "0 1"
kill "$feeder" 2>/dev/null; wait "$feeder" 2>/dev/null
p=$(q "SELECT max(job_id) FROM remora.jobs")
check "the worker still has the whole URL: the job succeeds" wait_state "$p" succeeded 30

# the target's secret from a file: pg_read_all_settings cannot read it
q "CREATE ROLE reader LOGIN; GRANT pg_read_all_settings TO reader" >/dev/null
check_eq "with the secret in a GUC, pg_read_all_settings members can read it" \
	"$(psql -X -A -t -q -U reader -d postgres -c "SELECT current_setting('remora.s3_secret_access_key')")" "$S3_SECRET_KEY"
echo "$S3_SECRET_KEY" >"$T/pg/target.secret"
chown postgres: "$T/pg/target.secret"
chmod 600 "$T/pg/target.secret"
cat >>"$T/pg/data/postgresql.conf" <<CONF
remora.s3_secret_access_key = ''
remora.s3_secret_access_key_file = '$T/pg/target.secret'
CONF
settings_seen=$(grep -c "new settings in effect" "$LOG" || true)
q "SELECT pg_reload_conf()" >/dev/null
new_engine() { [ "$(grep -c "new settings in effect" "$LOG" || true)" -gt "$settings_seen" ]; }
check "the worker takes the new settings" wait_for 30 new_engine
f=$(q "SELECT remora_submit('$SRC/small.bin', prefix => 'keyfile')")
check "a job signed with the secret from the file succeeds" wait_state "$f" succeeded 30
check_eq "remora_presign signs with it too" \
	"$(curl -s -o /dev/null -w '%{http_code}' "$(q "SELECT remora_presign($f, 'small.bin')")")" "200"
check_eq "a pg_read_all_settings member now reads no secret" \
	"$(psql -X -A -t -q -U reader -d postgres -c "SELECT current_setting('remora.s3_secret_access_key') || '|' || (SELECT count(*) FROM pg_settings WHERE setting LIKE '%$S3_SECRET_KEY%')")" "|0"

check_eq "no trap was ever called by the launcher or a worker" "$(trapped)" "0"
check_eq "nor with a worker's rights" "$(q "SELECT count(*) FROM public.trap_calls WHERE who IN ('postgres', 'rworker') AND backend <> 'client backend'")" "0"

# --- a worker role that cannot run the workers: none starts, and the
# launcher says why (rather than falling back to the superuser)
q "ALTER ROLE rworker NOLOGIN" >/dev/null
restart
refused_role() { grep -q 'remora.worker_role "rworker" cannot run the remora workers' "$LOG"; }
check "a role without LOGIN: the launcher says why" wait_for 30 refused_role
check_eq "and starts no worker" "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" "0"
check "the log names what is missing" grep -q "DETAIL:  The role has no LOGIN attribute." "$LOG"

e2e_finish
