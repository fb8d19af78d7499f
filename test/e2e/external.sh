#!/usr/bin/env bash
#
# The external worker, end to end: with remora.max_workers = 0 (PostgreSQL
# only coordinates) remora-worker, as a non-superuser role that is a member
# of remora_worker, finishes an http job, a multi-part http job, an S3
# prefix job, a Hugging Face snapshot and an export, each read back with
# the AWS CLI (and fails, naming the key, an overwrite export onto a key
# another writer put there, leaving it unchanged);
# --help names every exit code, and the worker exits with
# each: 2 on a bad option, 1 when its role may not read the settings, 3
# when the server stays unreachable for the bound (10 minutes, run 100
# times faster under libfaketime), before and after it connected; a
# NOTIFY wakes it well before its poll would, and --poll-only still
# finishes without ever running LISTEN (its statements, logged by the
# server); SIGTERM mid-transfer hands the attempts back and a later run
# finishes the jobs; remora_workers shows host, label and version, a
# heartbeat that advances while it transfers, and active_leases that are
# the attempts it runs; remora.worker_settings()
# is refused to a plain remora_user; the staging of finished attempts is
# cleaned by the worker's sweep; a cancel, a server restart and a server
# that cannot be reached (the attempt stops within its lease); valgrind
# finds no memory error and no definite leak in the worker.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin external
stack_up

WORKER=$(pg_config --bindir)/remora-worker
# the workers' logs are kept as /tmp/external-w*.log
e2e_at_exit 'for f in "$T"/w*.log; do cp "$f" "/tmp/external$E2E_TAG-${f##*/}"; done'
CONNINFO="host=$T/pg port=$PG_PORT dbname=postgres user=rw"

# --- PostgreSQL only coordinates: no background worker
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
no_bgworker() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 0 ]; }
check "with remora.max_workers = 0 no background worker runs" wait_for 20 no_bgworker
q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw;
   CREATE ROLE alice LOGIN; GRANT remora_user TO alice;
   SELECT remora.grant_target('alice', 'target')" >/dev/null

# --- the command line
"$WORKER" --help >"$T/help.out" 2>&1
check_eq "--help exits 0" "$?" "0"
check "--help documents --poll-only" grep -q -- "--poll-only" "$T/help.out"
help=$(tr '\n' ' ' <"$T/help.out")
help_codes() {
	grep -qE "Exit status: 0 stopped by SIGTERM or SIGINT, 1 cannot run, 2 usage error, +3 the server was unreachable for [0-9]+ minutes" <<<"$help"
}
check "--help names every exit code: 0 stopped, 1 cannot run, 2 usage, 3 unreachable" help_codes
minutes=$(grep -oE "unreachable for [0-9]+ minutes" <<<"$help" | grep -oE "[0-9]+")
check_eq "the operator guide gives the same codes and the same bound" \
	"$(tr '\n' ' ' <doc/operator-guide.md | grep -oE 'Exit status: `0` stopped by SIGTERM or SIGINT .{0,200}`1` cannot run .{0,200}`2` usage error; `3` the server was unreachable for [0-9]+ minutes' | grep -oE '[0-9]+ minutes')" \
	"$minutes minutes"
