#!/usr/bin/env bash
#
# A store's part limit below S3's 10,000 (Swift's S3 API takes 1,000):
# with remora.max_upload_parts = 3 and remora.part_size = 5MB, a 40 MiB
# object goes in parts of 14 MiB, three of them, whichever way it comes:
# one GET from nginx, ranged GETs (options.connections), a same-store
# s3:// member streamed, a member read through a registered endpoint
# (its size known from the listing), and an export's UploadPartCopy of a
# committed member.  The parts are counted at the fault proxy before the
# store (every UploadPart and UploadPartCopy of the key), and on a store
# whose multipart ETags say their parts ("<md5>-N": RGW, Swift) by the
# ETag too; every object is read back with its SHA-256.  And a part
# number the store refuses fails the attempt at once, naming the
# setting: on Swift started with a limit of 4 (SWIFT_MAX_UPLOAD_PARTS),
# the store's own answer to part 5; elsewhere the same answer from the
# proxy.  With remora.max_upload_parts = 4 the same object goes.  And an
# object whose count of ranges adapts has it bounded at the part size it
# goes in (100 MiB at three parts: 13 connections for parts of 34 MiB).
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin part_limit

[ "${REMORA_STORE:-s3rver}" != swift ] || export SWIFT_MAX_UPLOAD_PARTS=4
stack_up

MIB=1048576
make_file five.bin $((25 * MIB)) # 5 parts of 5 MiB; 4 of 7 MiB
cp "$WWW/five.bin" "$WWW/five4.bin"
make_file big40.bin $((40 * MIB))
make_file rng40.bin $((40 * MIB))
# in three parts of 16 MiB at most (the AWS CLI's 8 MiB would be five,
# more than Swift takes here), so that its ETag is not an MD5 on RGW and
# Swift
printf '[default]\ns3 =\n  multipart_chunksize = 16MB\n' >"$T/aws.conf"
AWS_CONFIG_FILE=$T/aws.conf aws_s3 s3 cp --only-show-errors "$WWW/big40.bin" s3://target/src/cp40.bin

sha() { sha256sum <"$1" | cut -d' ' -f1; }
# counters at the proxy (rules that never fire): part uploads (PUT
# ?partNumber=) of the keys that end in NAME
count_parts() { rule "$S3_PROXY" "match=$1?partNumber=&method=PUT&action=status:500&count=0"; }
parts_sent() { hits "$S3_PROXY" "$1?partNumber="; }
# check_object NAME COUNTED OBJECT N FILE [SENT]: SENT (N) part uploads
# counted as COUNTED since $base, the ETag of OBJECT says N parts where
# a store's ETags say so ("<md5>-N"), and it reads back as FILE
# (SHA-256); one GET for both, of a job's member ("JOB PATH", by
# remora_presign and curl: the AWS CLI takes seconds to start on a busy
# machine) or of a key
check_object() {
	local name=$1 counted=$2 obj=$3 n=$4 file=$5 etag
	if [ "${obj% *}" != "$obj" ]; then
		curl -s -D "$T/got.h" -o "$T/got" "$(q "SELECT remora_presign(${obj% *}, '${obj#* }')")"
		etag=$(sed -n 's/^[Ee][Tt][Aa][Gg]: *\(.*\)\r$/\1/p' "$T/got.h" | sed 's/&quot;/"/g')
	else
		etag=$(aws_s3 s3api get-object --bucket target --key "$obj" "$T/got" --output json 2>/dev/null | jq -r .ETag)
	fi
	check_eq "$name: ${6:-$n} part uploads" "$(($(parts_sent "$counted") - ${base:-0}))" "${6:-$n}"
	if [ "${REMORA_STORE:-s3rver}" != s3rver ]; then
		check_eq "$name: the store's ETag says $n parts" \
			"$(sed -n 's/^"[0-9a-f]*-\([0-9]*\)"$/\1/p' <<<"$etag")" "$n"
	fi
	check_eq "$name: read back with its SHA-256" "$(sha "$T/got")" "$(sha "$file")"
}
set_limit() {
	q "ALTER SYSTEM SET remora.max_upload_parts = $1" >/dev/null
	reload_workers
}

# --- a part number the store refuses: at once, naming the setting
if [ "${REMORA_STORE:-s3rver}" != swift ]; then
	rule "$S3_PROXY" "match=data/five.bin?partNumber=5&method=PUT&action=s3body:partlimit:400&count=1"
fi
j=$(q "SELECT remora_submit('$SRC/five.bin')")
check "limit 10000 on a store of fewer parts: the job fails" wait_state "$j" failed 60
check_eq "at once, class s3, not retryable, naming remora.max_upload_parts" \
	"$(q "SELECT attempts_used || ' ' || (last_error ->> 'class') || ' ' || (last_error ->> 'retryable') || ' '
		|| (last_error ->> 'message' LIKE '%part number 5%remora.max_upload_parts%')
		FROM remora_jobs WHERE job_id = $j")" "1 s3 false true"

