#!/usr/bin/env bash
#
# Installation: remora refuses to load outside shared_preload_libraries and
# says how to fix it; with it preloaded, CREATE EXTENSION creates the
# roles, and DROP/CREATE EXTENSION round-trips.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin install

# a cluster without the library preloaded
CLUSTER_PRELOAD= e2e_cluster </dev/null

out=$(psql -X -q -c "CREATE EXTENSION remora" 2>&1 || true)
check "refused without shared_preload_libraries" grep -q 'remora must be loaded via shared_preload_libraries' <<<"$out"
check "the hint names the setting" grep -q 'HINT:  Add remora to shared_preload_libraries' <<<"$out"
check_eq "nothing was created" "$(q "SELECT count(*) FROM pg_namespace WHERE nspname = 'remora'")" "0"

cluster_stop "$T/pg"
sed -i "s/^shared_preload_libraries = ''/shared_preload_libraries = 'remora'/" "$T/pg/data/postgresql.conf"
echo "remora.max_workers = 0" >>"$T/pg/data/postgresql.conf"
cluster_start "$T/pg"
q "CREATE EXTENSION remora" >/dev/null
check_eq "the three roles exist" \
	"$(q "SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles WHERE rolname LIKE 'remora\_%'")" \
	"remora_admin,remora_user,remora_worker"
check_eq "remora_admin is a remora_user" "$(q "SELECT pg_has_role('remora_admin', 'remora_user', 'MEMBER')")" "t"
q "DROP EXTENSION remora" >/dev/null
q "CREATE EXTENSION remora" >/dev/null
check_eq "DROP and CREATE EXTENSION round-trip (roles kept)" \
	"$(q "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'remora\_%'")" "3"
check_eq "an unknown remora.* setting is refused" \
	"$(psql -X -q -t -A -c "SET remora.no_such_setting = 1" 2>&1 | grep -c 'invalid configuration parameter name')" "1"

e2e_finish
