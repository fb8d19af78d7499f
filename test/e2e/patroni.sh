#!/usr/bin/env bash
#
# The Patroni recipe of doc/operator-guide.md ("Failover", "With Patroni"),
# on loopback: one etcd (Debian's etcd-server), two Patroni nodes with
# synchronous_mode and remora preloaded through Patroni's parameters.  The
# leader's Patroni and PostgreSQL die (kill -9, immediate stop); Patroni
# promotes the synchronous standby once the leader key's ttl (10 s) runs
# out; there the launcher starts, the job submitted on the old leader is
# there, reconcile rebuilds the coordination state, and Patroni asks no
# synchronous standby of the lone new leader.  (failover.sh tests what
# happens to running jobs, with pg_ctl promote.)
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin patroni
PGBIN=$(pg_config --bindir)
command -v patroni >/dev/null && command -v etcd >/dev/null ||
	{ not_ok "patroni and etcd are installed (test/lib/deps.sh)"; exit 1; }
ETCD_C=$(free_port); ETCD_P=$(free_port)
mkdir -p "$T/etcd"
etcd --name e1 --data-dir "$T/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_C" \
	--advertise-client-urls "http://127.0.0.1:$ETCD_C" --listen-peer-urls "http://127.0.0.1:$ETCD_P" \
	--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_P" --initial-cluster "e1=http://127.0.0.1:$ETCD_P" \
	>"$T/etcd.log" 2>&1 &
echo "$! KILL" >>"$SERVICES_DIR/pids"
wait_port "$ETCD_C"
declare -A PORT REST
for n in n1 n2; do
	PORT[$n]=$(free_port); REST[$n]=$(free_port)
	mkdir -p "$T/$n"; chown postgres: "$T/$n"; chmod 700 "$T/$n"
	cat >"$T/$n.yml" <<YML
scope: remora-test
name: $n
restapi:
  listen: 127.0.0.1:${REST[$n]}
  connect_address: 127.0.0.1:${REST[$n]}
etcd3:
  hosts: 127.0.0.1:$ETCD_C
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    synchronous_mode: true
    postgresql:
      parameters:
        synchronous_commit: "on"
        shared_preload_libraries: remora
        max_worker_processes: 32
        fsync: "off"
        remora.max_workers: 1
        remora.lease_duration: 4s
        remora.default_bucket: target
        remora.allow_networks: 127.0.0.1/32
  initdb: [{encoding: UTF8}, {locale: C.UTF-8}]
postgresql:
  listen: 127.0.0.1:${PORT[$n]}
  connect_address: 127.0.0.1:${PORT[$n]}
  data_dir: $T/$n/data
  bin_dir: $PGBIN
  parameters:
    unix_socket_directories: $T/$n
  authentication:
    superuser: {username: postgres, password: pw}
    replication: {username: replicator, password: rpw}
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 trust
    - host all all 127.0.0.1/32 trust
YML
	chown postgres: "$T/$n.yml"
done
# patroni() NAME: start the node; its pids (runuser's, Patroni's) are
# killed first when the script exits, before its PostgreSQL is stopped
patroni_node() {
	runuser -u postgres -- patroni "$T/$1.yml" >"$T/$1.log" 2>&1 &
	PPID_OF[$1]=$!
	e2e_at_exit "kill -9 \$(pgrep -P ${PPID_OF[$1]}) ${PPID_OF[$1]} 2>/dev/null"
}
e2e_at_exit 'cp "$T/n1.log" /tmp/patroni-n1.log; cp "$T/n2.log" /tmp/patroni-n2.log'
declare -A PPID_OF
patroni_node n1
leader_is() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${REST[$1]}/primary" | grep -q 200; }
check "n1 bootstraps and leads" wait_for 60 leader_is n1
patroni_node n2
sync_on() { curl -s "http://127.0.0.1:${REST[n2]}/sync" -o /dev/null -w '%{http_code}' | grep -q 200; }
check "n2 becomes the synchronous standby" wait_for 90 sync_on
export PGHOST=127.0.0.1 PGPORT=${PORT[n1]} PGUSER=postgres
q "CREATE EXTENSION remora" >/dev/null
q "SELECT remora_submit('http://127.0.0.1:8080/x.bin')" >/dev/null
check_eq "synchronous_standby_names set by Patroni" "$(q "SHOW synchronous_standby_names")" "n2"
t0=$(date +%s)
kill -9 "$(pgrep -P "${PPID_OF[n1]}")" "${PPID_OF[n1]}"
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$T/n1/data" -m immediate stop >/dev/null 2>&1
check "Patroni promotes n2" wait_for 60 leader_is n2
echo "# promoted after $(($(date +%s) - t0)) s"
export PGPORT=${PORT[n2]}
launcher() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora launcher'")" = 1 ]; }
check "the launcher runs on the new leader" wait_for 30 launcher
check_eq "the job is there" "$(q "SELECT count(*) FROM remora.jobs")" 1
coord() { [ "$(q "SELECT count(*) FROM remora.coordination")" = 1 ]; }
check "reconcile rebuilt the coordination state" wait_for 30 coord
check_eq "no synchronous standby demanded by the lone leader" "$(q "SHOW synchronous_standby_names")" ""
e2e_finish