check "the workers take remora.max_upload_parts = 4" set_limit 4
count_parts data/five4.bin
j=$(q "SELECT remora_submit('$SRC/five4.bin')")
check "limit 4: the same object goes" wait_state "$j" succeeded 60
check_object "limit 4, 25 MiB" data/five4.bin "$j five4.bin" 4 "$WWW/five.bin"

check "the workers take remora.max_upload_parts = 3" set_limit 3

# --- one GET: the size from Content-Length
count_parts data/big40.bin
big=$(q "SELECT remora_submit('$SRC/big40.bin')")
check "one GET of 40 MiB succeeds" wait_state "$big" succeeded 120
check_object "one GET" data/big40.bin "$big big40.bin" 3 "$WWW/big40.bin"

# --- ranged GETs: the first range's Content-Range says the size, and
# the first range is asked again at the part size that fits
count_parts data/rng40.bin
j=$(q "SELECT remora_submit('$SRC/rng40.bin', options => '{\"connections\": 4}')")
check "ranged GETs of 40 MiB succeed" wait_state "$j" succeeded 120
check_object "ranged" data/rng40.bin "$j rng40.bin" 3 "$WWW/rng40.bin"
check "ranged: it came in ranges (206), at least three" \
	test "$(grep -cE '"GET /rng40.bin [^"]*" 206 ' "$T/nginx/access.log")" -ge 3

# --- a same-store s3:// member: streamed where its ETag is not an MD5
# (RGW and Swift: the AWS CLI uploaded it in parts), else copied inside
# the store in one CopyObject
count_parts data/cp40.bin
j=$(q "SELECT remora_submit('s3://target/src/', prefix => 'same')")
check "a same-store set of a 40 MiB member succeeds" wait_state "$j" succeeded 120
if [ "${REMORA_STORE:-s3rver}" = s3rver ]; then
	check_eq "same store: copied inside the store, no part sent" "$(parts_sent data/cp40.bin)" "0"
	curl -s -o "$T/got" "$(q "SELECT remora_presign($j, 'cp40.bin')")"
	check_eq "same store: read back with its SHA-256" "$(sha "$T/got")" "$(sha "$WWW/big40.bin")"
else
	check_object "same store" data/cp40.bin "$j cp40.bin" 3 "$WWW/big40.bin"
fi

# --- the same member read through a registered endpoint (the same store
# behind the proxy, so that it is streamed on every store): its size
# from the listing
q "SELECT remora.register_source_endpoint('viaproxy', 'http://127.0.0.1:$S3_PROXY', 'us-east-1', true, '$S3_ACCESS_KEY', '$S3_SECRET_KEY')" >/dev/null
base=$(parts_sent data/cp40.bin)
j=$(q "SELECT remora_submit('s3://target/src/', prefix => 'via', options => '{\"endpoint\": \"viaproxy\"}')")
check "a set member of 40 MiB, its size listed, succeeds" wait_state "$j" succeeded 120
check_object "listed size" data/cp40.bin "$j cp40.bin" 3 "$WWW/big40.bin"
base=0

# --- an export of the 40 MiB member above the cutoff: UploadPartCopy
q "ALTER SYSTEM SET remora.export_copy_cutoff = '5MB'" >/dev/null
check "the workers take remora.export_copy_cutoff = 5MB" reload_workers
count_parts stable/pl/big40.bin
ex=$(q "SELECT remora_export($big, 'target', 'stable/pl')")
check "the export of the 40 MiB member succeeds" wait_state "$ex" succeeded 120
# Swift refuses each part copy's condition on a multipart member: each
# part is copied again without it, once HEAD shows the member unchanged
sent=3; [ "${REMORA_STORE:-s3rver}" != swift ] || sent=6
check_object "export" stable/pl/big40.bin stable/pl/big40.bin 3 "$WWW/big40.bin" "$sent"

# --- an adaptive count of ranges (remora.object_connections = 4) is
# bounded at the part size the object goes in: 100 MiB in three parts of
# 34 MiB, so 512 MiB of part buffers hold 13 connections (and two
# buffers for uploads), fewer than the 16 a host takes; taken at the
# 5 MiB of remora.part_size, the bound was 16 buffers of 34 MiB and more
make_file big100.bin $((100 * MIB))
q "ALTER SYSTEM SET remora.object_connections = 4" >/dev/null
check "the workers take remora.object_connections = 4" reload_workers
count_parts data/big100.bin
j=$(q "SELECT remora_submit('$SRC/big100.bin')")
check "an adaptive 100 MiB object succeeds" wait_state "$j" succeeded 180
check_object "adaptive" data/big100.bin "$j big100.bin" 3 "$WWW/big100.bin"
# the workers' log: the server's, or each remora-worker's
began=$(cat "$LOG" "$T"/hw*.log 2>/dev/null | grep -F "remora job $j: ranged connections 0 -> " | grep -o 'the ranges begin.*' | head -1)
check_eq "adaptive: at most 13 connections, for parts of 34 MiB" "$began" \
	"the ranges begin, at most 13 (parts of 34816 kB)"

e2e_finish
