#!/usr/bin/env bash
#
# The chaos run: jobs of every source kind and exports of their results,
# while the run kills, pauses and restarts whatever moves them, cuts a
# remora-worker off from PostgreSQL, the store or both for longer than the
# lease (test/lib/partition.sh), may run one remora-worker's slot with its
# wall clock an hour off (libfaketime), makes their sources and the store
# misbehave, and, in the soak, fills PostgreSQL's disk (its data directory
# on a tmpfs of the run's own, test/lib/disk.sh) until writes fail, holds
# it full past the lease, and frees it.  Afterwards it checks
# (test/lib/chaos.sh holds the job mix and these checks, which
# test/e2e/patroni.sh shares) that nothing was lost or published twice:
#
#   - every job ended, succeeded or for a reason the run injected and names
#     (a cancel it issued); every export succeeded, those left in
#     outcome_unknown after being verified (and, where verify finds a
#     member missing, retried) by an administrator;
#   - exactly one committed result per succeeded job, from its only
#     succeeded attempt, and none for any other job;
#   - every member read back from the store has the SHA-256 its manifest
#     records, and so has its source (the old or the new content, for a
#     source the run replaced mid-job); every manifest object hashes to the
#     committed SHA-256; every exported key holds its member;
#   - after cleanup, no object under the staging area that no committed
#     manifest names, and no open multipart upload (where the store lists
#     them: RGW does, the test server does not);
#   - the server log holds no PANIC, no failed assertion, no leak warning.
#
# It prints a summary (injections by kind, the source kinds submitted and
# checked, attempts per job, recoveries, reuse) as a Markdown table.
#
#   test/chaos/run.sh            the CI variant: CHAOS_SECONDS=300 of
#                                injections, 50 jobs and 16 exports
#   test/chaos/run.sh --soak     CHAOS_SECONDS=1500, 216 jobs and 60
#                                exports (in proportion for another
#                                CHAOS_SECONDS), a kill -9 per 15 s
#                                required, and fill_disk; test/chaos/soak.sh
#                                runs it, then a failover under load
#   test/chaos/run.sh --schedule [--soak]
#                                print the schedule CHAOS_SEED draws and
#                                exit, starting nothing
#
# CHAOS_SEED fixes the schedule: the job mix and the sources' sizes, every
# injection (which kind, at which second, with which fault and match), and
# the draw that picks what it lands on among what is there when it fires
# (the n-th running worker or job by a stable order); which pid or job
# that is, and the interleaving with the workers, are still the machine's.
# Every draw is made up front, in this shell (bash reseeds $RANDOM in every
# subshell, so a draw inside $(...) would not replay); the run checks that
# two dry runs with its seed print its schedule.
# REMORA_STORE chooses the target store (s3rver or rgw), as for test/e2e.
# CHAOS_FULL_DISK=1 adds fill_disk to the CI variant, =0 takes it from the
# soak; CHAOS_SUMMARY=FILE keeps the summary there, CHAOS_DOC=FILE writes
# it between FILE's chaos markers.  A failed check names, for each wrong
# job, its attempts and the injections and proxy faults around them
# (mix_explain in test/lib/chaos.sh).
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/chaos.sh"
. "$(dirname "$0")/../lib/partition.sh"
. "$(dirname "$0")/../lib/disk.sh"

MODE=ci
SCHEDULE_ONLY=
for arg in "$@"; do
	case $arg in
	--soak) MODE=soak ;;
	--schedule) SCHEDULE_ONLY=1 ;;
	*)
		echo "usage: $0 [--soak] [--schedule]" >&2
		exit 2
		;;
	esac
done
SEED=${CHAOS_SEED:-$(((RANDOM << 15) | RANDOM))}
if [ "$MODE" = soak ]; then
	SECONDS_TOTAL=${CHAOS_SECONDS:-1500}
	# the mix of 1500 s, in proportion to a shorter (or longer) run
	N_HTTP=$((150 * SECONDS_TOTAL / 1500)) N_PREFIX=$((50 * SECONDS_TOTAL / 1500))
	N_HUB=$((16 * SECONDS_TOTAL / 1500)) N_EXPORT=$((60 * SECONDS_TOTAL / 1500))
	[ "$N_HTTP" -ge 32 ] || N_HTTP=32 N_PREFIX=12 N_HUB=6 N_EXPORT=16
	FULL_DISK=${CHAOS_FULL_DISK-1}
else
	SECONDS_TOTAL=${CHAOS_SECONDS:-300}
	N_HTTP=32 N_PREFIX=12 N_HUB=6 N_EXPORT=16
	FULL_DISK=${CHAOS_FULL_DISK:-}