set +e
"$WORKER" --no-such-option >/dev/null 2>&1
rc=$?
"$WORKER" --concurrency 0 >/dev/null 2>&1
rc2=$?
"$WORKER" "dbname=postgres" "dbname=postgres" >/dev/null 2>&1
rc3=$?
set -e
check_eq "a bad option exits 2" "$rc" "2"
check_eq "a bad --concurrency exits 2" "$rc2" "2"
check_eq "two connection strings exit 2" "$rc3" "2"
# exit 1: connected, but the role (a plain remora_user) may not read the
# settings: that is final, no retrying
set +e
timeout 30 "$WORKER" "host=$T/pg port=$PG_PORT dbname=postgres user=alice" >"$T/cannot.log" 2>&1
rc=$?
set -e
check_eq "a role that is not a remora_worker: exit 1 at once" "$rc" "1"
check "saying what it needs" grep -q "cannot read the settings: the role must be a member of remora_worker" "$T/cannot.log"
# exit 3: the bound is a constant (GIVE_UP_MS, $minutes minutes), no option
# shortens it; libfaketime runs the worker's clocks 100 times faster
# (monotonic included), so it is reached in about $((minutes * 60 / 100)) s.
# Once never connected, once after the connection was cut (through
# test/faults/tcpproxy.js: new connections refused, the open one dropped).
FAST=(faketime -f "+0 x100")
# The bound runs from the first failure after the last connection (or
# after the start, if it never connected): the worker gave up no earlier
# than the bound after that line, on its own clock.
gave_up() {	# gave_up LOG RC: exit 3, and the fast clock passed the bound first
	local since last
	since=$(grep -E "remora-worker [0-9.]+ starting|connected to " "$1" | tail -1 | cut -d' ' -f1)
	last=$(tail -1 "$1" | cut -d' ' -f1)
	[ "$2" = 3 ] && [ -n "$since" ] && grep -q "could not connect" "$1" &&
		[ "$(q "SELECT '$last'::timestamptz - '$since'::timestamptz >= interval '$minutes minutes' - interval '1 second'")" = t ]
}
DEAD=$(free_port)
set +e
t0=$(date +%s)
timeout 60 "${FAST[@]}" "$WORKER" "host=127.0.0.1 port=$DEAD dbname=postgres user=rw" >"$T/giveup1.log" 2>&1
rc=$?
set -e
check "never reachable: exit 3 once $minutes minutes of its clock passed ($(($(date +%s) - t0)) s here, rc $rc)" gave_up "$T/giveup1.log" "$rc"
check "saying so" grep -q "the server was unreachable for $minutes minutes; giving up" "$T/giveup1.log"
GPX=$(free_port)
GCT=$(free_port)
start_tcpproxy "$GPX" "$PG_PORT" "$GCT" giveup-proxy
"${FAST[@]}" "$WORKER" --label e2e-giveup "host=127.0.0.1 port=$GPX dbname=postgres user=rw" >"$T/giveup2.log" 2>&1 &
GW=$!
service_pid "$GW" KILL
giveup_live() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = 'e2e-giveup' AND heartbeat_at IS NOT NULL")" = 1 ]; }
check "a worker connects through the TCP proxy" wait_for 20 giveup_live
tcpproxy "$GCT" refuse >/dev/null
tcpproxy "$GCT" drop >/dev/null
t0=$(date +%s)
set +e
wait_gone() { ! kill -0 "$GW" 2>/dev/null; }
wait_for 60 wait_gone
wait "$GW"
rc=$?
set -e
check "cut off: exit 3 once $minutes minutes of its clock passed ($(($(date +%s) - t0)) s here, rc $rc)" gave_up "$T/giveup2.log" "$rc"
check "saying so" grep -q "the server was unreachable for $minutes minutes; giving up" "$T/giveup2.log"
no_worker_backend() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'remora-worker'")" = 0 ]; }
wait_for 20 no_worker_backend || echo "# the cut-off worker's backend is still there"

# --- worker_settings: remora_worker only
err=$(psql -X -q -d postgres -U alice -c "SELECT * FROM remora.worker_settings()" 2>&1 || true)
check "remora.worker_settings() is refused to a remora_user" grep -q "permission denied" <<<"$err"
check_eq "with SQLSTATE 42501" \
	"$(psql -X -q -t -A -d postgres -U alice -v VERBOSITY=verbose -c "SELECT * FROM remora.worker_settings()" 2>&1 | grep -o 42501 | head -1)" "42501"
check_eq "a remora_worker reads the target settings" \
	"$(psql -X -q -t -A -d postgres -U rw -c "SELECT s3_access_key_id = '$S3_ACCESS_KEY', s3_secret_access_key = '$S3_SECRET_KEY', part_size FROM remora.worker_settings()")" \
	"t|t|5242880"

# --- an http job
make_file small.bin 300000
make_file big.bin 23000000
# the server logs every statement of the sessions of rw that start from here
# until the poll-only worker below has started (what LISTENs shows there)
q "ALTER ROLE rw SET log_statement = 'all'" >/dev/null
start_remora_worker w1 --label e2e-one --concurrency 3 "$CONNINFO"
W1=$REMORA_WORKER_PID
registered() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = 'e2e-one' AND stopped_at IS NULL")" = 1 ]; }
check "remora-worker records its incarnation" wait_for 20 registered
W1_BACKEND=$(q "SELECT string_agg(pid::text, '|') FROM pg_stat_activity WHERE application_name = 'remora-worker'")
check_eq "remora_workers shows its kind, host, label and version" \
	"$(q "SELECT kind, host, label, version FROM remora_workers WHERE label = 'e2e-one'")" \
	"external|$(hostname)|e2e-one|$(grep -oP "^default_version = '\K[^']+" remora.control)"
