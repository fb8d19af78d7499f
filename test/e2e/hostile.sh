#!/usr/bin/env bash
#
# Hostile input at run time, each case with its asserted outcome: a failed
# job with the right error class (and nothing published), or a job that
# survives the attack.  The sources only 127.0.0.1 is allowed to reach;
# names and redirects that lead elsewhere must be refused on the address
# actually connected to.  Then: no secret (the target's, or one in a
# source URL's query string) appears in any log line, view, ledger or
# manifest.  Submit-time refusals are in test/regress/sql/submit.sql.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin hostile

TARGET_SECRET="remora-target-secret-$RANDOM$RANDOM"
URL_SECRET="hostile-url-token-$RANDOM$RANDOM"
export REMORA_TEST_SECRET=$TARGET_SECRET
HOSTS_MARK="# remora hostile test $$"
restore_hosts() { sed -i "/$HOSTS_MARK/d" /etc/hosts; }

e2e_at_exit restore_hosts
stack_up
# this cluster signs with a key whose secret is distinctive, and gives up
# on a silent source after 3 s
cat >>"$T/pg/data/postgresql.conf" <<CONF
remora.s3_access_key_id = 'REMORAKEY'
remora.s3_secret_access_key = '$TARGET_SECRET'
remora.stall_timeout = '3s'
remora.max_attempts = 2
CONF
q "SELECT pg_reload_conf()" >/dev/null
make_file small.bin 100000
make_file stall.bin 2000000
make_file steady.bin 3000000
# names that resolve to addresses the policy denies
cat >>/etc/hosts <<HOSTS
127.0.0.9 remora-loopback.test $HOSTS_MARK
169.254.169.254 remora-metadata.test $HOSTS_MARK
HOSTS

fails_with() {	# fails_with NAME URL CLASS [RETRYABLE]: the job fails with CLASS
	local name=$1 url=$2 class=$3 retryable=${4:-false} j
	j=$(q "SELECT remora_submit('$url')")
	if wait_state "$j" failed 40; then
		check_eq "$name: failed with class $class, retryable $retryable, nothing published" \
			"$(q "SELECT (last_error ->> 'class') || ' ' || (last_error ->> 'retryable') || ' ' || (SELECT count(*) FROM remora.results WHERE job_id = $j) FROM remora.jobs WHERE job_id = $j")" \
			"$class $retryable 0"
	else
		not_ok "$name: the job did not fail"
	fi
}

# the engine took the new credentials: an ordinary job still succeeds
j=$(q "SELECT remora_submit('$SRC/small.bin')")
check "a job signed with the distinctive key succeeds" wait_state "$j" succeeded 30

# --- redirects and names that lead where the policy forbids
fails_with "redirect to the metadata address" "$SRC/to-metadata" policy
fails_with "redirect to another loopback address" "$SRC/to-denied" policy
fails_with "redirect to IPv6 loopback" "$SRC/to-loopback6" policy
fails_with "a name resolving to a denied loopback address" "http://remora-loopback.test:$NGINX_PORT/small.bin" policy
fails_with "a name resolving to the metadata address" "http://remora-metadata.test:$NGINX_PORT/small.bin" policy
fails_with "redirect to file://" "$SRC/to-file" source
fails_with "redirect to gopher://" "$SRC/to-gopher" source
fails_with "redirect carrying credentials" "$SRC/to-userinfo" source
fails_with "a redirect loop" "$SRC/loop" source
check_eq "the loop stopped after 10 hops, not before" \
	"$(grep -c '"GET /loop HTTP/1.1" 302' "$T/nginx/access.log")" "11"

# --- a source that stalls: a timeout, not a hung worker.  curl judges the
# speed over a window of about 5 s, so an attempt whose source sends a
# burst and then nothing gives up some 6 s after remora.stall_timeout
rule "$SRC_PROXY" "match=GET%20/stall.bin&action=stall&after=1000"
s=$(q "SELECT remora_submit('$FLAKY/stall.bin')")
w=$(q "SELECT remora_submit('$SRC/slow/steady.bin')")
check "a stalled source fails its attempts with a timeout" wait_state "$s" failed 90
check_eq "stall: network class, curl timeout (28), retried once" \
	"$(q "SELECT (last_error ->> 'class') || ' ' || (last_error ->> 'curl_code') || ' ' || attempts_used FROM remora_jobs WHERE job_id = $s")" "network 28 2"
check_eq "stall: each attempt gave up within remora.stall_timeout and curl's window (12 s)" \
	"$(q "SELECT count(*) FILTER (WHERE finished_at - started_at < interval '12 seconds') || '/' || count(*) FROM remora.attempts WHERE job_id = $s")" "2/2"
