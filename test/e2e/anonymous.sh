#!/usr/bin/env bash
#
# Reach (doc/operator-guide.md, "Source endpoints"), end to end.  A
# public-read bucket is copied through a source endpoint registered without
# credentials, with a logging proxy (test/e2e/s3_anon.py) in front of it to
# show that no request to it was signed or carried the target's key; a private
# bucket through the same kind of endpoint fails at once as AccessDenied (on
# Ceph RGW, which refuses unsigned reads; the test server grants every
# unsigned request).
# Then a store in another region, answering as Amazon S3 does
# (PermanentRedirect with x-amz-bucket-region, AuthorizationHeaderMalformed
# with <Region>), as a source endpoint and as the target: each job fails
# once, not retried, naming the region.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin anonymous

stack_up
ANON_PY=test/e2e/s3_anon.py
LOG_PROXY=$(free_port)
python3 "$ANON_PY" proxy "$LOG_PROXY" "$S3_PORT" "$T/anon.log" >"$T/proxy.out" 2>&1 &
service_pid $!
wait_port "$LOG_PROXY"

# --- a public-read bucket: a few objects, one over the part size, a key
# that needs encoding
SRCDIR=$T/public
mkdir -p "$SRCDIR/sub"
for i in 1 2 3; do head -c $((1000 * i + 7)) /dev/urandom >"$SRCDIR/f$i.bin"; done
head -c 6000000 /dev/urandom >"$SRCDIR/sub/big.bin"
head -c 333 /dev/urandom >"$SRCDIR/sub/a b+c.dat"
aws_s3 s3 mb s3://public >/dev/null
aws_s3 s3 mb s3://private >/dev/null
aws_s3 s3 cp --recursive --quiet "$SRCDIR" s3://public/data/
aws_s3 s3 cp --quiet "$SRCDIR/f1.bin" s3://private/data/f1.bin
cat >"$T/policy.json" <<'JSON'
{"Version": "2012-10-17", "Statement": [{"Sid": "PublicRead",
 "Effect": "Allow", "Principal": {"AWS": ["*"]},
 "Action": ["s3:GetObject", "s3:ListBucket"],
 "Resource": ["arn:aws:s3:::public", "arn:aws:s3:::public/*"]}]}
JSON
# (the test server has no bucket policies: it grants every unsigned request)
[ "${REMORA_STORE:-s3rver}" = rgw ] &&
	aws_s3 s3api put-bucket-policy --bucket public --policy "file://$T/policy.json"
anon_status() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$S3_PORT/$1"; }
check_eq "the public bucket is readable without a signature (list, GET)" \
	"$(anon_status 'public?list-type=2&prefix=data/') $(anon_status public/data/f1.bin)" "200 200"

q "SELECT remora.register_source_endpoint('open', 'http://127.0.0.1:$LOG_PROXY')" >/dev/null
check_eq "the endpoint is registered without credentials" \
	"$(q "SELECT has_credentials FROM remora_source_endpoints WHERE name = 'open'")" "f"

j=$(q "SELECT remora_submit('s3://public/data/', options => '{\"endpoint\": \"open\"}')")
check "public: the job succeeds" wait_state "$j" succeeded 120
check_eq "public: every object is a member, in one attempt" \
	"$(q "SELECT count(*) || ' ' || sum(size) FROM remora_result($j)") $(q "SELECT attempts_used FROM remora.jobs WHERE job_id = $j")" \
	"5 $((1007 + 2007 + 3007 + 6000000 + 333)) 1"
dir=$(q "SELECT regexp_replace(result_manifest_key, 'manifest\.jsonl$', '') FROM remora_jobs WHERE job_id = $j")
mkdir -p "$T/out"
aws_s3 s3 sync --quiet "s3://target/${dir}data/" "$T/out"
check "public: the AWS CLI reads back every member intact" diff -r "$SRCDIR" "$T/out"
check_eq "public: each member's recorded SHA-256 is its content's" \
	"$(q "SELECT string_agg(path || ' ' || sha256, E'\n' ORDER BY path) FROM remora_result($j)")" \
	"$(cd "$SRCDIR" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | while read -r f; do echo "$f $(sha256sum "$f" | cut -d' ' -f1)"; done)"

# what reached the endpoint: listings and GETs, none signed, no key
requests=$(wc -l <"$T/anon.log")
check "public: the endpoint saw the listing and the members' GETs" \
	test "$(grep -c '"target": "/public?' "$T/anon.log")" -ge 1 -a \
	"$(grep -c '"target": "/public/data/' "$T/anon.log")" -ge 5