check_eq "it connects as the role rw, named remora-worker" \
	"$(q "SELECT usename, application_name FROM pg_stat_activity WHERE application_name = 'remora-worker'")" \
	"rw|remora-worker"

j1=$(q "SELECT remora_submit('$SRC/small.bin')")
check "an http job succeeds" wait_state "$j1" succeeded 30
verify "$j1" small.bin
j2=$(q "SELECT remora_submit('$SRC/big.bin')")
check "a multi-part http job succeeds" wait_state "$j2" succeeded 60
verify "$j2" big.bin
check_eq "both ran in the external worker's incarnation" \
	"$(q "SELECT count(DISTINCT i.kind) || ':' || min(i.kind) FROM remora.attempts a JOIN remora.incarnations i USING (incarnation) WHERE a.job_id IN ($j1, $j2)")" \
	"1:external"
check "the worker logs one line per event, with job and attempt ids" \
	grep -qE "job $j1 attempt [0-9a-f-]{36} committed its result" "$T/w1.log"


# --- an S3 prefix, read from the target store itself
mkdir -p "$T/src/sub"
for i in $(seq 1 30); do head -c $((1000 + i * 37)) /dev/urandom >"$T/src/f$i.bin"; done
head -c 6000000 /dev/urandom >"$T/src/sub/large.bin"
aws_s3 s3 cp --recursive --quiet "$T/src" s3://target/src/
# every member, read back with the AWS CLI, has the SHA-256 of its file;
# one recursive download a staging prefix (a run of the CLI a member took
# minutes on a busy machine)
members_intact() {	# members_intact JOB DIR
	local path key sha pfx n=0 rb=$T/readback-$1
	rm -rf "$rb"
	while IFS='|' read -r path key sha; do
		pfx=${key%"$path"}
		[ -d "$rb/$pfx" ] || aws_s3 s3 cp --recursive --quiet "s3://target/$pfx" "$rb/$pfx" || return 1
		[ "$(sha256sum <"$rb/$key" | cut -d' ' -f1)" = "$sha" ] || return 1
		[ "$(sha256sum "$2/$path" | cut -d' ' -f1)" = "$sha" ] || return 1
		n=$((n + 1))
	done < <(q "SELECT path, key, sha256 FROM remora_result($1)")
	[ "$n" = "$(find "$2" -type f | wc -l)" ]
}
p=$(q "SELECT remora_submit('s3://target/src/')")
check "an s3 prefix job succeeds" wait_state "$p" succeeded 60
check_eq "with every object as a member" "$(q "SELECT count(*) FROM remora_result($p)")" "31"
check "the AWS CLI reads every member back with its file's SHA-256" members_intact "$p" "$T/src"
o=$(q "SELECT remora_submit('s3://target/src/sub/large.bin')")
check "an s3 object job succeeds" wait_state "$o" succeeded 60
check_eq "its one member has the object's SHA-256, read back by the AWS CLI" \
	"$(q "SELECT path, sha256 FROM remora_result($o)")|$(aws_s3 s3 cp "s3://target/$(q "SELECT key FROM remora_result($o)")" - 2>/dev/null | sha256sum | cut -d' ' -f1)" \
	"large.bin|$(sha256sum "$T/src/sub/large.bin" | cut -d' ' -f1)|$(sha256sum "$T/src/sub/large.bin" | cut -d' ' -f1)"

