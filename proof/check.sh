#!/usr/bin/env bash
#
# Model-check proof/remora.pml with Spin, and proof/owners.pml (the rows
# of remora.queue_owners).
#
#     proof/check.sh            the safety assertions (exhaustive, three
#                               configurations) and the liveness property
#                               under weak fairness
#     proof/check.sh --broken   each deliberately broken variant of the
#                               model (BROKEN_* in remora.pml) must give a
#                               counterexample
#     proof/check.sh --deep     as without arguments, and liveness in the
#                               two-job configuration too (about 5 minutes
#                               more; not part of ./test/run)
#
# Prints TAP lines ("ok - ...", "not ok - ...") with the bounds, the states
# stored and the time of each run, and exits non-zero on any violation, on
# a search that did not complete, or on a broken variant that passes.
# Every run is bounded: MEMLIM (MB) of memory, a depth limit, and
# PROOF_TIMEOUT seconds (default 120) of CPU time (the suite runs this at
# nice 19 beside its other stages, where a search of 43 s took over 120 s
# of wall time once), and eight times that of wall time.
#
set -Euo pipefail
cd "$(dirname "$0")" || exit 1
MODEL=$PWD/remora.pml
MEMLIM=${PROOF_MEMLIM:-1024}
TIMEOUT=${PROOF_TIMEOUT:-120}
DEPTH=${PROOF_DEPTH:-1000000}
LIVE=2	# configurations checked for liveness: the first LIVE
if [ "${1:-}" = --deep ]; then
	LIVE=3
	TIMEOUT=${PROOF_TIMEOUT:-900}
fi

command -v spin >/dev/null || { echo "not ok - spin is installed (apt-get install spin)"; exit 1; }

W=$(mktemp -d /tmp/remora-proof.XXXXXX)
trap 'rm -rf "$W"' EXIT
failed=0

# The configurations: name, then -D definitions for spin.  Each keeps the
# defaults of remora.pml for the rest (2 workers, 2 attempts of budget, one
# coordination loss, one late delivery, one decision, one yield a job,
# lease limit 1).  The two-job one leaves yields out: with them its search
# outgrows its bounds (the one-job ones hold every yield's properties:
# fencing, the budget, the lease rows, a late repeat).
CONFIGS=(
	"jobs|1 download job, 2 workers, budget 2, 1 yield|-DNJ=1 -DEXPORTJOB=9"
	"export|1 export, 2 workers, budget 2, 1 decision|-DNJ=1 -DEXPORTJOB=0"
	"limit|2 download jobs, 2 workers, budget 2, max_active_leases 1, no staging sweep, no yield|-DNJ=2 -DEXPORTJOB=9 -DNOCLEAN -DMAXYIELD=0"
)

# run NAME DEFINES MODE: build and run the verifier in $W/NAME; MODE is
# safety or liveness; OPT the C compiler's optimisation (-O2; the broken
# variants' counterexamples are found at once, -O0 compiles faster).  Leaves its output in $W/NAME.out; returns pan's
# status (124 on the wall-time bound, 152 on the CPU-time one).
run() {
	local name=$1 defs=$2 mode=$3 d="$W/$1" cflags pflags model=${PML:-$MODEL}
	mkdir -p "$d"
	cp "$model" "$d/"
	if [ "$mode" = safety ]; then
		cflags="-DSAFETY -DNOCLAIM -DCOLLAPSE"
		pflags=""
	else
		cflags="-DNFAIR=4"
		pflags="-a -f -N eventually_ended"
	fi
	# shellcheck disable=SC2086
	(cd "$d" && spin -a $defs "$(basename "$model")" >spin.out 2>&1 &&
		gcc -w "${OPT:--O2}" $cflags -DMEMLIM="$MEMLIM" -o pan pan.c &&
		ulimit -t "$TIMEOUT" &&
		timeout $((TIMEOUT * 8)) ./pan -m"$DEPTH" -w22 $pflags) >"$W/$name.out" 2>&1
}

