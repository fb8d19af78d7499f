#!/usr/bin/env bash
#
# Network partitions (test/lib/partition.sh): a remora-worker running as
# a throwaway OS user is cut off mid-transfer, by a packet filter on the
# loopback, for longer than the lease (4 s) and then healed:
#
#   - from PostgreSQL, the store still reachable (a true zombie: alive,
#     uploading, leaseless): it stops its attempt, a second worker takes
#     the job over once the lease lapsed and finishes it;
#   - from the store, PostgreSQL still reachable: it keeps its lease and
#     finishes when the store comes back, or the job is retried;
#   - from both: as from PostgreSQL.
#
# Each time: the job ends with exactly one result, from the attempt that
# held the job's last lease (its fencing token the greatest issued); the
# cut-off worker reconnects after the heal (its heartbeat moves again) and
# publishes nothing of an attempt that lost its lease; that attempt's
# staging, what it uploaded while cut off included, is cleaned; no
# multipart upload stays open (checked on RGW, which lists them).
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/partition.sh"
e2e_begin partition
stack_up
e2e_at_exit 'for f in "$T"/w*.log; do cp "$f" "/tmp/partition$E2E_TAG-${f##*/}"; done'

CUT_SECONDS=12 # three leases
W1_USER=$(partition_name w1)
q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw" >/dev/null
# only remora-workers run jobs here
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
no_bgworker() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 0 ]; }
check "with remora.max_workers = 0 no background worker runs" wait_for 20 no_bgworker
# over TCP: the filter sees the loopback, not the socket directory
CONNINFO="host=127.0.0.1 port=$PG_PORT dbname=postgres user=rw"
partition_user "$W1_USER" || { not_ok "the partitioned worker's user and filter are set up"; exit 1; }