fi
[ "$FULL_DISK" != 0 ] || FULL_DISK=
DOC=${CHAOS_DOC:-}	# a file whose "latest soak" section the summary replaces
PAUSE_SECONDS=6	# a SIGSTOP lasts past the lease (4 s)
PARTITION_SECONDS=10	# and a partition well past it
FILL_SECONDS=8	# and a full disk too

# ---- the schedule: every random draw of the run, from the seed, here ----
RANDOM=$SEED

declare -a INJ_AT INJ_KIND INJ_ARG INJ_R INJ_EXPORT
mix_draw
# the injections: one every 1-4 s, at seconds from the start of the run;
# each with a draw (INJ_R) for what it lands on, and a 60 % chance of an
# export before it
TARGET_FIRST=(stall truncate cutrequest)
for ((i = 2; i > 0; i--)); do
	k=$((RANDOM % (i + 1)))
	t=${TARGET_FIRST[i]} TARGET_FIRST[i]=${TARGET_FIRST[k]} TARGET_FIRST[k]=$t
done
# the first three partitions cut a remora-worker off from PostgreSQL, from
# the store and from both, in a drawn order
PARTITION_FIRST=(postgres store both)
for ((i = 2; i > 0; i--)); do
	k=$((RANDOM % (i + 1)))
	t=${PARTITION_FIRST[i]} PARTITION_FIRST[i]=${PARTITION_FIRST[k]} PARTITION_FIRST[k]=$t
done
TF=0	# target faults drawn so far
NP=0	# partitions drawn so far
NF=0	# full disks drawn so far
i=0
for ((at = 0; at < SECONDS_TOTAL; at += 1 + RANDOM % 4)); do
	pick kill_bgworker kill_bgworker kill_bgworker kill_launcher restart_pg restart_pg \
		kill_external kill_external pause_bgworker pause_external pause_external \
		source_fault source_fault source_fault source_fault target_fault target_fault target_fault \
		hub_fault change_source cancel partition
	# every run has a partition: the first injection past 30 s, if none yet
	[ "$NP" -gt 0 ] || [ "$at" -lt 30 ] || P=partition
	# with a disk of its own (the soak): a full disk once in about 40
	# injections, and the first injection past 60 s if none yet (drawn
	# only then, so that the CI variant's schedules stay as they were)
	if [ -n "$FULL_DISK" ]; then
		[ $((RANDOM % 40)) != 0 ] || P=fill_disk
		[ "$NF" -gt 0 ] || [ "$at" -lt 60 ] || P=fill_disk
		[ "$P" != fill_disk ] || NF=$((NF + 1))
	fi
	INJ_AT[i]=$at INJ_KIND[i]=$P INJ_ARG[i]='' INJ_R[i]=$RANDOM INJ_EXPORT[i]=$((RANDOM % 100 < 60))
	case ${INJ_KIND[i]} in
	source_fault)	# one GET of an http source: "FILE ACTION"
		f=o$((RANDOM % N_HTTP + 1))
		pick "reset&after=$((RANDOM * 16))" "truncate&after=$((RANDOM * 16))" status:500 status:503 \
			"stall&after=$((RANDOM * 8))"
		INJ_ARG[i]="$f $P"
		;;
	target_fault)	# one request to the store: "MATCH ACTION"
		ANY="PUT%20/target/remora/ POST%20/target/remora/ GET%20/target/src/ GET%20/target%3F PUT%20/target/stable/"
		if [ "$TF" -lt 3 ]; then
			# the first three are a stall, a truncated answer and a cut
			# upload, in a drawn order, on requests every job makes
			P=${TARGET_FIRST[TF]}
			ANY="PUT%20/target/remora/ POST%20/target/remora/"
		else
			pick status:500 status:503 s3error:SlowDown:503 s3error:InternalError:500 "reset&after=0" \
				stall stall truncate truncate cutrequest
		fi
		TF=$((TF + 1))
		case $P in
		stall)	# the store acted; its answer stops after some bytes (or never starts)
			action="stall&after=$((RANDOM % 2 * RANDOM * 16))"
			pick $ANY
			;;
		truncate)	# the store acted; its answer is cut short cleanly
			action="truncate&after=$((RANDOM % 2 * RANDOM * 16))"
			pick $ANY
			;;
		cutrequest)	# a part or object upload reaches the store cut short
			action="cutrequest&after=$((RANDOM * 64))"
			P=PUT%20/target/remora/
			;;
		*)
			action=$P
			pick $ANY
			;;
		esac
		INJ_ARG[i]="$P $action"
		;;
	hub_fault)	# one Hub request: "MATCH STATUS"
		pick /resolve/ /tree/ /cdn/
		f=$P
		pick 500 503 429
		INJ_ARG[i]="$f $P"
		;;
	partition)	# a remora-worker cut off for PARTITION_SECONDS: from what
		if [ "$NP" -lt 3 ]; then P=${PARTITION_FIRST[NP]}; else pick postgres store both; fi
		NP=$((NP + 1))
		INJ_ARG[i]=$P
		;;
	esac
	i=$((i + 1))
