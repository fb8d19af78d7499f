#!/usr/bin/env bash
#
# The Patroni recipe of doc/operator-guide.md ("Failover", "With Patroni"),
# on loopback, under load: one etcd (Debian's etcd-server), two Patroni
# nodes with synchronous_mode and remora in Patroni's parameters, the
# chaos run's job mix (test/lib/chaos.sh: http objects of one part and of
# several, S3 prefixes, Hub snapshots, exports of results) run by the
# leader's background workers and by two remora-workers that find the
# leader through a multi-host conninfo (target_session_attrs=read-write).
# While jobs run and more are submitted, the primary is switched over
# (patronictl switchover: planned, the old primary stopped cleanly), and
# later killed (kill -9 of its Patroni, its postmaster and every backend,
# as if its host died): Patroni promotes the synchronous standby once the
# leader key's ttl (10 s) runs out.  Submits carry idempotency keys and are
# replayed while no leader answers, so a job counted is one whose submit
# committed; with synchronous replication a committed submit survives.
#
# Then the chaos run's checks (mix_verify): every acknowledged job ended
# once, succeeded, with one result from its only succeeded attempt; every
# member and manifest read back from the store has its recorded SHA-256,
# and its source's; nothing published twice; every ended attempt's
# staging cleaned, nothing else left under the staging area, and on RGW no
# multipart upload left open.  CHAOS_SEED replays the mix.
#
# CHAOS_SOAK=1 (test/chaos/soak.sh, the soak's failover phase) runs a
# mix three times as large; PATRONI_SUMMARY=FILE keeps a summary there.
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/chaos.sh"
e2e_begin patroni
N_OK=0 N_NOT_OK=0	# counted for the summary
ok() { N_OK=$((N_OK + 1)); echo "ok - $E2E_LABEL$*"; }
not_ok() { N_NOT_OK=$((N_NOT_OK + 1)); echo "not ok - $E2E_LABEL$*"; E2E_FAILED=1; }
PGBIN=$(pg_config --bindir)
command -v patroni >/dev/null && command -v etcd >/dev/null ||
	{ not_ok "patroni and etcd are installed (test/lib/deps.sh)"; exit 1; }

# the mix: small, so that the whole test stays within three minutes, and
# from nginx's 1 MB/s, so that transfers are under way at each failover
SEED=${CHAOS_SEED:-$(((RANDOM << 15) | RANDOM))}
RANDOM=$SEED
N_HTTP=8 N_PREFIX=3 N_HUB=2 N_EXPORT=3
[ -z "${CHAOS_SOAK:-}" ] || N_HTTP=24 N_PREFIX=9 N_HUB=6 N_EXPORT=9
MIX_SIZES_1="150000 600000 3000000" MIX_SIZES_2="11000000 16000000"
MIX_SIZES="150000 600000 3000000 11000000"
mix_draw
mix_draw_exports
echo "# $(date +%T) seed $SEED: $N_JOBS jobs, $N_EXPORT exports, store ${REMORA_STORE:-s3rver}"
mix_print | sed 's/^/# /'
stack_services
MIX_HTTP=$SRC/slow/c
mix_sources

ETCD_C=$(free_port); ETCD_P=$(free_port)
mkdir -p "$T/etcd"
etcd --name e1 --data-dir "$T/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_C" \
	--advertise-client-urls "http://127.0.0.1:$ETCD_C" --listen-peer-urls "http://127.0.0.1:$ETCD_P" \
	--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_P" --initial-cluster "e1=http://127.0.0.1:$ETCD_P" \
	>"$T/etcd.log" 2>&1 &
