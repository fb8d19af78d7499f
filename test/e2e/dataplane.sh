#!/usr/bin/env bash
#
# The data plane end to end: a real PostgreSQL running remora's workers,
# nginx serving the sources, the target store (the test server that checks
# signatures, @20minutes/s3rver, or Ceph's RADOS Gateway with
# REMORA_STORE=rgw), and the project's fault-injecting proxy in front of
# both.  Every result is downloaded again with the AWS CLI from Debian and
# its SHA-256 compared with the source file.  With REMORA_HOST=external,
# remora-worker processes run the jobs instead (test/lib/stack.sh): a
# crash, a stop and a SIGSTOP then hit the remora-worker that holds the
# job, and another is started in its place.  On Swift (REMORA_STORE=swift)
# no segment object of a multipart upload is left that nothing names.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin dataplane

stack_up

make_file small.bin 1000000
make_file large.bin 32000000		# seven 5 MB parts
make_file exact.bin 5242880		# exactly remora.part_size
make_file flaky.bin 300000
make_file due.bin 300000
for f in reset truncated toomany forbidden throttled slowdown sum; do make_file $f.bin 700000; done
make_file sigterm.bin 12000000
make_file zombie.bin 200000
for f in cancel restart change ignored; do make_file $f.bin 12000000; done
# the crash case kills the worker once two parts (10.5 MB) are validated:
# 24 MB at 1 MB/s leaves it about 12 s of download to do then.  With 12 MB
# the job could finish (or be committing) before a busy machine's poll saw
# the second part's checkpoint, and the kill then found no worker, or a
# worker whose upload was complete.
make_file crash.bin 24000000
make_file pastcp.bin 24000000

# The cases up to the cancel below need no worker stopped and no server
# restarted: they are all submitted at once, each with its own file and
# its own proxy rules, and then checked one by one.
rule "$S3_PROXY" "match=data/large.bin?partNumber=&method=PUT&action=status:500&count=0"	# counts only
rule "$S3_PROXY" "match=data/exact.bin?partNumber=&method=PUT&action=status:500&count=0"
rule "$S3_PROXY" "match=/segments/&action=status:500&count=0"
rule "$SRC_PROXY" "match=GET%20/flaky.bin&action=status:503&count=2"
rule "$SRC_PROXY" "match=GET%20/reset.bin&action=reset&after=300000&count=1"
rule "$SRC_PROXY" "match=GET%20/truncated.bin&action=truncate&after=300000&count=1"
rule "$SRC_PROXY" "match=GET%20/throttled.bin&action=status:429&count=1"
rule "$SRC_PROXY" "match=GET%20/forbidden.bin&action=status:403"
rule "$S3_PROXY" "match=data/slowdown.bin&method=PUT&action=s3error:SlowDown:503&count=1"
cp "$WWW/small.bin" "$WWW/manifest.jsonl"
zeros=$(printf '0%.0s' $(seq 64))
j_small=$(q "SELECT remora_submit('$SRC/small.bin')")
j_manifest=$(q "SELECT remora_submit('$SRC/manifest.jsonl')")
j_large=$(q "SELECT remora_submit('$SRC/large.bin')")
j_exact=$(q "SELECT remora_submit('$SRC/exact.bin')")
j_redirect=$(q "SELECT remora_submit('$SRC/redirect/small.bin')")
j_missing=$(q "SELECT remora_submit('$SRC/missing.bin')")
j_denied=$(q "SELECT remora_submit('$SRC/to-denied')")
j_flaky=$(q "SELECT remora_submit('$FLAKY/flaky.bin')")
j_reset=$(q "SELECT remora_submit('$FLAKY/reset.bin')")
j_truncated=$(q "SELECT remora_submit('$FLAKY/truncated.bin')")
j_throttled=$(q "SELECT remora_submit('$FLAKY/throttled.bin')")
j_forbidden=$(q "SELECT remora_submit('$FLAKY/forbidden.bin')")
j_badsum=$(q "SELECT remora_submit('$SRC/sum.bin', options => '{\"expected_sha256\": \"$zeros\"}')")
j_goodsum=$(q "SELECT remora_submit('$SRC/sum.bin', options => '{\"expected_sha256\": \"$(sha256sum "$WWW/sum.bin" | cut -d' ' -f1)\"}')")
j_slowdown=$(q "SELECT remora_submit('$SRC/slowdown.bin')")

