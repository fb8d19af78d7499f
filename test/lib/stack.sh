# The whole stack for end-to-end tests (test/lib/e2e.sh sources this):
# nginx serving $WWW, the target store with bucket "target" (REMORA_STORE:
# s3rver, the signature-checking test server, by default; rgw, Ceph's
# RADOS Gateway), a fault proxy in front of each, and a PostgreSQL cluster
# whose workers use them.  Helpers to wait on jobs and to check results
# with the AWS CLI follow.  Jobs fetch with one GET unless they say
# otherwise (options.connections): the scripts' slow sources and their
# checkpoints are timed for one; test/e2e/ranges.sh asks for more.
#
# REMORA_HOST says who runs the jobs: bgworker (the default), remora's
# two background workers; external, $HOST_WORKERS remora-worker processes
# over libpq as the role rhost, a member of remora_worker, with
# remora.max_workers = 0 so that no background worker claims (TAP lines
# then say "[external]").  The helpers that touch a worker (worker_of,
# kill_worker, crash_host, sigterm_host, reload_workers, worker_logs,
# live_at_least) do the same thing on either host, so that a script runs
# unchanged on both.
HOST_WORKERS=2
host_is_external() { [ "${REMORA_HOST:-bgworker}" = external ]; }

# stack_up [NAME]: start it all in $T (e2e_begin NAME first, unless the
# script has begun already), stopped when the script exits
stack_up() {
	stack_services "$@"
	e2e_cluster < <(stack_settings)
	q "CREATE EXTENSION remora" >/dev/null
	if host_is_external; then
		q "CREATE ROLE rhost LOGIN; GRANT remora_worker TO rhost" >/dev/null
		for _ in $(seq "$HOST_WORKERS"); do start_host_worker; done
	fi
}

# stack_services [NAME]: all but PostgreSQL (test/e2e/patroni.sh runs its
# own, with stack_settings)
stack_services() {
	[ -n "${E2E_NAME:-}" ] || e2e_begin "$1"

	NGINX_PORT=$(free_port)
	S3_PORT=$(free_port)
	SRC_PROXY=$(free_port)
	S3_PROXY=$(free_port)
	start_nginx "$T/nginx" "$NGINX_PORT"
	start_store "$T/store" "$S3_PORT" target ||
		{ not_ok "the target store (${REMORA_STORE:-s3rver}) starts"; exit 1; }
	start_faults "$SRC_PROXY" "$NGINX_PORT"
	start_faults "$S3_PROXY" "$S3_PORT" s3proxy # a second proxy, before the store

	WWW=$T/nginx/www
	SRC="http://127.0.0.1:$NGINX_PORT"
	FLAKY="http://127.0.0.1:$SRC_PROXY"
}

# stack_settings: the remora settings of the stack, postgresql.conf lines
stack_settings() {
	cat <<CONF
remora.max_workers = $(host_is_external && echo 0 || echo "$HOST_WORKERS")
remora.worker_concurrency = 4
remora.s3_endpoint = 'http://127.0.0.1:$S3_PROXY'
remora.s3_path_style = on
remora.s3_access_key_id = '$S3_ACCESS_KEY'
remora.s3_secret_access_key = '$S3_SECRET_KEY'
remora.default_bucket = 'target'
remora.allow_networks = '127.0.0.1/32'
remora.part_size = '5MB'
remora.lease_duration = '4s'
remora.retry_base_delay = '200ms'
remora.retry_max_delay = '2s'
remora.stall_timeout = '60s'
remora.object_connections = 1
CONF
}