done
mix_draw_exports
# a clock that disagrees: one remora-worker's slot (its OS user's: the
# replacements of a killed one take it over) runs under libfaketime, an
# hour ahead or behind; the CI variant may draw none, the soak always one
if [ "$MODE" = soak ]; then pick +1h -1h; else pick none +1h -1h; fi
SKEW=$P
pick u1 u2
SKEW_SLOT=$P	# the schedule names the slot, the same in every lane
SKEW_USER=$(partition_name "$P")

print_schedule() {
	local i
	echo "chaos schedule: $MODE, seed $SEED, ${SECONDS_TOTAL} s, $N_JOBS jobs, $N_EXPORT exports, ${#INJ_AT[@]} injections${FULL_DISK:+, a disk of its own}"
	mix_print
	echo "clock of the remora-workers of slot $SKEW_SLOT: $SKEW"
	for i in "${!INJ_AT[@]}"; do
		echo "at ${INJ_AT[i]} s: ${INJ_KIND[i]}${INJ_ARG[i]:+ ${INJ_ARG[i]}} draw ${INJ_R[i]}$([ "${INJ_EXPORT[i]}" = 1 ] && echo ", export first")"
	done
	for ((i = 1; i <= N_EXPORT; i++)); do echo "export $i if_exists ${EXP_MODE[i]} draw ${EXP_R[i]}"; done
}
if [ -n "$SCHEDULE_ONLY" ]; then
	print_schedule
	exit 0
fi

e2e_begin chaos
echo "# chaos run: $MODE, seed $SEED, ${SECONDS_TOTAL} s of injections, store ${REMORA_STORE:-s3rver}"

# count the checks for the summary
N_OK=0 N_NOT_OK=0
ok() { N_OK=$((N_OK + 1)); echo "ok - $E2E_LABEL$*"; }
not_ok() { N_NOT_OK=$((N_NOT_OK + 1)); echo "not ok - $E2E_LABEL$*"; E2E_FAILED=1; }

# the schedule replays: two dry runs with this seed print this run's
print_schedule >"$T/schedule"
e2e_at_exit 'cp "$T/schedule" "/tmp/chaos$E2E_TAG-schedule.txt"'
soak_flag=
[ "$MODE" = soak ] && soak_flag=--soak
replays() {
	local r
	for r in 1 2; do
		CHAOS_SEED=$SEED CHAOS_SECONDS=$SECONDS_TOTAL bash "$0" --schedule $soak_flag >"$T/schedule.$r" || return 1
		cmp -s "$T/schedule" "$T/schedule.$r" || return 1
	done
}
check "CHAOS_SEED $SEED replays the schedule: two dry runs print this run's $(wc -l <"$T/schedule") lines ($(sha256sum <"$T/schedule" | cut -c1-12))" replays
CHAOS_SEED=$((SEED + 1)) CHAOS_SECONDS=$SECONDS_TOTAL bash "$0" --schedule $soak_flag >"$T/schedule.other"
check "and seed $((SEED + 1)) draws another" test "$(tail -n +2 "$T/schedule.other" | sha256sum)" != "$(tail -n +2 "$T/schedule" | sha256sum)"

# with fill_disk: the data directory (pg_wal included) on a tmpfs of the
# run's own (test/lib/disk.sh), the server log outside it; checkpoints
# often enough that WAL stays well within it
DATA=$T/pg/data
if [ -n "$FULL_DISK" ]; then
	disk_mount "$DATA" 256m || { not_ok "a tmpfs for the data directory is mounted"; exit 1; }
fi
stack_up
if [ -n "$FULL_DISK" ]; then
	q "ALTER SYSTEM SET max_wal_size = '64MB'" >/dev/null
	q "ALTER SYSTEM SET min_wal_size = '32MB'" >/dev/null
fi
e2e_at_exit 'for f in "$T"/w*.log; do cp "$f" "/tmp/chaos$E2E_TAG-${f##*/}"; done'

# ---- the sources, of the sizes drawn: http objects (some multi-part, 5 MB
# parts) behind the fault proxy and nginx's 256 KB/s, S3 prefixes in the
# target store behind the store's fault proxy, Hub repositories ----
mkdir -p "$T/old"
MIX_HTTP=$FLAKY/slower/c
mix_sources