# --- a Hugging Face snapshot from the local hub (test/hub)
HUB_PORT=$(free_port)
CDN_PORT=$(free_port)
HUB=$T/hub
TOKEN=hf_e2eExternalToken0123456789
mk() { mkdir -p "$(dirname "$HUB/$1")"; head -c "$2" /dev/urandom >"$HUB/$1"; }
mk models/acme/tiny/README.md 700
mk models/acme/tiny/config.json 300
mk models/acme/tiny/weights/model.bin 3000000
mk models/acme/tiny/tokenizer/vocab.txt 5000
mk models/acme/gated/model.bin 200000
touch "$HUB/models/acme/gated/.gated"
start_hub "$HUB_PORT" "$CDN_PORT" "$HUB" "$TOKEN"
q "ALTER SYSTEM SET remora.hf_endpoint = 'http://127.0.0.1:$HUB_PORT'" >/dev/null
q "ALTER SYSTEM SET remora.hf_token = '$TOKEN'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
n=$(grep -c "new settings in effect" "$T/w1.log" || true)
kill -HUP "$W1"
applied() { [ "$(grep -c "new settings in effect" "$T/w1.log" || true)" -gt "$n" ]; }
check "SIGHUP: the worker takes the new settings" wait_for 20 applied
h=$(q "SELECT remora_submit('hf://acme/gated')")
check "a gated Hugging Face snapshot succeeds with the server's token" wait_state "$h" succeeded 60
h=$(q "SELECT remora_submit('hf://acme/tiny')")
check "a Hugging Face snapshot succeeds" wait_state "$h" succeeded 60
check "the AWS CLI reads every file back intact" members_intact "$h" "$HUB/models/acme/tiny"
check_eq "the second host never saw the token" "$(curl -s "http://127.0.0.1:$HUB_PORT/__cdn_auth")" "0"

# --- an export of the prefix job's result to stable keys
ex=$(q "SELECT remora_export($p, 'target', 'stable/ext')")
check "an export succeeds" wait_state "$ex" succeeded 60
exported_intact() {
	local path sha rb=$T/readback-stable
	rm -rf "$rb"
	aws_s3 s3 cp --recursive --quiet s3://target/stable/ext/ "$rb" || return 1
	while IFS='|' read -r path sha; do
		[ "$(sha256sum <"$rb/$path" | cut -d' ' -f1)" = "$sha" ] || return 1
	done < <(q "SELECT path, sha256 FROM remora_result($p)")
}
check "the AWS CLI reads every exported key with its member's SHA-256" exported_intact
check_eq "every member has its reference" \
	"$(q "SELECT members_done, members FROM remora_exports WHERE export_id = $ex")" "31|31"

# --- an export of 2,500 members: remora-worker reads them in pages of
# 1,000 (remora.export_members), never all at once
many=$(made_result 2500 src/f1.bin)
ex=$(q "SELECT remora_export($many, 'target', 'stable/many', '{\"if_exists\": \"overwrite\"}')")
check "an export of 2,500 members succeeds" wait_state "$ex" succeeded 180
check_eq "every member answered, by remora-worker" \
	"$(q "SELECT e.members_done || '|' || jsonb_array_length(e.\"references\") || '|' || w.label FROM remora_exports e JOIN remora.attempts a ON a.job_id = e.export_id JOIN remora_workers w USING (incarnation) WHERE e.export_id = $ex")" \
	"2500|2500|e2e-one"
check_eq "the AWS CLI lists 2,500 keys, the last page's too" \
	"$(aws_s3 s3 ls --recursive s3://target/stable/many/ | wc -l)|$(aws_s3 s3 cp s3://target/stable/many/d0/m002500.bin - 2>/dev/null | sha256sum | cut -d' ' -f1)" \
	"2500|$(sha256sum "$T/src/f1.bin" | cut -d' ' -f1)"

# --- an overwrite export onto a key another writer put there: remora-worker
# is told the owner may not overwrite it (remora.export_members'
# may_overwrite), and the export fails naming the key, which is unchanged
make_file mine.bin 20000
mine=$(psql -X -A -t -q -v ON_ERROR_STOP=1 -U alice -d postgres -c "SELECT remora_submit('$SRC/mine.bin')")
check "alice's job succeeds" wait_state "$mine" succeeded 60
head -c 9000 /dev/urandom >"$T/theirs.bin"
aws_s3 s3 cp --quiet "$T/theirs.bin" s3://target/theirs/mine.bin
ex=$(psql -X -A -t -q -v ON_ERROR_STOP=1 -U alice -d postgres -c "SELECT remora_export($mine, 'target', 'theirs', '{\"if_exists\": \"overwrite\"}')")
check "alice's overwrite export onto another writer's key fails" wait_state "$ex" failed 60
check_eq "class exists, naming the key, run by remora-worker; the key is unchanged" \
	"$(q "SELECT e.last_error ->> 'class', e.last_error ->> 'message' LIKE '%\"theirs/mine.bin\"%', min(w.label) FROM remora_exports e JOIN remora.attempts a ON a.job_id = e.export_id JOIN remora_workers w USING (incarnation) WHERE e.export_id = $ex GROUP BY 1, 2")|$(aws_s3 s3 cp s3://target/theirs/mine.bin - 2>/dev/null | sha256sum | cut -d' ' -f1)" \
	"exists|t|e2e-one|$(sha256sum "$T/theirs.bin" | cut -d' ' -f1)"