# --- a small object: one PUT
j=$j_small
check "small object succeeds" wait_state "$j" succeeded 60
verify "$j" small.bin
check_eq "the member path is the file name" "$(q "SELECT path FROM remora_result($j)")" "small.bin"
check_eq "the member key is under the attempt's staging prefix" \
	"$(q "SELECT key = remora._staging_prefix('remora', $j, current_attempt) || 'data/small.bin' FROM remora_result($j), remora.jobs WHERE job_id = $j")" "t"

# --- a member whose name is the manifest's: kept apart from it
j=$j_manifest
check "a file named manifest.jsonl succeeds" wait_state "$j" succeeded 60
verify "$j" manifest.jsonl

# --- a large object: seven parts, each uploaded once into the member's
# multipart upload (no segment objects, no copies)
j=$j_large
check "large object (7 parts) succeeds" wait_state "$j" succeeded 90
verify "$j" large.bin
check_eq "seven parts were uploaded, once each" "$(hits "$S3_PROXY" "data/large.bin?partNumber=")" "7"
check_eq "and no segment object was written" "$(hits "$S3_PROXY" /segments/)" "0"
# an object of exactly one part size is one PUT, no part
j=$j_exact
check "an object of exactly remora.part_size succeeds" wait_state "$j" succeeded 60
check_eq "and is one PUT, not a multipart upload" "$(hits "$S3_PROXY" "data/exact.bin?partNumber=")" "0"
verify "$j" exact.bin
check "the committed attempt's cleanup is recorded" wait_for 20 all_cleaned "$j"
check_eq "only the member and the manifest remain" "$(staging_objects "$j")" "2"

# --- a redirect, followed one hop at a time
j=$j_redirect
check "redirected source succeeds" wait_state "$j" succeeded 60
verify "$j" small.bin

# --- 404: failed at once, with a structured error
j=$j_missing
check "404 fails the job" wait_state "$j" failed 60
check_eq "404: one attempt, error class http, status 404, not retryable" \
	"$(q "SELECT attempts_used || ' ' || (last_error ->> 'class') || ' ' || (last_error ->> 'http_status') || ' ' || (last_error ->> 'retryable') FROM remora_jobs WHERE job_id = $j")" \
	"1 http 404 false"
check_eq "404: no result" "$(q "SELECT count(*) FROM remora_result($j)")" "0"

# --- the outbound policy, on the address connected to, redirects included
check_eq "a denied address literal is refused at submit (RM001)" \
	"$(psql -X -q -t -A -v VERBOSITY=verbose -c "SELECT remora_submit('http://127.0.0.2:$NGINX_PORT/small.bin')" 2>&1 | grep -c 'RM001')" "1"
j=$j_denied
check "a redirect to a denied address fails" wait_state "$j" failed 60
check_eq "redirect to denied: class policy" "$(q "SELECT last_error ->> 'class' FROM remora_jobs WHERE job_id = $j")" "policy"

# --- 503 twice, then 200: succeeded on attempt 3
j=$j_flaky
check "503, 503, 200: the job succeeds" wait_state "$j" succeeded 60
check_eq "on attempt 3" "$(q "SELECT attempts_used FROM remora_jobs WHERE job_id = $j")" "3"
check_eq "the history has both 503s, retryable, with Retry-After" \
	"$(q "SELECT string_agg((e ->> 'http_status') || '/' || (e ->> 'retryable') || '/' || (e ->> 'retry_after'), ',') FROM remora_jobs, jsonb_array_elements(error_history) e WHERE job_id = $j")" \
	"503/true/1,503/true/1"
verify "$j" flaky.bin

