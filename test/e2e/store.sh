#!/usr/bin/env bash
#
# The test harness's target store itself (REMORA_STORE: s3rver by default,
# rgw or swift), before any test relies on it: it starts, on 127.0.0.1
# only; the AWS CLI from Debian writes and reads back an object (one PUT,
# and a multipart upload) with the store's key and with the second key
# tests may ask for (S3_SECOND_KEY); a request signed with a wrong secret
# is refused with 403 (read with curl from a presigned URL: the AWS CLI 2.9
# crashes on RGW's error answers); every S3 behaviour Remora relies on is
# observed and compared with the recorded observations the operator
# guide's store table is made from; an upload cut short replaces
# nothing; and stopping it leaves no process behind.  A broken harness is then a failing test, not a silently
# different one.
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
check "the second key ($S3_SECOND_KEY) writes and reads" \
	cmp "$T/small.bin" <(S3_ACCESS_KEY=$S3_SECOND_KEY S3_SECRET_KEY=$REMORA_TEST_SECRET aws_s3 s3 cp s3://target/a/small.bin - 2>/dev/null)

# Each S3 behaviour Remora relies on, observed by requests made to the
# store (test/lib/store_probe.py: multipart ETags, copy-source conditions
# on plain and multipart sources, conditional writes, upload listings,
# ListParts and UploadPart once completed, a completion with a subset of
# the parts, checksums, the part limit, ETag spelling).  Each is a TAP line
# and a line of $OBS (REMORA_STORE_TABLE, or /tmp/remora-store-STORE.tsv);
# doc/stores/STORE.tsv holds the last recorded ones, from which
# test/lib/store_table.py renders doc/operator-guide.md's table (and
# test/run's static stage checks that the guide says what they say).  A
# store that answers otherwise than recorded fails here.
OBS=${REMORA_STORE_TABLE:-/tmp/remora-store-$STORE.tsv}
observe() {	# observe KEY VALUE
	ok "observed: $1: $2"
	printf '%s\t%s\n' "$1" "$2" >>"$OBS.new"
}
: >"$OBS.new"
if /usr/bin/python3 test/lib/store_probe.py "http://127.0.0.1:$S3_PORT" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" \
	target >"$T/probe.out" 2>"$T/probe.err"; then
	ok "every behaviour is observed"
else
	not_ok "every behaviour is observed: $(tail -n 1 "$T/probe.err")"
fi
while IFS=$'\t' read -r key value; do observe "$key" "$value"; done <"$T/probe.out"

# What is left of the parts a completion left out, once the object is
# deleted and the upload aborted: Swift keeps a multipart upload's parts as
# segments in the container BUCKET+segments, which its own API lists (S3's
# listings do not show them); a store that refuses the completion keeps
# nothing to look for; elsewhere S3 gives no way to see them.
swift_segments() {	# swift_segments PREFIX: the segments' names
	local token
	token=$(curl -s -D - -o /dev/null -H "X-Auth-User: $S3_ACCESS_KEY" -H "X-Auth-Key: $S3_SECRET_KEY" \
		"http://127.0.0.1:$S3_PORT/auth/v1.0" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-auth-token" {print $2}')
	curl -sf -H "X-Auth-Token: $token" \
		"http://127.0.0.1:$S3_PORT/v1/AUTH_${S3_ACCESS_KEY%%:*}/target+segments?prefix=$1"
}
subset=$(awk -F'\t' '$1 == "complete_subset" {print $2}' "$T/probe.out")
if [ "$STORE" = swift ]; then
	n=$(swift_segments probe/subset.bin/ | grep -c . || true)
	if [ "$n" -gt 0 ]; then
		observe subset_orphans "**kept as orphan segments** (seen through Swift's API)"
	else
		observe subset_orphans "none kept (Swift's API lists no segment)"
	fi
elif [[ $subset == *refused* ]]; then
	observe subset_orphans "(no completion)"
else
	observe subset_orphans "not visible through S3"
fi
mv "$OBS.new" "$OBS"
if [ -f "doc/stores/$STORE.tsv" ]; then
	check "the observations are those doc/stores/$STORE.tsv records (if the store changed: cp $OBS doc/stores/$STORE.tsv; python3 test/lib/store_table.py)" \
		diff -u "doc/stores/$STORE.tsv" "$OBS"
fi
echo "# observations in $OBS"

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
