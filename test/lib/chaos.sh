# The chaos run's job mix and its checks against the store (source this
# file after e2e.sh): test/chaos/run.sh runs the mix under its injections,
# test/e2e/patroni.sh across a switchover and a failover of the primary.
#
#     mix_draw      the mix, drawn from $RANDOM (the caller seeds it and
#                   sets N_HTTP, N_PREFIX, N_HUB, N_EXPORT; MIX_SIZES_1,
#                   MIX_SIZES_2 and MIX_SIZES are the http objects' sizes
#                   drawn for o1, o2 and the others)
#     mix_print     its lines of the printed schedule
#     mix_sources   the sources, of the sizes drawn (after stack_services):
#                   http objects under $WWW/c (fetched through $MIX_HTTP),
#                   S3 prefixes in the target store, Hub repositories
#     submit_one    the next job of the mix; export_one the next export
#     mix_settle    wait until every job and export ends, resolving the
#                   exports left in outcome_unknown as an administrator
#     mix_verify    the checks: one job per submit, one result per
#                   succeeded job, every member and manifest read back
#                   from the store, staging cleaned, no upload left open
#
# Submits and exports carry idempotency keys ("chaos-N", "chaos-export-J")
# and qr replays them while the server cannot answer, so a job or export
# the run counts is one whose submit committed.

PART=5242880	# remora.part_size (test/lib/stack.sh): a larger http object goes in parts
MIX_SIZES_1=${MIX_SIZES_1:-150000 600000 3000000}
MIX_SIZES_2=${MIX_SIZES_2:-11000000 24000000}
MIX_SIZES=${MIX_SIZES:-150000 600000 3000000 3000000 11000000 24000000}
CHAOS="idempotency_key LIKE 'chaos-%'"

SUBMITTED=0	# jobs submitted (idempotency keys chaos-1 ..)
declare -A CHANGED=()	# job -> the SHA-256 of its source before the run replaced it
declare -A CANCELLED=()	# job -> 1: the run asked to cancel it
declare -A EXPORTED=()	# job -> export id
declare -A RESOLVED=()	# export -> verified | retried
declare -a JOBS=() HTTP_SIZE=() PREFIX_SIZES=() HUB_SIZE=() JOB=() EXP_MODE=() EXP_R=()

pick() { P=${*:$((RANDOM % $# + 1)):1}; }	# pick WORD...: one of them, in $P

mix_draw() {
	local i m n k t first
	N_JOBS=$((N_HTTP + N_PREFIX + N_HUB))
	# http objects of several sizes: o1 of one part and o2 of several, whatever
	# the draw, so that both are in the mix
	for ((i = 1; i <= N_HTTP; i++)); do
		case $i in
		1) pick $MIX_SIZES_1 ;;
		2) pick $MIX_SIZES_2 ;;
		*) pick $MIX_SIZES ;;
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
}

# mix_draw_exports: the exports' modes and draws (after the rest of a
# schedule, so that adding them changed no other draw)
mix_draw_exports() {
	local k
	for ((k = 1; k <= N_EXPORT; k++)); do
		pick fail overwrite
		EXP_MODE[k]=$P EXP_R[k]=$RANDOM
	done
}

mix_print() {
	local i
	for ((i = 1; i <= N_HTTP; i++)); do echo "file o$i ${HTTP_SIZE[i]}"; done
	for ((i = 1; i <= N_PREFIX; i++)); do echo "prefix p$i ${PREFIX_SIZES[i]}"; done
	for ((i = 1; i <= N_HUB; i++)); do echo "hub r$i ${HUB_SIZE[i]}"; done
	for ((i = 1; i <= N_JOBS; i++)); do echo "job $i ${JOB[i]}"; done
}

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

# mix_sources: the sources, of the sizes drawn: http objects (some
# multi-part, 5 MB parts), S3 prefixes in the target store, Hub
# repositories (remora.hf_endpoint must name $HUB_PORT, remora.hf_token
# $TOKEN)
mix_sources() {
	local i m r size
	mkdir -p "$WWW/c" "$T/src"
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
}

submit_one() {	# the next job of the schedule, with an idempotency key: replayable
	local n=$((SUBMITTED + 1)) src j opts=''
	set -- ${JOB[n]}
	# every other job a mirror: what the latest result of its source holds
	# unchanged is copied from it (doc/user-guide.md, "Mirrors")
	[ $((n % 2)) = 1 ] || opts=", options => '{\"reuse_from\": \"latest\"}'"
	case $1 in
	http) src="$MIX_HTTP/$2.bin" ;;
	prefix) src="s3://target/src/$2/" ;;
	hub) src="hf://chaos/$2" ;;
	esac
	j=$(qr "SELECT remora_submit('$src'$opts, idempotency_key => 'chaos-$n')") || return 0
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