# --- a retry is claimed when it is due, not at a worker's next poll: three
# 503s with Retry-After 1, then 200.  Each retry is due 1 s after its
# attempt failed (the backoffs here, at most 0.8 s, are shorter); by the
# server's timestamps the next attempt starts no sooner (claim's rule) and
# within 2.5 s after (the worker asks remora.next_due and claims then; 2.5 s
# leaves a busy machine's rounds and round trips their time).  At the 5 s
# poll, a retry was claimed 4 s late by the worker that failed it (and by
# both remora-workers, woken by the retry's NOTIFY when it was not due
# yet); a background worker's other one, polling at its own phase, may
# take one in time, not all three.
rule "$SRC_PROXY" "match=GET%20/due.bin&action=status:503&count=3"
j=$(q "SELECT remora_submit('$FLAKY/due.bin')")
check "503 three times, then 200: the job succeeds" wait_state "$j" succeeded 60
retry_gaps="SELECT a.attempt_no, b.started_at - a.finished_at AS gap
  FROM remora.attempts a
  JOIN remora.attempts b ON b.job_id = a.job_id AND b.attempt_no = a.attempt_no + 1
 WHERE a.job_id = $j"
echo "# due.bin: from each failed attempt's end to the next one's claim: $(q "SELECT string_agg(attempt_no || ': ' || gap, ', ' ORDER BY attempt_no) FROM ($retry_gaps) g")"
check_eq "each retry started when due: not before, nor 2.5 s after" \
	"$(q "SELECT string_agg(CASE WHEN gap < interval '1 second' THEN 'early'
								   WHEN gap < interval '3.5 seconds' THEN 'due'
								   ELSE 'late' END, ',' ORDER BY attempt_no) FROM ($retry_gaps) g")" \
	"due,due,due"
verify "$j" due.bin

# --- transient source failures are retried; permanent ones are not
j=$j_reset
check "a connection reset mid-body is retried and succeeds" wait_state "$j" succeeded 60
check_eq "reset: attempt 1 failed as a retryable network error with its curl code" \
	"$(q "SELECT (error_history -> 0 ->> 'class') || ' ' || (error_history -> 0 ->> 'retryable') || ' ' || (error_history -> 0 ? 'curl_code') FROM remora_jobs WHERE job_id = $j")" \
	"network true true"
verify "$j" reset.bin

j=$j_truncated
check "a body shorter than its Content-Length is retried and succeeds" wait_state "$j" succeeded 60
check_eq "truncated: one retryable failure first" \
	"$(q "SELECT attempts_used || ' ' || (error_history -> 0 ->> 'retryable') FROM remora_jobs WHERE job_id = $j")" "2 true"
verify "$j" truncated.bin

j=$j_throttled
check "429 with Retry-After is retried and succeeds" wait_state "$j" succeeded 60
check_eq "429: honoured as retryable with its Retry-After" \
	"$(q "SELECT (error_history -> 0 ->> 'http_status') || ' ' || (error_history -> 0 ->> 'retry_after') FROM remora_jobs WHERE job_id = $j")" "429 1"

j=$j_forbidden
check "403 fails the job at once" wait_state "$j" failed 60
check_eq "403: one attempt, not retryable" \
	"$(q "SELECT attempts_used || ' ' || (last_error ->> 'retryable') FROM remora_jobs WHERE job_id = $j")" "1 false"

j=$j_badsum
check "a SHA-256 mismatch fails the job" wait_state "$j" failed 60
check_eq "checksum: class checksum, one attempt, not retryable, no result" \
	"$(q "SELECT (last_error ->> 'class') || ' ' || attempts_used || ' ' || (last_error ->> 'retryable') || ' ' || (SELECT count(*) FROM remora_result($j)) FROM remora_jobs WHERE job_id = $j")" \
	"checksum 1 false 0"
j=$j_goodsum
check "the right expected_sha256 succeeds" wait_state "$j" succeeded 60

# --- the store says SlowDown: retried, and the retry succeeds
j=$j_slowdown
check "S3 SlowDown is retried and the job succeeds" wait_state "$j" succeeded 60
check_eq "SlowDown: recorded with class s3, its S3 code and status" \
	"$(q "SELECT (error_history -> 0 ->> 'class') || ' ' || (error_history -> 0 ->> 's3_code') || ' ' || (error_history -> 0 ->> 'http_status') || ' ' || (error_history -> 0 ->> 'retryable') FROM remora_jobs WHERE job_id = $j")" \
	"s3 SlowDown 503 true"
