#!/usr/bin/env bash
#
# The chaos run: jobs of every source kind and exports of their results,
# while the run kills, pauses and restarts whatever moves them and makes
# their sources and the store misbehave.  Afterwards it checks that
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
# It prints a summary (injections by kind, attempts per job, recoveries,
# reuse) as a Markdown table.
#
#   test/chaos/run.sh            the CI variant: CHAOS_SECONDS=300 of
#                                injections, 50 jobs and 16 exports
#   test/chaos/run.sh --soak     CHAOS_SECONDS=1500, 216 jobs and 60
#                                exports; writes its summary into
#                                doc/reliability.md
#
# CHAOS_SEED fixes the schedule (which injection, when, on what; the job
# mix); the interleaving with the workers is still the machine's.
# REMORA_STORE chooses the target store (s3rver or rgw), as for test/e2e.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin chaos

MODE=ci
[ "${1:-}" = --soak ] && MODE=soak
SEED=${CHAOS_SEED:-$(((RANDOM << 15) | RANDOM))}
RANDOM=$SEED
if [ "$MODE" = soak ]; then
	SECONDS_TOTAL=${CHAOS_SECONDS:-1500}
	N_HTTP=150 N_PREFIX=50 N_HUB=16 N_EXPORT=60
	DOC=${CHAOS_DOC:-doc/reliability.md}
else
	SECONDS_TOTAL=${CHAOS_SECONDS:-300}
	N_HTTP=32 N_PREFIX=12 N_HUB=6 N_EXPORT=16
	DOC=${CHAOS_DOC:-}
fi
echo "# chaos run: $MODE, seed $SEED, ${SECONDS_TOTAL} s of injections, store ${REMORA_STORE:-s3rver}"

stack_up
e2e_at_exit 'for f in "$T"/w*.log; do cp "$f" "/tmp/chaos${E2E_LABEL:+-rgw}-${f##*/}"; done'

# count the checks for the summary
N_OK=0 N_NOT_OK=0
ok() { N_OK=$((N_OK + 1)); echo "ok - $E2E_LABEL$*"; }
not_ok() { N_NOT_OK=$((N_NOT_OK + 1)); echo "not ok - $E2E_LABEL$*"; E2E_FAILED=1; }

pick() { echo "${@:$((RANDOM % $# + 1)):1}"; }	# pick WORD...: one of them
chance() { [ $((RANDOM % 100)) -lt "$1" ]; }	# chance PERCENT

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

# ---- the sources: http objects of several sizes (some multi-part, 5 MB
# parts) behind the fault proxy and nginx's 256 KB/s, S3 prefixes in the
# target store behind the store's fault proxy, Hub repositories ----
mkdir -p "$WWW/c" "$T/src" "$T/old"
declare -a HTTP_FILES
for i in $(seq 1 "$N_HTTP"); do
	size=$(pick 150000 600000 3000000 3000000 11000000 24000000)
	make_file "c/o$i.bin" "$size"
	HTTP_FILES+=("o$i.bin")
done
for i in $(seq 1 "$N_PREFIX"); do
	n=$((3 + RANDOM % 12))
	mkdir -p "$T/src/p$i/d"
	for m in $(seq 1 "$n"); do head -c $((500 + RANDOM * 4)) /dev/urandom >"$T/src/p$i/d/m$m.bin"; done
	head -c 7000 /dev/urandom >"$T/src/p$i/top.bin"
done
aws_s3 s3 cp --recursive --quiet "$T/src" s3://target/src/

HUB_PORT=$(free_port)
CDN_PORT=$(free_port)
HUB=$T/hub
TOKEN=hf_chaosToken0123456789abcdef
for i in $(seq 1 "$N_HUB"); do
	r=$HUB/models/chaos/r$i
	mkdir -p "$r/weights"
	head -c 900 /dev/urandom >"$r/README.md"
	head -c 400 /dev/urandom >"$r/config.json"
	head -c $((1200000 + RANDOM * 30)) /dev/urandom >"$r/weights/model.bin"
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
CONNINFO="host=$T/pg port=$PG_PORT dbname=postgres user=rw"
declare -A EXT=()	# label -> pid of the running remora-workers
NEXT_W=1
new_external() {
	local name=w$NEXT_W
	NEXT_W=$((NEXT_W + 1))
	start_remora_worker "$name" --label "$name" --concurrency 2 "$CONNINFO"
	disown "$REMORA_WORKER_PID"	# its kill -9 is the point: no notice of it
	EXT[$name]=$REMORA_WORKER_PID
}
new_external
new_external