# start_host_worker: one more remora-worker for REMORA_HOST=external,
# named hw1, hw2 ... (its log $T/hwN.log, kept as /tmp/NAME-hwN.log; its
# pid in HOST_WORKER_PIDS[name]); returns once it has recorded its
# incarnation
HOST_WORKER_N=0
declare -A HOST_WORKER_PIDS=()
start_host_worker() {
	local name
	HOST_WORKER_N=$((HOST_WORKER_N + 1))
	name=hw$HOST_WORKER_N
	start_remora_worker "$name" --label "$name" "host=$T/pg port=$PG_PORT dbname=postgres user=rhost"
	disown "$REMORA_WORKER_PID" # no "Killed" line from bash when one is killed
	HOST_WORKER_PIDS[$name]=$REMORA_WORKER_PID
	host_worker_up() { [ "$(q "SELECT count(*) FROM remora.incarnations WHERE label = '$1' AND stopped_at IS NULL")" = 1 ]; }
	wait_for 30 host_worker_up "$name" || not_ok "remora-worker $name starts (its log: $(tail -3 "$T/$name.log"))"
}
# forget_host_worker PID: a remora-worker of ours ended
forget_host_worker() {
	local name
	for name in "${!HOST_WORKER_PIDS[@]}"; do
		[ "${HOST_WORKER_PIDS[$name]}" != "$1" ] || unset "HOST_WORKER_PIDS[$name]"
	done
}

make_file() { head -c "$2" /dev/urandom >"$WWW/$1"; chmod 644 "$WWW/$1"; }
rule() { curl -s "http://127.0.0.1:$1/__rule?$2" >/dev/null; }
hits() { curl -s "http://127.0.0.1:$1/__hits?match=$2"; }
# proxy_bytes PORT SUBSTR: the answer bytes the upstream sent to requests a rule matches
proxy_bytes() { curl -s "http://127.0.0.1:$1/__bytes?match=$2"; }
state() { q "SELECT state FROM remora.jobs WHERE job_id = $1" 2>/dev/null; }
is_state() { [ "$(state "$1")" = "$2" ]; }
wait_state() {	# wait_state JOB STATE SECONDS
	if wait_for "$3" is_state "$1" "$2"; then return 0; fi
	echo "# job $1 is $(state "$1"), not $2: $(q "SELECT last_error FROM remora.jobs WHERE job_id = $1")"
	return 1
}
validated_at_least() { [ "$(q "SELECT coalesce(bytes_done, 0) FROM remora.checkpoints WHERE job_id = $1")" -ge "$2" ] 2>/dev/null; }
# live_at_least JOB BYTES: the transfer is under way, BYTES along.  A
# background worker's live progress is in shared memory (remora_progress);
# remora-worker's reaches the server only as checkpoints, one a part.
live_at_least() {
	if host_is_external; then
		validated_at_least "$1" "$2"
	else
		[ "$(q "SELECT coalesce(max(bytes_done), 0) FROM remora_progress WHERE job_id = $1")" -ge "$2" ]
	fi
}
# worker_of JOB: the pid of the worker that runs the job's current attempt
# (a background worker's backend, or a remora-worker process)
worker_of() {
	if host_is_external; then
		q "SELECT i.pid FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt
			 JOIN remora.incarnations i ON i.incarnation = a.incarnation WHERE j.job_id = $1"
	else
		q "SELECT worker_pid FROM remora_progress WHERE job_id = $1"
	fi
}

# kill_worker PID: SIGKILL a worker, as a crash would.  A background
# worker: PostgreSQL then restarts every backend; return once the server
# answers again after that restart (the pid is reaped first, so an answer
# never comes from before the restart began).  A remora-worker: its leases
# lapse; once it is reaped another is started in its place, so that as
# many run as before.
kill_worker() {
	local pid=$1
	kill -9 "$pid"
	reaped() { ! kill -0 "$pid" 2>/dev/null; }
	answers() { q "SELECT 1" >/dev/null 2>&1; }
	if host_is_external; then
		forget_host_worker "$pid"
		wait_for 30 reaped && start_host_worker
	else
		wait_for 30 reaped && wait_for 60 answers
	fi
}

# crash_host JOB, then recover_host: the job's host goes down at once
# (a background worker's: PostgreSQL, stopped immediately; a remora-worker:
# SIGKILL), and later comes back (PostgreSQL started again; another
# remora-worker).  Between the two, nothing runs the job's attempt.
crash_host() {
	if host_is_external; then
		local pid
		pid=$(worker_of "$1")
		kill -9 "$pid"
		forget_host_worker "$pid"
		crashed() { ! kill -0 "$pid" 2>/dev/null; }
		wait_for 30 crashed
	else
		cluster_stop "$T/pg" immediate
	fi
}
recover_host() {
	if host_is_external; then start_host_worker; else cluster_start "$T/pg"; fi
}