# ---- the cluster: a retry budget that outlasts the run's crashes, a short
# stall timeout (stalls are injected), the local hub; two remora-workers
# beside the two background workers, two attempts each, so that work waits
# for them through the run ----
q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw" >/dev/null
q "ALTER SYSTEM SET remora.max_attempts = 60" >/dev/null
q "ALTER SYSTEM SET remora.worker_concurrency = 2" >/dev/null
q "ALTER SYSTEM SET remora.stall_timeout = '5s'" >/dev/null
q "ALTER SYSTEM SET remora.hf_endpoint = 'http://127.0.0.1:$HUB_PORT'" >/dev/null
q "ALTER SYSTEM SET remora.hf_token = '$TOKEN'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
settled() { [ "$(grep -c "new settings in effect" "$LOG" || true)" -ge 2 ]; }
wait_for 30 settled || echo "# the background workers did not say that the new settings are in effect"
# the remora-workers connect over TCP, each as an OS user of its own
# (slots u1 and u2, named by partition_name: a replacement takes the user
# of the one it replaces), so that a partition can cut one off
# (test/lib/partition.sh)
CONNINFO="host=127.0.0.1 port=$PG_PORT dbname=postgres user=rw"
declare -A EXT=() EXT_USER=()	# label -> pid, OS user of the running remora-workers
SKEWED=()	# the labels of those started under libfaketime
NEXT_W=1
new_external() {	# new_external USER
	local name=w$NEXT_W skew=()
	NEXT_W=$((NEXT_W + 1))
	if [ "$SKEW" != none ] && [ "$1" = "$SKEW_USER" ]; then
		skew=(env $(faketime_env "$SKEW"))
		SKEWED+=("$name")
	fi
	(partition_run "$1" "${skew[@]}" "$(pg_config --bindir)/remora-worker" --label "$name" --concurrency 2 "$CONNINFO") \
		>>"$T/$name.log" 2>&1 &
	service_pid $! KILL
	disown $!	# its kill -9 is the point: no notice of it
	EXT[$name]=$! EXT_USER[$name]=$1
}
for u in "$(partition_name u1)" "$(partition_name u2)"; do
	partition_user "$u" || { not_ok "the remora-workers' OS user $u and its filter are set up"; exit 1; }
	new_external "$u"
done
# ext_name DRAW: one of the running remora-workers, by the draw
ext_name() { printf '%s\n' "${!EXT[@]}" | sort -V | sed -n "$(($1 % ${#EXT[@]} + 1))p"; }

# ---- what the run does, and counts ----
declare -A INJECTED=()	# kind -> count
declare -a PAUSERS=()
note() {
	INJECTED[$1]=$((${INJECTED[$1]:-0} + 1))
	echo "# $(date +%T) $1 ${2:-}"
	chaos_note "$1" "${2:-}"
}


# pause PID: SIGSTOP, and SIGCONT past the lease, while the run goes on
pause() {
	local start
	start=$(pid_start "$1") && kill -STOP "$1" 2>/dev/null || return 1
	{
		sleep "$PAUSE_SECONDS"
		kill_if_same CONT "$1" "$start"
	} &
	PAUSERS+=($!)
}