# --- NOTIFY: a submit wakes the worker at once, not at its next poll (5 s);
# the bound leaves room for a busy machine, and three polls in a row would
# all land under it by chance one time in sixteen
for i in 1 2 3; do
	make_file "n$i.bin" 1000
	j=$(q "SELECT remora_submit('$SRC/n$i.bin')")
	wait_state "$j" succeeded 30 >/dev/null
	ms=$(q "SELECT round(extract(epoch FROM a.started_at - j.submitted_at) * 1000) FROM remora.attempts a JOIN remora.jobs j USING (job_id) WHERE j.job_id = $j")
	check "NOTIFY: submit $i was claimed in ${ms} ms, well under the 5 s poll" test "$ms" -lt 2000
done

# --- a backlog larger than --concurrency (3), queued by one statement (one
# NOTIFY): the worker claims again as soon as it has room, not at its polls
for i in $(seq 1 12); do make_file "b$i.bin" 2000; done
q "SELECT remora_submit('$SRC/b' || i || '.bin', options => jsonb_build_object('label', 'backlog')) FROM generate_series(1, 12) i" >/dev/null
backlog_done() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE label = 'backlog' AND state = 'succeeded'")" = 12 ]; }
check "12 jobs queued at once all succeed within two poll intervals" wait_for 10 backlog_done
check_eq "never more than 3 attempts of the worker at once" \
	"$(q "SELECT max(n) FROM (SELECT (SELECT count(*) FROM remora.attempts b JOIN remora.jobs jb USING (job_id)
	                                 WHERE jb.label = 'backlog' AND b.started_at <= a.started_at
	                                   AND coalesce(b.finished_at, 'infinity') > a.started_at) AS n
	                        FROM remora.attempts a JOIN remora.jobs j USING (job_id) WHERE j.label = 'backlog') s")" "3"

# --- a cancel reaches a running attempt within seconds (about one; the
# bound leaves room for a busy machine)
make_file slow.bin 8000000
c=$(q "SELECT remora_submit('$SRC/slow/slow.bin')")
check "a slow job runs" wait_state "$c" running 20
q "SELECT remora_cancel($c)" >/dev/null
stopped() { grep -q "job $c attempt .* stopped: the job was cancelled" "$T/w1.log"; }
check "the worker stops the cancelled attempt within 5 s" wait_for 5 stopped

# --- SIGTERM mid-transfer hands the attempts back; a later run finishes
# them.  Meanwhile remora_workers shows the worker alive and busy: its
# heartbeat advances, and active_leases is the attempts it runs.
t=$(q "SELECT remora_submit('$SRC/slow/slow.bin')")
t2=$(q "SELECT remora_submit('$SRC/slow/slow.bin')")
both_run() { is_state "$t" running && is_state "$t2" running; }
check "two slow jobs run" wait_for 20 both_run
W1_ROW="FROM remora_workers w WHERE w.label = 'e2e-one' AND w.stopped_at IS NULL"
check_eq "remora_workers: active_leases 2, the attempts the worker runs" \
	"$(q "SELECT w.active_leases || '|' || (SELECT count(*) FROM remora.attempts a WHERE a.incarnation = w.incarnation
		AND a.state = 'running' AND a.job_id IN ($t, $t2)) $W1_ROW")" "2|2"