service_pid $! KILL
wait_port "$ETCD_C"
# the stack's remora settings and the chaos run's, as Patroni parameters
# (every value a YAML string: Patroni passes it on as it is); one
# background worker of two attempts, so that the remora-workers, which
# poll, take their share of the jobs
parameters() {
	{
		stack_settings | grep -vE '^remora\.(max_workers|worker_concurrency) '
		echo "remora.max_workers = 1"
		echo "remora.worker_concurrency = 2"
		echo "remora.max_attempts = 60"
		echo "remora.hf_endpoint = 'http://127.0.0.1:$HUB_PORT'"
		echo "remora.hf_token = '$TOKEN'"
	} | sed -E "s/^([a-z0-9_.]+) = '?([^']*)'?\$/        \1: \"\2\"/"
}
declare -A PORT REST LINES_BEFORE
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
$(parameters)
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
# patroni_node NAME: start the node; its pids (runuser's, Patroni's) are
# killed first when the script exits, before its PostgreSQL is stopped
patroni_node() {
	runuser -u postgres -- patroni "$T/$1.yml" >"$T/$1.log" 2>&1 &
	PPID_OF[$1]=$!
	# only while it is still that runuser: n2's is killed long before
	e2e_at_exit "pid_is ${PPID_OF[$1]} '$(pid_start $!)' && kill -9 \$(pgrep -P ${PPID_OF[$1]}) ${PPID_OF[$1]} 2>/dev/null"
}
e2e_at_exit 'cp "$T/n1.log" /tmp/patroni-n1.log; cp "$T/n2.log" /tmp/patroni-n2.log'
e2e_at_exit 'for f in "$T"/w*.log; do [ ! -e "$f" ] || cp "$f" "/tmp/patroni$E2E_TAG-${f##*/}"; done'
declare -A PPID_OF
patroni_node n1
leader_is() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:${REST[$1]}/primary" | grep -q 200; }
check "n1 bootstraps and leads" wait_for 180 leader_is n1
patroni_node n2
sync_is() { curl -s "http://127.0.0.1:${REST[$1]}/sync" -o /dev/null -w '%{http_code}' | grep -q 200; }
check "n2 becomes the synchronous standby" wait_for 90 sync_is n2
[ "$E2E_FAILED" = 0 ] || exit 1

# every client finds the leader: psql (q, qr) and the remora-workers
export PGHOST=127.0.0.1,127.0.0.1 PGPORT=${PORT[n1]},${PORT[n2]} PGUSER=postgres PGTARGETSESSIONATTRS=read-write
q "CREATE EXTENSION remora" >/dev/null
q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw" >/dev/null
check_eq "synchronous_standby_names set by Patroni" "$(q "SHOW synchronous_standby_names")" "n2"
CONNINFO="host=127.0.0.1,127.0.0.1 port=${PORT[n1]},${PORT[n2]} dbname=postgres user=rw target_session_attrs=read-write"
for w in w1 w2; do start_remora_worker "$w" --label "$w" --concurrency 2 "$CONNINFO"; done

launcher() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora launcher'")" = 1 ]; }
serving() {	# serving NODE: NODE leads, and its launcher runs
	leader_is "$1" && [ "$(q "SELECT inet_server_port()")" = "${PORT[$1]}" ] && launcher
}
check "the launcher runs on n1" wait_for 30 serving n1
echo "# $(date +%T) n1 serves"
# feed N RUNNING: RUNNING jobs or more run, or the next of the mix's
# first N is submitted (poll it until they run)
feed() {
	[ "$(q "SELECT count(*) FROM remora.jobs WHERE state = 'running'")" -ge "$2" ] && return 0
	[ "$SUBMITTED" -lt "$1" ] && submit_until $((SUBMITTED + 1))
	return 1
}
# submit_until N: the mix's jobs up to the N-th
submit_until() {
	local before
	while [ "$SUBMITTED" -lt "$1" ]; do
		before=$SUBMITTED
		submit_one
		[ "$SUBMITTED" -gt "$before" ] || { not_ok "job $((before + 1)) of the mix is submitted"; exit 1; }
	done
}
check "jobs run on n1" wait_for 60 feed 5 2

# ---- a switchover while jobs run, and submits during it ----
t0=$(date +%s)
chaos_note switchover "n1 to n2, $(q "SELECT count(*) FROM remora.jobs WHERE state = 'running'") jobs running"
patronictl -c "$T/n1.yml" switchover --leader n1 --candidate n2 --force >"$T/switchover.log" 2>&1 &
switchover=$!
submit_until 8
wait "$switchover"
check "patronictl switches over to n2" test $? = 0
check "n2 leads, and its launcher runs" wait_for 60 serving n2
SWITCHOVER_S=$(($(date +%s) - t0))
echo "# $(date +%T) n2 serves, $SWITCHOVER_S s after the switchover began"
check "n1 becomes n2's synchronous standby" wait_for 90 sync_is n1
echo "# $(date +%T) n1 is synchronous again"
check_eq "synchronous_standby_names set by Patroni" "$(q "SHOW synchronous_standby_names")" "n1"
export_one
check "a job runs on n2" wait_for 60 feed $((N_JOBS - 1)) 1

