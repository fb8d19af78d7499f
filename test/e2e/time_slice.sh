#!/usr/bin/env bash
#
# Time slices end to end (doc/operator-guide.md, "Time slices"): with one
# lease for the whole deployment, alice's job, capped at the floor
# remora.min_bytes_per_second and with max_attempts 1, holds the one
# worker slot; bob's job waits.  Past remora.time_slice the renewal asks
# alice's attempt to yield, and at its next checkpoint it does: its job is
# queued again, bob's runs and succeeds, and alice's resumes from its
# checkpoint (not from zero) and succeeds, its one attempt of budget
# unspent by the yield.  A cap below the floor is refused (22023).  Run on
# each store, by background workers and by remora-worker (REMORA_HOST).
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin time_slice

stack_services
e2e_cluster < <(
	stack_settings
	echo "remora.max_active_leases = 1"
	echo "remora.time_slice = '2s'"
	echo "remora.min_bytes_per_second = 1048576"
)
q "CREATE EXTENSION remora" >/dev/null
if host_is_external; then
	q "CREATE ROLE rhost LOGIN; GRANT remora_worker TO rhost" >/dev/null
	for _ in $(seq "$HOST_WORKERS"); do start_host_worker; done
fi
q "CREATE ROLE alice LOGIN IN ROLE remora_user; CREATE ROLE bob LOGIN IN ROLE remora_user" >/dev/null
as() { local who=$1; shift; PGUSER=$who q "$@"; }
sqlstate_of() { PGUSER=$1 psql -X -q -t -A -v VERBOSITY=verbose -d postgres -c "$2" 2>&1 | grep -oE 'ERROR: +[0-9A-Z]{5}' | grep -oE '[0-9A-Z]{5}$'; }

check_eq "a cap below remora.min_bytes_per_second is refused (22023)" \
	"$(sqlstate_of alice "SELECT remora_submit('$SRC/x.bin', options => '{\"max_bytes_per_second\": 1048575}')")" 22023

# 16 MiB at 1 MiB/s: parts of 5 MiB, a checkpoint every 5 s or so
make_file capped.bin $((16 * 1024 * 1024))
make_file quick.bin 100000
ja=$(as alice "SELECT remora_submit('$SRC/capped.bin', options => '{\"max_bytes_per_second\": 1048576, \"max_attempts\": 1}')")
running() { [ "$(state "$1")" = running ]; }
check "alice's capped job runs" wait_for 30 running "$ja"
jb=$(as bob "SELECT remora_submit('$SRC/quick.bin')")
check_eq "bob's job waits for the one lease" "$(state "$jb")" queued

yielded() { [ "$(q "SELECT count(*) FROM remora.attempts WHERE job_id = $ja AND state = 'yielded'")" -ge 1 ]; }
check "past the slice, at a checkpoint, alice's attempt yields" wait_for 60 yielded
check "bob's job runs and succeeds" wait_state "$jb" succeeded 60
check_eq "before alice's ends" \
	"$(q "SELECT (SELECT finished_at FROM remora.jobs WHERE job_id = $jb) < coalesce((SELECT finished_at FROM remora.jobs WHERE job_id = $ja), 'infinity')")" t
check "alice's job succeeds" wait_state "$ja" succeeded 120
check_eq "with max_attempts 1: the yields spent none of it" \
	"$(q "SELECT attempts_used || ' of ' || max_attempts FROM remora.jobs WHERE job_id = $ja")" "1 of 1"
check_eq "its attempts: yielded, then succeeded" \
	"$(q "SELECT string_agg(DISTINCT state, ' ' ORDER BY state) FROM remora.attempts WHERE job_id = $ja")" "succeeded yielded"
check_eq "the attempt after the first yield resumed from its checkpoint, not from zero" \
	"$(q "SELECT a.resumed_from IS NOT NULL AND a.restart_reason IS NULL
		FROM remora.attempts a WHERE a.job_id = $ja AND a.attempt_no = 2")" t
check_eq "the result is the source's bytes" \
	"$(q "SELECT m.sha256 FROM remora.results r JOIN remora.members m USING (attempt_id) WHERE r.job_id = $ja")" \
	"$(sha256sum "$WWW/capped.bin" | cut -d' ' -f1)"
check_eq "the yield is no failure: no error recorded" \
	"$(q "SELECT last_error IS NULL FROM remora.jobs WHERE job_id = $ja")" t
check "the worker said why it yielded" \
	grep -q "asked to yield" <(cat "$T/pg/server.log" "$T"/hw*.log 2>/dev/null)

e2e_finish
