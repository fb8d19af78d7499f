#!/usr/bin/env bash
#
# Export to stable keys, end to end: a real worker exports a committed
# result of three members to <prefix>/<path> and the AWS CLI reads each
# back with its SHA-256, and one of 1,095 members; if_exists fail, skip_identical and overwrite do
# what they say (requests counted at the fault proxy); a copy that the
# store made but whose answer is cut short leaves the export
# outcome_unknown and not retried, and a verify concludes succeeded; a
# copy whose answer the proxy holds past remora.stall_timeout leaves it
# outcome_unknown too, the copy sent exactly once and never again; a copy
# refused with a 500 the store never saw leaves it outcome_unknown, a
# verify says which member is missing, and an administrator's retry
# publishes it; kill -9 of the worker mid-dispatch leaves it
# outcome_unknown and unretried; a member above remora.export_copy_cutoff
# (5MB here) is copied as a multipart upload of UploadPartCopy ranges,
# read back byte-identical with no upload left open, and a part refused
# aborts its upload and is published by the next attempt; a hard delete
# of the job leaves the exported keys; an export overwrites only keys its
# owner published (another role's: 42501; another writer's: failed naming
# the key), an administrator's any.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin export
stack_up

sum_key() { aws_s3 s3 cp "s3://target/$1" - 2>/dev/null | sha256sum | cut -d' ' -f1; }
sum_file() { sha256sum "$1" | cut -d' ' -f1; }
copies() { hits "$S3_PROXY" "$1"; }	# PUTs whose "METHOD path" contains $1

# three members under s3://target/src/, one in a subdirectory
mkdir -p "$T/src/sub"
head -c 300000 /dev/urandom >"$T/src/a.bin"
head -c 1000 /dev/urandom >"$T/src/b.bin"
head -c 70000 /dev/urandom >"$T/src/sub/c.bin"
for f in a.bin b.bin sub/c.bin; do
	aws_s3 s3 cp --quiet "$T/src/$f" "s3://target/src/$f"
done
job=$(q "SELECT remora_submit('s3://target/src/')")
check "a job of three members succeeds" wait_state "$job" succeeded 60

# counters at the proxy: one rule that never fires, per target prefix
for p in stable/llama stable/amb stable/amb2; do
	rule "$S3_PROXY" "match=PUT%20/target/$p/&method=PUT&action=status:500&count=0"
done

# --- the happy path
ex=$(q "SELECT remora_export($job, 'target', 'stable/llama', '{}', 'llama-v1')")
check "the export succeeds" wait_state "$ex" succeeded 60
for f in a.bin b.bin sub/c.bin; do
	check_eq "the AWS CLI reads stable/llama/$f with its SHA-256" \
		"$(sum_key "stable/llama/$f")" "$(sum_file "$T/src/$f")"