# sigterm_host JOB: the job's worker is told to stop (SIGTERM: a background
# worker's, by a fast shutdown of PostgreSQL; a remora-worker, itself) and
# hands its attempt back before it exits; then the host runs again
# (PostgreSQL started; another remora-worker)
sigterm_host() {
	if host_is_external; then
		local pid
		pid=$(worker_of "$1")
		kill -TERM "$pid"
		forget_host_worker "$pid"
		stopped() { ! kill -0 "$pid" 2>/dev/null; }
		wait_for 60 stopped
		start_host_worker
	else
		cluster_stop "$T/pg" fast
		cluster_start "$T/pg" >/dev/null
	fi
}

# worker_logs: what the workers logged (a background worker logs to the
# server log; a remora-worker to its own, $T/hwN.log)
worker_logs() {
	cat "$LOG"
	if host_is_external; then cat "$T"/hw*.log; fi
}

# reload_workers: pg_reload_conf(), and wait until every worker says the
# new settings are in effect (a background worker takes them from the
# server's SIGHUP; a remora-worker from its own, sent here, and again
# until it says so: the server's backend that serves it may have read
# them a moment after the first).  The settings must have changed.
reload_workers() {
	local n pid name
	settings_lines() { grep -c "new settings in effect" "$1" || true; }
	if ! host_is_external; then
		n=$(settings_lines "$LOG")
		q "SELECT pg_reload_conf()" >/dev/null
		applied() { [ "$(settings_lines "$LOG")" -ge $((n + HOST_WORKERS)) ]; }
		wait_for 30 applied
		return
	fi
	q "SELECT pg_reload_conf()" >/dev/null
	hup_applied() {	# hup_applied PID LOG N
		kill -HUP "$1"
		applied() { [ "$(settings_lines "$1")" -gt "$2" ]; }
		wait_for 2 applied "$2" "$3"
	}
	# the workers started here that still run (a pid of one that ended
	# may be another process's by now)
	for name in "${!HOST_WORKER_PIDS[@]}"; do
		pid=${HOST_WORKER_PIDS[$name]}
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = remora-worker ] || continue
		n=$(settings_lines "$T/$name.log")
		wait_for 30 hup_applied "$pid" "$T/$name.log" "$n" || return 1
	done
}

# verify JOB FILE: the committed member, downloaded with the AWS CLI, has
# the file's SHA-256, and so does the manifest's record of it
verify() {
	local job=$1 file=$2 key want got manifest
	want=$(sha256sum "$WWW/$file" | cut -d' ' -f1)
	key=$(q "SELECT key FROM remora_result($job)")
	got=$(aws_s3 s3 cp "s3://target/$key" - 2>/dev/null | sha256sum | cut -d' ' -f1)
	check_eq "job $job: the AWS CLI reads back $file intact" "$got" "$want"
	check_eq "job $job: remora_result records the same SHA-256" \
		"$(q "SELECT sha256 FROM remora_result($job)")" "$want"
	manifest=$(q "SELECT result_manifest_key FROM remora_jobs WHERE job_id = $job")
	check_eq "job $job: the manifest object has the committed SHA-256" \
		"$(aws_s3 s3 cp "s3://target/$manifest" - 2>/dev/null | sha256sum | cut -d' ' -f1)" \
		"$(q "SELECT result_manifest_sha256 FROM remora_jobs WHERE job_id = $job")"
}