hb=$(q "SELECT heartbeat_at $W1_ROW")
advanced() { [ "$(q "SELECT heartbeat_at > '$hb' AND heartbeat_at > now() - interval '4 seconds' $W1_ROW")" = t ]; }
check "its heartbeat advances while it transfers (every third of the 4 s lease)" wait_for 8 advanced
check "the first one's first segment is checkpointed" wait_for 30 validated_at_least "$t" 5242880
kill -TERM "$W1"
set +e
wait "$W1"
rc=$?
set -e
check_eq "SIGTERM: the worker exits 0" "$rc" "0"
check_eq "its attempts were handed back, retryable, and the jobs wait" \
	"$(q "SELECT string_agg(a.state || ' ' || (a.error ->> 'class') || ' ' || j.state, ', ') FROM remora.attempts a JOIN remora.jobs j USING (job_id) WHERE a.job_id IN ($t, $t2)")" \
	"failed worker retrying, failed worker retrying"
check_eq "and its incarnation ended, holding no lease" \
	"$(q "SELECT stopped_at IS NOT NULL, active_leases FROM remora_workers WHERE label = 'e2e-one'")" "t|0"

# --poll-only: no LISTEN, and the jobs still finish (resuming)
start_remora_worker w2 --poll-only --label e2e-poll "$CONNINFO"
W2=$REMORA_WORKER_PID
poll_registered() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = 'e2e-poll' AND stopped_at IS NULL")" = 1 ]; }
wait_for 20 poll_registered || true
W2_BACKEND=$(q "SELECT string_agg(pid::text, '|') FROM pg_stat_activity WHERE application_name = 'remora-worker'")
q "ALTER ROLE rw RESET log_statement" >/dev/null
check "--poll-only: the handed-back jobs succeed" wait_state "$t" succeeded 60
wait_state "$t2" succeeded 30 >/dev/null || true
verify "$t" slow.bin
check_eq "in a second attempt that resumed from the first one's checkpoint" \
	"$(q "SELECT attempts_used, (SELECT resumed_from IS NOT NULL FROM remora.attempts WHERE job_id = $t AND attempt_no = 2) FROM remora.jobs WHERE job_id = $t")" \
	"2|t"
check "the poll-only worker says so" grep -q "(poll only)" "$T/w2.log"
# the statements the server logged for a worker's sessions (PIDS: a|b),
# by the pid in log_line_prefix '%m [%p] %b '
statements() { grep -E "^[^[]*\[($1)\] .*(statement|execute [^:]*): " "$LOG"; }
check "the log shows the listening worker's session run LISTEN remora_jobs" \
	grep -q "LISTEN remora_jobs" <(statements "$W1_BACKEND")
check "and the poll-only worker's session claim (its statements are logged)" \
	grep -q "remora.claim" <(statements "$W2_BACKEND")
