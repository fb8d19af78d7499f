#!/usr/bin/env bash
#
# Adaptive connections (src/engine/transfer/adapt.h): a job that does not pin
# options.connections, at remora.object_connections 4 (the default), reads a large
# object from four ranged GETs up (the fixed count of before), adding one while each added one raises
# the rate.  A source that caps each connection's rate rewards more: the
# GETs in flight at once (counted from the source's access log) exceed
# the start.  A source that answers some ranges 503 is backed off from: a
# connection fewer, said in the server log, the refused ranges asked for
# again in the same attempt; so is a part the store answers SlowDown.
# No speeds are asserted (bench/adaptive.sh
# measures them).
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin adaptive

stack_up

# a source at 2 MiB/s per connection (test/lib/paced_source.py: nginx's
# limit_rate caps a request, and lets each send its first second's worth
# at once, so a sub-range of 1 MiB would not be capped), and a log of each
# request's span
RATE_PORT=$(free_port)
RATE=$T/rate
mkdir -p "$RATE"
python3 "$E2E_LIB/paced_source.py" "$WWW" "$RATE_PORT" 2097152 "$RATE/access.log" >"$RATE/out" 2>&1 &
service_pid $!
wait_port "$RATE_PORT"
ALOG=$RATE/access.log
# the fault proxy in front of it, for the 503s
BUSY_PORT=$(free_port)
start_faults "$BUSY_PORT" "$RATE_PORT" busy

make_file big.bin 67108864  # 64 MiB: 13 parts of 5 MB, 64 sub-ranges
make_file busy.bin 41943040 # 40 MiB: 8 parts, 40 sub-ranges

# the engine's lines about job J in the server log (LOG: test/lib/e2e.sh)
# shellcheck disable=SC2153
adapt_log() { grep -F "remora job $1: ranged connections" "$LOG" || true; }

# the stack pins one connection; this script runs at the default
q "ALTER SYSTEM SET remora.object_connections = 4" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
setting_is_default() { [ "$(q "SHOW remora.object_connections")" = 4 ]; }
check "the default, 4 to start with, then adapting, is in force" wait_for 30 setting_is_default

# --- capped per connection: more connections pay, so it grows
j=$(q "SELECT remora_submit('http://127.0.0.1:$RATE_PORT/c2/big.bin')")
check "capped: the job succeeds" wait_state "$j" succeeded 180
verify "$j" big.bin
# sub-ranges of 1 MiB at the default 16 connections a host: 64 GETs
check_eq "capped: sixty-four GETs, all ranged (206)" \
	"$(grep -F '"GET /c2/big.bin ' "$ALOG" | awk '{ print $3 }' | sort | uniq -c | awk '{ print $1 "x" $2 }')" "64x206"
at_once=$(most_at_once "$ALOG" /c2/big.bin)
check "capped: more GETs at once than the four it starts with ($at_once)" \
	test "$at_once" -gt 4
check "capped: no more at once than remora.max_connections_per_host ($at_once)" \
	test "$at_once" -le "$(q "SHOW remora.max_connections_per_host")"
lines=$(adapt_log "$j")
sed 's/^/# /' <<<"$lines"
check "capped: the log says it began with four" \
	grep -q "ranged connections 0 -> 4 at .*: the ranges begin" <<<"$lines"
check "capped: the log says a connection was added because it paid" \
	grep -q "ranged connections 4 -> 5 at .*: the last one added paid" <<<"$lines"

# --- a source that refuses two ranges with 503 (the first GET passes):
# a connection fewer, logged, and the ranges asked for again, one attempt
rule "$BUSY_PORT" "match=GET%20/c2/busy.bin&action=status:503&skip=1&count=2"
j=$(q "SELECT remora_submit('http://127.0.0.1:$BUSY_PORT/c2/busy.bin')")
check "503s: the job succeeds" wait_state "$j" succeeded 180
verify "$j" busy.bin
check_eq "503s: in one attempt" \
	"$(q "SELECT count(*) FROM remora.attempts WHERE job_id = $j")" "1"
check_eq "503s: the proxy refused two ranges" \
	"$(curl -s "http://127.0.0.1:$BUSY_PORT/__fired")" '{"status":2}'
check_eq "503s: every sub-range came once (40 ranged GETs answered 206)" \
	"$(grep -F '"GET /c2/busy.bin ' "$ALOG" | awk '$3 == 206 { print $NF }' | sort -u | wc -l) $(grep -F '"GET /c2/busy.bin ' "$ALOG" | awk '$3 == 206' | wc -l)" "40 40"
lines=$(adapt_log "$j")
sed 's/^/# /' <<<"$lines"
check "503s: the log says it shrank, and why" \
	grep -Eq "ranged connections ([0-9]+) -> [0-9]+ at .*: the source answered a range with HTTP 503" <<<"$lines"
shrank=$(grep -F "HTTP 503" <<<"$lines" | awk '{ for (i = 1; i < NF; i++) if ($i == "->") { if ($(i + 1) < $(i - 1)) s = 1 } } END { print s + 0 }')
check_eq "503s: a connection fewer after a 503 (from more than one)" "$shrank" "1"

# --- the store answers a part SlowDown: fewer uploads at once, the part
# sent again after the pause, in the same attempt
rule "$S3_PROXY" "match=partNumber=2%26&method=PUT&action=s3error:SlowDown:503&count=1"
j=$(q "SELECT remora_submit('http://127.0.0.1:$RATE_PORT/c2/busy.bin')")
check "SlowDown: the job succeeds" wait_state "$j" succeeded 180
verify "$j" busy.bin
check_eq "SlowDown: in one attempt" \
	"$(q "SELECT count(*) FROM remora.attempts WHERE job_id = $j")" "1"
check_eq "SlowDown: the store's proxy refused part 2 once" \
	"$(hits "$S3_PROXY" 'partNumber=2%26')" "2"
check "SlowDown: the log says the store refused a part" \
	grep -q "the store answered a part with HTTP 503 SlowDown" <<<"$(adapt_log "$j")"

e2e_finish
