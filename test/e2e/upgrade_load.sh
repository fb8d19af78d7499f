#!/usr/bin/env bash
#
# An upgrade under load (doc/operator-guide.md, "Upgrading without
# downtime"): the last release (the Makefile's PREVIOUS), built from the
# repository's history, runs jobs in its background workers and in a
# remora-worker of its own; while they run, the new library and scripts
# are installed, the server restarts (fast: the background workers hand
# their attempts back) and ALTER EXTENSION remora UPDATE runs.  Between
# the restart and the update submits are taken, and no background worker
# runs (the launcher says why); after it, every job ends
# succeeded with the right bytes, none failed, the previous release's
# remora-worker keeps claiming and committing, and a new one replaces it
# when it is stopped.
#
# The server runs from a private copy of the PostgreSQL installation
# (test/lib/cluster.sh) with a library directory of its own, so that the
# system's installation never holds the previous release.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin upgrade_load

previous=$(sed -n 's/^PREVIOUS = //p' Makefile)
current=$(grep -oP "^default_version = '\K[^']+" remora.control)
# the release's source: the commit before the one that froze its scripts
released=$(git log --diff-filter=A --format=%H -- "sql/remora--$previous.sql" 2>/dev/null | tail -1)
if [ -z "$released" ] && [ "$(git rev-parse --is-shallow-repository)" = true ]; then
	git fetch -q --unshallow 2>/dev/null || true
	released=$(git log --diff-filter=A --format=%H -- "sql/remora--$previous.sql" | tail -1)
fi
[ -n "$released" ] || { not_ok "the commit that released $previous is in the history"; exit 1; }
mkdir -p "$T/old"
git archive "$released^" | tar -x -C "$T/old"
if make -C "$T/old" -s -j2 >"$T/old-build.log" 2>&1; then
	ok "$previous builds from the repository's history"
else
	not_ok "$previous builds from the repository's history: $(tail -5 "$T/old-build.log")"
	exit 1
fi
check_eq "it is $previous" "$(grep -oP "^default_version = '\K[^']+" "$T/old/remora.control")" "$previous"

PGBIN=$(cluster_private_install "$T/install" lib) ||
	{ not_ok "a private copy of the PostgreSQL installation"; exit 1; }
LIBDIR=$("$PGBIN/pg_config" --pkglibdir)
EXTDIR=$("$PGBIN/pg_config" --sharedir)/extension
install_build() {	# install_build TREE: its library and scripts, in place of the others
	rm -f "$LIBDIR/remora.so" "$EXTDIR"/remora*
	cp "$1/remora.so" "$LIBDIR/remora.so"
	cp "$1/remora.control" "$1"/sql/remora--*.sql "$EXTDIR/"
}
install_build "$T/old"

stack_up
rule "$SRC_PROXY" "match=GET%20/slow&action=slow"
q "CREATE ROLE rhost LOGIN; GRANT remora_worker TO rhost; CREATE ROLE dora LOGIN IN ROLE remora_user" >/dev/null
check_eq "the cluster runs $previous" "$(q "SELECT extversion FROM pg_extension WHERE extname = 'remora'")" "$previous"
old_worker() {
	"$T/old/src/worker/remora-worker" --label "$1" "host=$T/pg port=$PG_PORT dbname=postgres user=rhost" \
		>>"$T/$1.log" 2>&1 &
	OLD_PID=$!
	disown "$OLD_PID" # no "Killed" line from bash at the end
	service_pid "$OLD_PID" KILL
}
old_worker old
up() { [ "$(q "SELECT count(*) FROM remora.incarnations WHERE label = '$1' AND stopped_at IS NULL")" = 1 ]; }
check "the previous release's remora-worker starts" wait_for 30 up old
check_eq "and says its version" "$(q "SELECT version FROM remora.incarnations WHERE label = 'old'")" "$previous"

jobs=()
# more than the background workers take at once (two, four jobs each)
for i in $(seq 1 12); do
	make_file "slow-$i.bin" 1500000
	jobs+=("$(PGUSER=dora q "SELECT remora_submit('$FLAKY/slow-$i.bin')")")