# summary NAME: "N states, T s" from a run's output
summary() {
	local states secs
	states=$(awk '/states, stored/ {print $1; exit}' "$W/$1.out")
	secs=$(sed -n 's/^pan: elapsed time \([0-9.e+]*\) seconds.*/\1/p' "$W/$1.out" | head -n1)
	echo "${states:-?} states, ${secs:-?} s"
}

errors() { sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$W/$1.out" | head -n1; }

# verdict NAME LABEL STATUS: a clean, complete run is ok
verdict() {
	local name=$1 label=$2 rc=$3 e
	e=$(errors "$name")
	if [ "$rc" -eq 0 ] && [ "${e:-x}" = 0 ] &&
		! grep -qE "Search not completed|max search depth too small" "$W/$name.out"; then
		echo "ok - model: $label: no violation ($(summary "$name"))"
	else
		echo "not ok - model: $label (status $rc, errors ${e:-?})"
		grep -E "assertion violated|acceptance cycle|error|MEMLIM|Search not completed|too small" "$W/$name.out" | head -n 5
		failed=1
	fi
}

if [ "${1:-}" = --broken ]; then
	# variant|configuration it is caught in|search|what breaks
	BROKEN=(
		"BROKEN_FENCE|jobs|safety|commit without the fencing check (attempt and token)"
		"BROKEN_CANCEL|jobs|safety|commit that ignores a cancel request"
		"BROKEN_BUDGET|jobs|safety|a replacement of a lost attempt that does not consume budget"
		"BROKEN_LEASES|limit|safety|claim counting only lease rows while the marker is gone"
		"BROKEN_EXPORT|export|safety|a lost export attempt retried without a decision"
		"BROKEN_YIELD|jobs|safety|a yield that leaves its lease row behind"
		"BROKEN_STUCK|jobs|liveness|reconcile that leaves expired leases alone"
	)
	# proof/owners.pml's, in its one configuration
	for def in "BROKEN_SHARE|a queue insert that does not hold its owner's row" \
		"BROKEN_SNAPSHOT|reconcile deleting an owner's row on the snapshot it locked with"; do
		what=${def#*|} def=${def%%|*}
		PML=$PWD/owners.pml OPT=-O0 run "$def" "-D$def" safety || true
		if [ "$(errors "$def")" -gt 0 ] 2>/dev/null; then
			echo "ok - model: $def ($what) is caught ($(summary "$def"))"
		else
			echo "not ok - model: $def ($what) is not caught"
			failed=1
		fi
	done
	for b in "${BROKEN[@]}"; do
		IFS='|' read -r def cfg mode what <<<"$b"
		for c in "${CONFIGS[@]}"; do
			IFS='|' read -r name _ defs <<<"$c"
			[ "$name" = "$cfg" ] && break
		done
		rc=0
		OPT=-O0 run "$def" "$defs -D$def" "$mode" || rc=$?
		e=$(errors "$def")
		if [ "${e:-0}" -gt 0 ] 2>/dev/null; then
			why=$(grep -m1 -oE "assertion violated .*|acceptance cycle .*" "$W/$def.out" || true)
			echo "ok - model: $def ($what) is caught: ${why:-counterexample} ($(summary "$def"))"
		else
			echo "not ok - model: $def ($what) is not caught (status $rc)"
			failed=1
		fi
	done
	exit "$failed"
fi

for c in "${CONFIGS[@]}"; do
	IFS='|' read -r name bounds defs <<<"$c"
	rc=0
	run "$name" "$defs" safety || rc=$?
	verdict "$name" "safety, $bounds" "$rc"
done
rc=0
PML=$PWD/owners.pml run owners "" safety || rc=$?
verdict owners "queue owners: an owner with queued jobs keeps its row, 2 submits, 2 reconciles, 2 claims" "$rc"
# Liveness (weak fairness): every job ends.  The single-job configurations
# (--deep: all three).
for c in "${CONFIGS[@]:0:$LIVE}"; do
	IFS='|' read -r name bounds defs <<<"$c"
	rc=0
	run "$name-live" "$defs" liveness || rc=$?
	verdict "$name-live" "liveness <>[] every job ended, weak fairness, $bounds" "$rc"
done
exit "$failed"