# ---- the leader killed while jobs run, and submits while none leads ----
t0=$(date +%s)
for w in w1 w2; do LINES_BEFORE[$w]=$(wc -l <"$T/$w.log"); done
pm=$(head -1 "$T/n2/data/postmaster.pid")
chaos_note leader_killed "n2, $(q "SELECT count(*) FROM remora.jobs WHERE state = 'running'") jobs running"
kill -9 "$(pgrep -P "${PPID_OF[n2]}")" "${PPID_OF[n2]}" "$pm" $(pgrep -P "$pm")
submit_until "$N_JOBS"
check "Patroni promotes n1, and its launcher runs" wait_for 60 serving n1
FAILOVER_S=$(($(date +%s) - t0))
echo "# $(date +%T) n1 serves, $FAILOVER_S s after the kill"
check_eq "no synchronous standby demanded by the lone leader" "$(q "SHOW synchronous_standby_names")" ""
coord() { [ "$(q "SELECT count(*) FROM remora.coordination")" = 1 ]; }
check "reconcile rebuilt the coordination state there" wait_for 30 coord
reconnected() {	# reconnected NODE [FROM_LINE]: each remora-worker's log says it
	local w
	for w in w1 w2; do
		# grep -c reads to the end: grep -q would stop at the match, and a
		# tail still writing would die of SIGPIPE, which pipefail counts
		# as a failure (1 call in 70 on a 7 KB log)
		tail -n +"${2:-${LINES_BEFORE[$w]}}" "$T/$w.log" | grep -c "connected to 127.0.0.1:${PORT[$1]} " >/dev/null || return 1
	done
}
if ! check "the remora-workers connected to n2 after the switchover, and to n1 again after the kill" \
	eval 'reconnected n2 1 && wait_for 60 reconnected n1'; then
	for w in w1 w2; do
		echo "# $w: ${LINES_BEFORE[$w]} lines before the kill; n1 on ${PORT[n1]}, n2 on ${PORT[n2]}"
		grep -n "connected to" "$T/$w.log" | sed "s/^/# $w: /"
	done
fi

mix_settle
echo "# $(date +%T) every job ended"
mix_verify
check_eq "both kinds of worker committed results" \
	"$(q "SELECT count(DISTINCT i.kind) FROM remora.results r JOIN remora.attempts a USING (attempt_id) JOIN remora.incarnations i USING (incarnation)")" 2
if [ -n "${PATRONI_SUMMARY:-}" ]; then
	{
		echo "Failover under load (test/e2e/patroni.sh, seed $SEED, store ${REMORA_STORE:-s3rver}, $(date -u +%Y-%m-%d)):" \
			"$SUBMITTED jobs and ${#EXPORTED[@]} exports across a Patroni switchover and a kill of the leader."
		echo
		echo "| | |"
		echo "| --- | --- |"
		echo "| new leader serving after the switchover began | $SWITCHOVER_S s |"
		echo "| new leader serving after the leader was killed | $FAILOVER_S s |"
		q "SELECT '| ' || CASE WHEN source_kind = 'export' THEN 'exports ' ELSE 'jobs ' END || state || ' | ' || count(*) || ' |'
			FROM remora.jobs WHERE $CHAOS GROUP BY source_kind = 'export', state ORDER BY 1"
		q "SELECT '| attempts lost (on the old leader, or cut off) | ' || count(*) FILTER (WHERE a.state = 'lost') || ' |' || chr(10)
			|| '| of the replacements, resumed from a checkpoint | ' || count(*) FILTER (WHERE a.resumed_from IS NOT NULL AND a.restart_reason IS NULL) || ' |'
			FROM remora.attempts a JOIN remora.jobs j USING (job_id) WHERE j.$CHAOS"
		echo "| members and exported keys read back intact | $(printf '%s\n' "${CHECKED_MEMBERS[@]}" | awk '{ n += $1 } END { print n + 0 }') |"
		echo
		echo "Checks: $N_OK passed, $N_NOT_OK failed."
	} >"$PATRONI_SUMMARY"
fi
e2e_finish