# ---- what the run does, and counts ----
declare -A INJECTED=()	# kind -> count
SUBMITTED=0	# jobs submitted (idempotency keys chaos-1 ..)
declare -A CHANGED=()	# job -> the SHA-256 of its source before the run replaced it
declare -A CANCELLED=()	# job -> 1: the run asked to cancel it
declare -A EXPORTED=()	# job -> export id
declare -a JOBS=()
note() { INJECTED[$1]=$((${INJECTED[$1]:-0} + 1)); echo "# $(date +%T) $1 ${2:-}"; }

submit_one() {	# the next job of the mix, with an idempotency key: replayable
	local n=$((SUBMITTED + 1)) src kind j
	kind=$(pick http http http prefix prefix hub)
	case $kind in
	http) src="$FLAKY/slower/c/$(pick "${HTTP_FILES[@]}")" ;;
	prefix) src="s3://target/src/p$((RANDOM % N_PREFIX + 1))/" ;;
	hub) src="hf://chaos/r$((RANDOM % N_HUB + 1))" ;;
	esac
	j=$(qr "SELECT remora_submit('$src', idempotency_key => 'chaos-$n')") || return 0
	SUBMITTED=$n
	JOBS+=("$j")
}

export_one() {	# an export of a succeeded job not yet exported
	local j mode ex
	j=$(qr "SELECT job_id FROM remora.jobs j WHERE source_kind <> 'export' AND state = 'succeeded' AND idempotency_key LIKE 'chaos-%'
		AND NOT EXISTS (SELECT 1 FROM remora.jobs e WHERE e.idempotency_key = 'chaos-export-' || j.job_id)
		ORDER BY random() LIMIT 1") || return 0
	[ -n "$j" ] || return 0
	mode=$(pick fail overwrite)
	ex=$(qr "SELECT remora_export($j, 'target', 'stable/$j', '{\"if_exists\": \"$mode\"}', 'chaos-export-$j')") || return 0
	EXPORTED[$j]=$ex
}

running_pid() {	# running_pid TYPE: a random pid of a backend of TYPE
	q "SELECT pid FROM pg_stat_activity WHERE backend_type = '$1' ORDER BY random() LIMIT 1" 2>/dev/null
}

pause() {	# pause PID: SIGSTOP past the lease (4 s), then SIGCONT
	kill -STOP "$1" 2>/dev/null || return 0
	sleep 6
	kill -CONT "$1" 2>/dev/null || true
}

inject() {
	local kind pid name f j action
	kind=$(pick kill_bgworker kill_bgworker kill_bgworker kill_launcher restart_pg restart_pg \
		kill_external kill_external pause_bgworker pause_external pause_external \
		source_fault source_fault source_fault source_fault target_fault target_fault target_fault \
		hub_fault change_source cancel)
	case $kind in
	kill_bgworker | kill_launcher)
		[ "$kind" = kill_bgworker ] && pid=$(running_pid "remora worker") || pid=$(running_pid "remora launcher")
		[ -n "$pid" ] || return 0
		kill -9 "$pid" && note "$kind" "$pid"
		;;
	restart_pg)
		cluster_stop "$T/pg" immediate
		cluster_start "$T/pg" || cluster_start "$T/pg" || { not_ok "PostgreSQL starts again"; exit 1; }
		note "$kind"
		;;
	kill_external)
		name=$(pick "${!EXT[@]}")
		kill -9 "${EXT[$name]}" 2>/dev/null && note "$kind" "$name"
		unset "EXT[$name]"
		new_external
		;;
	pause_bgworker)
		pid=$(running_pid "remora worker")
		[ -n "$pid" ] || return 0
		note "$kind" "$pid"
		pause "$pid"
		;;
	pause_external)
		name=$(pick "${!EXT[@]}")
		note "$kind" "$name"
		pause "${EXT[$name]}"
		;;
	source_fault)
		f=$(pick "${HTTP_FILES[@]}")
		action=$(pick "reset&after=$((RANDOM * 16))" "truncate&after=$((RANDOM * 16))" status:500 status:503 \
			"stall&after=$((RANDOM * 8))")
		rule "$SRC_PROXY" "match=GET%20/slower/c/$f&action=$action&count=1"
		note "$kind" "$f ${action%%&*}"
		;;
	target_fault)
		action=$(pick status:500 status:503 s3error:SlowDown:503 s3error:InternalError:500 "reset&after=0")
		rule "$S3_PROXY" "match=$(pick PUT%20/target/remora/ POST%20/target/remora/ GET%20/target/src/ PUT%20/target/stable/)&action=$action&count=1"
		note "$kind" "${action%%&*}"
		;;
	hub_fault)
		curl -s "$HUBCTL/__rule?match=$(pick /resolve/ /tree/ /cdn/)&status=$(pick 500 503 429)&count=1&retry_after=1" >/dev/null
		note "$kind"
		;;
	change_source)
		# replace an http source a running job reads (each file once): a
		# new file, so that the GET in flight goes on with the old one and
		# the next attempt's resume check sees the change
		j=$(q "SELECT j.job_id FROM remora.jobs j JOIN remora.checkpoints c USING (job_id) WHERE j.state = 'running'
			AND j.source LIKE '%/slower/c/%' AND c.bytes_done > 0 ORDER BY random() LIMIT 1" 2>/dev/null)
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
	cancel)
		j=$(q "SELECT job_id FROM remora.jobs WHERE source_kind <> 'export' AND state IN ('queued', 'running', 'retrying') ORDER BY random() LIMIT 1" 2>/dev/null)
		[ -n "$j" ] || return 0
		CANCELLED[$j]=1
		qr "SELECT remora_cancel($j)" >/dev/null
		note "$kind" "job $j"
		;;
	esac
}