inject() {	# inject I: the schedule's injection I
	local kind=${INJ_KIND[$1]} arg=${INJ_ARG[$1]} r=${INJ_R[$1]} pid name f j action
	case $kind in
	kill_bgworker | kill_launcher)
		[ "$kind" = kill_bgworker ] && action="remora worker" || action="remora launcher"
		pid=$(nth "$r" "SELECT pid FROM pg_stat_activity WHERE backend_type = '$action'")
		[ -n "$pid" ] || return 0
		kill -9 "$pid" && note "$kind" "$pid"
		;;
	restart_pg)
		cluster_stop "$T/pg" immediate
		cluster_start "$T/pg" || cluster_start "$T/pg" || { not_ok "PostgreSQL starts again"; exit 1; }
		note "$kind"
		;;
	kill_external)
		name=$(ext_name "$r")
		kill -9 "${EXT[$name]}" 2>/dev/null && note "$kind" "$name"
		unset "EXT[$name]"
		new_external "${EXT_USER[$name]}"
		;;
	pause_bgworker)
		pid=$(nth "$r" "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora worker'")
		[ -n "$pid" ] || return 0
		pause "$pid" && note "$kind" "$pid"
		;;
	pause_external)
		name=$(ext_name "$r")
		pause "${EXT[$name]}" && note "$kind" "$name"
		;;
	partition)	# one not cut off already; healed while the run goes on
		name=$(ext_name "$r")
		cut_off "${EXT_USER[$name]}" && note "$kind" "$name from $arg"
		;;
	source_fault)
		f=${arg%% *}.bin action=${arg#* }
		rule "$SRC_PROXY" "match=GET%20/slower/c/$f&action=$action&count=1"
		note "$kind" "$f ${action%%&*}"
		;;
	target_fault)
		action=${arg#* }
		rule "$S3_PROXY" "match=${arg%% *}&action=$action&count=1"
		note "$kind" "${action%%&*} ${arg%% *}"
		;;
	hub_fault)
		curl -s "$HUBCTL/__rule?match=${arg%% *}&status=${arg#* }&count=1&retry_after=1" >/dev/null
		note "$kind" "$arg"
		;;
	change_source)
		# replace an http source a running job reads (each file once): a
		# new file, so that the GET in flight goes on with the old one and
		# the next attempt's resume check sees the change
		j=$(nth "$r" "SELECT j.job_id FROM remora.jobs j JOIN remora.checkpoints c USING (job_id) WHERE j.state = 'running'
			AND j.source LIKE '%/slower/c/%' AND c.bytes_done > 0")
		[ -n "$j" ] || return 0
		f=$(q "SELECT regexp_replace(source, '^.*/', '') FROM remora.jobs WHERE job_id = $j")
		[ ! -e "$T/old/$f" ] || return 0
		cp "$WWW/c/$f" "$T/old/$f"
		head -c "$(stat -c %s "$WWW/c/$f")" /dev/urandom >"$WWW/c/$f.new"
		chmod 644 "$WWW/c/$f.new"
		mv "$WWW/c/$f.new" "$WWW/c/$f"
		# every job of the file submitted so far may end with the old
		# content or the new one, and must end with one of them whole
		for k in $(q "SELECT job_id FROM remora.jobs WHERE source LIKE '%/slower/c/$f'"); do
			CHANGED[$k]=$(sha256sum "$T/old/$f" | cut -d' ' -f1)
		done
		note "$kind" "$f (job $j)"
		;;
	fill_disk) fill_disk ;;
	cancel)	# not one of the first four jobs, one of each kind: every kind ends checked
		j=$(nth "$r" "SELECT job_id FROM remora.jobs WHERE source_kind <> 'export' AND state IN ('queued', 'running', 'retrying')
			AND idempotency_key NOT IN ('chaos-1', 'chaos-2', 'chaos-3', 'chaos-4')")
		[ -n "$j" ] || return 0
		CANCELLED[$j]=1
		qr "SELECT remora_cancel($j)" >/dev/null
		note "$kind" "job $j"
		;;
	esac
}

# cut_off USER: cut USER's remora-worker off from what the injection's
# argument names, and heal it PARTITION_SECONDS later (what the filter
# dropped counted in $T/dropped)
cut_off() {
	local user=$1
	! nft list chain inet "$PARTITION_TABLE" "$user" | grep -q drop || return 1
	case $arg in
	postgres) partition_cut "$user" "$PG_PORT" ;;
	store) partition_cut "$user" "$S3_PROXY" "$S3_PORT" ;;
	both) partition_cut "$user" "$PG_PORT" "$S3_PROXY" "$S3_PORT" ;;
	esac || return 1
	{
		sleep "$PARTITION_SECONDS"
		partition_dropped "$user" >>"$T/dropped"
		partition_heal "$user"
	} &
	PAUSERS+=($!)
}

# fill_disk: a filler takes every free byte of the data directory's file
# system, and a write that must extend a file fails (the run's own
# temporary table: it adds nothing to remora's tables); the disk stays
# full FILL_SECONDS while the workers meet it (the run's other injections
# wait), then it is freed.  A server that stopped meanwhile (a PANIC for
# lack of WAL space, and a crash recovery that failed for the same) is
# started, as an operator would.
FULL_REFUSED=0 FULL_RESTARTS=0
fill_disk() {
	local refused
	disk_fill "$DATA/filler"
	refused=$(psql -X -q -c "CREATE TEMP TABLE fill AS SELECT repeat('x', 1000) FROM generate_series(1, 20000)" 2>&1 >/dev/null | head -1)
	! grep -q "No space left on device" <<<"$refused" || FULL_REFUSED=$((FULL_REFUSED + 1))
	note fill_disk "($(disk_free "$DATA") bytes free; a write: ${refused:-succeeded})"
	sleep "$FILL_SECONDS"
	rm -f "$DATA/filler"
	pg_settled() {
		q "SELECT 1" >/dev/null 2>&1 || ! runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
	}
	wait_for 60 pg_settled || true
	q "SELECT 1" >/dev/null 2>&1 && return 0
	# a postmaster still there is still recovering: it is waited for
	if runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
		wait_for 120 q "SELECT 1" >/dev/null 2>&1 || { not_ok "PostgreSQL answers again once space is back"; exit 1; }
		return 0
	fi
	cluster_start "$T/pg" || cluster_start "$T/pg" || { not_ok "PostgreSQL starts again once space is back"; exit 1; }
	FULL_RESTARTS=$((FULL_RESTARTS + 1))
	echo "# $(date +%T) space back, the server stopped on the full disk started again"
	chaos_note restart_after_full_disk
}