declare -A WPID
worker() { # worker NAME [USER]: remora-worker NAME (label NAME), as USER if given
	local name=$1 user=${2:-}
	if [ -n "$user" ]; then
		(partition_run "$user" "$(pg_config --bindir)/remora-worker" --label "$name" "$CONNINFO") \
			>>"$T/$name.log" 2>&1 &
		WPID[$name]=$!
		service_pid $! KILL
	else
		start_remora_worker "$name" --label "$name" "$CONNINFO"
		WPID[$name]=$REMORA_WORKER_PID
	fi
}
stop_worker() { kill -TERM "${WPID[$1]}" && wait "${WPID[$1]}"; }
live() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = '$1' AND stopped_at IS NULL")" = 1 ]; }
# beats_since LABEL TIME: its incarnation is live and heartbeat after TIME
beats_since() {
	[ "$(q "SELECT count(*) FROM remora_workers WHERE label = '$1' AND state = 'running' AND heartbeat_at > '$2'")" = 1 ]
}
runs_on() { # runs_on JOB LABEL: the job's running attempt is LABEL's
	[ "$(q "SELECT j.state || ':' || coalesce(i.label, '') FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt JOIN remora.incarnations i ON i.incarnation = a.incarnation WHERE j.job_id = $1")" = "running:$2" ]
}
current_attempt() { q "SELECT current_attempt FROM remora.jobs WHERE job_id = $1"; }
prefix_of() { q "SELECT remora._staging_prefix(j.prefix, j.job_id, a.attempt_id) FROM remora.attempts a JOIN remora.jobs j USING (job_id) WHERE a.attempt_id = '$1'"; }
staging_gone() { # staging_gone ATTEMPT: cleaned, and no object left under its prefix
	[ "$(q "SELECT cleaned_at IS NOT NULL FROM remora.attempts WHERE attempt_id = '$1'")" = t ] || return 1
	[ "$(aws_s3 s3 ls --recursive "s3://target/$(prefix_of "$1")" 2>/dev/null | wc -l)" = 0 ]
}
# open_uploads [PREFIX]: multipart uploads open under PREFIX (RGW lists them)
open_uploads() {
	aws_s3 s3api list-multipart-uploads --bucket target --prefix "${1:-}" \
		--query 'length(Uploads || `[]`)' --output text
}
no_open_uploads() { [ "$(open_uploads "${1:-}")" = 0 ]; }

worker w1 "$W1_USER"
check "a remora-worker runs as its own OS user ($W1_USER)" wait_for 20 live w1
check_eq "it is that user's process" "$(ps -o user= -p "${WPID[w1]}")" "$W1_USER"

# partition NAME PORT...: a job of 20 MB at 1 MB/s on w1, cut from PORTs
# once its first part is checkpointed, a second worker started; healed
# once the cut lasted CUT_SECONDS and the job moved on
partition() {
	local name=$1 j old t_cut t_heal n dropped held a
	shift
	make_file "$name.bin" 20000000
	j=$(q "SELECT remora_submit('$SRC/slow/$name.bin')")
	check "$name: w1 runs the job" wait_for 20 runs_on "$j" w1
	check "$name: its first part is checkpointed" wait_for 30 validated_at_least "$j" 5242880
	old=$(current_attempt "$j")
	n=$(grep -c "connected to" "$T/w1.log")
	partition_cut "$W1_USER" "$@"
	t_cut=$(q "SELECT now()")
	worker "w2-$name"
	sleep "$CUT_SECONDS" # the nemesis's length, not a wait for a condition
	dropped=$(partition_dropped "$W1_USER")
	case $name in
	store) ;;
	*)
		fenced() { grep -q "job $j attempt $old stopped" "$T/w1.log"; }
		check "$name: cut off, w1 stops its attempt" wait_for 20 fenced
		check "$name: the second worker takes the job over" wait_for 30 runs_on "$j" "w2-$name"
		# (cut from the database: its heartbeat ages past the lease)
		silent() { [ "$(q "SELECT state FROM remora_workers WHERE label = 'w1' AND stopped_at IS NULL")" = silent ]; }
		check "$name: remora_workers says w1 is silent" wait_for 30 silent
		;;
	esac
	partition_heal "$W1_USER"
	t_heal=$(q "SELECT now()")
	echo "# $name: cut at $t_cut for $CUT_SECONDS s, $dropped packets dropped, healed at $t_heal"
	check "$name: the filter dropped w1's packets" test "$dropped" -gt 0
	check "$name: the job succeeds" wait_state "$j" succeeded 120
	verify "$j" "$name.bin"
	check_eq "$name: exactly one result, from a succeeded attempt with the job's greatest token" \
		"$(q "SELECT count(*) || ':' || bool_and(a.state = 'succeeded' AND a.fencing_token = r.fencing_token
			AND a.fencing_token = (SELECT max(fencing_token) FROM remora.attempts WHERE job_id = $j))
			FROM remora.results r JOIN remora.attempts a USING (attempt_id) WHERE r.job_id = $j")" "1:true"
	check_eq "$name: no other attempt succeeded" \
		"$(q "SELECT count(*) FROM remora.attempts a WHERE job_id = $j AND state = 'succeeded'
			AND attempt_id <> (SELECT attempt_id FROM remora.results WHERE job_id = $j)")" 0
	held=$(q "SELECT attempt_id = '$old' FROM remora.results WHERE job_id = $j")
	[ "$name" = store ] || check_eq "$name: the cut-off attempt is lost, not the result's" \
		"$(q "SELECT state FROM remora.attempts WHERE attempt_id = '$old'"):$held" "lost:f"
	check "$name: w1 is live again after the heal, its heartbeat moving" wait_for 60 beats_since w1 "$t_heal"
	[ "$name" = store ] || {
		back() { [ "$(grep -c "connected to" "$T/w1.log")" -gt "$n" ]; }
		check "$name: w1's log says it reconnected" wait_for 30 back
	}
	if [ "$held" = f ]; then
		check "$name: the cut-off attempt's staging is cleaned, what it uploaded cut off included" \
			wait_for 60 staging_gone "$old"
		check_eq "$name: the cut-off attempt published no result" \
			"$(q "SELECT count(*) FROM remora.results WHERE attempt_id = '$old'")" 0
	fi
	for a in $(q "SELECT attempt_id FROM remora.attempts WHERE job_id = $j AND state <> 'succeeded' AND attempt_id <> '$old'"); do
		check "$name: attempt $a is cleaned" wait_for 60 staging_gone "$a"
	done
	if [ "${REMORA_STORE:-s3rver}" = rgw ]; then
		check "$name: no multipart upload stays open under the job" wait_for 60 no_open_uploads "remora/$j/"
	fi
	stop_worker "w2-$name"
}

partition postgres "$PG_PORT"
partition store "$S3_PROXY" "$S3_PORT"
partition both "$PG_PORT" "$S3_PROXY" "$S3_PORT"

make_file after.bin 100000
a=$(q "SELECT remora_submit('$SRC/after.bin')")
check "after the partitions, w1 alone finishes a new job" wait_state "$a" succeeded 60
check_eq "in its first incarnation" \
	"$(q "SELECT count(*) FROM remora.incarnations WHERE label = 'w1'"):$(q "SELECT i.label FROM remora.results r
		JOIN remora.attempts a USING (attempt_id) JOIN remora.incarnations i USING (incarnation) WHERE r.job_id = $a")" "1:w1"
if [ "${REMORA_STORE:-s3rver}" = rgw ]; then
	check "no multipart upload stays open in the bucket" wait_for 60 no_open_uploads
else
	echo "# the test server lists no multipart uploads: checked on RGW"
fi
check_eq "the workers' logs have no crash or assertion" \
	"$(cat "$T"/w*.log | grep -ciE 'assert|segmentation|core dumped' || true)" 0

e2e_finish
