#!/usr/bin/env bash
#
# Point-in-time recovery and the orphans it leaves (doc/operator-guide.md,
# "Backup and restore"): with a base backup (pg_basebackup) and a WAL
# archive, two jobs and an export succeed, a restore point is made, two
# more jobs succeed, and the cluster is recovered to the restore point.
# The database is then right (the earlier jobs resolve, the later ones are
# gone, a new job gets a fresh id and publishes its own content), but the
# later jobs' objects are still in the store: remora.sweep_orphans lists
# exactly those (dry run, the default), keeps them while they are younger
# than older_than, deletes exactly those with dry_run => false, and leaves
# every object of a known attempt and every exported key.  Only
# remora_admin may call it.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin pitr

stack_services
WAL=$T/pg/wal
e2e_cluster < <(
	stack_settings
	echo "archive_mode = on"
	echo "archive_command = 'cp %p $WAL/%f'"
)
runuser -u postgres -- mkdir -p "$WAL"
q "CREATE EXTENSION remora" >/dev/null
q "CREATE ROLE dba LOGIN IN ROLE remora_admin; CREATE ROLE carol LOGIN IN ROLE remora_user" >/dev/null
q "SELECT remora.grant_target('carol', 'target', 'kept*')" >/dev/null
as() { local who=$1; shift; PGUSER=$who q "$@"; }
staged() {	# staged JOB [PREFIX]: the keys of the job's staging area, one a line
	aws_s3 s3api list-objects-v2 --bucket target --prefix "${2:-remora}/$1/" \
		--query 'Contents[].Key' --output text | tr '\t' '\n' | grep -v '^None$' | sort
}
listing() {	# every key of the bucket, one a line
	aws_s3 s3api list-objects-v2 --bucket target --query 'Contents[].Key' \
		--output text | tr '\t' '\n' | grep -v '^None$' | sort
}

runuser -u postgres -- pg_basebackup -h "$PGHOST" -p "$PGPORT" -U postgres \
	-D "$T/pg/base" -X stream >"$T/basebackup.log" 2>&1 &&
	ok "pg_basebackup makes a base backup" ||
	not_ok "pg_basebackup makes a base backup: $(tail -3 "$T/basebackup.log")"

make_file one.bin 300000
make_file two.bin 200000
make_file late.bin 250000
j1=$(as carol "SELECT remora_submit('$SRC/one.bin')")
# under prefix kept, beside the export's keys: the sweep lists them too
j2=$(as carol "SELECT remora_submit('$SRC/two.bin', 'target', 'kept')")
check "the first job succeeds" wait_state "$j1" succeeded 60
check "the second job succeeds" wait_state "$j2" succeeded 60
ex=$(as carol "SELECT remora_export($j1, 'target', 'kept/out')")
check "its export succeeds" wait_state "$ex" succeeded 60
q "SELECT pg_create_restore_point('before_the_late_jobs')" >/dev/null
q "SELECT pg_switch_wal()" >/dev/null
j3=$(as carol "SELECT remora_submit('$SRC/late.bin')")
j4=$(as carol "SELECT remora_submit('$SRC/two.bin', options => '{\"label\": \"late\"}')")
check "a later job succeeds" wait_state "$j3" succeeded 60
check "and another" wait_state "$j4" succeeded 60
{ staged "$j3"; staged "$j4"; } | sort >"$T/forgotten.txt"
check "the later jobs wrote objects" test "$(wc -l <"$T/forgotten.txt")" -ge 4
listing >"$T/before.txt"
last=$(q "SELECT pg_walfile_name(pg_current_wal_lsn())")
q "SELECT pg_switch_wal()" >/dev/null
archived() { [ -f "$WAL/$last" ]; }
check "the WAL up to the later jobs is archived" wait_for 30 archived