# ---- the run: jobs submitted through most of it, exports of what
# succeeded, the injections at the seconds of the schedule ----
t0=$(date +%s)
for _ in $(seq 1 $((N_JOBS / 4))); do submit_one; done
for i in "${!INJ_AT[@]}"; do
	while :; do	# submit what is due until the injection's second
		now=$EPOCHSECONDS
		due=$((N_JOBS * (now - t0 + 10) * 5 / (SECONDS_TOTAL * 4)))
		while [ "$SUBMITTED" -lt "$N_JOBS" ] && [ "$SUBMITTED" -lt "$due" ]; do submit_one; done
		[ "$now" -lt $((t0 + INJ_AT[i])) ] || break
		poll_sleep 0.5
	done
	[ "${#EXPORTED[@]}" -lt "$N_EXPORT" ] && [ "${INJ_EXPORT[i]}" = 1 ] && export_one
	inject "$i"
done
echo "# $(date +%T) the schedule's ${#INJ_AT[@]} injections ran in $(($(date +%s) - t0)) s (planned: $SECONDS_TOTAL)"
while [ "$SUBMITTED" -lt "$N_JOBS" ]; do submit_one; done

# ---- the faults stop; every job and export ends ----
curl -s "http://127.0.0.1:$SRC_PROXY/__reset" >/dev/null
curl -s "http://127.0.0.1:$S3_PROXY/__reset" >/dev/null
for p in "${PAUSERS[@]}"; do wait "$p" 2>/dev/null || true; done
for name in "${!EXT[@]}"; do kill -CONT "${EXT[$name]}" 2>/dev/null || true; done
# the last injection may have crashed the server, whose restart a paused
# backend holds up until its SIGCONT, sent as its pauser ends: a plain
# query here once met recovery, left HEALED empty, and every poll below
# failed on it (CI, seed 78243812)
if ! HEALED=$(qr "SELECT now()") || [ -z "$HEALED" ]; then
	not_ok "PostgreSQL answers once the injections stop"
	exit 1
fi
echo "# $(date +%T) injections stopped: $(for k in "${!INJECTED[@]}"; do printf '%s %s, ' "$k" "${INJECTED[$k]}"; done)"
mix_settle

# ---- what happened ----
mix_verify
# (a PANIC for lack of WAL space on the full disk is PostgreSQL's answer
# to it, and the only one allowed)
check_eq "the server log has no PANIC but for lack of space, no failed assertion or leak warning" \
	"$(grep -E 'PANIC|TRAP:|[Aa]ssert|leak|not closed|still referenced' "$LOG" | grep -cvE 'PANIC: .*No space left on device' || true)" 0
check_eq "nor have the remora-workers' logs a crash or an assertion" \
	"$(cat "$T"/w*.log | grep -ciE 'assertion|segmentation fault|core dumped' || true)" 0
kills=$((${INJECTED[kill_bgworker]:-0} + ${INJECTED[kill_launcher]:-0} + ${INJECTED[restart_pg]:-0} + ${INJECTED[kill_external]:-0}))
# the partitions: some packets dropped, and every remora-worker cut off
# reconnected (the global checks above cover its attempts and staging)
beating() {
	[ "$(q "SELECT count(*) FROM remora_workers WHERE kind = 'external' AND stopped_at IS NULL AND heartbeat_at > '$HEALED'::timestamptz")" = "${#EXT[@]}" ]
}
beat_name="the run cut remora-workers off ${INJECTED[partition]:-0} times ($(awk '{ n += $1 } END { print n + 0 }' "$T/dropped" 2>/dev/null || echo 0) packets dropped), and each one live beats again since the heal"
if [ "${INJECTED[partition]:-0}" -ge 1 ] && wait_for 60 beating; then
	ok "$beat_name"
else
	not_ok "$beat_name"
	# what was counted, against which remora-workers the run holds live
	echo "# healed at $HEALED; live: $(for name in "${!EXT[@]}"; do
		printf '%s (pid %s, %s) ' "$name" "${EXT[$name]}" "$(kill -0 "${EXT[$name]}" 2>/dev/null && echo running || echo gone)"
	done)"
	q "SELECT '# ' || coalesce(label, '-') || ' pid ' || pid || ' started ' || started_at || ' beat ' || coalesce(heartbeat_at::text, '-')
		|| ' stopped ' || coalesce(stopped_at::text, '-') FROM remora_workers WHERE kind = 'external' ORDER BY started_at" || true
