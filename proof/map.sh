#!/usr/bin/env bash
#
# The model and the code kept together.  proof/remora.pml lists its
# transitions ("@transition Name function"); each SQL function that
# implements one says so in the comment block above its CREATE OR REPLACE
# FUNCTION in sql/functions/*.sql ("-- Model: Name (proof/remora.pml)"),
# and doc/protocol.md has a table row for each.  This script checks, and prints TAP lines:
#   - every transition is defined in the model (an inline of that name)
#     and its function in sql/functions/ names it;
#   - every "Model:" comment names a transition the model lists, for the
#     function the model says;
#   - every protocol function (those granted to remora_worker, and the
#     internal ones below) has a transition, but for the few listed as not
#     modelled, with the reason;
#   - doc/protocol.md's table has every transition.
#
set -Euo pipefail
cd "$(dirname "$0")/.." || exit 1
PML=proof/remora.pml
SQL=(sql/functions/*.sql)	# in the order the Makefile joins them
DOC=doc/protocol.md
failed=0
ok() { echo "ok - map: $*"; }
not_ok() { echo "not ok - map: $*"; failed=1; }

# internal functions that carry protocol decisions
INTERNAL="remora._authorize remora._settle remora._leases_in_use remora._cancel
remora._submit remora._export remora._export_resolve remora._commit_export
remora._coordination_lost"
# protocol functions with no transition, and why
declare -A NOT_MODELLED=(
	[remora.job_objects_deleted]="records that a hard delete's objects are gone: no authority changes"
	[remora.worker_settings]="hands an external worker the server's settings: no state at all"
	[remora.export_members]="hands the current export attempt a page of the members it publishes: reads, locks and changes nothing (a stale attempt gets none)"
	[remora.start_incarnation]="records who runs: no authority changes (a claim records an incarnation it has not seen)"
	[remora.heartbeat]="shows an incarnation alive to operators: no authority changes (leases are renewed by remora.renew)"
	[remora.end_incarnation]="records that an incarnation stopped: reconcile then takes its leases as lapsed, a case of the model's lease expiry, which any live lease may take at any moment"
	[remora.earlier_members]="hands a replacement the members its job's earlier attempts staged: reads, locks and changes nothing"
	[remora.source_endpoint_settings]="hands a worker the settings of the endpoint its job names: no state of the protocol at all"
	[remora.next_due]="tells a worker how long until the next queued job is due: reads, locks and changes nothing, and only says when to claim (claim judges what is due)"
	[remora.rate_limits]="hands a worker the byte-rate caps of its running attempts: reads, locks and changes nothing, and a cap only slows a transfer"
	[remora._blocked_origins]="lists the target store's, the registered endpoints' and the listeners' host and port, which no source may reach: reads, locks and changes nothing"
	[remora.webhooks_due]="claims webhooks owed for jobs that already ended: no job, attempt or lease changes"
	[remora.webhook_tried]="records a webhook's try and its next one: no job, attempt or lease changes (a delivery never changes a job's outcome)"
)

# function -> transition, from the model's list
declare -A T_OF
while read -r name fn; do
	T_OF[$fn]=$name
done < <(sed -n 's/^ \*   @transition \([A-Za-z]*\) *\([a-z_.]*\)$/\1 \2/p' "$PML")
[ "${#T_OF[@]}" -gt 0 ] || { not_ok "the model lists its transitions"; exit 1; }

# function -> the Model: name in the comment block right above it
declare -A M_OF
while read -r fn name; do
	M_OF[$fn]=$name
done < <(awk '
	/^--/ { if (match($0, /^-- Model: [A-Za-z]+ \(proof\/remora\.pml\)/)) {
				split($0, w, " "); model = w[3] }
			next }
	/^CREATE OR REPLACE FUNCTION / { fn = $5; sub(/\(.*/, "", fn);
									 if (model != "") print fn, model; model = ""; next }
	{ model = "" }' "${SQL[@]}")

for fn in "${!T_OF[@]}"; do
	name=${T_OF[$fn]}
	grep -qE "^inline $name\(" "$PML" || not_ok "transition $name is not defined in the model"
	if [ "${M_OF[$fn]:-}" = "$name" ]; then
		ok "$name is $fn"
	else
		not_ok "$fn does not say \"-- Model: $name (proof/remora.pml)\" above its CREATE OR REPLACE FUNCTION"
	fi
	grep -qE "^\| *\`?$name\`? *\|" "$DOC" || not_ok "doc/protocol.md has no row for transition $name"
done

for fn in "${!M_OF[@]}"; do
	[ "${T_OF[$fn]:-}" = "${M_OF[$fn]}" ] ||
		not_ok "$fn names transition ${M_OF[$fn]}, which the model does not list for it"
done

# the protocol functions: granted to remora_worker, and the internal ones
granted=$(awk '/^GRANT EXECUTE ON FUNCTION/ { g = 1; buf = "" }
	g { buf = buf " " $0 }
	g && /;$/ { if (buf ~ /TO remora_worker;/) print buf; g = 0 }' "${SQL[@]}" |
	grep -oE 'remora\.[a-z_]+\(' | tr -d '(')
for fn in $granted $INTERNAL; do
	if [ -n "${T_OF[$fn]:-}" ]; then
		continue
	elif [ -n "${NOT_MODELLED[$fn]:-}" ]; then
		ok "$fn is not modelled: ${NOT_MODELLED[$fn]}"
	else
		not_ok "protocol function $fn has no transition in the model"
	fi
done
[ "$failed" -eq 0 ] && ok "every transition has its function and every protocol function its transition"
exit "$failed"
