#!/usr/bin/env bash
#
# The external worker, end to end: with remora.max_workers = 0 (PostgreSQL
# only coordinates) remora-worker, as a non-superuser role that is a member
# of remora_worker, finishes an http job, a multi-part http job, an S3
# prefix job, a Hugging Face snapshot and an export, each read back with
# the AWS CLI; --help and a bad option's exit code; a NOTIFY wakes it
# well before its poll would, and --poll-only still finishes; SIGTERM
# mid-transfer hands the attempt back and a later run finishes the job;
# remora_workers shows host, label and version; remora.worker_settings()
# is refused to a plain remora_user; the staging of finished attempts is
# cleaned by the worker's sweep.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin external
stack_up

WORKER=$(pg_config --bindir)/remora-worker
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
check "--help documents the exit codes and --poll-only" \
	grep -q -- "--poll-only" "$T/help.out"
set +e
"$WORKER" --no-such-option >/dev/null 2>&1
rc=$?
"$WORKER" --concurrency 0 >/dev/null 2>&1
rc2=$?
set -e
check_eq "a bad option exits 2" "$rc" "2"
check_eq "a bad --concurrency exits 2" "$rc2" "2"

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
start_remora_worker w1 --label e2e-one --concurrency 3 "$CONNINFO"
W1=$REMORA_WORKER_PID
registered() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = 'e2e-one' AND stopped_at IS NULL")" = 1 ]; }
check "remora-worker records its incarnation" wait_for 20 registered
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

e2e_finish