# mix_settle: the exports not made yet, of jobs that succeeded; then every
# job and export ends
mix_settle() {
	local ex
	exportable() {
		[ -n "$(qr "SELECT 1 FROM remora.jobs j WHERE source_kind <> 'export' AND state = 'succeeded' AND idempotency_key LIKE 'chaos-%'
			AND NOT EXISTS (SELECT 1 FROM remora.jobs e WHERE e.idempotency_key = 'chaos-export-' || j.job_id) LIMIT 1")" ]
	}
	while [ "${#EXPORTED[@]}" -lt "$N_EXPORT" ] && wait_for 120 exportable; do export_one; done
	unsettled() { qr "SELECT count(*) FROM remora.jobs WHERE idempotency_key LIKE 'chaos-%' AND state IN ('queued', 'running', 'retrying')"; }
	all_ended() { [ "$(unsettled)" = 0 ]; }
	# (check says nothing of the outcome: it returns what not_ok does)
	if wait_for 600 all_ended; then
		ok "every job and export ends once the faults stop"
	else
		not_ok "every job and export ends once the faults stop"
		q "SELECT '# ' || job_id || ' ' || source_kind || ' ' || state || ' ' || source FROM remora.jobs WHERE idempotency_key LIKE 'chaos-%' AND state IN ('queued', 'running', 'retrying')"
	fi

	# exports a kill or a fault left in outcome_unknown: an administrator
	# verifies, and retries those verify finds incomplete
	unknown() { q "SELECT job_id FROM remora.jobs WHERE source_kind = 'export' AND state = 'outcome_unknown' AND idempotency_key LIKE 'chaos-%'"; }
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
}

