#!/usr/bin/env bash
#
# The chaos run: jobs of every source kind and exports of their results,
# while the run kills, pauses and restarts whatever moves them, cuts a
# remora-worker off from PostgreSQL, the store or both for longer than the
# lease (test/lib/partition.sh), and makes their sources and the store
# misbehave.  Afterwards it checks that
# nothing was lost or published twice:
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
#                                exports, and 100+ kill -9 required; writes
#                                its summary into doc/reliability.md
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
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/partition.sh"

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
	N_HTTP=150 N_PREFIX=50 N_HUB=16 N_EXPORT=60
	DOC=${CHAOS_DOC:-doc/reliability.md}
else
	SECONDS_TOTAL=${CHAOS_SECONDS:-300}
	N_HTTP=32 N_PREFIX=12 N_HUB=6 N_EXPORT=16
	DOC=${CHAOS_DOC:-}
fi
N_JOBS=$((N_HTTP + N_PREFIX + N_HUB))
PART=5242880	# remora.part_size (test/lib/stack.sh): a larger http object goes in parts
PAUSE_SECONDS=6	# a SIGSTOP lasts past the lease (4 s)
PARTITION_SECONDS=10	# and a partition well past it

# ---- the schedule: every random draw of the run, from the seed, here ----
RANDOM=$SEED
pick() { P=${*:$((RANDOM % $# + 1)):1}; }	# pick WORD...: one of them, in $P

declare -a HTTP_SIZE PREFIX_SIZES HUB_SIZE JOB INJ_AT INJ_KIND INJ_ARG INJ_R INJ_EXPORT EXP_MODE EXP_R
# http objects of several sizes: o1 of one part and o2 of several, whatever
# the draw, so that both are in the mix
for ((i = 1; i <= N_HTTP; i++)); do
	case $i in
	1) pick 150000 600000 3000000 ;;
	2) pick 11000000 24000000 ;;
	*) pick 150000 600000 3000000 3000000 11000000 24000000 ;;
	esac
	HTTP_SIZE[i]=$P
done
for ((i = 1; i <= N_PREFIX; i++)); do	# 3-14 members under d/, and top.bin
	PREFIX_SIZES[i]=
	for ((m = 3 + RANDOM % 12; m > 0; m--)); do PREFIX_SIZES[i]+="$((500 + RANDOM * 4)) "; done
done
for ((i = 1; i <= N_HUB; i++)); do HUB_SIZE[i]=$((1200000 + RANDOM * 30)); done
# the jobs, in the order they are submitted: the first four one of each
# kind (an http object of one part, one of several, a prefix, a Hub
# snapshot), in a drawn order; then a drawn mix
first=("http o1" "http o2" "prefix p$((RANDOM % N_PREFIX + 1))" "hub r$((RANDOM % N_HUB + 1))")
for ((i = 3; i > 0; i--)); do
	k=$((RANDOM % (i + 1)))
	t=${first[i]} first[i]=${first[k]} first[k]=$t
done
for ((n = 1; n <= N_JOBS; n++)); do
	if [ "$n" -le 4 ]; then
		JOB[n]=${first[n - 1]}
		continue
	fi
	pick http http http prefix prefix hub
	case $P in
	http) JOB[n]="http o$((RANDOM % N_HTTP + 1))" ;;
	prefix) JOB[n]="prefix p$((RANDOM % N_PREFIX + 1))" ;;
	hub) JOB[n]="hub r$((RANDOM % N_HUB + 1))" ;;
	esac
done
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
i=0
for ((at = 0; at < SECONDS_TOTAL; at += 1 + RANDOM % 4)); do
	pick kill_bgworker kill_bgworker kill_bgworker kill_launcher restart_pg restart_pg \
		kill_external kill_external pause_bgworker pause_external pause_external \
		source_fault source_fault source_fault source_fault target_fault target_fault target_fault \
		hub_fault change_source cancel partition
	# every run has a partition: the first injection past 30 s, if none yet
	[ "$NP" -gt 0 ] || [ "$at" -lt 30 ] || P=partition
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
for ((k = 1; k <= N_EXPORT; k++)); do
	pick fail overwrite
	EXP_MODE[k]=$P EXP_R[k]=$RANDOM
done

