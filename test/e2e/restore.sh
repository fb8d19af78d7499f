#!/usr/bin/env bash
#
# Backup and restore with pg_dump and pg_restore (doc/operator-guide.md,
# "Backup and restore"): a database with jobs of two users, alice and bob
# (results, an export, target and source grants, role limits, webhook
# secrets, a job of bob's still queued), is dumped and restored into
# another cluster whose roles were created in another order, so that bob
# there has the OID alice had here.  Then each user sees exactly their
# own jobs, results, limits and secret; the grants and the export's keys
# name the same roles; the queued job runs, as bob's; and job ids
# continue past the restored ones.  Before roles were recorded by name,
# bob saw alice's jobs, and the first submit failed with 23505 (the job
# id sequence was not dumped).
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin restore

stack_services
# the roles first, so that their OIDs are the first of the cluster
e2e_cluster < <(stack_settings)
q "CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN" >/dev/null
q "CREATE EXTENSION remora; GRANT remora_user TO alice, bob" >/dev/null
as() { local who=$1; shift; PGUSER=$who q "$@"; }
oid_of() { q "SELECT oid FROM pg_roles WHERE rolname = '$1'"; }
alice_oid=$(oid_of alice)

make_file a.bin 300000
make_file b.bin 200000
make_file c.bin 100000
q "SELECT remora.grant_target('alice', 'target', 'alice/*'),
		  remora.grant_source('bob', 'target', 'in/*'),
		  remora.set_role_limits('bob', weight => 3, max_queued => 50),
		  remora.set_role_limits('alice', max_running => 7)" >/dev/null
ja=$(as alice "SELECT remora_submit('$SRC/a.bin', 'target', 'alice/jobs')")
jb=$(as bob "SELECT remora_submit('$SRC/b.bin')")
check "alice's job succeeds" wait_state "$ja" succeeded 60
check "bob's job succeeds" wait_state "$jb" succeeded 60
ex=$(as alice "SELECT remora_export($ja, 'target', 'alice/out')")
check "alice's export succeeds" wait_state "$ex" succeeded 60
secret_a=$(as alice "SELECT remora_webhook_secret()")
secret_b=$(as bob "SELECT remora_webhook_secret()")
# no worker from here on: bob's next job is queued when the dump is made
q "ALTER SYSTEM SET remora.max_workers = 0" && q "SELECT pg_reload_conf()" >/dev/null
no_workers() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 0 ]; }
check "the workers stop" wait_for 30 no_workers
jq=$(as bob "SELECT remora_submit('$SRC/c.bin')")
check_eq "bob's last job is queued" "$(state "$jq")" queued

snapshot() {	# what each user and the admin see, one line each
	echo "alice jobs $(as alice "SELECT string_agg(job_id::text, ',' ORDER BY job_id) FROM remora_jobs")"
	echo "bob jobs $(as bob "SELECT string_agg(job_id::text, ',' ORDER BY job_id) FROM remora_jobs")"
	echo "alice exports $(as alice "SELECT string_agg(export_id::text, ',') FROM remora_exports")"
	echo "alice result $(as alice "SELECT string_agg(path || ' ' || sha256, ',') FROM remora_result($ja)")"
	echo "bob result $(as bob "SELECT string_agg(path || ' ' || sha256, ',') FROM remora_result($jb)")"
	echo "alice limits $(as alice "SELECT role || ' ' || weight || ' ' || max_running FROM remora_role_limits")"
	echo "bob limits $(as bob "SELECT role || ' ' || weight || ' ' || max_queued FROM remora_role_limits")"
	echo "target grants $(q "SELECT string_agg(role || ' ' || bucket || ' ' || prefix_pattern, ',' ORDER BY role) FROM remora_target_grants")"
	echo "source grants $(q "SELECT string_agg(role || ' ' || bucket || ' ' || prefix_pattern, ',' ORDER BY role) FROM remora_source_grants")"
	echo "owners $(q "SELECT string_agg(job_id || ' ' || owner, ',' ORDER BY job_id) FROM remora_jobs")"
	echo "export keys $(q "SELECT string_agg(key || ' ' || owner::text, ',' ORDER BY key) FROM remora.export_keys")"
}
snapshot >"$T/before.txt"
check "alice sees her job and bob his" grep -qx "alice jobs $ja" "$T/before.txt"

