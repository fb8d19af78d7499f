#!/usr/bin/env bash
#
# Mirrors end to end (doc/user-guide.md, "Mirrors"): a nightly pull of the
# same S3 prefix with options.reuse_from "latest".  The second run of a
# 40-member prefix with 2 members changed, 1 removed and 1 added makes the
# source send only the changed and added bytes (counted at the proxy in
# front of the store), copies the other 37 from the first job's result,
# and every member reads back as the source's bytes under the second
# job's own keys, also after the first job is deleted for good.  An
# http(s) source unchanged is answered 304 and copied; a Hub snapshot at a
# new commit reuses the files whose oid did not change.  Run
# on each store, by background workers and by remora-worker (REMORA_HOST).
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin mirror

stack_up

# --- the source: 40 objects of 20 to 60 kB under data/
SRCDIR=$T/srcdata
mkdir -p "$SRCDIR/sub"
python3 -c 'import os, sys
for i in range(1, 41):
    d = sys.argv[1] + ("/sub" if i > 30 else "")
    with open(f"{d}/m{i:02d}.bin", "wb") as f:
        f.write(os.urandom(20000 + 1000 * i))' "$SRCDIR"
aws_s3 s3 mb s3://source >/dev/null
aws_s3 s3 cp --recursive --quiet "$SRCDIR" s3://source/data/
check_eq "the source prefix holds 40 objects" "$(aws_s3 s3 ls --recursive s3://source/data/ | wc -l)" "40"