print_schedule() {
	local i
	echo "chaos schedule: $MODE, seed $SEED, ${SECONDS_TOTAL} s, $N_JOBS jobs, $N_EXPORT exports, ${#INJ_AT[@]} injections"
	for ((i = 1; i <= N_HTTP; i++)); do echo "file o$i ${HTTP_SIZE[i]}"; done
	for ((i = 1; i <= N_PREFIX; i++)); do echo "prefix p$i ${PREFIX_SIZES[i]}"; done
	for ((i = 1; i <= N_HUB; i++)); do echo "hub r$i ${HUB_SIZE[i]}"; done
	for ((i = 1; i <= N_JOBS; i++)); do echo "job $i ${JOB[i]}"; done
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
e2e_at_exit 'cp "$T/schedule" "/tmp/chaos${E2E_LABEL:+-rgw}-schedule.txt"'
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

stack_up
e2e_at_exit 'for f in "$T"/w*.log; do cp "$f" "/tmp/chaos${E2E_LABEL:+-rgw}-${f##*/}"; done'

# qr SQL: like q, but waits out a server that is restarting (90 s)
qr() {
	local deadline=$(($(date +%s) + 90)) out
	until out=$(q "$1" 2>/dev/null); do
		if [ "$(date +%s)" -ge "$deadline" ]; then
			echo "# gave up on: $1" >&2
			return 1
		fi
		sleep 0.3
	done
	printf '%s\n' "$out"
}

# nth DRAW SQL: the row DRAW mod n of the n values SQL selects, in their
# order (a drawn choice among what is there now); empty when there is none
nth() {
	q "SELECT x FROM (SELECT x, row_number() OVER (ORDER BY x) - 1 AS i, count(*) OVER () AS n FROM ($2) s (x)) t
		WHERE i = $1 % n" 2>/dev/null
}

# kind_of SOURCE SIZE: the kind of source, in $K, for the checks
KINDS=("http single-part" "http multi-part" "s3 prefix" "hf snapshot" export)
kind_of() {
	case $1 in
	s3://*) K="s3 prefix" ;;
	hf://*) K="hf snapshot" ;;
	*) if [ "$2" -gt "$PART" ]; then K="http multi-part"; else K="http single-part"; fi ;;
	esac
}

# ---- the sources, of the sizes drawn: http objects (some multi-part, 5 MB
# parts) behind the fault proxy and nginx's 256 KB/s, S3 prefixes in the
# target store behind the store's fault proxy, Hub repositories ----
mkdir -p "$WWW/c" "$T/src" "$T/old"
for ((i = 1; i <= N_HTTP; i++)); do make_file "c/o$i.bin" "${HTTP_SIZE[i]}"; done
for ((i = 1; i <= N_PREFIX; i++)); do
	mkdir -p "$T/src/p$i/d"
	m=0
	for size in ${PREFIX_SIZES[i]}; do
		m=$((m + 1))
		head -c "$size" /dev/urandom >"$T/src/p$i/d/m$m.bin"
	done
	head -c 7000 /dev/urandom >"$T/src/p$i/top.bin"
done
aws_s3 s3 cp --recursive --quiet "$T/src" s3://target/src/

HUB_PORT=$(free_port)
CDN_PORT=$(free_port)
HUB=$T/hub
TOKEN=hf_chaosToken0123456789abcdef
for ((i = 1; i <= N_HUB; i++)); do
	r=$HUB/models/chaos/r$i
	mkdir -p "$r/weights"
	head -c 900 /dev/urandom >"$r/README.md"
	head -c 400 /dev/urandom >"$r/config.json"
	head -c "${HUB_SIZE[i]}" /dev/urandom >"$r/weights/model.bin"
	head -c 2500000 /dev/urandom >"$r/weights/extra.bin"
done
start_hub "$HUB_PORT" "$CDN_PORT" "$HUB" "$TOKEN"
HUBCTL="http://127.0.0.1:$HUB_PORT"
curl -s "$HUBCTL/__rate?bps=1500000" >/dev/null

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
# (remora_chaos_u1, _u2: a replacement takes the user of the one it
# replaces), so that a partition can cut one off (test/lib/partition.sh)
CONNINFO="host=127.0.0.1 port=$PG_PORT dbname=postgres user=rw"
declare -A EXT=() EXT_USER=()	# label -> pid, OS user of the running remora-workers
NEXT_W=1
new_external() {	# new_external USER
	local name=w$NEXT_W
	NEXT_W=$((NEXT_W + 1))
	(partition_run "$1" "$(pg_config --bindir)/remora-worker" --label "$name" --concurrency 2 "$CONNINFO") \
		>>"$T/$name.log" 2>&1 &
	echo "$! KILL" >>"$SERVICES_DIR/pids"
	disown $!	# its kill -9 is the point: no notice of it
	EXT[$name]=$! EXT_USER[$name]=$1
}
for u in remora_chaos_u1 remora_chaos_u2; do
	partition_user "$u" || { not_ok "the remora-workers' OS user $u and its filter are set up"; exit 1; }
	new_external "$u"