check_eq "public: none of its $requests requests carried a signature or a credential" \
	"$(python3 - "$T/anon.log" <<'PY'
import json, sys
bad = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    names = {k.lower() for k in r["headers"]}
    if ("authorization" in names or "x-amz-date" in names
            or "x-amz-security-token" in names
            or any(p in r["target"] for p in
                   ("X-Amz-Signature", "X-Amz-Credential", "X-Amz-Algorithm",
                    "Signature=", "AWSAccessKeyId"))):
        bad += 1
print(bad)
PY
)" "0"
check_eq "public: the target's key never went to it" \
	"$(grep -c -- "$S3_ACCESS_KEY" "$T/anon.log")" "0"

# --- a private bucket through an endpoint without credentials
p=$(q "SELECT remora_submit('s3://private/data/', options => '{\"endpoint\": \"open\"}')")
if [ "${REMORA_STORE:-s3rver}" = rgw ]; then
	check "private: the job fails" wait_state "$p" failed 60
	check_eq "private: as AccessDenied, class s3, once, not retried" \
		"$(q "SELECT (last_error ->> 'class') || ' ' || (last_error ->> 's3_code') || ' ' || attempts_used || ' ' || jsonb_array_length(error_history) || ' ' || (error_history -> 0 ->> 'retryable') FROM remora_jobs WHERE job_id = $p")" \
		"s3 AccessDenied 1 1 false"
	check_eq "private: the message says the endpoint has no credentials" \
		"$(q "SELECT last_error ->> 'message' LIKE '%no credentials%public bucket%' FROM remora.jobs WHERE job_id = $p")" "t"
else
	check "private: the test server grants unsigned reads, so the job succeeds" \
		wait_state "$p" succeeded 60
fi

# --- a store in another region, answering as Amazon S3 does
AWS_PORT=$(free_port)
python3 "$ANON_PY" aws "$AWS_PORT" "$T/aws.log" >"$T/aws.out" 2>&1 &
service_pid $!
wait_port "$AWS_PORT"
q "SELECT remora.register_source_endpoint('faraway', 'http://127.0.0.1:$AWS_PORT', 'us-east-1', true, 'AKIDFARAWAY', 'faraway-secret')" >/dev/null

# region_failed NAME JOB CODE: the job failed once, class s3, not retried,
# with the code, and the message names the bucket's region
region_failed() {
	local name=$1 job=$2 code=$3
	check "$name: the job fails" wait_state "$job" failed 60
	check_eq "$name: once, class s3 $code, not retried" \
		"$(q "SELECT (last_error ->> 'class') || ' ' || (last_error ->> 's3_code') || ' ' || attempts_used || ' ' || jsonb_array_length(error_history) || ' ' || (error_history -> 0 ->> 'retryable') FROM remora_jobs WHERE job_id = $job")" \
		"s3 $code 1 1 false"
	check_eq "$name: the message names the region to register" \
		"$(q "SELECT last_error ->> 'message' LIKE '%region eu-west-1%register the endpoint%' FROM remora.jobs WHERE job_id = $job")" "t"
}
r=$(q "SELECT remora_submit('s3://moved-data/x/', options => '{\"endpoint\": \"faraway\"}')")
region_failed "source, PermanentRedirect" "$r" PermanentRedirect
a=$(q "SELECT remora_submit('s3://elsewhere/x/', options => '{\"endpoint\": \"faraway\"}')")
region_failed "source, AuthorizationHeaderMalformed" "$a" AuthorizationHeaderMalformed
check_eq "source: the store was asked once a job, the listing" \
	"$(grep -c '"target": "/moved-data?' "$T/aws.log") $(grep -c '"target": "/elsewhere?' "$T/aws.log")" "1 1"

# --- the same store as the target (restarted to take the setting)
make_file region.bin 1000
q "ALTER SYSTEM SET remora.s3_endpoint = 'http://127.0.0.1:$AWS_PORT'" >/dev/null
cluster_stop "$T/pg" fast
cluster_start "$T/pg" || { not_ok "PostgreSQL starts again"; exit 1; }
t1=$(q "SELECT remora_submit('$SRC/region.bin', 'moved-target')")
region_failed "target, PermanentRedirect" "$t1" PermanentRedirect
t2=$(q "SELECT remora_submit('$SRC/region.bin', 'elsewhere-target')")
region_failed "target, AuthorizationHeaderMalformed" "$t2" AuthorizationHeaderMalformed

e2e_finish