verify "$j" slowdown.bin

# --- cancel mid-transfer
j=$(q "SELECT remora_submit('$SRC/slow/cancel.bin')")
check "the slow transfer is under way" wait_for 30 live_at_least "$j" 2000000
q "SELECT remora_cancel($j)" >/dev/null
t0=$(date +%s%N)
check "cancel: the job is cancelled" wait_state "$j" cancelled 10
t1=$(date +%s%N)
check "cancel: the attempt was told within 5 seconds ($(((t1 - t0) / 1000000)) ms)" test $(((t1 - t0) / 1000000)) -lt 5000
check_eq "cancel: no result" "$(q "SELECT count(*) FROM remora_result($j)")" "0"
check "cancel: staging is cleaned up" wait_for 30 all_cleaned "$j"
check_eq "cancel: no object remains under the job's prefix" "$(staging_objects "$j")" "0"

# --- kill -9 of the worker mid-transfer (a background worker's: PostgreSQL
# restarts every backend; a remora-worker's: its lease lapses); a
# replacement attempt with a greater token resumes
j=$(q "SELECT remora_submit('$SRC/slow/crash.bin')")
check "crash: two parts are validated" wait_for 30 validated_at_least "$j" 10000000
kill_worker "$(worker_of "$j")"
check "crash: the job still succeeds" wait_state "$j" succeeded 90
check_eq "crash: a second attempt with a greater token committed" \
	"$(q "SELECT a.attempt_no > 1 AND a.fencing_token > 1 FROM remora.results r JOIN remora.attempts a USING (attempt_id) WHERE r.job_id = $j")" "t"
check_eq "crash: it resumed from the first attempt's checkpoint" \
	"$(q "SELECT a.resumed_from IS NOT NULL AND a.restart_reason IS NULL FROM remora.results r JOIN remora.attempts a USING (attempt_id) WHERE r.job_id = $j")" "t"
check "crash: the resumed download asked for a range (206)" \
	grep -q '"GET /slow/crash.bin HTTP/1.1" 206' "$T/nginx/access.log"
verify "$j" crash.bin

# --- kill -9 once the store holds a part past the checkpoint: the answer
# to part 3 is held, so the attempt never validates it.  RGW refuses to
# complete an upload with fewer parts than it holds: the replacement
# completes it with all of them (ListParts) and copies the first two.
# One connection: the first attempt's GET is the one 200, the
# replacement's the 206s, so nginx's log counts what came after the kill.
rule "$S3_PROXY" "match=data/pastcp.bin?partNumber=3&method=PUT&action=holdanswer&count=1"
j=$(q "SELECT remora_submit('$SRC/slow/pastcp.bin', options => '{\"connections\": 1}')")
check "past the checkpoint: two parts are validated" wait_for 30 validated_at_least "$j" 10000000
uid=$(q "SELECT state ->> 'upload_id' FROM remora.checkpoints WHERE job_id = $j")
ukey=$(q "SELECT state ->> 'upload_key' FROM remora.checkpoints WHERE job_id = $j")
three_parts() { [ "$(aws_s3 s3api list-parts --bucket target --key "$ukey" --upload-id "$uid" --query 'length(Parts)' 2>/dev/null)" = 3 ]; }
part3_sent() { [ "$(hits "$S3_PROXY" "data/pastcp.bin?partNumber=3")" -ge 1 ]; }
if [ "${REMORA_STORE:-s3rver}" = s3rver ]; then	# s3rver has no ListParts
	check "past the checkpoint: part 3 was sent, its answer held" wait_for 120 part3_sent
else
	check "past the checkpoint: the store holds part 3, unanswered" wait_for 120 three_parts
fi
check_eq "past the checkpoint: the checkpoint still has two parts" \
	"$(q "SELECT jsonb_array_length(state -> 'parts') FROM remora.checkpoints WHERE job_id = $j")" "2"