done
# ext_name DRAW: one of the running remora-workers, by the draw
ext_name() { printf '%s\n' "${!EXT[@]}" | sort -V | sed -n "$(($1 % ${#EXT[@]} + 1))p"; }

# ---- what the run does, and counts ----
declare -A INJECTED=()	# kind -> count
SUBMITTED=0	# jobs submitted (idempotency keys chaos-1 ..)
declare -A CHANGED=()	# job -> the SHA-256 of its source before the run replaced it
declare -A CANCELLED=()	# job -> 1: the run asked to cancel it
declare -A EXPORTED=()	# job -> export id
declare -a JOBS=() PAUSERS=()
note() { INJECTED[$1]=$((${INJECTED[$1]:-0} + 1)); echo "# $(date +%T) $1 ${2:-}"; }

submit_one() {	# the next job of the schedule, with an idempotency key: replayable
	local n=$((SUBMITTED + 1)) src j
	set -- ${JOB[n]}
	case $1 in
	http) src="$FLAKY/slower/c/$2.bin" ;;
	prefix) src="s3://target/src/$2/" ;;
	hub) src="hf://chaos/$2" ;;
	esac
	j=$(qr "SELECT remora_submit('$src', idempotency_key => 'chaos-$n')") || return 0
	SUBMITTED=$n
	JOBS+=("$j")
}

