# Helpers for end-to-end tests.  Every script begins
#
#     . "$(dirname "$0")/../lib/e2e.sh"
#     e2e_begin NAME
#
# and then starts what it needs through the functions of test/lib:
# stack_up (the whole stack: nginx, the target store, fault proxies,
# PostgreSQL), e2e_cluster (PostgreSQL alone), or single start_* services.
# Whatever was started is stopped, and $T removed, when the script exits,
# also on failure.  Two switches from the environment: REMORA_STORE
# (s3rver or rgw: test/lib/services.sh) and REMORA_HOST (bgworker or
# external: who runs the jobs of stack_up, test/lib/stack.sh).
#
# Each test prints TAP-style lines ("ok - ...", "not ok - ...") that the
# suite runner counts, and exits non-zero if anything failed.

E2E_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$E2E_LIB/deps.sh"
. "$E2E_LIB/cluster.sh"
. "$E2E_LIB/history.sh"
. "$E2E_LIB/services.sh"
. "$E2E_LIB/stack.sh"

E2E_FAILED=0
E2E_LABEL=${E2E_LABEL:-}	# said before every test name, e.g. "[rgw] "
E2E_TAG=${E2E_TAG:-}	# in the names of the logs kept, e.g. "-rgw" (e2e_begin)

ok() { echo "ok - $E2E_LABEL$*"; }
not_ok() { echo "not ok - $E2E_LABEL$*"; E2E_FAILED=1; }

# check NAME COMMAND...: ok if the command succeeds
check() {
	local name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name"; fi
}

# check_eq NAME GOT WANT
check_eq() {
	if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (got '$2', want '$3')"; fi
}

# wait_for SECONDS COMMAND...: test/lib/wait.sh

# q SQL: one value from the test cluster's database
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 -d "${E2E_DB:-postgres}" -c "$1"; }

# most_at_once LOG PATH: the most GETs of PATH in flight at once, from an
# access log of test/lib/paced_source.py (nginx's `$msec $request_time`
# first).  A request's end counts 20 ms early: the source takes its end
# time once its thread holds Python's GIL again (switch interval 5 ms,
# more on a busy machine), and by then the client may have read the last
# bytes and asked for the next range on another connection.
most_at_once() {
	grep -F "\"GET $2 " "$1" | awk '{ printf "%.3f 1\n%.3f -1\n", $1 - $2, $1 - 0.02 }' |
		sort -k1,1n -k2,2n | awk '{ n += $2; if (n > m) m = n } END { print m + 0 }'
}

# sqlstate SQL: the SQLSTATE the statement fails with; nothing if it runs
sqlstate() {
	psql -X -q -d "${E2E_DB:-postgres}" -v VERBOSITY=sqlstate -c "$1" 2>&1 >/dev/null |
		sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\)$/\1/p'
}

e2e_finish() {
	[ "$E2E_FAILED" -eq 0 ]
}

# e2e_begin NAME: strict mode, the repository as working directory, a
# private directory $T (world-readable: nginx's workers run as nobody),
# and the exit trap that stops everything started in it.  With
# REMORA_STORE=rgw (swift) every TAP line says "[rgw]" ("[swift]"), with
# REMORA_HOST=external (test/lib/stack.sh) "[external]", with both
# "[rgw external]".
e2e_begin() {
	set -Euo pipefail
	cd "$E2E_LIB/../.."
	E2E_NAME=$1
	E2E_AT_EXIT=()
	case ${REMORA_HOST:-bgworker} in
	bgworker | external) ;;
	*) echo "not ok - REMORA_HOST is bgworker or external, not '$REMORA_HOST'"; exit 1 ;;
	esac
	local store=${REMORA_STORE:-s3rver} host=
	[ "$store" != s3rver ] || store=
	[ "${REMORA_HOST:-bgworker}" != external ] || host=external
	store="$store${store:+${host:+ }}$host"
	[ -z "$store" ] || E2E_LABEL="[$store] "
	# said in the names of the logs a script keeps: "-rgw", "-swift-external"
	E2E_TAG=${store:+-${store// /-}}
	T=$(mktemp -d /tmp/remora-e2e.XXXXXX)
	chmod 755 "$T"
	SERVICES_DIR=$T
	trap e2e_end EXIT
	# a script stopped by test/run's timeout (SIGTERM) or by hand stops
	# its servers too: the exit trap runs only on exit
	trap 'exit 143' TERM
	trap 'exit 130' INT
}

# e2e_at_exit COMMAND: run COMMAND too when the script exits, before the
# servers stop (e.g. to undo a change outside $T)
e2e_at_exit() { E2E_AT_EXIT+=("$1"); }

# e2e_end: the exit trap.  Keeps the server log as /tmp/NAME-server.log
# (/tmp/NAME-rgw-server.log on RGW, with radosgw's own log beside it;
# /tmp/NAME-swift-server.log and the proxy's /tmp/NAME-swift-proxy.log;
# NAME-external-… with REMORA_HOST=external, with each remora-worker's log
# as NAME-external-hwN.log), stops every cluster under $T and every
# service, removes $T.
e2e_end() {
	local cmd dir f name=$E2E_NAME$E2E_TAG
	for cmd in "${E2E_AT_EXIT[@]}"; do eval "$cmd" || true; done
	cp "$T/pg/server.log" "/tmp/$name-server.log" 2>/dev/null
	for f in "$T"/hw*.log; do [ -f "$f" ] && cp "$f" "/tmp/$name-${f##*/}"; done
	[ -f "$T/store/log/client.rgw.a.log" ] && cp "$T/store/log/client.rgw.a.log" "/tmp/$name-radosgw.log"
	[ -f "$T/store/proxy.out" ] && cp "$T/store/proxy.out" "/tmp/$name-proxy.log"
	for dir in "$T"/*/; do cluster_stop "${dir%/}" immediate; done
	stop_services
	rm -rf "$T"
}

# e2e_cluster: a PostgreSQL cluster in $T/pg on $PG_PORT, remora preloaded
# (CLUSTER_PRELOAD overrides), extra postgresql.conf lines from standard
# input; started, with libpq's environment pointing at it.
e2e_cluster() {
	PG_PORT=$(free_port)
	cluster_init "$T/pg" "$PG_PORT" || { not_ok "PostgreSQL initializes"; exit 1; }
	cluster_start "$T/pg" || { not_ok "PostgreSQL starts"; exit 1; }
	export PGHOST=$T/pg PGPORT=$PG_PORT PGUSER=postgres
	LOG=$T/pg/server.log
}