kill_worker "$(worker_of "$j")"
curl -s "http://127.0.0.1:$S3_PROXY/__release" >/dev/null
check "past the checkpoint: the job succeeds" wait_state "$j" succeeded 90
check_eq "past the checkpoint: the replacement resumed, not from zero" \
	"$(q "SELECT a.resumed_from IS NOT NULL AND a.restart_reason IS NULL FROM remora.results r JOIN remora.attempts a USING (attempt_id) WHERE r.job_id = $j")" "t"
after=$(awk '/"GET \/slow\/pastcp.bin HTTP\/1.1" 206 / { n += $10 } END { print n + 0 }' "$T/nginx/access.log")
check_eq "past the checkpoint: one GET from the first byte" \
	"$(grep -c '"GET /slow/pastcp.bin HTTP/1.1" 200 ' "$T/nginx/access.log")" "1"
check "past the checkpoint: after the kill the source sent $after bytes, less than the object's 24000000" \
	test "$after" -gt 0 -a "$after" -lt 24000000
verify "$j" pastcp.bin

# --- SIGSTOP: a zombie finishes after its replacement and is refused
rule "$S3_PROXY" "match=manifest.jsonl&method=PUT&action=hold&count=1"
j=$(q "SELECT remora_submit('$SRC/zombie.bin')")
held() { [ "$(hits "$S3_PROXY" manifest.jsonl)" -ge 1 ]; }
check "zombie: the first attempt's manifest is held" wait_for 30 held
zpid=$(q "SELECT i.pid FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt JOIN remora.incarnations i ON i.incarnation = a.incarnation WHERE j.job_id = $j")
zatt=$(q "SELECT current_attempt FROM remora.jobs WHERE job_id = $j")
kill -STOP "$zpid"
check "zombie: the replacement succeeds while the first attempt is stopped" wait_state "$j" succeeded 40
# the lost attempt's staging is due for the sweep a lease after it was
# lost, which may come before the store has the manifest let go below, or
# before it is seen: its cleanup waits (as after a failed one) until then
q "UPDATE remora.attempts SET clean_after = now() + interval '1 hour' WHERE attempt_id = '$zatt'" >/dev/null
curl -s "http://127.0.0.1:$S3_PROXY/__release" >/dev/null
# resume it once the store has written its manifest: the answer is waiting,
# so the first thing it does is try to commit
zmanifest() { aws_s3 s3 ls "s3://target/remora/$j/$zatt/manifest.jsonl" >/dev/null 2>&1; }
check "zombie: the store accepted its manifest while it was stopped" wait_for 20 zmanifest
q "UPDATE remora.attempts SET clean_after = now() WHERE attempt_id = '$zatt'" >/dev/null
kill -CONT "$zpid"
# it either finds its lease's deadline past and stops before committing
# (the worker's own fence) or commits and is refused (the protocol's)
refused() { worker_logs | grep -qE "attempt $zatt(: commit refused| stopped: its lease could not be renewed in time)"; }
check "zombie: it does not commit late" wait_for 20 refused
check_eq "zombie: exactly one result, from the replacement" \
	"$(q "SELECT count(*) || ' ' || (bool_and(r.attempt_id <> '$zatt'))::text FROM remora.results r WHERE r.job_id = $j")" "1 true"
check_eq "zombie: the first attempt is lost" "$(q "SELECT state FROM remora.attempts WHERE attempt_id = '$zatt'")" "lost"
verify "$j" zombie.bin
check "zombie: its staging is cleaned up" wait_for 30 all_cleaned "$j"

# --- immediate restart of PostgreSQL mid-transfer
j=$(q "SELECT remora_submit('$SRC/slow/restart.bin')")
check "restart: a part is validated" wait_for 30 validated_at_least "$j" 5000000
cluster_stop "$T/pg" immediate
cluster_start "$T/pg"
check "restart: the job completes" wait_state "$j" succeeded 60
verify "$j" restart.bin

# --- SIGTERM mid-transfer (a background worker's by a fast shutdown of
# PostgreSQL; a remora-worker's, its own): the worker hands its attempt
# back at once, and once the host runs again a replacement resumes
j=$(q "SELECT remora_submit('$SRC/slow/sigterm.bin')")
check "sigterm: a part is validated" wait_for 30 validated_at_least "$j" 5000000
sigterm_host "$j"
check_eq "sigterm: the stopped worker reported its attempt, retryable" \
	"$(q "SELECT (error_history -> 0 ->> 'class') || ' ' || (error_history -> 0 ->> 'retryable') FROM remora_jobs WHERE job_id = $j")" \
	"worker true"