mix_verify() {
	local bad bad_store bad_source good got file n_members orphans open cancelled_list j n kj
	local key sha path source job size
	check_eq "every submit replayed after a crash made one job, not two" \
		"$(q "SELECT count(*) || '/' || count(DISTINCT idempotency_key) FROM remora.jobs WHERE source_kind <> 'export' AND $CHAOS")" \
		"$SUBMITTED/$SUBMITTED"
	cancelled_list=$(IFS=,; echo "${!CANCELLED[*]}")
	check_eq "every job succeeded, or was cancelled by the run" \
		"$(q "SELECT count(*) FROM remora.jobs WHERE source_kind <> 'export' AND $CHAOS AND state <> 'succeeded'
			AND NOT (state = 'cancelled' AND job_id = ANY ('{${cancelled_list}}'::bigint[]))")" 0
	for j in $(q "SELECT job_id FROM remora.jobs WHERE source_kind <> 'export' AND $CHAOS AND state <> 'succeeded'
		AND NOT (state = 'cancelled' AND job_id = ANY ('{${cancelled_list}}'::bigint[])) ORDER BY job_id"); do
		echo "# job $j did not succeed: $(q "SELECT state || ': ' || coalesce(last_error::text, '') FROM remora.jobs WHERE job_id = $j")"
		mix_explain "$j"
	done
	check_eq "every export succeeded" \
		"$(q "SELECT count(*) FILTER (WHERE state = 'succeeded') || '/' || count(*) FROM remora.jobs WHERE source_kind = 'export' AND $CHAOS")" \
		"${#EXPORTED[@]}/${#EXPORTED[@]}"
	for j in $(q "SELECT job_id FROM remora.jobs WHERE source_kind = 'export' AND $CHAOS AND state <> 'succeeded' ORDER BY job_id"); do
		echo "# export $j: $(q "SELECT state || ': ' || coalesce(last_error::text, '') FROM remora.jobs WHERE job_id = $j")"
		mix_explain "$j"
	done
	check_eq "one committed result per succeeded job, from its only succeeded attempt; none for any other" \
		"$(q "SELECT count(*) FILTER (WHERE j.state = 'succeeded' AND r.attempt_id IS NOT NULL AND a.state = 'succeeded'
				AND (SELECT count(*) FROM remora.attempts x WHERE x.job_id = j.job_id AND x.state = 'succeeded') = 1)
			|| '/' || count(*) FILTER (WHERE j.state = 'succeeded') || '/' || count(r.job_id)
			FROM remora.jobs j LEFT JOIN remora.results r USING (job_id) LEFT JOIN remora.attempts a ON a.attempt_id = r.attempt_id
			WHERE j.source_kind <> 'export' AND j.$CHAOS")" \
		"$(q "SELECT count(*) || '/' || count(*) || '/' || count(*) FROM remora.jobs WHERE source_kind <> 'export' AND $CHAOS AND state = 'succeeded'")"
	# the jobs that break it: a succeeded one without exactly that, or a
	# result on any other
	for j in $(q "SELECT j.job_id FROM remora.jobs j LEFT JOIN remora.results r USING (job_id) LEFT JOIN remora.attempts a ON a.attempt_id = r.attempt_id
			WHERE j.source_kind <> 'export' AND j.$CHAOS AND (j.state = 'succeeded') IS DISTINCT FROM (r.job_id IS NOT NULL
			AND a.state = 'succeeded' AND (SELECT count(*) FROM remora.attempts x WHERE x.job_id = j.job_id AND x.state = 'succeeded') = 1)
			ORDER BY j.job_id"); do
		echo "# job $j: $(q "SELECT count(*) FILTER (WHERE state = 'succeeded') || ' succeeded attempts, '
			|| (SELECT count(*) FROM remora.results WHERE job_id = $j) || ' results' FROM remora.attempts WHERE job_id = $j")"
		mix_explain "$j"
	done

	# every committed member and manifest, read back from the store at once
	mkdir -p "$T/dl"
	aws_s3 s3 sync --quiet s3://target/remora/ "$T/dl/remora/"
	aws_s3 s3 sync --quiet s3://target/stable/ "$T/dl/stable/"
	q "SELECT m.key, m.sha256, m.path, j.source, j.job_id, m.size FROM remora.results r JOIN remora.members m USING (attempt_id)
		JOIN remora.jobs j USING (job_id) WHERE j.$CHAOS" >"$T/members"
	bad_store=0 bad_source=0
	declare -gA CHECKED_MEMBERS=() CHECKED_JOB=()	# kind -> members checked; kind|job -> 1
	while IFS='|' read -r key sha path source job size; do
		good=1
		got=$(sha256sum "$T/dl/$key" 2>/dev/null | cut -d' ' -f1)
		if [ "$got" != "$sha" ]; then
			echo "# job $job: $key in the store has ${got:-no object}, its manifest $sha ($(stat -c %s "$T/dl/$key" 2>/dev/null || echo '-') of $size bytes)"
			mix_explain "$job" "$key"
			bad_store=$((bad_store + 1)) good=
		fi
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
			mix_explain "$job" "$key"
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
	while IFS='|' read -r key sha job; do
		[ "$(sha256sum "$T/dl/$key" 2>/dev/null | cut -d' ' -f1)" != "$sha" ] || continue
		bad=$((bad + 1))
		echo "# job $job: its manifest $key does not hash to $sha"
		mix_explain "$job" "$key"
	done < <(q "SELECT r.manifest_key, r.manifest_sha256, r.job_id FROM remora.results r JOIN remora.jobs j USING (job_id) WHERE j.$CHAOS")
	check_eq "every manifest object hashes to its committed SHA-256" "$bad" 0
	bad=0
	while IFS='|' read -r key sha job; do
		if [ "$(sha256sum "$T/dl/$key" 2>/dev/null | cut -d' ' -f1)" = "$sha" ]; then
			CHECKED_MEMBERS[export]=$((${CHECKED_MEMBERS[export]:-0} + 1))
		else
			bad=$((bad + 1))
			echo "# export $job: $key does not hold its member ($sha)"
			mix_explain "$job" "$key"
		fi
	done < <(q "SELECT 'stable/' || j.job_id || '/' || m.path, m.sha256, e.job_id FROM remora.jobs e JOIN remora.jobs j ON e.idempotency_key = 'chaos-export-' || j.job_id
		JOIN remora.results r ON r.job_id = j.job_id JOIN remora.members m ON m.attempt_id = r.attempt_id WHERE e.state = 'succeeded'")
	check_eq "every exported key holds its member" "$bad" 0

	# every kind of source was submitted, and its results checked above
	declare -gA KIND_SUBMITTED=() KIND_SUCCEEDED=() KIND_JOBS_CHECKED=()
	declare -gA KIND_OF_JOB=()	# job id -> kind
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
	# the mirrors among them (every other job): what they copied, checked above as any member
	echo "# mirrors: $(q "SELECT count(*) FILTER (WHERE m.reused_from_job IS NOT NULL) || ' of ' || count(*)
		FROM remora.results r JOIN remora.members m USING (attempt_id) JOIN remora.jobs j USING (job_id)
		WHERE j.$CHAOS AND j.spec #> '{options,reuse_from}' IS NOT NULL") members of their results copied from an earlier job's"

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
	# whose staging each is (the first five): the attempt, its state, its cleanup
	for key in $(printf '%s\n' "$orphans" | head -5); do echo "# orphan $key: $(staging_owner "$key")"; done
	[ -z "$orphans" ] || echo "$orphans" | sed -n '6,20p' | sed 's/^/# orphan: /'
	if [ "${REMORA_STORE:-s3rver}" != s3rver ]; then
		open=$(aws_s3 s3api list-multipart-uploads --bucket target --query 'length(Uploads || `[]`)' --output text)
		check_eq "no multipart upload left open" "$open" 0
		[ "$open" = 0 ] || aws_s3 s3api list-multipart-uploads --bucket target \
			--query 'Uploads[].[Key, Initiated]' --output text | head -5 |
			while read -r key initiated; do echo "# open: $key since $initiated: $(staging_owner "$key")"; done
	else
		echo "# the test server does not list multipart uploads (RGW's and Swift's runs check them)"
	fi
	if [ "${REMORA_STORE:-s3rver}" = swift ]; then
		# the segments of uploads completed with some parts, unseen by S3
		segs=$(swift_orphan_segments target)
		check_eq "no Swift segment is left that no open upload or object names (of $(tail -n 1 <<<"$segs" | cut -d' ' -f2))" \
			"$(sed '$d' <<<"$segs" | grep -c . || true)" 0
		sed '$d' <<<"$segs" | head -5 | sed 's/^/# orphan segment: /'
	fi
}

# ---- what a failed check says: enough to debug it without a rerun ----
# chaos_note KIND [WHAT]: a nemesis as it happens, "EPOCH KIND WHAT" in
# $T/nemeses (the chaos run's injections, patroni.sh's switchover and
# kill); the proxies keep the faults they applied (/__firedlog)
chaos_note() { echo "$(date +%s) $1 ${2:-}" >>"$T/nemeses"; }

# staging_owner KEY: the attempt whose staging KEY is under: its job,
# number, token, state, when it ended and was cleaned
staging_owner() {
	q "SELECT 'job ' || j.job_id || ' attempt ' || a.attempt_no || ' token ' || a.fencing_token || ' ' || a.state
			|| ', ended ' || coalesce(to_char(a.finished_at, 'HH24:MI:SS'), '-') || ', cleaned ' || coalesce(to_char(a.cleaned_at, 'HH24:MI:SS'), 'never')
			|| ' (' || a.clean_failures || ' failed cleanups)' || CASE WHEN r.attempt_id = a.attempt_id THEN ', committed' ELSE '' END
		FROM remora.attempts a JOIN remora.jobs j USING (job_id) LEFT JOIN remora.results r USING (job_id)
		WHERE '$1' LIKE remora._staging_prefix(j.prefix, j.job_id, a.attempt_id) || '%'"
}

EXPLAINED=0	# jobs explained so far
# mix_explain JOB [KEY]: a few lines on a job a check found wrong: its
# state and committed attempt; KEY's ETag and size in the store and in
# its manifest; every attempt (number, token, state, worker, times, error
# class and message); the nemeses and the faults the proxies applied from
# 5 s before its first attempt to 5 s after its last ended.  At most
# MIX_EXPLAIN (5) jobs a run, so that the output stays readable.
mix_explain() {
	local job=$1 key=${2:-} store from to
	EXPLAINED=$((EXPLAINED + 1))
	if [ "$EXPLAINED" -gt "${MIX_EXPLAIN:-5}" ]; then
		[ "$EXPLAINED" -gt $((${MIX_EXPLAIN:-5} + 1)) ] || echo "#   (further jobs not explained: MIX_EXPLAIN=${MIX_EXPLAIN:-5})"
		return 0
	fi
	q "SELECT '#   job ' || j.job_id || ' ' || j.state || ' ' || j.source || ': committed attempt '
			|| coalesce(r.attempt_id::text || ' token ' || r.fencing_token || ' at ' || to_char(r.committed_at, 'HH24:MI:SS'), 'none')
		FROM remora.jobs j LEFT JOIN remora.results r USING (job_id) WHERE j.job_id = $job"
	if [ -n "$key" ]; then
		store=$(aws_s3 s3api head-object --bucket target --key "$key" --query '[ETag, ContentLength]' --output text 2>/dev/null | tr '\t' ' ')
		echo "#   $key: store ETag, size ${store:-(no object)}; manifest $(q "SELECT m.etag || ' ' || m.size FROM remora.members m
			JOIN remora.results r USING (attempt_id) WHERE r.job_id = $job AND m.key = '$key'")"
	fi
	q "SELECT '#   attempt ' || a.attempt_no || ' token ' || a.fencing_token || ' ' || a.state || ' on ' || coalesce(i.label, i.kind)
			|| ' ' || to_char(a.started_at, 'HH24:MI:SS') || '-' || coalesce(to_char(a.finished_at, 'HH24:MI:SS'), '')
			|| coalesce(', resumed from ' || left(a.resumed_from::text, 8), '') || coalesce(', restarted: ' || a.restart_reason, '')
			|| coalesce(', ' || (a.error ->> 'class') || ': ' || left(a.error ->> 'message', 160), '') || ' (' || left(a.attempt_id::text, 8) || ')'
		FROM remora.attempts a JOIN remora.incarnations i USING (incarnation) WHERE a.job_id = $job ORDER BY a.attempt_no LIMIT 8"
	read -r from to < <(q "SELECT extract(epoch FROM min(started_at))::bigint - 5, extract(epoch FROM max(coalesce(finished_at, now())))::bigint + 5
		FROM remora.attempts WHERE job_id = $job" | tr '|' ' ')
	[ -n "$from" ] || return 0
	echo "#   nemeses then: $(while read -r at what; do
		[ "$at" -ge "$from" ] && [ "$at" -le "$to" ] && echo "$(date -u -d "@$at" +%T) $what"
	done < <(cat "$T/nemeses" 2>/dev/null) | head -12 | paste -sd ';' - | sed 's/;/; /g')"
	echo "#   faults the proxies applied then: $(for p in "${SRC_PROXY:-}" "${S3_PROXY:-}"; do
		[ -z "$p" ] || curl -s "http://127.0.0.1:$p/__firedlog"
	done | jq -r --argjson f "$from" --argjson t "$to" \
		'select(.at >= $f and .at <= $t) | (.at | floor | strftime("%H:%M:%S")) + " " + .action + " " + .request' 2>/dev/null |
		sort | head -12 | paste -sd ';' - | sed 's/;/; /g')"
}