# the recovery: the base backup, the archive, the restore point
cluster_stop "$T/pg" immediate
mv "$T/pg/data" "$T/pg/data.lost"
mv "$T/pg/base" "$T/pg/data"
{
	echo "archive_mode = off"
	echo "restore_command = 'cp $WAL/%f %p'"
	echo "recovery_target_name = 'before_the_late_jobs'"
	echo "recovery_target_action = 'promote'"
} >>"$T/pg/data/postgresql.conf"
runuser -u postgres -- touch "$T/pg/data/recovery.signal"
cluster_start "$T/pg" || { not_ok "the recovered cluster starts"; exit 1; }
promoted() { [ "$(q "SELECT pg_is_in_recovery()")" = f ]; }
check "it recovers to the restore point and is promoted" wait_for 60 promoted

check_eq "the earlier jobs are there and succeeded" \
	"$(q "SELECT string_agg(state, ' ' ORDER BY job_id) FROM remora.jobs WHERE job_id IN ($j1, $j2, $ex)")" \
	"succeeded succeeded succeeded"
check_eq "the later ones are not" "$(q "SELECT count(*) FROM remora.jobs WHERE job_id IN ($j3, $j4)")" 0
check_eq "an earlier result resolves" \
	"$(as carol "SELECT path FROM remora_result($j1)")" "one.bin"

# what the sweep finds: exactly the forgotten jobs' objects
as dba "SELECT key FROM remora.sweep_orphans(older_than => '0') ORDER BY key" >"$T/found.txt"
if diff "$T/forgotten.txt" "$T/found.txt" >"$T/found.diff"; then
	ok "the sweep lists exactly the objects of the forgotten attempts ($(wc -l <"$T/found.txt"))"
else
	not_ok "the sweep lists exactly the objects of the forgotten attempts"
	head -20 "$T/found.diff"
fi
check_eq "a dry run deletes nothing" "$(listing | diff - "$T/before.txt" | head -3)" ""
check_eq "with the default older_than (a day) none of them is old enough" \
	"$(as dba "SELECT count(*) FROM remora.sweep_orphans()")" 0
check_eq "a user may not sweep (42501)" \
	"$(PGUSER=carol psql -X -A -t -q -v VERBOSITY=verbose -d postgres \
		-c "SELECT count(*) FROM remora.sweep_orphans()" 2>&1 | grep -oE 'ERROR: +42501' | grep -oE '42501')" "42501"
check_eq "a negative older_than is refused (22023)" \
	"$(PGUSER=dba psql -X -A -t -q -v VERBOSITY=verbose -d postgres \
		-c "SELECT count(*) FROM remora.sweep_orphans(older_than => '-1 hour')" 2>&1 | grep -oE 'ERROR: +22023' | grep -oE '22023')" "22023"

as dba "SELECT key || ' ' || deleted FROM remora.sweep_orphans(older_than => '0', dry_run => false) ORDER BY key" >"$T/deleted.txt"
check_eq "with dry_run => false it deletes them, and says so" \
	"$(sed 's/$/ true/' "$T/forgotten.txt" | diff - "$T/deleted.txt" | head -3)" ""
listing >"$T/after.txt"
check_eq "what is left is everything else: the known attempts' objects, the exported keys" \
	"$(comm -23 "$T/before.txt" "$T/forgotten.txt" | diff - "$T/after.txt" | head -3)" ""
check "the exported keys are among them" grep -q '^kept/out/one.bin$' "$T/after.txt"
check_eq "and the earlier results are all there" \
	"$({ staged "$j1"; staged "$j2" kept; } | sort | comm -23 - "$T/after.txt" | head -3)" ""
check_eq "a second sweep finds nothing" \
	"$(as dba "SELECT count(*) FROM remora.sweep_orphans(older_than => '0')")" 0

# the workers carry on: a new job gets a fresh id and publishes its own
j5=$(as carol "SELECT remora_submit('$SRC/late.bin')")
check "a new job's id is past the forgotten ones ($j5)" test "$j5" -gt "$j4"
check "it succeeds" wait_state "$j5" succeeded 60
check_eq "with its own content" "$(as carol "SELECT sha256 FROM remora_result($j5)")" \
	"$(sha256sum "$WWW/late.bin" | cut -d' ' -f1)"

e2e_finish