check "sigterm: the job completes" wait_state "$j" succeeded 60
check_eq "sigterm: the replacement resumed" \
	"$(q "SELECT a.resumed_from IS NOT NULL AND a.restart_reason IS NULL FROM remora.results r JOIN remora.attempts a USING (attempt_id) WHERE r.job_id = $j")" "t"
verify "$j" sigterm.bin
if host_is_external; then
	# a remora-worker killed with -9 cannot end its incarnation: the open
	# ones are those of the processes running and of those killed
	check_eq "incarnations record their heartbeat and their end" \
		"$(q "SELECT count(*) FILTER (WHERE stopped_at IS NOT NULL) >= 1 AND bool_and(heartbeat_at >= started_at) FROM remora.incarnations")" "t"
	check_eq "the stopped remora-worker ended its incarnation" \
		"$(q "SELECT count(*) FROM remora.incarnations i JOIN remora.attempts a USING (incarnation) WHERE a.job_id = $j AND a.attempt_no = 1 AND i.stopped_at IS NOT NULL")" "1"
else
	check_eq "incarnations record their heartbeat and their end" \
		"$(q "SELECT count(*) FILTER (WHERE stopped_at IS NULL) <= 2 AND bool_and(heartbeat_at >= started_at) FROM remora.incarnations")" "t"
fi

# --- the source changes between attempts (its host down meanwhile):
# restart from zero, new content
j=$(q "SELECT remora_submit('$SRC/slow/change.bin')")
check "change: a part is validated" wait_for 30 validated_at_least "$j" 5000000
crash_host "$j"
make_file change.bin 12000000		# new content, new ETag
recover_host
check "change: the job completes" wait_state "$j" succeeded 60
check_eq "change: the replacement says it restarted from zero" \
	"$(q "SELECT restarted_from_zero AND restart_reason LIKE 'the source changed%' FROM remora_jobs WHERE job_id = $j")" "t"
verify "$j" change.bin

# --- the same through a server that ignores If-Range: the validators of
# its 206 answer are checked all the same, and the attempt starts over
rule "$SRC_PROXY" "match=ignored.bin&action=drop:if-range"
j=$(q "SELECT remora_submit('$FLAKY/slow/ignored.bin')")
check "ignored If-Range: a part is validated" wait_for 30 validated_at_least "$j" 5000000
crash_host "$j"
make_file ignored.bin 12000000
recover_host
check "ignored If-Range: the job completes" wait_state "$j" succeeded 60
check_eq "ignored If-Range: the replacement restarted from zero" \
	"$(q "SELECT restarted_from_zero AND restart_reason LIKE 'the source changed%' FROM remora_jobs WHERE job_id = $j")" "t"
verify "$j" ignored.bin

# --- Swift keeps a multipart upload's parts as segment objects, which an
# upload completed with some of its parts leaves behind unseen by S3
# (doc/stores/swift.tsv): once every ended attempt is cleaned, none is left
# that no open upload or committed object names
if [ "${REMORA_STORE:-s3rver}" = swift ]; then
	every_cleaned() { [ "$(q "SELECT count(*) FROM remora.attempts WHERE cleaned_at IS NULL AND state <> 'running'")" = 0 ]; }
	check "every ended attempt's staging is cleaned" wait_for 120 every_cleaned
	segs=$(swift_orphan_segments target)
	check_eq "no segment is left that no open upload or object names (of $(tail -n 1 <<<"$segs" | cut -d' ' -f2))" \
		"$(sed '$d' <<<"$segs" | grep -c . || true)" 0
	sed '$d' <<<"$segs" | head -20 | sed 's/^/# orphan segment: /'
fi

# --- nothing secret in the log
check_eq "the target secret never appears in the server log (nor a remora-worker's)" \
	"$(worker_logs | grep -c "$S3_SECRET_KEY" || true)" "0"

e2e_finish