check_eq "but never LISTEN" "$(statements "$W2_BACKEND" | grep -c "LISTEN" || true)" 0
check_eq "and pg_stat_activity shows it is that session, alive, idle or working" \
	"$(q "SELECT count(*) FROM pg_stat_activity WHERE pid IN (${W2_BACKEND//|/,}) AND application_name = 'remora-worker' AND usename = 'rw'")" 1

# --- with no background worker, the external worker's sweep cleans staging
# and carries out hard deletes; the launcher still reconciles and prunes
check "the staging of the handed-back and cancelled attempts is deleted" \
	wait_for 40 all_cleaned "$t"
check "and of the cancelled job" wait_for 40 all_cleaned "$c"
q "SELECT remora_delete($j1, true)" >/dev/null
hard_deleted() { [ "$(q "SELECT hard_deleted_at IS NOT NULL FROM remora.jobs WHERE job_id = $j1")" = t ]; }
check "a hard delete is carried out" wait_for 40 hard_deleted
check_eq "its objects are gone" "$(staging_objects "$j1")" "0"
q "ALTER SYSTEM SET remora.retention = '1s'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
pruned() { [ "$(q "SELECT pruned_at IS NOT NULL FROM remora.jobs WHERE job_id = $j2")" = t ]; }
check "the launcher still prunes the history (remora.retention)" wait_for 30 pruned
q "ALTER SYSTEM RESET remora.retention" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null

# --- the server stopped (immediate) and started again under a transfer:
# the worker reconnects, its incarnation goes on, and the job finishes
inc=$(q "SELECT incarnation FROM remora_workers WHERE label = 'e2e-poll' AND stopped_at IS NULL")
r=$(q "SELECT remora_submit('$SRC/slow/slow.bin')")
check "a slow job runs under the poll-only worker" wait_state "$r" running 20
cluster_stop "$T/pg" immediate
cluster_start "$T/pg"
check "after the restart the job succeeds" wait_state "$r" succeeded 90
verify "$r" slow.bin
reconnected() { grep -q "connected to" "$T/w2.log" && [ "$(grep -c "connected to" "$T/w2.log")" -ge 2 ]; }
check "the worker reconnected" reconnected
check_eq "with the same incarnation, still running" \
	"$(q "SELECT count(*) FROM remora_workers WHERE incarnation = '$inc' AND stopped_at IS NULL")" "1"

# --- the server unreachable (the postmaster and the worker's backend
# paused): the attempt is stopped before its lease could lapse, and a
# replacement commits
f=$(q "SELECT remora_submit('$SRC/slow/slow.bin')")
check "a slow job runs" wait_state "$f" running 20
fa=$(q "SELECT current_attempt FROM remora.jobs WHERE job_id = $f")
pm=$(head -1 "$T/pg/data/postmaster.pid")
be=$(q "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE application_name = 'remora-worker'")
e2e_at_exit "kill -CONT $pm $be 2>/dev/null"
# shellcheck disable=SC2086
kill -STOP "$pm" $be
fenced() { grep -q "job $f attempt $fa stopped: its lease could not be renewed in time" "$T/w2.log"; }
check "server unreachable: the attempt stops within its lease (4 s)" wait_for 4 fenced
# shellcheck disable=SC2086
kill -CONT "$pm" $be
check "the job succeeds in another attempt" wait_state "$f" succeeded 90
check_eq "the stopped attempt never committed: it is lost" \
	"$(q "SELECT state FROM remora.attempts WHERE attempt_id = '$fa'")" "lost"
verify "$f" slow.bin

# --- a multi-host connection string whose first host is down: libpq finds
# the read-write one (as after a failover)
kill -TERM "$W2"
wait "$W2" || true
DEAD=$(free_port)
start_remora_worker w3 --label e2e-multi \
	"host=127.0.0.1,127.0.0.1 port=$DEAD,$PG_PORT dbname=postgres user=rw target_session_attrs=read-write"
W3=$REMORA_WORKER_PID
m=$(q "SELECT remora_submit('$SRC/small.bin')")
check "multi-host conninfo: the worker connects to the live host and finishes a job" \
	wait_state "$m" succeeded 30
check_eq "in its incarnation" \
	"$(q "SELECT w.label FROM remora.attempts a JOIN remora_workers w USING (incarnation) WHERE a.job_id = $m")" "e2e-multi"
kill -TERM "$W3"
wait "$W3" || true

# --- remora-worker under valgrind: an http job of one part and one of
# several, an s3 prefix, an export of two pages of members, then SIGTERM
# mid-transfer (a longer lease: valgrind is slow)
q "ALTER SYSTEM SET remora.lease_duration = '20s'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 \
	"$WORKER" --label valgrind "$CONNINFO" >"$T/wvg.log" 2>&1 &
VG=$!
service_pid "$VG" KILL
v1=$(q "SELECT remora_submit('$SRC/small.bin', options => '{\"label\": \"vg\"}')")
v2=$(q "SELECT remora_submit('$SRC/big.bin', options => '{\"label\": \"vg\"}')")
v3=$(q "SELECT remora_submit('s3://target/src/', options => '{\"label\": \"vg\"}')")
vg_done() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE label = 'vg' AND state = 'succeeded'")" = 3 ]; }
check "valgrind: the worker finishes an http job, a multi-part one and a prefix" wait_for 180 vg_done
v5=$(q "SELECT remora_export($(made_result 1001 src/f1.bin), 'target', 'stable/vg', '{\"if_exists\": \"overwrite\"}')")
check "valgrind: an export of 1,001 members (two pages) succeeds" wait_state "$v5" succeeded 300
v4=$(q "SELECT remora_submit('$SRC/slow/slow.bin')")
check "valgrind: a slow job runs" wait_state "$v4" running 60
kill -TERM "$VG"
set +e
wait "$VG"
rc=$?
set -e
check_eq "valgrind: no memory error, no definite leak, exit 0 after SIGTERM" "$rc" "0"
grep -v "remora-worker\[" "$T/wvg.log" | head -20 || true

e2e_finish