runuser -u postgres -- pg_dump -h "$PGHOST" -p "$PGPORT" -U postgres -Fc -d postgres \
	-f "$T/pg/dump" 2>"$T/dump.log" && ok "pg_dump writes the database" ||
	not_ok "pg_dump writes the database: $(cat "$T/dump.log")"

# The other cluster, with no worker until the restore is done: its roles
# created in another order, so that bob takes the OID alice has here
B_PORT=$(free_port)
stack_settings | sed 's/^remora.max_workers = .*/remora.max_workers = 0/' |
	cat - <(echo "remora.database = 'restored'") | cluster_init "$T/pgb" "$B_PORT"
cluster_start "$T/pgb" || { not_ok "the other cluster starts"; exit 1; }
b() { PGHOST=$T/pgb PGPORT=$B_PORT q "$@"; }
bas() { local who=$1; shift; PGHOST=$T/pgb PGPORT=$B_PORT PGUSER=$who q "$@"; }
# (each bob made and dropped takes an OID: the next one takes the next)
until b "CREATE ROLE bob LOGIN" && [ "$(b "SELECT oid FROM pg_roles WHERE rolname = 'bob'")" -ge "$alice_oid" ]; do
	b "DROP ROLE bob"
done
b "CREATE ROLE alice LOGIN" >/dev/null
check_eq "there bob has the OID alice has here" "$(b "SELECT oid FROM pg_roles WHERE rolname = 'bob'")" "$alice_oid"
# the extension's own roles, and their members, as pg_dumpall --roles-only would bring them
b "CREATE ROLE remora_user NOLOGIN; CREATE ROLE remora_admin NOLOGIN; CREATE ROLE remora_worker NOLOGIN;
   GRANT remora_user TO remora_admin, alice, bob" >/dev/null
b "CREATE DATABASE restored" >/dev/null
if runuser -u postgres -- pg_restore -h "$T/pgb" -p "$B_PORT" -U postgres -d restored \
	--exit-on-error "$T/pg/dump" >"$T/restore.log" 2>&1; then
	ok "pg_restore restores it into the other cluster"
else
	not_ok "pg_restore restores it into the other cluster: $(head -5 "$T/restore.log")"
fi

# the same checks, there
PGHOST=$T/pgb PGPORT=$B_PORT E2E_DB=restored snapshot >"$T/after.txt"
while IFS='|' read -r was now; do
	check_eq "after the restore: $(cut -d' ' -f1-2 <<<"$was")" "$now" "$was"
done < <(paste -d'|' "$T/before.txt" "$T/after.txt")
check_eq "alice's webhook secret is hers" "$(E2E_DB=restored bas alice "SELECT remora_webhook_secret()")" "$secret_a"
check_eq "bob's webhook secret is his" "$(E2E_DB=restored bas bob "SELECT remora_webhook_secret()")" "$secret_b"
check_eq "bob cannot see alice's result (P0002)" \
	"$(PGHOST=$T/pgb PGPORT=$B_PORT PGUSER=bob psql -X -A -t -q -v VERBOSITY=verbose -d restored \
		-c "SELECT count(*) FROM remora_result($ja)" 2>&1 | grep -oE 'ERROR: +P0002' | grep -oE 'P0002')" "P0002"

# workers there: the queued job runs, still bob's, and ids continue
b "ALTER SYSTEM SET remora.max_workers = 2" && b "SELECT pg_reload_conf()" >/dev/null
restored_state() { [ "$(E2E_DB=restored b "SELECT state FROM remora.jobs WHERE job_id = $jq")" = succeeded ]; }
check "the job queued at the dump runs after the restore" wait_for 60 restored_state
check_eq "and it is bob's" "$(E2E_DB=restored b "SELECT owner FROM remora_jobs WHERE job_id = $jq")" bob
next=$(E2E_DB=restored bas alice "SELECT remora_submit('$SRC/c.bin')" 2>&1)
check "a new job gets an id past every restored one ($next)" test "$next" -gt "$jq" 2>/dev/null

e2e_finish