done
check_eq "remora_exports: every member answered, with its reference" \
	"$(q "SELECT members_done, members, jsonb_array_length(\"references\"),
			     output_digest = (SELECT result_manifest_sha256 FROM remora_jobs WHERE job_id = $job)
		    FROM remora_exports WHERE export_id = $ex")" "3|3|3|t"
check_eq "each reference is the key and the member's ETag" \
	"$(q "SELECT count(*) FROM remora_exports e, jsonb_array_elements(e.\"references\") r,
			     remora_result($job) m
		   WHERE e.export_id = $ex AND r ->> 'path' = m.path
		     AND r ->> 'key' = 'stable/llama/' || m.path AND r ->> 'etag' = m.etag")" "3"
check_eq "three copies were sent" "$(copies PUT%20/target/stable/llama/)" "3"
check_eq "the idempotency key returns the same export after it succeeded" \
	"$(q "SELECT remora_export($job, 'target', 'stable/llama', '{}', 'llama-v1')")" "$ex"
check_eq "the export is not a job in remora_jobs" \
	"$(q "SELECT count(*) FROM remora_jobs WHERE job_id = $ex")" "0"

# --- if_exists: one key now holds other content
head -c 5000 /dev/urandom >"$T/other.bin"
aws_s3 s3 cp --quiet "$T/other.bin" s3://target/stable/llama/b.bin
ex=$(q "SELECT remora_export($job, 'target', 'stable/llama')")
check "if_exists = fail: the export fails" wait_state "$ex" failed 60
check_eq "with class exists, naming the key, and copies nothing" \
	"$(q "SELECT last_error ->> 'class', last_error ->> 'message' LIKE '%stable/llama/b.bin%' FROM remora_exports WHERE export_id = $ex")|$(copies PUT%20/target/stable/llama/)" \
	"exists|t|3"
check_eq "the key keeps its other content" "$(sum_key stable/llama/b.bin)" "$(sum_file "$T/other.bin")"

ex=$(q "SELECT remora_export($job, 'target', 'stable/llama', '{\"if_exists\": \"skip_identical\"}')")
check "if_exists = skip_identical: the export succeeds" wait_state "$ex" succeeded 60
check_eq "only the differing key was copied" "$(copies PUT%20/target/stable/llama/)" "4"
check_eq "and holds the member again" "$(sum_key stable/llama/b.bin)" "$(sum_file "$T/src/b.bin")"
check_eq "the identical ones are recorded as present" \
	"$(q "SELECT string_agg(r ->> 'outcome', ',' ORDER BY r ->> 'path') FROM remora_exports e, jsonb_array_elements(e.\"references\") r WHERE e.export_id = $ex")" \
	"present,copied,present"

ex=$(q "SELECT remora_export($job, 'target', 'stable/llama', '{\"if_exists\": \"overwrite\"}')")
check "if_exists = overwrite: the export succeeds" wait_state "$ex" succeeded 60
check_eq "and copies every member" "$(copies PUT%20/target/stable/llama/)" "7"

# --- a copy made by the store whose answer is cut: outcome unknown
rule "$S3_PROXY" "match=PUT%20/target/stable/amb/a.bin&method=PUT&action=truncate&after=1&count=1"
ex=$(q "SELECT remora_export($job, 'target', 'stable/amb')")
check "a copy without a conclusive answer: outcome_unknown" wait_state "$ex" outcome_unknown 60
check_eq "its error says so" \
	"$(q "SELECT last_error ->> 'class', last_error ->> 'retryable' FROM remora_exports WHERE export_id = $ex")" \
	"outcome_unknown|false"
q "SELECT remora.reconcile()" >/dev/null
check_eq "nothing retries it: one attempt, not queued, a.bin sent once" \
	"$(q "SELECT attempts_used, state, (SELECT count(*) FROM remora.queue WHERE job_id = $ex) FROM remora_exports WHERE export_id = $ex")|$(copies PUT%20/target/stable/amb/a.bin)" \
	"1|outcome_unknown|0|1"
check_eq "verify is the owner's to ask" "$(q "SELECT remora_export_resolve($ex, 'verify')")" "queued"
check "verify finds every member there: succeeded" wait_state "$ex" succeeded 60
check_eq "verify copied nothing" "$(copies PUT%20/target/stable/amb/)" "3"
check_eq "the decision is recorded" \
	"$(q "SELECT decisions -> 0 ->> 'action', decisions -> 0 ->> 'by' FROM remora_exports WHERE export_id = $ex")" \
	"verify|postgres"

# --- a copy the store never saw, answered 500: outcome unknown, verify
# names the missing member, an administrator retries
rule "$S3_PROXY" "match=PUT%20/target/stable/amb2/b.bin&method=PUT&action=status:500&count=1"
ex=$(q "SELECT remora_export($job, 'target', 'stable/amb2')")
check "a copy answered 500: outcome_unknown" wait_state "$ex" outcome_unknown 60
q "SELECT remora_export_resolve($ex, 'verify')" >/dev/null
verified_twice() { [ "$(q "SELECT attempts_used || state FROM remora_exports WHERE export_id = $ex")" = 2outcome_unknown ]; }
check "verify leaves it outcome_unknown" wait_for 60 verified_twice
check_eq "and names the missing member" \
	"$(q "SELECT last_error ->> 'class', last_error ->> 'message' LIKE '%stable/amb2/b.bin (missing)%' FROM remora_exports WHERE export_id = $ex")" \
	"verify_mismatch|t"
check_eq "an administrator retries" "$(q "SELECT remora_export_resolve($ex, 'retry')")" "queued"
check "the retry publishes it" wait_state "$ex" succeeded 60
check_eq "stable/amb2/b.bin has the member's SHA-256" \
	"$(sum_key stable/amb2/b.bin)" "$(sum_file "$T/src/b.bin")"
check_eq "the retry's token is greater than the verify's" \
	"$(q "SELECT max(fencing_token) FILTER (WHERE state = 'succeeded') > max(fencing_token) FILTER (WHERE state <> 'succeeded') FROM remora_export_attempts WHERE export_id = $ex")" "t"

# --- the store makes a copy, and its answer is held past
# remora.stall_timeout (2s here): outcome_unknown, the copy sent once, and
# nothing sends it again
q "ALTER SYSTEM SET remora.stall_timeout = '2s'" >/dev/null
check "the workers take remora.stall_timeout = 2s" reload_workers
rule "$S3_PROXY" "match=PUT%20/target/stable/late/a.bin&method=PUT&action=holdanswer&count=1"
t0=$(date +%s)
ex=$(q "SELECT remora_export($job, 'target', 'stable/late')")
check "a copy whose answer is held past the stall timeout: outcome_unknown" \
	wait_state "$ex" outcome_unknown 60
check_eq "its error says so, naming the key" \
	"$(q "SELECT last_error ->> 'class', last_error ->> 'retryable', last_error ->> 'message' LIKE '%stable/late/a.bin%' FROM remora_exports WHERE export_id = $ex")" \
	"outcome_unknown|false|t"
echo "# outcome_unknown $(($(date +%s) - t0)) s after the export was created"
q "SELECT remora.reconcile()" >/dev/null
check_eq "nothing retries it: one attempt, not queued, exactly one copy of a.bin sent" \
	"$(q "SELECT attempts_used, state, (SELECT count(*) FROM remora.queue WHERE job_id = $ex) FROM remora_exports WHERE export_id = $ex")|$(copies PUT%20/target/stable/late/a.bin)" \
	"1|outcome_unknown|0|1"
check_eq "the other members were answered (checkpointed as copied)" \
	"$(q "SELECT string_agg(r ->> 'path' || ':' || (r ->> 'outcome'), ',' ORDER BY r ->> 'path') FROM remora_exports e, jsonb_array_elements(e.\"references\") r WHERE e.export_id = $ex")" \
	"b.bin:copied,sub/c.bin:copied"
check_eq "the store made the copy nobody was told of" \
	"$(sum_key stable/late/a.bin)" "$(sum_file "$T/src/a.bin")"
curl -s "http://127.0.0.1:$S3_PROXY/__release" >/dev/null
q "ALTER SYSTEM SET remora.stall_timeout = '60s'" >/dev/null
check "the workers take remora.stall_timeout = 60s again" reload_workers
check_eq "still one copy of a.bin, one attempt, outcome_unknown" \
	"$(copies PUT%20/target/stable/late/a.bin)|$(q "SELECT attempts_used || state FROM remora_exports WHERE export_id = $ex")" \
	"1|1outcome_unknown"

# --- a result of 1,095 members, exported whole
# (printf is the shell's own: no process for each of the 1,095 files)
mkdir -p "$T"/big/d{0..9}
for i in $(seq 1 1095); do
	printf 'member %d of 1095\n' "$i" >"$T/big/d$((i % 10))/f$i.txt"
done
aws_s3 s3 cp --quiet --recursive "$T/big" s3://target/big/
big=$(q "SELECT remora_submit('s3://target/big/')")
check "a job of 1,095 members succeeds" wait_state "$big" succeeded 300
ex=$(q "SELECT remora_export($big, 'target', 'stable/big')")
check "its export succeeds" wait_state "$ex" succeeded 300
check_eq "every member answered" \
	"$(q "SELECT members, members_done, jsonb_array_length(\"references\") FROM remora_exports WHERE export_id = $ex")" \
	"1095|1095|1095"
check_eq "the AWS CLI lists 1,095 objects under the stable prefix" \
	"$(aws_s3 s3 ls --recursive s3://target/stable/big/ | wc -l)" "1095"
check_eq "and reads one back intact" "$(sum_key stable/big/d7/f1077.txt)" "$(sum_file "$T/big/d7/f1077.txt")"

# --- kill -9 of the worker while a copy is in flight: the attempt is
# lost, and a lost export attempt is outcome_unknown (the database cannot
# know whether a copy went out), never retried
rule "$S3_PROXY" "match=PUT%20/target/stable/kill/&method=PUT&action=hold&count=1"
ex=$(q "SELECT remora_export($job, 'target', 'stable/kill', '{\"if_exists\": \"overwrite\"}')")
held_copy() { [ "$(hits "$S3_PROXY" PUT%20/target/stable/kill/)" -ge 1 ]; }
check "kill: a copy is held at the proxy" wait_for 30 held_copy
pid=$(q "SELECT i.pid FROM remora.jobs j JOIN remora.attempts a ON a.attempt_id = j.current_attempt
		 JOIN remora.incarnations i ON i.incarnation = a.incarnation WHERE j.job_id = $ex")
kill_worker "$pid"
check "kill -9 mid-dispatch: outcome_unknown" wait_state "$ex" outcome_unknown 60
q "SELECT remora.reconcile()" >/dev/null
check_eq "the attempt is lost, and no other was made" \
	"$(q "SELECT count(*), min(state) FROM remora_export_attempts WHERE export_id = $ex")" "1|lost"
check_eq "after a crash the idempotency key still returns its export" \
	"$(q "SELECT remora_export($job, 'target', 'stable/llama', '{}', 'llama-v1')")" "$(q "SELECT min(export_id) FROM remora_exports WHERE idempotency_key = 'llama-v1'")"
curl -s "http://127.0.0.1:$S3_PROXY/__reset" >/dev/null

# --- a member above remora.export_copy_cutoff: a multipart copy of
# UploadPartCopy ranges (parts of remora.part_size), byte-identical, with
# no upload left open; a part refused: the upload is aborted, the attempt
# fails conclusively and the next one publishes
head -c $((12 * 1024 * 1024)) /dev/urandom >"$T/big12.bin"
aws_s3 s3 cp --quiet "$T/big12.bin" s3://target/srcbig/big12.bin
bigjob=$(q "SELECT remora_submit('s3://target/srcbig/')")
check "a job of one 12 MiB member succeeds" wait_state "$bigjob" succeeded 120
q "ALTER SYSTEM SET remora.export_copy_cutoff = '5MB'" >/dev/null
q "ALTER SYSTEM SET remora.part_size = '5MB'" >/dev/null
check "the workers take remora.export_copy_cutoff = 5MB" reload_workers
for m in 'stable/mpu/big12.bin?uploads' 'stable/mpu/big12.bin?partNumber=' 'stable/mpu/big12.bin?uploadId=' \
	'stable/mpu2/big12.bin?uploads' 'stable/mpu2/big12.bin?partNumber=' 'stable/mpu2/big12.bin?uploadId=' \
	'DELETE%20/target/stable/mpu2/big12.bin?uploadId='; do
	rule "$S3_PROXY" "match=$m&action=status:500&count=0"
done
open_uploads() {	# multipart uploads open under the target bucket's stable/ keys
	if store_lists_uploads; then
		# (the AWS CLI prints nothing at all for a listing without uploads)
		aws_s3 s3api list-multipart-uploads --bucket target --prefix stable/ --output json \
			>"$T/uploads.json" || { echo "the listing failed"; return; }
		jq -s '.[0].Uploads // [] | length' "$T/uploads.json"
	else
		# s3rver has no ListMultipartUploads: its folder of open uploads
		find "$T/store/target" -path '*uploads*' -name key -exec grep -l '^stable/' {} + 2>/dev/null | wc -l
	fi
}
if store_lists_uploads; then
	# the listing sees an upload when there is one
	up=$(aws_s3 s3api create-multipart-upload --bucket target --key stable/control.bin --output json | jq -r .UploadId)
	check_eq "an upload opened by the AWS CLI is listed" "$(open_uploads)" "1"
	aws_s3 s3api abort-multipart-upload --bucket target --key stable/control.bin --upload-id "$up"
	check_eq "and is gone once aborted" "$(open_uploads)" "0"
fi
ex=$(q "SELECT remora_export($bigjob, 'target', 'stable/mpu')")
check "the export of a member above the cutoff succeeds" wait_state "$ex" succeeded 120
# Swift refuses each part copy's condition on a multipart member: each
# part is copied again without it, once HEAD shows the member unchanged
copies=3; [ "${REMORA_STORE:-s3rver}" = swift ] && copies=6
check_eq "it was a multipart upload of three UploadPartCopy parts, completed" \
	"$(hits "$S3_PROXY" 'stable/mpu/big12.bin?uploads') $(hits "$S3_PROXY" 'stable/mpu/big12.bin?partNumber=') $(hits "$S3_PROXY" 'stable/mpu/big12.bin?uploadId=')" \
	"1 $copies 1"
check_eq "the AWS CLI reads it back byte-identical (SHA-256)" \
	"$(sum_key stable/mpu/big12.bin)" "$(sum_file "$T/big12.bin")"
head_etag=$(aws_s3 s3api head-object --bucket target --key stable/mpu/big12.bin --output json 2>/dev/null | jq -r .ETag)
check_eq "its reference is the completed object's ETag" \
	"$(q "SELECT r ->> 'outcome', r ->> 'etag' FROM remora_exports e, jsonb_array_elements(e.\"references\") r WHERE e.export_id = $ex")" \
	"copied|$head_etag"
check_eq "no multipart upload is left open" "$(open_uploads)" "0"

rule "$S3_PROXY" "match=stable/mpu2/big12.bin?partNumber=2&method=PUT&action=status:500&count=1"
ex=$(q "SELECT remora_export($bigjob, 'target', 'stable/mpu2')")
check "a part answered 500: the export still succeeds, on a second attempt" wait_state "$ex" succeeded 120
check_eq "the first attempt failed conclusively (not outcome_unknown)" \
	"$(q "SELECT string_agg(state || ':' || (coalesce(error ->> 'class', '') = 'outcome_unknown'), ',' ORDER BY attempt_no) FROM remora_export_attempts WHERE export_id = $ex")" \
	"failed:false,succeeded:false"
check "its upload was aborted (a DELETE ?uploadId was sent)" \
	test "$(hits "$S3_PROXY" 'DELETE%20/target/stable/mpu2/big12.bin?uploadId=')" -ge 1
check_eq "two uploads were started; one aborted, one completed" \
	"$(hits "$S3_PROXY" 'stable/mpu2/big12.bin?uploads') $(hits "$S3_PROXY" 'stable/mpu2/big12.bin?uploadId=')" "2 2"
check_eq "the AWS CLI reads it back byte-identical" \
	"$(sum_key stable/mpu2/big12.bin)" "$(sum_file "$T/big12.bin")"
if store_lists_uploads; then
	check_eq "no multipart upload is left open" "$(open_uploads)" "0"
else
	check_eq "no upload is left open but the aborted one (s3rver has no AbortMultipartUpload)" "$(open_uploads)" "1"
fi
curl -s "http://127.0.0.1:$S3_PROXY/__reset" >/dev/null

# --- a published key is its publisher's: alice and bob may both write
# target/pub*; bob's overwrite export onto alice's published key is
# refused (42501) and her bytes stay; onto a key put there by something
# other than an export bob's overwrite and skip_identical end failed naming
# the key, nothing copied; alice overwrites her own key; an administrator
# overwrites anyone's
q "CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; GRANT remora_user TO alice, bob" >/dev/null
q "SELECT remora.grant_target('alice', 'target', 'pub*'), remora.grant_target('bob', 'target', 'pub*')" >/dev/null
as() { psql -X -A -t -q -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -U "$1" -d postgres -c "$2" 2>&1; }
for p in pub pub/ext; do
	rule "$S3_PROXY" "match=PUT%20/target/$p/&method=PUT&action=status:500&count=0"
done
for f in a1 a2 b; do
	mkdir -p "$WWW/$f"
	make_file "$f/model.bin" $((40000 + ${#f} * 1000 + RANDOM % 1000))
done
a1=$(as alice "SELECT remora_submit('$SRC/a1/model.bin')")
a2=$(as alice "SELECT remora_submit('$SRC/a2/model.bin')")
b=$(as bob "SELECT remora_submit('$SRC/b/model.bin')")
for j in "$a1" "$a2" "$b"; do
	check "the users' job $j succeeds" wait_state "$j" succeeded 60
done
ex=$(as alice "SELECT remora_export($a1, 'target', 'pub')")
check "alice publishes pub/model.bin" wait_state "$ex" succeeded 60
check_eq "the AWS CLI reads alice's bytes there" "$(sum_key pub/model.bin)" "$(sum_file "$WWW/a1/model.bin")"
sent=$(copies PUT%20/target/pub/)
err=$(as bob "SELECT remora_export($b, 'target', 'pub', '{\"if_exists\": \"overwrite\"}')" || true)
check "bob's overwrite export onto alice's key is refused with 42501" \
	grep -q '^ERROR:  42501: permission denied for target bucket "target" key "pub/model.bin"' <<<"$err"
check_eq "no export of bob's was recorded, nothing was copied, alice's bytes stay" \
	"$(q "SELECT count(*) FROM remora_exports WHERE owner = 'bob'")|$(copies PUT%20/target/pub/)|$(sum_key pub/model.bin)" \
	"0|$sent|$(sum_file "$WWW/a1/model.bin")"

head -c 7000 /dev/urandom >"$T/elsewhere.bin"
aws_s3 s3 cp --quiet "$T/elsewhere.bin" s3://target/pub/ext/model.bin
for mode in overwrite skip_identical; do
	ex=$(as bob "SELECT remora_export($b, 'target', 'pub/ext', '{\"if_exists\": \"$mode\"}')")
	check "bob's $mode export onto a key put there by another writer fails" wait_state "$ex" failed 60
	check_eq "$mode: class exists, naming the key; nothing copied" \
		"$(q "SELECT last_error ->> 'class', last_error ->> 'message' LIKE '%\"pub/ext/model.bin\"%' FROM remora_exports WHERE export_id = $ex")|$(copies PUT%20/target/pub/ext/)" \
		"exists|t|0"
done
check_eq "the other writer's object is unchanged" "$(sum_key pub/ext/model.bin)" "$(sum_file "$T/elsewhere.bin")"

ex=$(as alice "SELECT remora_export($a2, 'target', 'pub', '{\"if_exists\": \"overwrite\"}')")
check "alice's overwrite export onto her own key succeeds" wait_state "$ex" succeeded 60
check_eq "and the key holds her new bytes" "$(sum_key pub/model.bin)" "$(sum_file "$WWW/a2/model.bin")"
ex=$(q "SELECT remora_export($b, 'target', 'pub', '{\"if_exists\": \"overwrite\"}')")
check "an administrator's overwrite export of bob's result onto alice's key succeeds" \
	wait_state "$ex" succeeded 60
check_eq "and the key holds bob's bytes" "$(sum_key pub/model.bin)" "$(sum_file "$WWW/b/model.bin")"
ex=$(q "SELECT remora_export($b, 'target', 'pub/ext', '{\"if_exists\": \"overwrite\"}')")
check "an administrator overwrites the other writer's key too" wait_state "$ex" succeeded 60
check_eq "which now holds bob's bytes" "$(sum_key pub/ext/model.bin)" "$(sum_file "$WWW/b/model.bin")"
err=$(as alice "SELECT remora_export($a1, 'target', 'pub', '{\"if_exists\": \"overwrite\"}')" || true)
check "the key is the administrator's now: alice's export onto it is refused" \
	grep -q '^ERROR:  42501: permission denied for target bucket "target" key "pub/model.bin"' <<<"$err"
curl -s "http://127.0.0.1:$S3_PROXY/__reset" >/dev/null

# --- hard-deleting the job leaves the stable keys alone
q "SELECT remora_delete($job, true)" >/dev/null
hard_deleted() { [ "$(q "SELECT hard_deleted_at IS NOT NULL FROM remora.jobs WHERE job_id = $job")" = t ]; }
check "the job's hard delete is carried out" wait_for 60 hard_deleted
check_eq "its exported keys stay" "$(sum_key stable/llama/sub/c.bin)" "$(sum_file "$T/src/sub/c.bin")"

e2e_finish