export_one() {	# the next export of the schedule: a succeeded job not yet exported
	local k=$((${#EXPORTED[@]} + 1)) j ex
	j=$(nth "${EXP_R[k]}" "SELECT job_id FROM remora.jobs j WHERE source_kind <> 'export' AND state = 'succeeded' AND idempotency_key LIKE 'chaos-%'
		AND NOT EXISTS (SELECT 1 FROM remora.jobs e WHERE e.idempotency_key = 'chaos-export-' || j.job_id)")
	[ -n "$j" ] || return 0
	ex=$(qr "SELECT remora_export($j, 'target', 'stable/$j', '{\"if_exists\": \"${EXP_MODE[k]}\"}', 'chaos-export-$j')") || return 0
	EXPORTED[$j]=$ex
}

# pause PID: SIGSTOP, and SIGCONT past the lease, while the run goes on
pause() {
	kill -STOP "$1" 2>/dev/null || return 1
	{
		sleep "$PAUSE_SECONDS"
		kill -CONT "$1" 2>/dev/null
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

# ---- the run: jobs submitted through most of it, exports of what
# succeeded, the injections at the seconds of the schedule ----
t0=$(date +%s)
for _ in $(seq 1 $((N_JOBS / 4))); do submit_one; done
for i in "${!INJ_AT[@]}"; do
	while :; do	# submit what is due until the injection's second
		now=$(date +%s)
		due=$((N_JOBS * (now - t0 + 10) * 5 / (SECONDS_TOTAL * 4)))
		while [ "$SUBMITTED" -lt "$N_JOBS" ] && [ "$SUBMITTED" -lt "$due" ]; do submit_one; done
		[ "$now" -lt $((t0 + INJ_AT[i])) ] || break
		sleep 0.5
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
HEALED=$(q "SELECT now()")
echo "# $(date +%T) injections stopped: $(for k in "${!INJECTED[@]}"; do printf '%s %s, ' "$k" "${INJECTED[$k]}"; done)"
exportable() {
	[ -n "$(qr "SELECT 1 FROM remora.jobs j WHERE source_kind <> 'export' AND state = 'succeeded' AND idempotency_key LIKE 'chaos-%'
		AND NOT EXISTS (SELECT 1 FROM remora.jobs e WHERE e.idempotency_key = 'chaos-export-' || j.job_id) LIMIT 1")" ]
}
while [ "${#EXPORTED[@]}" -lt "$N_EXPORT" ] && wait_for 120 exportable; do export_one; done
unsettled() { qr "SELECT count(*) FROM remora.jobs WHERE idempotency_key LIKE 'chaos-%' AND state IN ('queued', 'running', 'retrying')"; }
all_ended() { [ "$(unsettled)" = 0 ]; }
if ! check "every job and export ends once the faults stop" wait_for 600 all_ended; then
	q "SELECT '# ' || job_id || ' ' || source_kind || ' ' || state || ' ' || source FROM remora.jobs WHERE idempotency_key LIKE 'chaos-%' AND state IN ('queued', 'running', 'retrying')"
fi

# exports a kill or a fault left in outcome_unknown: an administrator
# verifies, and retries those verify finds incomplete
unknown() { q "SELECT job_id FROM remora.jobs WHERE source_kind = 'export' AND state = 'outcome_unknown' AND idempotency_key LIKE 'chaos-%'"; }
declare -A RESOLVED=()	# export -> verified | retried
for ex in $(unknown); do
	q "SELECT remora_export_resolve($ex, 'verify')" >/dev/null
	RESOLVED[$ex]=verified
done
wait_for 300 all_ended || true
for ex in $(unknown); do
	q "SELECT remora_export_resolve($ex, 'retry')" >/dev/null
	RESOLVED[$ex]=retried
done
wait_for 300 all_ended || true

# ---- what happened ----
CHAOS="idempotency_key LIKE 'chaos-%'"
check_eq "every submit replayed after a crash made one job, not two" \
	"$(q "SELECT count(*) || '/' || count(DISTINCT idempotency_key) FROM remora.jobs WHERE source_kind <> 'export' AND $CHAOS")" \
	"$SUBMITTED/$SUBMITTED"
cancelled_list=$(IFS=,; echo "${!CANCELLED[*]}")
check_eq "every job succeeded, or was cancelled by the run" \
	"$(q "SELECT count(*) FROM remora.jobs WHERE source_kind <> 'export' AND $CHAOS AND state <> 'succeeded'
		AND NOT (state = 'cancelled' AND job_id = ANY ('{${cancelled_list}}'::bigint[]))")" 0
q "SELECT '# ' || job_id || ' ' || state || ' ' || source || ': ' || coalesce(last_error::text, '') FROM remora.jobs
	WHERE source_kind <> 'export' AND $CHAOS AND state NOT IN ('succeeded', 'cancelled')"
check_eq "every export succeeded" \
	"$(q "SELECT count(*) FILTER (WHERE state = 'succeeded') || '/' || count(*) FROM remora.jobs WHERE source_kind = 'export' AND $CHAOS")" \
	"${#EXPORTED[@]}/${#EXPORTED[@]}"
q "SELECT '# export ' || job_id || ' ' || state || ': ' || coalesce(last_error::text, '') FROM remora.jobs
	WHERE source_kind = 'export' AND $CHAOS AND state <> 'succeeded'"
check_eq "one committed result per succeeded job, from its only succeeded attempt; none for any other" \
	"$(q "SELECT count(*) FILTER (WHERE j.state = 'succeeded' AND r.attempt_id IS NOT NULL AND a.state = 'succeeded'
			AND (SELECT count(*) FROM remora.attempts x WHERE x.job_id = j.job_id AND x.state = 'succeeded') = 1)
		|| '/' || count(*) FILTER (WHERE j.state = 'succeeded') || '/' || count(r.job_id)
		FROM remora.jobs j LEFT JOIN remora.results r USING (job_id) LEFT JOIN remora.attempts a ON a.attempt_id = r.attempt_id
		WHERE j.source_kind <> 'export' AND j.$CHAOS")" \
	"$(q "SELECT count(*) || '/' || count(*) || '/' || count(*) FROM remora.jobs WHERE source_kind <> 'export' AND $CHAOS AND state = 'succeeded'")"

# every committed member and manifest, read back from the store at once
mkdir -p "$T/dl"
aws_s3 s3 sync --quiet s3://target/remora/ "$T/dl/remora/"
aws_s3 s3 sync --quiet s3://target/stable/ "$T/dl/stable/"
q "SELECT m.key, m.sha256, m.path, j.source, j.job_id, m.size FROM remora.results r JOIN remora.members m USING (attempt_id)
	JOIN remora.jobs j USING (job_id) WHERE j.$CHAOS" >"$T/members"
bad_store=0 bad_source=0
declare -A CHECKED_MEMBERS=() CHECKED_JOB=()	# kind -> members checked; kind|job -> 1
while IFS='|' read -r key sha path source job size; do
	good=1
	[ "$(sha256sum "$T/dl/$key" 2>/dev/null | cut -d' ' -f1)" = "$sha" ] || { bad_store=$((bad_store + 1)) good=; }
	case $source in
	s3://target/src/*) file=$T/src/${source#s3://target/src/}$path ;;
	hf://*)
		file=${source#hf://}
		file=$HUB/models/${file%@*}/$path
		;;
	*) file=$WWW/c/${source##*/} ;;
	esac
	got=$(sha256sum "$file" | cut -d' ' -f1)
	if [ "$got" != "$sha" ] && [ "${CHANGED[$job]:-}" != "$sha" ]; then
		echo "# job $job: $path has $sha, its source $got${CHANGED[$job]:+ (before the change: ${CHANGED[$job]})}"
		bad_source=$((bad_source + 1)) good=
	fi
	if [ -n "$good" ]; then
		kind_of "$source" "$size"
		CHECKED_MEMBERS[$K]=$((${CHECKED_MEMBERS[$K]:-0} + 1))
		CHECKED_JOB[$K|$job]=1
	fi
done <"$T/members"
n_members=$(wc -l <"$T/members")
check_eq "all $n_members committed members read back from the store have their manifest's SHA-256" "$bad_store" 0
check_eq "and their source's (for a replaced source, the old or the new content, whole)" "$bad_source" 0
bad=0
while IFS='|' read -r key sha; do
	[ "$(sha256sum "$T/dl/$key" 2>/dev/null | cut -d' ' -f1)" = "$sha" ] || bad=$((bad + 1))
done < <(q "SELECT r.manifest_key, r.manifest_sha256 FROM remora.results r JOIN remora.jobs j USING (job_id) WHERE j.$CHAOS")
check_eq "every manifest object hashes to its committed SHA-256" "$bad" 0
bad=0
while IFS='|' read -r key sha; do
	if [ "$(sha256sum "$T/dl/$key" 2>/dev/null | cut -d' ' -f1)" = "$sha" ]; then
		CHECKED_MEMBERS[export]=$((${CHECKED_MEMBERS[export]:-0} + 1))
	else
		bad=$((bad + 1))
	fi
done < <(q "SELECT 'stable/' || j.job_id || '/' || m.path, m.sha256 FROM remora.jobs e JOIN remora.jobs j ON e.idempotency_key = 'chaos-export-' || j.job_id
	JOIN remora.results r ON r.job_id = j.job_id JOIN remora.members m ON m.attempt_id = r.attempt_id WHERE e.state = 'succeeded'")
check_eq "every exported key holds its member" "$bad" 0

# every kind of source was submitted, and its results checked above
declare -A KIND_SUBMITTED=() KIND_SUCCEEDED=() KIND_JOBS_CHECKED=()
declare -A KIND_OF_JOB=()	# job id -> kind
for ((n = 1; n <= SUBMITTED; n++)); do
	set -- ${JOB[n]}
	case $1 in
	http) kind_of http "${HTTP_SIZE[${2#o}]}" ;;
	prefix) K="s3 prefix" ;;
	hub) K="hf snapshot" ;;
	esac
	KIND_SUBMITTED[$K]=$((${KIND_SUBMITTED[$K]:-0} + 1))
	KIND_OF_JOB[${JOBS[n - 1]}]=$K
done
for j in $(q "SELECT job_id FROM remora.jobs WHERE source_kind <> 'export' AND $CHAOS AND state = 'succeeded'"); do
	K=${KIND_OF_JOB[$j]:-?}
	KIND_SUCCEEDED[$K]=$((${KIND_SUCCEEDED[$K]:-0} + 1))
done
for kj in "${!CHECKED_JOB[@]}"; do
	K=${kj%|*}
	KIND_JOBS_CHECKED[$K]=$((${KIND_JOBS_CHECKED[$K]:-0} + 1))
done
KIND_SUBMITTED[export]=${#EXPORTED[@]}
KIND_SUCCEEDED[export]=$(q "SELECT count(*) FROM remora.jobs WHERE source_kind = 'export' AND $CHAOS AND state = 'succeeded'")
KIND_JOBS_CHECKED[export]=$(q "SELECT count(*) FROM remora.jobs e WHERE e.source_kind = 'export' AND e.$CHAOS AND e.state = 'succeeded'")
every_kind() {
	local k
	for k in "${KINDS[@]}"; do
		[ "${KIND_SUBMITTED[$k]:-0}" -ge 1 ] && [ "${KIND_JOBS_CHECKED[$k]:-0}" -ge 1 ] &&
			[ "${CHECKED_MEMBERS[$k]:-0}" -ge 1 ] || return 1
	done
}
check "every source kind was submitted and its results checked against the store ($(for k in "${KINDS[@]}"; do
	printf '%s: %s submitted, %s checked, %s members; ' "$k" "${KIND_SUBMITTED[$k]:-0}" "${KIND_JOBS_CHECKED[$k]:-0}" "${CHECKED_MEMBERS[$k]:-0}"
done))" every_kind

# staging: every attempt's cleanup is carried out, then nothing is left
# under the staging area that a committed manifest does not name
cleaned() { [ "$(q "SELECT count(*) FROM remora.attempts WHERE cleaned_at IS NULL AND state <> 'running'")" = 0 ]; }
check "every ended attempt's staging is cleaned" wait_for 300 cleaned
aws_s3 s3 ls --recursive s3://target/remora/ | awk '{ print $4 }' | sort >"$T/listed"
q "SELECT m.key FROM remora.results r JOIN remora.members m USING (attempt_id) UNION ALL SELECT manifest_key FROM remora.results" |
	sort >"$T/named"
orphans=$(comm -23 "$T/listed" "$T/named")
check_eq "no object under the staging area that no committed manifest names ($(wc -l <"$T/listed") listed)" \
	"$(printf '%s' "$orphans" | grep -c . || true)" 0
[ -z "$orphans" ] || echo "$orphans" | head -20 | sed 's/^/# orphan: /'
if [ "${REMORA_STORE:-s3rver}" = rgw ]; then
	open=$(aws_s3 s3api list-multipart-uploads --bucket target --query 'length(Uploads || `[]`)' --output text)
	check_eq "no multipart upload left open" "$open" 0
	[ "$open" = 0 ] || aws_s3 s3api list-multipart-uploads --bucket target \
		--query 'Uploads[].[Key, Initiated]' --output text | sed 's/^/# open: /'
else
	echo "# the test server does not list multipart uploads (RGW's run checks them)"
fi
check_eq "the server log has no PANIC, failed assertion or leak warning" \
	"$(grep -cE 'PANIC|TRAP:|[Aa]ssert|leak|not closed|still referenced' "$LOG" || true)" 0
check_eq "nor have the remora-workers' logs a crash or an assertion" \
	"$(cat "$T"/w*.log | grep -ciE 'assertion|segmentation fault|core dumped' || true)" 0
kills=$((${INJECTED[kill_bgworker]:-0} + ${INJECTED[kill_launcher]:-0} + ${INJECTED[restart_pg]:-0} + ${INJECTED[kill_external]:-0}))
# the partitions: some packets dropped, and every remora-worker cut off
# reconnected (the global checks above cover its attempts and staging)
beating() {
	[ "$(q "SELECT count(*) FROM remora_workers WHERE kind = 'external' AND stopped_at IS NULL AND heartbeat_at > '$HEALED'")" = "${#EXT[@]}" ]
}
check "the run cut remora-workers off ${INJECTED[partition]:-0} times ($(awk '{ n += $1 } END { print n + 0 }' "$T/dropped" 2>/dev/null || echo 0) packets dropped), and each one live beats again since the heal" \
	eval '[ "${INJECTED[partition]:-0}" -ge 1 ] && wait_for 60 beating'
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
	check "the soak killed workers and the launcher with kill -9 100 times or more ($KILL9)" test "$KILL9" -ge 100
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
if [ -n "$DOC" ]; then
	# between the markers of doc/reliability.md's "latest soak" section
	awk -v f="$T/summary.md" '
		/<!-- chaos:begin -->/ { print; while ((getline l < f) > 0) print l; skip = 1; next }
		/<!-- chaos:end -->/ { skip = 0 }
		!skip' "$DOC" >"$T/doc" && cp "$T/doc" "$DOC"
fi

e2e_finish
