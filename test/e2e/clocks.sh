#!/usr/bin/env bash
#
# Clocks that disagree: a remora-worker whose wall clock is an hour ahead
# of the server's, and one an hour behind (libfaketime preloaded), each
# runs jobs on its own: an http object of several parts, long enough to
# renew its lease, and an S3 prefix.  Leases are judged by the server's
# clock alone: each job succeeds with one attempt, and while it runs its
# lease's timestamps are the server's (expires_at within the lease of the
# server's now(), never an hour off), and a retry is claimed when it is
# due by the server's clock.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin clocks
stack_up
e2e_at_exit 'for f in "$T"/w*.log; do cp "$f" "/tmp/clocks$E2E_TAG-${f##*/}"; done'

q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw" >/dev/null
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
no_bgworker() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 0 ]; }
check "with remora.max_workers = 0 no background worker runs" wait_for 20 no_bgworker
CONNINFO="host=$T/pg port=$PG_PORT dbname=postgres user=rw"
LEASE=$(q "SELECT extract(epoch FROM current_setting('remora.lease_duration')::interval)")

live() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = '$1' AND stopped_at IS NULL")" = 1 ]; }
runs_on() {
	[ "$(q "SELECT j.state || ':' || coalesce(i.label, '') FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt JOIN remora.incarnations i ON i.incarnation = a.incarnation WHERE j.job_id = $1")" = "running:$2" ]
}
renewed() { # renewed JOB: its lease was renewed after it was granted
	[ "$(q "SELECT renewed_at > granted_at FROM remora.leases WHERE job_id = $1")" = t ]
}
mkdir -p "$T/src/p"
for i in 1 2 3; do head -c $((4000 + i)) /dev/urandom >"$T/src/p/m$i.bin"; done
aws_s3 s3 cp --recursive --quiet "$T/src/p" s3://target/src/p/

# skewed NAME OFFSET: remora-worker NAME under libfaketime, its wall clock
# OFFSET from the server's ("+1h", "-1h").  The monotonic clock is left
# alone, as a wrong wall clock (not set by NTP) leaves it: the worker's
# deadlines are monotonic.
skewed() {
	local name=$1 offset=$2 j p r lease skew
	LD_PRELOAD=$FAKETIME_LIB FAKETIME=$offset FAKETIME_DONT_FAKE_MONOTONIC=1 \
		start_remora_worker "$name" --label "$name" "$CONNINFO"
	check "$name: a worker $offset starts" wait_for 20 live "$name"
	skew=$(log_skew "$T/$name.log")
	echo "# $name: its log is $skew s off this clock"
	check "$name: its wall clock is $offset (libfaketime preloaded)" \
		test "${skew#-}" -gt 3000 -a "${skew#-}" -lt 4200
	make_file "$name.bin" 12000000 # three parts at 1 MB/s: renewals
	j=$(q "SELECT remora_submit('$SRC/slow/$name.bin')")
	check "$name: runs the http job" wait_for 20 runs_on "$j" "$name"
	check "$name: renews its lease" wait_for 30 renewed "$j"
	# now() is when this statement arrived; a renewal that began after
	# that and committed before the statement's snapshot is seen, stamped
	# later than now().  clock_timestamp() is read after the snapshot.
	lease=$(q "SELECT expires_at > now() AND expires_at <= clock_timestamp() + interval '$LEASE seconds'
		AND renewed_at BETWEEN now() - interval '$LEASE seconds' AND clock_timestamp()
		FROM remora.leases WHERE job_id = $j")
	check_eq "$name: the lease is on the server's clock (expires within the lease of its now())" "$lease" t
	check "$name: the http job succeeds" wait_state "$j" succeeded 90
	verify "$j" "$name.bin"
	p=$(q "SELECT remora_submit('s3://target/src/p/')")
	check "$name: the S3 prefix job succeeds" wait_state "$p" succeeded 60
	check_eq "$name: each with one attempt, its own" \
		"$(q "SELECT count(*) || ':' || count(*) FILTER (WHERE i.label = '$name' AND a.state = 'succeeded')
			FROM remora.attempts a JOIN remora.incarnations i USING (incarnation) WHERE a.job_id IN ($j, $p)")" "2:2"
	# a retry is claimed when due by the server's clock (remora.next_due
	# says how long until then; the worker waits on its monotonic clock)
	make_file "$name-due.bin" 100000
	rule "$SRC_PROXY" "match=GET%20/$name-due.bin&action=status:503&count=1"
	r=$(q "SELECT remora_submit('$FLAKY/$name-due.bin')")
	check "$name: a job whose source answered 503 once succeeds" wait_state "$r" succeeded 60
	check_eq "$name: its retry started when due (Retry-After 1): not before, nor 2.5 s after" \
		"$(q "SELECT b.started_at - a.finished_at >= interval '1 second'
				 AND b.started_at - a.finished_at < interval '3.5 seconds'
			FROM remora.attempts a JOIN remora.attempts b ON b.job_id = a.job_id AND b.attempt_no = 2
		   WHERE a.job_id = $r AND a.attempt_no = 1")" t
	check_eq "$name: its heartbeat is the server's time" \
		"$(q "SELECT heartbeat_at BETWEEN now() - interval '1 minute' AND clock_timestamp() FROM remora_workers WHERE label = '$name' AND stopped_at IS NULL")" t
	kill -TERM "$REMORA_WORKER_PID" && wait "$REMORA_WORKER_PID"
	check_eq "$name: stops on SIGTERM with status 0" "$?" 0
}

skewed w_ahead +1h
skewed w_behind -1h

e2e_finish