fi
# the clock: the skewed remora-workers' logs run the drawn hour off, and
# they ran attempts (the global checks above cover what they did)
skewed_ok() {
	local name skew logged=0
	for name in "${SKEWED[@]}"; do
		# one killed before its first line has no clock to show (the CI
		# run of seed 1015400450 killed w5 so; its log was empty)
		if ! skew=$(log_skew "$T/$name.log"); then
			echo "# $name: killed before it logged a line"
			continue
		fi
		echo "# $name: its log is $skew s off this clock"
		[ $((skew - ${SKEW%h} * 3600)) -gt -600 ] && [ $((skew - ${SKEW%h} * 3600)) -lt 600 ] || return 1
		logged=$((logged + 1))
	done
	[ "$logged" -ge 1 ] && [ "$(q "SELECT count(*) FROM remora.attempts a JOIN remora.incarnations i USING (incarnation)
		WHERE i.label = ANY ('{$(IFS=,; echo "${SKEWED[*]}")}')")" -ge 1 ]
}
if [ "$SKEW" != none ]; then
	check "$SKEW_USER's ${#SKEWED[@]} remora-workers ran their wall clock $SKEW off the server's (libfaketime), and ran attempts" skewed_ok
fi
check "the run injected kills and restarts ($kills) and faults of $(echo "${!INJECTED[@]}" | wc -w) kinds" \
	test "$kills" -ge $((SECONDS_TOTAL / 30)) -a "$(echo "${!INJECTED[@]}" | wc -w)" -ge 8
# a kill or pause whose target the run could not find is not counted: each
# kind must have found one (the first soak's kill_bgworker looked for a
# backend type that does not exist, and killed no background worker)
declare -A PLANNED=()	# kind -> times the schedule holds it
for k in "${INJ_KIND[@]}"; do PLANNED[$k]=$((${PLANNED[$k]:-0} + 1)); done
PROCESS_KINDS="kill_bgworker kill_launcher kill_external restart_pg pause_bgworker pause_external partition"
every_process_kind() {	# those the schedule holds three times or more
	local k
	for k in $PROCESS_KINDS; do
		[ "${PLANNED[$k]:-0}" -lt 3 ] || [ "${INJECTED[$k]:-0}" -ge 1 ] || return 1
	done
}
check "every kind of kill, restart and pause the schedule holds was carried out (carried out/planned: $(for k in $PROCESS_KINDS; do
	printf '%s %s/%s, ' "$k" "${INJECTED[$k]:-0}" "${PLANNED[$k]:-0}"
done))" every_process_kind
KILL9=$((${INJECTED[kill_bgworker]:-0} + ${INJECTED[kill_launcher]:-0} + ${INJECTED[kill_external]:-0}))
if [ "$MODE" = soak ]; then
	check "the soak killed workers and the launcher with kill -9 $((SECONDS_TOTAL / 15)) times or more ($KILL9)" \
		test "$KILL9" -ge $((SECONDS_TOTAL / 15))
fi
PANICS=$(grep -cE 'PANIC: .*No space left on device' "$LOG" || true)
if [ -n "$FULL_DISK" ]; then
	check "the data directory's file system was filled ${INJECTED[fill_disk]:-0} times, a write refused for lack of space $FULL_REFUSED times; $PANICS PANICs for lack of WAL space, the server started again $FULL_RESTARTS times" \
		test "${INJECTED[fill_disk]:-0}" -ge 1 -a "$FULL_REFUSED" -ge 1
fi
# what the proxies applied (a rule waits for a request it matches)
SRC_FIRED=$(curl -s "http://127.0.0.1:$SRC_PROXY/__fired")
S3_FIRED=$(curl -s "http://127.0.0.1:$S3_PROXY/__fired")
fired() { jq -r --arg a "$2" '.[$a] // 0' <<<"$1"; }
# the first three target faults of the schedule are one of each
check "the store's answers were stalled ($(fired "$S3_FIRED" stall)) and truncated ($(fired "$S3_FIRED" truncate)), and uploads cut short ($(fired "$S3_FIRED" cutrequest))" \
	test "$(fired "$S3_FIRED" stall)" -ge 1 -a "$(fired "$S3_FIRED" truncate)" -ge 1 -a "$(fired "$S3_FIRED" cutrequest)" -ge 1 \
	-o "${PLANNED[target_fault]:-0}" -lt 3