# the timeline: when each attempt ran, on which worker, and how it ended
q "SELECT '# attempt ' || attempt_no || ' on ' || i.pid || ': ' || to_char(a.started_at, 'HH24:MI:SS.MS') || ' to ' || coalesce(to_char(a.finished_at, 'HH24:MI:SS.MS'), '-') || ' ' || a.state || ' ' || coalesce(a.error ->> 'message', '') FROM remora.attempts a JOIN remora.incarnations i USING (incarnation) WHERE job_id = $s ORDER BY attempt_no"
check "stall: meanwhile another job on the same workers completes" wait_state "$w" succeeded 40

# --- oversized response headers
rule "$SRC_PROXY" "match=GET%20/bigheader.bin&action=bigheader"
fails_with "a 256 KiB response header" "$FLAKY/bigheader.bin" network true

# --- hostile XML from the store: entity bomb, external entity, deep nesting
make_file xml.bin 12000000
rule "$S3_PROXY" "match=uploads&method=POST&action=s3body:bomb:200&count=1"
rule "$S3_PROXY" "match=partNumber=1&method=PUT&action=s3body:xxe:500&count=1"
rule "$S3_PROXY" "match=uploadId=&method=POST&action=s3body:deep:500&count=1"
j=$(q "SELECT remora_submit('$SRC/xml.bin', options => '{\"max_attempts\": 4}')")
check "hostile XML bodies from the store are refused, and the job still succeeds" wait_state "$j" succeeded 90
check_eq "hostile XML: three refused answers, each a retryable s3 failure" \
	"$(q "SELECT string_agg((e ->> 'class') || '/' || (e ->> 'retryable'), ',') FROM remora_jobs, jsonb_array_elements(error_history) e WHERE job_id = $j")" \
	"s3/true,s3/true,s3/true"
check_eq "hostile XML: no file content leaked into an error" \
	"$(q "SELECT count(*) FROM remora.attempts WHERE job_id = $j AND error::text LIKE '%root:%'")" "0"
check "hostile XML: the workers survived" \
	test "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" -ge 1

# --- secrets: in a source URL's query string, and the target's key
ok_j=$(q "SELECT remora_submit('$SRC/small.bin?token=$URL_SECRET')")
bad_j=$(q "SELECT remora_submit('$SRC/missing.bin?sig=$URL_SECRET')")
check "a job with a secret in its URL succeeds" wait_state "$ok_j" succeeded 30
check "a job with a secret in its URL fails" wait_state "$bad_j" failed 30
for secret in "$URL_SECRET" "$TARGET_SECRET"; do
	what=$([ "$secret" = "$URL_SECRET" ] && echo "the URL secret" || echo "the target secret")
	check_eq "$what is in no log line" "$(grep -c "$secret" "$T/pg/server.log" || true)" "0"
	check_eq "$what is in no view" \
		"$(q "SELECT count(*) FROM (SELECT t::text FROM remora_jobs t UNION ALL SELECT t::text FROM remora_attempts t
			UNION ALL SELECT t::text FROM remora_progress t UNION ALL SELECT t::text FROM remora_stats t
			UNION ALL SELECT t::text FROM remora_workers t) v(t) WHERE t LIKE '%$secret%'")" "0"
	check_eq "$what is in no job, ledger, checkpoint, member or result row" \
		"$(q "SELECT count(*) FROM (SELECT t::text FROM remora.jobs t UNION ALL SELECT t::text FROM remora.attempts t
			UNION ALL SELECT t::text FROM remora.checkpoints t UNION ALL SELECT t::text FROM remora.members t
			UNION ALL SELECT t::text FROM remora.results t) v(t) WHERE t LIKE '%$secret%'")" "0"
	check_eq "$what is not in pg_stat_activity" \
		"$(q "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%$secret%' AND pid <> pg_backend_pid()")" "0"
	manifest=$(q "SELECT result_manifest_key FROM remora_jobs WHERE job_id = $ok_j")
	check_eq "$what is not in the manifest" \
		"$(aws_s3 s3 cp "s3://target/$manifest" - 2>/dev/null | grep -c "$secret" || true)" "0"
done
check_eq "the URL secret is kept, for the worker only" \
	"$(q "SELECT count(*) FROM remora.source_urls WHERE url LIKE '%$URL_SECRET'")" "2"
check_eq "the target secret is hidden from a non-superuser" \
	"$(psql -X -q -t -A -d postgres -c "CREATE ROLE snoop LOGIN; GRANT remora_user TO snoop" >/dev/null;
	   psql -X -q -t -A -U snoop -d postgres -c "SELECT current_setting('remora.s3_secret_access_key')" 2>&1 | grep -c 'must be superuser')" "1"
check_eq "and from pg_settings" \
	"$(psql -X -q -t -A -U snoop -d postgres -c "SELECT count(*) FROM pg_settings WHERE setting LIKE '%$TARGET_SECRET%'")" "0"

e2e_finish