done
running_on() {	# running_on KIND: attempts running on that kind of worker
	[ "$(q "SELECT count(*) FROM remora.attempts a JOIN remora.incarnations i USING (incarnation)
		WHERE a.state = 'running' AND i.kind = '$1'")" -ge 1 ]
}
check "jobs run in the background workers" wait_for 30 running_on worker
check "and in the previous release's remora-worker" wait_for 30 running_on external

# the upgrade: the new build's files, a restart, the update
install_build "$PWD"
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$T/pg/data" -l "$T/pg/server.log" -m fast -w -t 60 restart >/dev/null ||
	{ not_ok "the server restarts with the new library"; exit 1; }
# the new library calls the previous release's SQL functions it finds: a
# submit is taken, and its job waits for the workers of the update
between=$(PGUSER=dora q "SELECT remora_submit('$SRC/slow-1.bin', options => '{\"label\": \"between\"}')")
check "meanwhile a submit is taken" test "$between" -gt 0
warned() { grep -q "remora $previous is installed in database \"postgres\", but the library is $current" "$T/pg/server.log"; }
check "the launcher says the schema must be updated" wait_for 15 warned
check_eq "and starts no background worker" \
	"$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" 0
q "ALTER EXTENSION remora UPDATE" >/dev/null
updated_at=$(q "SELECT now()")
jobs+=("$between")
check_eq "the update reaches $current" "$(q "SELECT extversion FROM pg_extension WHERE extname = 'remora'")" "$current"

all_ended() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE job_id IN ($(IFS=,; echo "${jobs[*]}")) AND finished_at IS NULL")" = 0 ]; }
check "every job submitted before the upgrade ends" wait_for 120 all_ended
check_eq "every one succeeded" \
	"$(q "SELECT string_agg(DISTINCT state, ' ') FROM remora.jobs WHERE job_id IN ($(IFS=,; echo "${jobs[*]}"))")" succeeded
bad=""
for i in $(seq 1 12); do
	got=$(q "SELECT m.sha256 FROM remora.results r JOIN remora.members m USING (attempt_id) WHERE r.job_id = ${jobs[$((i - 1))]}")
	[ "$got" = "$(sha256sum "$WWW/slow-$i.bin" | cut -d' ' -f1)" ] || bad="$bad $i"
done
check_eq "each with its source's SHA-256" "$bad" ""

# the previous release's remora-worker against the new schema
by_old() { [ "$(q "SELECT count(*) FROM remora.results r JOIN remora.attempts a USING (attempt_id)
	JOIN remora.incarnations i USING (incarnation)
	WHERE i.label = 'old' AND r.committed_at > '$updated_at'")" -ge 1 ]; }
check "the previous release's remora-worker commits jobs after the update" wait_for 60 by_old
more=()
for i in 1 2 3 4; do more+=("$(PGUSER=dora q "SELECT remora_submit('$SRC/slow-$i.bin', options => '{\"label\": \"after\"}')")"); done
kill -TERM "$OLD_PID"
stopped() { [ "$(q "SELECT count(*) FROM remora.incarnations WHERE label = 'old' AND stopped_at IS NOT NULL")" = 1 ]; }
check "it stops when asked, recording its end" wait_for 30 stopped
start_remora_worker new --label new "host=$T/pg port=$PG_PORT dbname=postgres user=rhost"
disown "$REMORA_WORKER_PID"
check "a remora-worker of $current takes its place" wait_for 30 up new
check_eq "and says its version" "$(q "SELECT version FROM remora.incarnations WHERE label = 'new'")" "$current"
ended_more() { [ "$(q "SELECT count(*) FROM remora.jobs WHERE job_id IN ($(IFS=,; echo "${more[*]}")) AND state = 'succeeded'")" = 4 ]; }
check "the jobs submitted after the update succeed" wait_for 60 ended_more

e2e_finish