# made_result N KEY: a succeeded job (of the source s3://target/<KEY's
# folder>/) whose result has N members, made by hand through the worker
# protocol (submit, claim, checkpoint, commit) in one transaction, so that
# no worker claims it first; the member paths are d<i % 100>/m<i, six
# digits>.bin, and every member is one object under the attempt's staging
# prefix (data/made.bin, a copy of KEY: same size, ETag and SHA-256): a
# result of many members for the price of one copy.  Prints the job id.
made_result() {
	local n=$1 key=$2 etag sha size label=made-$RANDOM$RANDOM job mkey
	etag=$(aws_s3 s3api head-object --bucket target --key "$key" --output json | jq -r .ETag)
	size=$(aws_s3 s3api head-object --bucket target --key "$key" --output json | jq -r .ContentLength)
	sha=$(aws_s3 s3 cp "s3://target/$key" - 2>/dev/null | sha256sum | cut -d' ' -f1)
	q "DO \$\$
	DECLARE job bigint; att uuid; tok bigint; stage text;
	BEGIN
		job := remora_submit('s3://target/${key%/*}/',
							 options => '{\"priority\": 1000, \"label\": \"$label\"}');
		SELECT c.attempt_id, c.fencing_token INTO att, tok
		  FROM remora.claim('44444444-4444-4444-4444-444444444444') c WHERE c.job_id = job;
		stage := remora._staging_prefix((SELECT j.prefix FROM remora.jobs j WHERE j.job_id = job),
										job, att);
		PERFORM remora.checkpoint(att, tok, jsonb_build_object('members',
			(SELECT jsonb_agg(jsonb_build_object(
				'path', 'd' || i % 100 || '/m' || lpad(i::text, 6, '0') || '.bin',
				'bucket', 'target', 'key', stage || 'data/made.bin', 'size', $size,
				'sha256', '$sha', 'etag', \$e\$$etag\$e\$)) FROM generate_series(1, $n) i)));
		IF NOT remora.commit(att, tok, jsonb_build_object(
				'key', stage || 'manifest.jsonl', 'etag', 'm', 'sha256', repeat('a', 64),
				'members', $n, 'bytes', $n * $size)) THEN
			RAISE EXCEPTION 'the made result of job % was not committed', job;
		END IF;
	END \$\$" >/dev/null || return 1
	job=$(q "SELECT job_id FROM remora.jobs WHERE label = '$label' AND state = 'succeeded'")
	mkey=$(q "SELECT min(m.key) FROM remora.members m JOIN remora.results r USING (attempt_id) WHERE r.job_id = $job")
	aws_s3 s3 cp --quiet "s3://target/$key" "s3://target/$mkey" || return 1
	[ "$(aws_s3 s3api head-object --bucket target --key "$mkey" --output json | jq -r .ETag)" = "$etag" ] || return 1
	echo "$job"
}

staging_objects() {	# staging_objects JOB: objects under the job's prefix
	aws_s3 s3 ls --recursive "s3://target/remora/$1/" 2>/dev/null | wc -l
}
all_cleaned() { [ "$(q "SELECT count(*) FROM remora.attempts WHERE job_id = $1 AND cleaned_at IS NULL")" = 0 ]; }

# start_remora_worker NAME [ARGS...]: run the external worker
# (remora-worker from PostgreSQL's bindir) in the background with ARGS
# (options, then a connection string), its log in $T/NAME.log and its
# pid in $REMORA_WORKER_PID; killed when the script exits, if still
# running.
start_remora_worker() {
	local name=$1
	shift
	"$(pg_config --bindir)/remora-worker" "$@" >>"$T/$name.log" 2>&1 &
	REMORA_WORKER_PID=$!
	service_pid "$REMORA_WORKER_PID" KILL
}

# Clocks that disagree: libfaketime (test/lib/deps.sh installs it)
# preloaded sets a process's wall clock off this machine's; its monotonic
# clock is left alone, as a wrong wall clock (not set by NTP) leaves it
FAKETIME_LIB=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1

# faketime_env OFFSET: the environment, as NAME=VALUE words for env(1),
# of a process whose wall clock is OFFSET ("+1h", "-1h") off this one
faketime_env() { echo "LD_PRELOAD=$FAKETIME_LIB FAKETIME=$1 FAKETIME_DONT_FAKE_MONOTONIC=1"; }

# log_skew LOG: seconds the clock of the remora-worker writing LOG is
# ahead of this machine's: the time its last line says, less the time of
# that write by this machine's clock (the file's modification time, which
# the kernel sets), so that it holds whenever it is asked
log_skew() {
	local line
	line=$(grep -E '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "$1" | tail -n 1 | cut -d' ' -f1)
	[ -n "$line" ] || return 1
	echo $(($(date -d "$line" +%s) - $(stat -c %Y "$1")))
}
