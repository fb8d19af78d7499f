#!/usr/bin/env bash
#
# Staging that can no longer be committed is cleaned up completely: its
# objects, and its multipart uploads, which no object listing shows.  A
# worker is killed (-9) while the store holds its CompleteMultipartUpload,
# so its upload stays incomplete; the replacement attempt commits; then the
# cleanup of the first attempt must leave nothing under the job's prefix
# but the committed result.  And an upload whose creation the store
# carried out but whose answer was lost is never created twice within an
# attempt (libcurl repeats a request by itself when a reused connection
# dies without an answer): the attempt fails, and its cleanup finds the
# upload.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin staging

stack_up

make_file parts.bin 12000000 # three 5 MB segments, so a multipart upload

# the first CompleteMultipartUpload of a member is held, never released
rule "$S3_PROXY" "match=/data/parts.bin?uploadId=&method=POST&action=hold&count=1"
j=$(q "SELECT remora_submit('$SRC/parts.bin')")
held() { [ "$(hits "$S3_PROXY" "/data/parts.bin?uploadId=")" -ge 1 ]; }
check "the first attempt's completion is held by the store" wait_for 60 held
first=$(q "SELECT current_attempt FROM remora.jobs WHERE job_id = $j")
kill_worker "$(worker_of "$j")"
check "the job succeeds on a replacement attempt" wait_state "$j" succeeded 90
verify "$j" parts.bin
check_eq "the committed attempt is not the killed one" \
	"$(q "SELECT attempt_id <> '$first' FROM remora.results WHERE job_id = $j")" "t"

first_cleaned() { [ -n "$(q "SELECT cleaned_at FROM remora.attempts WHERE attempt_id = '$first'")" ]; }
check "the killed attempt's staging is cleaned" wait_for 60 first_cleaned
check_eq "no object of the killed attempt remains" \
	"$(aws_s3 s3 ls --recursive "s3://target/remora/$j/$first/" 2>/dev/null | wc -l)" "0"
check_eq "only the member and the manifest remain under the job's prefix" \
	"$(staging_objects "$j")" "2"
uploads=$(aws_s3 s3api list-multipart-uploads --bucket target --prefix "remora/$j/" \
	--query 'length(Uploads || `[]`)' --output text 2>&1)
if store_lists_uploads; then
	check_eq "no multipart upload remains under the job's prefix" "$uploads" "0"
else
	# the test server has no ListMultipartUploads: the cleanup must still
	# finish (above), taking "not implemented" as nothing to list
	check "the test server lacks ListMultipartUploads, and the cleanup finished anyway" \
		grep -q NotImplemented <<<"$uploads"
fi

# --- CreateMultipartUpload carried out by the store, its answer lost (the
# proxy forwards it, then drops the connection before a byte of the answer)
make_file lost.bin 12000000
rule "$S3_PROXY" "match=/data/lost.bin?uploads&method=POST&action=reset&after=0&count=1"
k=$(q "SELECT remora_submit('$SRC/lost.bin')")
check "a lost CreateMultipartUpload answer: the job succeeds" wait_state "$k" succeeded 90
verify "$k" lost.bin
check_eq "the upload was created once an attempt: the first attempt failed, not sent again by libcurl" \
	"$(q "SELECT attempts_used FROM remora.jobs WHERE job_id = $k")/$(hits "$S3_PROXY" "/data/lost.bin?uploads")" "2/2"
k_cleaned() { all_cleaned "$k"; }
check "every attempt's staging is cleaned" wait_for 60 k_cleaned
if store_lists_uploads; then
	check_eq "no multipart upload remains under the job's prefix" \
		"$(aws_s3 s3api list-multipart-uploads --bucket target --prefix "remora/$k/" \
			--query 'length(Uploads || `[]`)' --output text 2>&1)" "0"
fi

e2e_finish