# every member of a job, read back with the AWS CLI, is the source's file
# of its path, and its key is under the job's own area
reads_back() {	# reads_back JOB
	local job=$1 path key n=0
	while IFS='|' read -r path key; do
		[[ "$key" == remora/$job/* ]] || {
			echo "# job $job: $path is at $key"
			return 1
		}
		cmp -s <(aws_s3 s3 cp "s3://target/$key" - 2>/dev/null) "$SRCDIR/$path" || {
			echo "# job $job: $path differs"
			return 1
		}
		n=$((n + 1))
	done < <(q "SELECT path || '|' || key FROM remora_result($job)")
	[ "$n" = "$(find "$SRCDIR" -type f | wc -l)" ]
}

# the bytes of source objects the store sent (GETs of source/data/ keys;
# the listing's path is /source?list-type=2, not counted)
rule "$S3_PROXY" "match=GET%20/source/data/&count=0&action=status:500"
sent() { proxy_bytes "$S3_PROXY" "GET%20/source/data/"; }

# --- the first run: nothing to reuse yet
j1=$(q "SELECT remora_submit('s3://source/data/', options => '{\"reuse_from\": \"latest\"}')")
check "first run: the job succeeds" wait_state "$j1" succeeded 180
check_eq "  it had nothing to reuse (no earlier job): the option is dropped" \
	"$(q "SELECT spec -> 'options' ? 'reuse_from' FROM remora.jobs WHERE job_id = $j1")" "f"
check_eq "  every member downloaded" \
	"$(q "SELECT count(*) FILTER (WHERE action = 'download') || ' ' || (SELECT bytes_reused FROM remora_jobs WHERE job_id = $j1) FROM remora_result($j1)")" "40 0"
check "  every member reads back as the source's bytes" reads_back "$j1"
first_sent=$(sent)
check "  the source sent at least every byte once" \
	test "$first_sent" -ge "$(du -cb "$SRCDIR"/*.bin "$SRCDIR"/sub/*.bin | tail -1 | cut -f1)"

# --- the night after: 2 changed (one the same size), 1 removed, 1 added
head -c 25000 /dev/urandom >"$SRCDIR/m05.bin"
head -c 50000 /dev/urandom >"$SRCDIR/sub/m32.bin"
rm "$SRCDIR/m07.bin"
head -c 33333 /dev/urandom >"$SRCDIR/sub/new.bin"
aws_s3 s3 cp --quiet "$SRCDIR/m05.bin" s3://source/data/m05.bin
aws_s3 s3 cp --quiet "$SRCDIR/sub/m32.bin" s3://source/data/sub/m32.bin
aws_s3 s3 rm --quiet s3://source/data/m07.bin
aws_s3 s3 cp --quiet "$SRCDIR/sub/new.bin" s3://source/data/sub/new.bin
changed_bytes=$((25000 + 50000 + 33333))

# --- a dry run first: what the next run would do, reading no content
before=$(sent)
d1=$(q "SELECT remora_submit('s3://source/data/', options => '{\"reuse_from\": \"latest\", \"dry_run\": true}')")
check "dry run: the job succeeds" wait_state "$d1" succeeded 180
check_eq "  no byte of a source object was read" "$(($(sent) - before))" "0"
check_eq "  it plans 37 reuses of the first job and 3 downloads, with no keys" \
	"$(q "SELECT count(*) FILTER (WHERE action = 'reuse' AND reused_from_job = $j1) || ' ' ||
			 string_agg(path, ',' ORDER BY path) FILTER (WHERE action = 'download') || ' ' ||
			 count(*) FILTER (WHERE key IS NOT NULL OR sha256 IS NOT NULL) FROM remora_result($d1)")" \
	"37 m05.bin,sub/m32.bin,sub/new.bin 0"
check_eq "  it wrote its manifest and nothing else" \
	"$(aws_s3 s3 ls --recursive "s3://target/remora/$d1/" | awk '{ print $4 }' | sed 's|.*/||')" "manifest.jsonl"
check_eq "  the manifest's lines say each member's action and name no key" \
	"$(aws_s3 s3 cp "s3://target/$(q "SELECT result_manifest_key FROM remora_jobs WHERE job_id = $d1")" - |
		grep '"path"' | jq -r 'select(has("key") | not) | .action' | sort | uniq -c | awk '{ print $1 $2 }' | tr '\n' ' ')" \
	"3download 37reuse "
check_eq "  exporting it is refused" \
	"$(sqlstate "SELECT remora_export($d1, 'target', 'dry-export')")" "22023"
check_eq "  reusing from it is refused" \
	"$(sqlstate "SELECT remora_submit('s3://source/data/', options => '{\"reuse_from\": $d1}')")" "22023"

before=$(sent)
j2=$(q "SELECT remora_submit('s3://source/data/', options => '{\"reuse_from\": \"latest\"}')")
check_eq "second run: \"latest\" is the first job" \
	"$(q "SELECT spec #>> '{options,reuse_from}' FROM remora.jobs WHERE job_id = $j2")" "$j1"
check "second run: the job succeeds" wait_state "$j2" succeeded 180
check_eq "  the source sent only the changed and added bytes" "$(($(sent) - before))" "$changed_bytes"
check_eq "  37 members reused from the first job, 3 downloaded, the removed one gone" \
	"$(q "SELECT count(*) FILTER (WHERE action = 'reuse' AND reused_from_job = $j1) || ' ' ||
			 string_agg(path, ',' ORDER BY path) FILTER (WHERE action = 'download') || ' ' ||
			 count(*) FILTER (WHERE path = 'm07.bin') FROM remora_result($j2)")" "37 m05.bin,sub/m32.bin,sub/new.bin 0"
check_eq "  remora_jobs.bytes_reused is the reused members' bytes" \
	"$(q "SELECT bytes_reused FROM remora_jobs WHERE job_id = $j2")" \
	"$(q "SELECT sum(size) FROM remora_result($j2) WHERE action = 'reuse'")"
check "  every member reads back as the source's bytes, under the job's own keys" reads_back "$j2"
check_eq "  the manifest says which job each reused member came from" \
	"$(aws_s3 s3 cp "s3://target/$(q "SELECT result_manifest_key FROM remora_jobs WHERE job_id = $j2")" - |
		grep -c "\"reused_from_job\":$j1")" "37"

# --- nothing changed: nothing is sent
before=$(sent)
j3=$(q "SELECT remora_submit('s3://source/data/', options => '{\"reuse_from\": \"latest\"}')")
check "third run, nothing changed: the job succeeds" wait_state "$j3" succeeded 180
check_eq "  from the second job, every member reused, no byte sent" \
	"$(q "SELECT count(*) FILTER (WHERE reused_from_job = $j2) FROM remora_result($j3)") $(($(sent) - before))" "40 0"

# --- the first job deleted for good: the second's result is its own
q "SELECT remora_delete($j1, true)" >/dev/null
gone() { [ "$(q "SELECT hard_deleted_at IS NOT NULL FROM remora.jobs WHERE job_id = $j1")" = t ]; }
check "the first job's objects are deleted" wait_for 120 gone
check_eq "  none of its keys is left in the store" \
	"$(aws_s3 s3 ls --recursive "s3://target/remora/$j1/" | wc -l)" "0"
check "  the second job's members still read back intact" reads_back "$j2"

# --- an http(s) source: a 304 to the earlier validators is a copy
mkdir -p "$WWW/mirror"
make_file mirror/blob.bin 3000000
rule "$SRC_PROXY" "match=GET%20/mirror/blob.bin&count=0&action=status:500"
src_sent() { proxy_bytes "$SRC_PROXY" "GET%20/mirror/blob.bin"; }
u1=$(q "SELECT remora_submit('$FLAKY/mirror/blob.bin', options => '{\"reuse_from\": \"latest\"}')")
check "http: the first download succeeds" wait_state "$u1" succeeded 120
before=$(src_sent)
u2=$(q "SELECT remora_submit('$FLAKY/mirror/blob.bin', options => '{\"reuse_from\": \"latest\"}')")
check "http: the next, the source unchanged, succeeds" wait_state "$u2" succeeded 120
check_eq "  the source answered 304 to its ETag: no byte of the body sent" "$(($(src_sent) - before))" "0"
check_eq "  the member is a copy of the first job's" \
	"$(q "SELECT action || ' ' || (reused_from_job = $u1) FROM remora_result($u2)") $(q "SELECT bytes_reused FROM remora_jobs WHERE job_id = $u2")" \
	"reuse true 3000000"
verify "$u2" mirror/blob.bin
check "  under its own key" test "$(q "SELECT key LIKE 'remora/$u2/%' FROM remora_result($u2)")" = t
check "  its manifest says from which job" \
	grep -q "\"reused_from_job\":$u1" <(aws_s3 s3 cp "s3://target/$(q "SELECT result_manifest_key FROM remora_jobs WHERE job_id = $u2")" -)
sleep 1 # another second: another Last-Modified, so another ETag
make_file mirror/blob.bin 3000000
before=$(src_sent)
u3=$(q "SELECT remora_submit('$FLAKY/mirror/blob.bin', options => '{\"reuse_from\": \"latest\"}')")
check "http: once the source changed, the next succeeds" wait_state "$u3" succeeded 120
check_eq "  downloaded again, every byte" \
	"$(q "SELECT action FROM remora_result($u3)") $(test "$(($(src_sent) - before))" -ge 3000000 && echo all)" "download all"
verify "$u3" mirror/blob.bin
# a dry run: a HEAD, with the last job's ETag, answered 304: a reuse
before=$(src_sent)
u4=$(q "SELECT remora_submit('$FLAKY/mirror/blob.bin', options => '{\"reuse_from\": \"latest\", \"dry_run\": true}')")
check "http: a dry run succeeds" wait_state "$u4" succeeded 120
check_eq "  it plans a reuse of the last job's copy, and sent no GET" \
	"$(q "SELECT action || ' ' || (reused_from_job = $u3) || ' ' || size || ' ' || (key IS NULL) FROM remora_result($u4)") $(($(src_sent) - before))" \
	"reuse true 3000000 true 0"
u5=$(q "SELECT remora_submit('$FLAKY/mirror/blob.bin', options => '{\"dry_run\": true}')")
check "http: a dry run with nothing to reuse succeeds" wait_state "$u5" succeeded 120
check_eq "  it plans a download of the size the source says, and sent no GET" \
	"$(q "SELECT action || ' ' || size || ' ' || (key IS NULL) FROM remora_result($u5)") $(($(src_sent) - before))" \
	"download 3000000 true 0"

# --- the Hub: a new commit reuses the files whose oid did not change
HUB_PORT=$(free_port)
CDN_PORT=$(free_port)
HUB=$T/hub
R=$HUB/models/acme/mirror
mkdir -p "$R/weights"
for i in 1 2 3 4 5; do head -c $((3000 * i)) /dev/urandom >"$R/weights/w$i.bin"; done
head -c 1500000 /dev/urandom >"$R/model.safetensors" # an LFS file, on the "CDN"
echo one >"$R/.commit"
start_hub "$HUB_PORT" "$CDN_PORT" "$HUB" hf_mirrorToken0123456789
HUBCTL="http://127.0.0.1:$HUB_PORT"
q "ALTER SYSTEM SET remora.hf_endpoint = 'http://127.0.0.1:$HUB_PORT'" >/dev/null
check "the workers take the local hub's address" reload_workers
h1=$(q "SELECT remora_submit('hf://acme/mirror', options => '{\"reuse_from\": \"latest\"}')")
check "hub: the first snapshot succeeds" wait_state "$h1" succeeded 120
c1=$(q "SELECT descriptor ->> 'source_commit' FROM remora.results WHERE job_id = $h1")
head -c 4000 /dev/urandom >"$R/weights/w2.bin"
echo two >"$R/.commit"
resolves() { curl -s "$HUBCTL/__hits?match=/acme/mirror/resolve/"; }
before=$(resolves)
h2=$(q "SELECT remora_submit('hf://acme/mirror', options => '{\"reuse_from\": \"latest\"}')")
check "hub: the snapshot at the next commit succeeds" wait_state "$h2" succeeded 120
check "  at another commit" test "$(q "SELECT descriptor ->> 'source_commit' FROM remora.results WHERE job_id = $h2")" != "$c1"
check_eq "  the file whose oid changed is downloaded, the 5 others reused" \
	"$(q "SELECT string_agg(path, ',') FILTER (WHERE action = 'download') || ' ' ||
			 count(*) FILTER (WHERE reused_from_job = $h1) FROM remora_result($h2)")" "weights/w2.bin 5"
check_eq "  only that file was fetched from the Hub" "$(($(resolves) - before))" "1"
for f in model.safetensors weights/w2.bin weights/w5.bin; do
	check_eq "  $f reads back intact" \
		"$(aws_s3 s3 cp "s3://target/$(q "SELECT key FROM remora_result($h2) WHERE path = '$f'")" - | sha256sum | cut -d' ' -f1)" \
		"$(sha256sum "$R/$f" | cut -d' ' -f1)"
done

# a dry run at the next commit reads nothing from the Hub's files
head -c 5000 /dev/urandom >"$R/weights/w4.bin"
echo three >"$R/.commit"
before=$(resolves)
h3=$(q "SELECT remora_submit('hf://acme/mirror', options => '{\"reuse_from\": \"latest\", \"dry_run\": true}')")
check "hub: a dry run at the next commit succeeds" wait_state "$h3" succeeded 120
check_eq "  it plans to download the changed file, reuse the 5 others, and fetched no file" \
	"$(q "SELECT string_agg(path, ',') FILTER (WHERE action = 'download') || ' ' ||
			 count(*) FILTER (WHERE reused_from_job = $h2) FROM remora_result($h3)") $(($(resolves) - before))" \
	"weights/w4.bin 5 0"

e2e_finish
