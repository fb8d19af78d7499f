#!/usr/bin/env bash
#
# The test harness's target store itself (REMORA_STORE: s3rver by default,
# or rgw), before any test relies on it: it starts, on 127.0.0.1 only; the
# AWS CLI from Debian writes and reads back an object (one PUT, and a
# multipart upload) with the store's key and with the second key tests
# may ask for (REMORAKEY); a request signed with a wrong secret is refused
# with 403 (read with curl from a presigned URL: the AWS CLI 2.9 crashes on
# RGW's error answers); If-None-Match: * is ignored by CopyObject (and on
# a PUT honoured by RGW only); an upload cut short replaces nothing; and
# stopping it leaves no process behind.
# A broken harness is then a failing test, not a silently different one.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin store

STORE=${REMORA_STORE:-s3rver}
export REMORA_TEST_SECRET="store-test-secret-$RANDOM$RANDOM"
S3_PORT=$(free_port)

t0=$(date +%s%N)
if ! start_store "$T/store" "$S3_PORT" target other; then
	not_ok "the target store ($STORE) starts"
	exit 1
fi
ok "the target store ($STORE) starts, in $((($(date +%s%N) - t0) / 1000000)) ms"
cp "$T/pids" "$T/started"

# every listening socket of the store's processes is on 127.0.0.1
listening() {
	local pid
	while read -r pid _; do
		ss -Hltnp | grep -F "pid=$pid," | awk '{print $4}'
	done <"$T/started"
}
check_eq "it listens on 127.0.0.1 only" \
	"$(listening | grep -vc '^127\.0\.0\.1:' || true) $(listening | grep -c "^127\.0\.0\.1:$S3_PORT\$")" "0 1"

head -c 300000 /dev/urandom >"$T/small.bin"
head -c 20000000 /dev/urandom >"$T/large.bin"	# the CLI's default: 3 parts of 8 MiB
check "the AWS CLI writes an object" aws_s3 s3 cp --quiet "$T/small.bin" s3://target/a/small.bin
check "and reads it back intact" cmp "$T/small.bin" <(aws_s3 s3 cp s3://target/a/small.bin - 2>/dev/null)
check "a multipart upload by the AWS CLI succeeds" aws_s3 s3 cp --quiet "$T/large.bin" s3://target/a/large.bin
check "and reads back intact" cmp "$T/large.bin" <(aws_s3 s3 cp s3://target/a/large.bin - 2>/dev/null)
check_eq "a listing shows both, with their sizes" \
	"$(aws_s3 s3 ls --recursive s3://target/a/ | awk '{print $3, $4}' | sort | paste -sd,)" \
	"20000000 a/large.bin,300000 a/small.bin"
check "every bucket asked for exists" aws_s3 s3api head-bucket --bucket other

check_eq "a presigned URL reads the object" "$(s3_status s3://target/a/small.bin)" "200"
check_eq "a request signed with a wrong secret is refused with 403" \
	"$(S3_SECRET_KEY=wrong-secret s3_status s3://target/a/small.bin)" "403"
check_eq "an unknown access key is refused with 403" \
	"$(S3_ACCESS_KEY=NOSUCHKEY s3_status s3://target/a/small.bin)" "403"
check_eq "a missing object is 404" "$(s3_status s3://target/a/missing.bin)" "404"
check "the second key (REMORAKEY) writes and reads" \
	cmp "$T/small.bin" <(S3_ACCESS_KEY=REMORAKEY S3_SECRET_KEY=$REMORA_TEST_SECRET aws_s3 s3 cp s3://target/a/small.bin - 2>/dev/null)

# If-None-Match: * (write only if the key does not exist), observed on
# each store, for src/engine/export.c: neither honours it on CopyObject (the
# copy overwrites the key), so an export with if_exists = fail rests on its
# HEAD before the copy.  Should a store start answering 412 here, the
# engine can send the header and the race between HEAD and copy closes.
s3req() { /usr/bin/python3 test/lib/s3req.py "http://127.0.0.1:$S3_PORT" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" "$@"; }
echo "new content" >"$T/new.txt"
aws_s3 s3 cp --quiet "$T/new.txt" s3://target/inm/src.txt
aws_s3 s3 cp --quiet "$T/small.bin" s3://target/inm/copied.bin
got=$(s3req PUT /target/inm/copied.bin - "x-amz-copy-source:/target/inm/src.txt" "If-None-Match:*")
check_eq "CopyObject with If-None-Match: * onto an existing key: 200, ignored" "${got%% *}" "200"
check_eq "and the key is overwritten" "$(aws_s3 s3 cp s3://target/inm/copied.bin - 2>/dev/null)" "new content"
check_eq "CopyObject with If-None-Match: * onto a missing key: 200" \
	"$(s3req PUT /target/inm/fresh.bin - "x-amz-copy-source:/target/inm/src.txt" "If-None-Match:*" | cut -d' ' -f1)" "200"
aws_s3 s3 cp --quiet "$T/small.bin" s3://target/inm/put.bin
got=$(s3req PUT /target/inm/put.bin "$T/new.txt" "If-None-Match:*")
if [ "$STORE" = rgw ]; then
	check_eq "a PUT with If-None-Match: * onto an existing key: 412 (RGW honours it there)" "${got%% *}" "412"
	check "and the key keeps its content" cmp "$T/small.bin" <(aws_s3 s3 cp s3://target/inm/put.bin - 2>/dev/null)
else
	check_eq "a PUT with If-None-Match: * onto an existing key: 200 (s3rver ignores it there too)" "${got%% *}" "200"
	check_eq "and the key is overwritten" "$(aws_s3 s3 cp s3://target/inm/put.bin - 2>/dev/null)" "new content"
fi

# An upload cut short never becomes the object at its key, as on S3, and
# the object it would have replaced stays whole.  The test server wrote an
# object's file in place: an upload cut short (the fault proxy's
# cutrequest, or one it acted on after libcurl had sent the request again
# whole on a fresh connection) left the key with other bytes under the
# complete object's ETag, which a copy then carried on (test/s3/server.js).
head -c 300000 /dev/urandom >"$T/other.bin"
aws_s3 s3 cp --quiet "$T/small.bin" s3://target/cut/a.bin
S3REQ_CUT=150000 s3req PUT /target/cut/a.bin "$T/other.bin" >/dev/null
check "an upload cut short leaves the object at its key whole" \
	cmp "$T/small.bin" <(aws_s3 s3 cp s3://target/cut/a.bin - 2>/dev/null)
check_eq "with its length and ETag" \
	"$(aws_s3 s3api head-object --bucket target --key cut/a.bin --query '[ContentLength, ETag]' --output text | tr -d '"')" \
	"$(printf '300000\t%s' "$(md5sum <"$T/small.bin" | cut -d' ' -f1)")"
S3REQ_CUT=150000 s3req PUT /target/cut/new.bin "$T/other.bin" >/dev/null
check_eq "an upload of a new key cut short leaves no object" "$(s3_status s3://target/cut/new.bin)" "404"
check_eq "and a listing shows only the whole object" \
	"$(aws_s3 s3 ls --recursive s3://target/cut/ | awk '{print $3, $4}' | paste -sd,)" "300000 cut/a.bin"

# stopped, nothing of it is left running
pids=$(cut -d' ' -f1 "$T/started" | paste -sd' ')
stop_services
gone() {
	local p
	for p in $pids; do
		[ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat")" != Z ] && return 1
	done
	return 0
}
check "stopped, none of its processes ($pids) is left" wait_for 10 gone

e2e_finish