# ---- the summary ----
summary() {
	echo "Chaos run ($MODE, seed $SEED, store ${REMORA_STORE:-s3rver}, $(date -u +%Y-%m-%d)):" \
		"$SUBMITTED jobs and ${#EXPORTED[@]} exports, ${SECONDS_TOTAL} s of injections."
	echo
	echo "| injection | count |"
	echo "| --- | --- |"
	for k in $(printf '%s\n' "${!INJECTED[@]}" | sort); do echo "| $k | ${INJECTED[$k]} |"; done
	echo "| of them kill -9 | $KILL9 |"
	echo
	echo "| fault applied by a proxy | source side | target side |"
	echo "| --- | --- | --- |"
	for k in $(jq -rn --argjson a "$SRC_FIRED" --argjson b "$S3_FIRED" '$a + $b | keys[]'); do
		echo "| $k | $(fired "$SRC_FIRED" "$k") | $(fired "$S3_FIRED" "$k") |"
	done
	echo
	echo "| source kind | submitted | succeeded | checked against the store (jobs, members) |"
	echo "| --- | --- | --- | --- |"
	for k in "${KINDS[@]}"; do
		echo "| $k | ${KIND_SUBMITTED[$k]:-0} | ${KIND_SUCCEEDED[$k]:-0} | ${KIND_JOBS_CHECKED[$k]:-0}, ${CHECKED_MEMBERS[$k]:-0} |"
	done
	echo
	echo "| outcome | count |"
	echo "| --- | --- |"
	q "SELECT '| ' || source_kind || ' ' || state || ' | ' || count(*) || ' |' FROM remora.jobs WHERE $CHAOS GROUP BY source_kind, state ORDER BY 1"
	echo "| exports verified by an administrator | $(printf '%s\n' "${RESOLVED[@]:-}" | grep -c . || true) |"
	echo "| of them retried | $(printf '%s\n' "${RESOLVED[@]:-}" | grep -c retried || true) |"
	echo "| sources replaced mid-job | ${INJECTED[change_source]:-0} |"
	if [ -n "$FULL_DISK" ]; then
		echo "| full disk: a write refused (No space left on device) | $FULL_REFUSED |"
		echo "| full disk: PANICs for lack of WAL space | $PANICS |"
		echo "| full disk: the server, stopped, started again | $FULL_RESTARTS |"
	fi
	echo
	echo "| attempts per job | jobs |"
	echo "| --- | --- |"
	q "SELECT '| ' || b || ' | ' || count(*) || ' |' FROM (SELECT CASE WHEN n >= 6 THEN '6+' WHEN n >= 4 THEN '4-5' ELSE n::text END AS b
		FROM (SELECT count(a.*) AS n FROM remora.jobs j LEFT JOIN remora.attempts a USING (job_id) WHERE j.$CHAOS GROUP BY j.job_id) s) t
		GROUP BY b ORDER BY b"
	echo
	echo "| recovery | count |"
	echo "| --- | --- |"
	q "SELECT '| attempts lost (killed, paused or cut off; reclaimed) | ' || count(*) FILTER (WHERE a.state = 'lost') || ' |' || chr(10)
		|| '| attempts failed retryably and retried | ' || count(*) FILTER (WHERE a.state = 'failed' AND j.state <> 'failed' AND a.attempt_id <> j.current_attempt) || ' |' || chr(10)
		|| '| replacements offered a checkpoint | ' || count(*) FILTER (WHERE a.resumed_from IS NOT NULL) || ' |' || chr(10)
		|| '| of them resumed from it | ' || count(*) FILTER (WHERE a.resumed_from IS NOT NULL AND a.restart_reason IS NULL) || ' |' || chr(10)
		|| '| of them restarted (source changed, or checkpoint unusable) | ' || count(*) FILTER (WHERE a.restart_reason IS NOT NULL) || ' |'
		FROM remora.attempts a JOIN remora.jobs j USING (job_id) WHERE j.$CHAOS"
	q "SELECT '| set members reused from a lost attempt | ' || coalesce(sum((descriptor ->> 'members_reused')::bigint), 0) || ' of ' || sum(members) || ' |'
		FROM remora.results r JOIN remora.jobs j USING (job_id) WHERE j.$CHAOS AND j.source NOT LIKE 'http%'"
	echo
	echo "Checks: $N_OK passed, $N_NOT_OK failed."
}
summary | tee "$T/summary.md"
[ -z "${CHAOS_SUMMARY:-}" ] || cp "$T/summary.md" "$CHAOS_SUMMARY"
if [ -n "$DOC" ]; then
	# between the markers of doc/reliability.md's "latest soak" section
	awk -v f="$T/summary.md" '
		/<!-- chaos:begin -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next }
		/<!-- chaos:end -->/ { skip = 0 }
		!skip' "$DOC" >"$T/doc" && cp "$T/doc" "$DOC"
fi

e2e_finish