# ---- the run: jobs submitted through most of it, exports of what
# succeeded, an injection every 1-4 s ----
N_JOBS=$((N_HTTP + N_PREFIX + N_HUB))
t0=$(date +%s)
end=$((t0 + SECONDS_TOTAL))
for _ in $(seq 1 $((N_JOBS / 4))); do submit_one; done
while [ "$(date +%s)" -lt "$end" ]; do
	elapsed=$(($(date +%s) - t0))
	due=$((N_JOBS * (elapsed + 10) * 5 / (SECONDS_TOTAL * 4)))
	while [ "$SUBMITTED" -lt "$N_JOBS" ] && [ "$SUBMITTED" -lt "$due" ]; do submit_one; done
	[ "${#EXPORTED[@]}" -lt "$N_EXPORT" ] && chance 60 && export_one
	inject
	sleep "$((1 + RANDOM % 4))"
done
while [ "$SUBMITTED" -lt "$N_JOBS" ]; do submit_one; done

# ---- the faults stop; every job and export ends ----
curl -s "http://127.0.0.1:$SRC_PROXY/__reset" >/dev/null
curl -s "http://127.0.0.1:$S3_PROXY/__reset" >/dev/null
for name in "${!EXT[@]}"; do kill -CONT "${EXT[$name]}" 2>/dev/null || true; done
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
q "SELECT m.key, m.sha256, m.path, j.source, j.job_id FROM remora.results r JOIN remora.members m USING (attempt_id)
	JOIN remora.jobs j USING (job_id) WHERE j.$CHAOS" >"$T/members"
bad_store=0 bad_source=0
while IFS='|' read -r key sha path source job; do
	[ "$(sha256sum "$T/dl/$key" 2>/dev/null | cut -d' ' -f1)" = "$sha" ] || bad_store=$((bad_store + 1))
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
		bad_source=$((bad_source + 1))
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
	[ "$(sha256sum "$T/dl/$key" 2>/dev/null | cut -d' ' -f1)" = "$sha" ] || bad=$((bad + 1))
done < <(q "SELECT 'stable/' || j.job_id || '/' || m.path, m.sha256 FROM remora.jobs e JOIN remora.jobs j ON e.idempotency_key = 'chaos-export-' || j.job_id
	JOIN remora.results r ON r.job_id = j.job_id JOIN remora.members m ON m.attempt_id = r.attempt_id WHERE e.state = 'succeeded'")
check_eq "every exported key holds its member" "$bad" 0

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
check "the run injected kills and restarts ($kills) and faults of $(echo "${!INJECTED[@]}" | wc -w) kinds" \
	test "$kills" -ge $((SECONDS_TOTAL / 30)) -a "$(echo "${!INJECTED[@]}" | wc -w)" -ge 8

# ---- the summary ----
summary() {
	echo "Chaos run ($MODE, seed $SEED, store ${REMORA_STORE:-s3rver}, $(date -u +%Y-%m-%d)):" \
		"$SUBMITTED jobs and ${#EXPORTED[@]} exports, ${SECONDS_TOTAL} s of injections."
	echo
	echo "| injection | count |"
	echo "| --- | --- |"
	for k in $(printf '%s\n' "${!INJECTED[@]}" | sort); do echo "| $k | ${INJECTED[$k]} |"; done
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
