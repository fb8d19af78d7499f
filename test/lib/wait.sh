# Waiting on a condition (source this file; cluster.sh and services.sh
# do).  A wait polls, and on this machine a poll is dear: psql and the
# backend it starts cost some 100 ms of CPU, a fork and exec of sleep(1)
# or date(1) some 10 ms, and the end-to-end lanes beside a long wait need
# the cores (test/run says each script's CPU).  So the pause between two
# polls is a tenth of the time waited so far, from 0.1 s to 1 s: a
# condition that comes true is seen within some 10% of the wait, and a
# wait of a minute polls some 90 times instead of 600.  The clock is
# bash's $EPOCHSECONDS and the pause a read that times out, neither a
# process.

# the pipe that poll_sleep reads, both ends held, so that nothing comes
[ -n "${POLL_SLEEP_FD:-}" ] || exec {POLL_SLEEP_FD}<> <(:)

# poll_sleep SECONDS: a pause without a process
poll_sleep() { read -r -t "$1" -u "$POLL_SLEEP_FD" _ || true; }

# poll_pause T0: the pause between two polls of a wait that began at T0
# ($EPOCHSECONDS)
poll_pause() {
	local waited=$((EPOCHSECONDS - $1))
	[ "$waited" -ge 1 ] || waited=1
	if [ "$waited" -lt 10 ]; then poll_sleep "0.$waited"; else poll_sleep 1; fi
}

# wait_for SECONDS COMMAND...: poll until the command succeeds or the
# deadline passes; never a fixed sleep.
wait_for() {
	local t0=$EPOCHSECONDS
	local deadline=$((t0 + $1))
	shift
	until "$@"; do
		[ "$EPOCHSECONDS" -lt "$deadline" ] || return 1
		poll_pause "$t0"
	done
}

# wait_alive SECONDS PID COMMAND...: wait_for, failing as soon as the
# process PID is gone (a server that died while it started)
wait_alive() {
	local t0=$EPOCHSECONDS
	local deadline=$((t0 + $1)) pid=$2
	shift 2
	until "$@"; do
		kill -0 "$pid" 2>/dev/null || return 1
		[ "$EPOCHSECONDS" -lt "$deadline" ] || return 1
		poll_pause "$t0"
	done
}
