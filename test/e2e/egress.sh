#!/usr/bin/env bash
#
# The outbound policy on every hop and every connection: a registered
# source endpoint (trusted, the administrator's) that redirects elsewhere
# is judged like any source from there on, and a source request that would
# ride a pooled connection to the target store (which the policy does not
# judge) is judged on the address it is sent to.  And what a source says
# in its headers is made valid UTF-8 before it is recorded.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin egress

stack_up

# One worker, so that the pooled connection of one job is there for the
# next; sources only on nginx's and its proxy's ports; the target reached
# through a proxy that keeps idle connections for a minute.
POOL_PROXY=$(free_port)
KEEPALIVE_MS=60000 start_faults "$POOL_PROXY" "$S3_PORT" pool
CLOSED_PORT=$(free_port) # allowed, and nothing listens there
cluster_stop "$T/pg" fast
cat >>"$T/pg/data/postgresql.conf" <<CONF
remora.max_workers = 1
remora.allow_ports = '$NGINX_PORT,$SRC_PROXY,$S3_PROXY,$CLOSED_PORT'
remora.s3_endpoint = 'http://127.0.0.1:$POOL_PROXY'
CONF
cluster_start "$T/pg"

make_file small.bin 100000
fails_as_policy() {	# fails_as_policy JOB NAME
	wait_state "$1" failed 30 || { not_ok "$2: the job fails"; return; }
	check_eq "$2: refused by the outbound policy" \
		"$(q "SELECT (last_error ->> 'class') || ' ' || (last_error ->> 'retryable') FROM remora_jobs WHERE job_id = $1")" \
		"policy false"
}

# --- a pooled connection to the target is not a way around the policy
j=$(q "SELECT remora_submit('$SRC/small.bin')")
check "a job leaves a pooled connection to the target" wait_state "$j" succeeded 30
key=$(q "SELECT key FROM remora_result($j)")
rule "$POOL_PROXY" "match=GET%20/target/$key&action=status:500&count=0"	# counts only
rule "$SRC_PROXY" "match=GET%20/to-target.bin&action=redirect:http://127.0.0.1:$POOL_PROXY/target/$key"
j=$(q "SELECT remora_submit('$FLAKY/to-target.bin')")
fails_as_policy "$j" "a redirect to the target store's host and port"
check_eq "and the target's proxy never saw the source request" \
	"$(hits "$POOL_PROXY" "GET%20/target/$key")" "0"

# --- a registered endpoint's redirect is judged like any source's
aws_s3 s3 cp "$WWW/small.bin" s3://target/ep/obj.bin >/dev/null
q "SELECT remora.register_source_endpoint('redirecting', 'http://127.0.0.1:$S3_PROXY', 'us-east-1', true, '$S3_ACCESS_KEY', '$S3_SECRET_KEY')" >/dev/null
for to in "http://169.254.169.254/latest/meta-data/" "http://127.0.0.2:$NGINX_PORT/small.bin"; do
	curl -s "http://127.0.0.1:$S3_PROXY/__reset" >/dev/null
	rule "$S3_PROXY" "match=GET%20/target/ep/obj.bin&action=redirect:$to"
	j=$(q "SELECT remora_submit('s3://target/ep/obj.bin', options => '{\"endpoint\": \"redirecting\"}')")
	fails_as_policy "$j" "an endpoint redirecting to $to"
done
curl -s "http://127.0.0.1:$S3_PROXY/__reset" >/dev/null
j=$(q "SELECT remora_submit('s3://target/ep/obj.bin', options => '{\"endpoint\": \"redirecting\"}')")
check "without the redirect the same endpoint job succeeds" wait_state "$j" succeeded 30

# --- a name with a denied address and an allowed one: curl resolves
# localhost to ::1 and 127.0.0.1, and only 127.0.0.1/32 is allowed.  A
# refused connection to the allowed one is the network's failure (retried),
# not the policy's (final).
j=$(q "SELECT remora_submit('http://localhost:$NGINX_PORT/small.bin')")
check "localhost: through its allowed address the job succeeds" wait_state "$j" succeeded 30
j=$(q "SELECT remora_submit('http://localhost:$CLOSED_PORT/small.bin')")
retrying_network() {
	[ "$(q "SELECT state || ' ' || (last_error ->> 'class') || ' ' || (last_error ->> 'retryable') FROM remora_jobs WHERE job_id = $j")" = "retrying network true" ]
}
check "localhost, nothing listening: a network failure, retried" wait_for 30 retrying_network
q "SELECT remora_cancel($j)" >/dev/null

