#!/usr/bin/env bash
#
# A committed member stays what its manifest says when the store acts
# late on an upload of its key that the worker gave up on.  A set's
# member is sent to one key of its attempt as often as it is tried (and
# libcurl sends a PUT again by itself, at once, when a reused connection
# closes before the answer); a try the worker gave up on may still reach
# the store, cut short, after the member was committed.  On S3 an upload
# cut short never becomes the object.  The test server wrote objects in
# place, so it truncated the committed member under the member's own
# ETag: the chaos run's seed 4 on s3rver failed twice that way (a member
# that no longer hashed to its manifest, an export's key found with "other
# content").  Here: the member's first PUT is held by the proxy past
# remora.stall_timeout, the attempt sends it again and commits, then the
# held PUT reaches the store with half its body.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin late_upload

stack_up

n=$(grep -c "new settings in effect" "$LOG" || true)
q "ALTER SYSTEM SET remora.stall_timeout = '2s'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
applied() { [ "$(grep -c "new settings in effect" "$LOG" || true)" -ge $((n + 2)) ]; }
check "the workers take remora.stall_timeout = 2s" wait_for 30 applied

mkdir -p "$T/src/late"
head -c 200000 /dev/urandom >"$T/src/late/m.bin"
aws_s3 s3 cp --quiet "$T/src/late/m.bin" s3://target/src/late/m.bin
want=$(sha256sum <"$T/src/late/m.bin" | cut -d' ' -f1)

rule "$S3_PROXY" "match=/data/m.bin&method=PUT&action=holdcut&after=100000&count=1"
j=$(q "SELECT remora_submit('s3://target/src/late/')")
held() { [ "$(hits "$S3_PROXY" /data/m.bin)" -ge 1 ]; }
check "the member's first PUT is held" wait_for 60 held
check "the job succeeds" wait_state "$j" succeeded 60
check_eq "in one attempt, which sent the member again" \
	"$(q "SELECT attempts_used FROM remora.jobs WHERE job_id = $j")/$(hits "$S3_PROXY" /data/m.bin)" "1/2"
key=$(q "SELECT m.key FROM remora.results r JOIN remora.members m USING (attempt_id) WHERE r.job_id = $j")
check_eq "the committed member has the source's SHA-256" \
	"$(aws_s3 s3 cp "s3://target/$key" - 2>/dev/null | sha256sum | cut -d' ' -f1)" "$want"

# the held PUT reaches the store now, with 100,000 of its 200,000 bytes;
# the store is given 10 s to act on it (a truncated member would show
# sooner)
curl -s "http://127.0.0.1:$S3_PROXY/__release" >/dev/null
length() { aws_s3 s3api head-object --bucket target --key "$key" --query ContentLength --output text 2>/dev/null; }
cut_short() { [ "$(length)" != 200000 ]; }
wait_for 10 cut_short || true
check_eq "after the late upload cut short, the committed member is still whole" \
	"$(aws_s3 s3 cp "s3://target/$key" - 2>/dev/null | sha256sum | cut -d' ' -f1) $(length)" "$want 200000"
check_eq "and its store's ETag is the one committed" \
	"$(aws_s3 s3api head-object --bucket target --key "$key" --query ETag --output text | tr -d '"')" \
	"$(q "SELECT trim(both '\"' from m.etag) FROM remora.results r JOIN remora.members m USING (attempt_id) WHERE r.job_id = $j")"

e2e_finish
