# Helpers for end-to-end tests (source after deps.sh and cluster.sh).
#
# Each test prints TAP-style lines ("ok - ...", "not ok - ...") that the
# suite runner counts, and exits non-zero if anything failed.

E2E_FAILED=0
E2E_LABEL=${E2E_LABEL:-}	# said before every test name, e.g. "[rgw] "

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

# wait_for SECONDS COMMAND...: poll until the command succeeds or the
# deadline passes; never a fixed sleep.
wait_for() {
	local deadline=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 0.1
	done
}

# q SQL: one value from the test cluster's database
q() { psql -X -A -t -q -v ON_ERROR_STOP=1 -d "${E2E_DB:-postgres}" -c "$1"; }

e2e_finish() {
	[ "$E2E_FAILED" -eq 0 ]
}