# --- an ETag that is not UTF-8 (with an escape sequence) is scrubbed
make_file badetag.bin 12000000
rule "$SRC_PROXY" "match=GET%20/badetag.bin&action=badetag"
j=$(q "SELECT remora_submit('$FLAKY/badetag.bin')")
check "a source whose ETag is not UTF-8 is downloaded" wait_state "$j" succeeded 60
verify "$j" badetag.bin
check_eq "its ETag is recorded as valid text, invalid bytes and controls as '?'" \
	"$(q "SELECT m.source ->> 'etag' FROM remora.members m JOIN remora.results r USING (attempt_id) WHERE r.job_id = $j")" \
	'"???[31m"'

# --- Remora's own store and endpoints are never a source, whatever
# remora.allow_networks and allow_ports say (they allow 127.0.0.1 and the
# port of the endpoint "redirecting" here): a worker takes the endpoints
# registered into its engine at the next reload.  Under another name
# (localhost for 127.0.0.1) a URL of the endpoint passes the submit, and
# the worker refuses the address it reaches; a redirect to it is refused
# so too; a webhook to it is refused at submit (RM001).
settings_taken() { [ "$(grep -c "new settings in effect" "$LOG")" -gt "$1" ]; }
before=$(grep -c "new settings in effect" "$LOG")
q "SELECT pg_reload_conf()" >/dev/null
check "after a reload the worker has the endpoint among the origins it refuses" wait_for 30 settings_taken "$before"
j=$(q "SELECT remora_submit('http://localhost:$S3_PROXY/target/$key')")
fails_as_policy "$j" "a registered endpoint under another name"
rule "$SRC_PROXY" "match=GET%20/to-store.bin&action=redirect:http://127.0.0.1:$S3_PROXY/target/$key"
j=$(q "SELECT remora_submit('$FLAKY/to-store.bin')")
fails_as_policy "$j" "a redirect to a registered endpoint"
check "  refused as Remora's own" grep -q "Remora's own" \
	<<<"$(q "SELECT last_error ->> 'message' FROM remora_jobs WHERE job_id = $j")"
check_eq "a webhook to it is refused at submit (RM001)" \
	"$(psql -X -q -t -A -v VERBOSITY=verbose -c "SELECT remora_submit('$SRC/small.bin', options => '{\"notify_url\": \"http://127.0.0.1:$S3_PROXY/hook\"}')" 2>&1 | grep -oE 'ERROR: +RM001' | grep -oE 'RM001')" RM001

# --- a refusal names the rule, not the address a name resolved to (who
# resolves names inside the network is not a user's to learn); the
# server's log keeps the address.  localhost is denied here as a whole.
q "ALTER SYSTEM SET remora.deny_networks = '127.0.0.1/32'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
j=$(q "SELECT remora_submit('http://localhost:$CLOSED_PORT/small.bin')")
policy_failed() { [ "$(q "SELECT state || ' ' || (last_error ->> 'class') FROM remora_jobs WHERE job_id = $j")" = "failed policy" ]; }
check "a name that resolves only to denied addresses: refused by the policy" wait_for 30 policy_failed
msg=$(q "SELECT last_error ->> 'message' FROM remora_jobs WHERE job_id = $j")
check "the job's error names the rule (remora.deny_networks, or the reserved ranges)" \
	grep -qE "deny_networks|reserved range" <<<"$msg"
check_eq "and not the address" "$(grep -cE '127\.0\.0\.1|::1' <<<"$msg")" 0
check "the server's log names it" grep -qE "refused the address (127\.0\.0\.1|::1)" "$LOG"
q "ALTER SYSTEM RESET remora.deny_networks" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null

e2e_finish
