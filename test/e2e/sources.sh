#!/usr/bin/env bash
#
# Sources of many members, end to end: an S3 prefix of more than 1,000
# objects (several listing pages) with include/exclude, a single S3
# object, a registered source endpoint, a source object replaced during
# the copy, Hugging Face snapshots from a local hub (branch, tag and sha,
# a dataset, pagination, a 429, LFS files redirected to a second host that
# must not see the token, a gated repository, an LFS checksum lie,
# traversal names), and a crash mid-snapshot whose replacement transfers
# only what was not recorded.  Results are read back with the AWS CLI.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin sources

stack_up
HUB_PORT=$(free_port)
CDN_PORT=$(free_port)
HUB=$T/hub
TOKEN=hf_e2eSecretToken0123456789
mkdir -p "$HUB"

# --- the source bucket: 1,100 objects under data/, some to exclude
SRCDIR=$T/srcdata
mkdir -p "$SRCDIR/sub/deeper"
# (one process for the 1,080 files: a head each costs a second of CPU a hundred)
python3 -c 'import os, sys
for i in range(1, 1081):
    with open(f"{sys.argv[1]}/f{i:04d}.bin", "wb") as f:
        f.write(os.urandom(100 + i))' "$SRCDIR"
for i in $(seq 1 10); do head -c 3000 /dev/urandom >"$SRCDIR/sub/s$i.dat"; done
for i in $(seq 1 5); do head -c 2000 /dev/urandom >"$SRCDIR/sub/deeper/d$i.dat"; done
for i in $(seq 1 5); do head -c 50 /dev/urandom >"$SRCDIR/skip$i.tmp"; done
head -c 7000000 /dev/urandom >"$SRCDIR/big.bin"
aws_s3 s3 mb s3://source >/dev/null
aws_s3 s3 cp --recursive --quiet "$SRCDIR" s3://source/data/
check_eq "the source bucket holds 1,101 objects" \
	"$(aws_s3 s3 ls --recursive s3://source/data/ | wc -l)" "1101"

# members of a committed job, downloaded by the AWS CLI under OUT: every
# member's key is data/PATH beside the manifest, so one sync reads them all
fetch_result() {	# fetch_result JOB OUT
	local job=$1 out=$2 dir
	dir=$(q "SELECT regexp_replace(result_manifest_key, 'manifest\.jsonl$', '') FROM remora_jobs WHERE job_id = $job")
	[ "$(q "SELECT count(*) FROM remora_result($job) WHERE key <> '${dir}data/' || path")" = 0 ] || {
		echo "# job $job: a member's key is not beside its manifest"
		return 1
	}
	mkdir -p "$out"
	aws_s3 s3 sync --quiet "s3://target/${dir}data/" "$out"
}
# the manifest: its SHA-256, its root digest and its member count
manifest_ok() {	# manifest_ok JOB
	local job=$1 m=$T/manifest.$1 n want
	aws_s3 s3 cp --quiet "s3://target/$(q "SELECT result_manifest_key FROM remora_jobs WHERE job_id = $job")" "$m"
	want=$(q "SELECT result_manifest_sha256 || ' ' || result_members FROM remora_jobs WHERE job_id = $job")
	n=$(($(wc -l <"$m") - 2))
	[ "$(sha256sum "$m" | cut -d' ' -f1) $n" = "$want" ] &&
		[ "$(sed -n '2,$p' "$m" | sed '$d' | sha256sum | cut -d' ' -f1)" = \
			"$(tail -1 "$m" | sed 's/.*"members_sha256":"\([0-9a-f]*\)".*/\1/')" ]
}

# (the proxy counts requests that match a rule; count=0 never acts)
rule "$S3_PROXY" "match=list-type%3D2&count=0&action=status:500"
rule "$S3_PROXY" "match=GET%20/source/data/sub/s1.dat&count=0&action=status:500"

# --- an S3 prefix: every page listed, include and exclude applied
lists_before=$(hits "$S3_PROXY" "list-type%3D2")
j=$(q "SELECT remora_submit('s3://source/data/', options => '{\"include\": [\"*.bin\", \"sub/*\"], \"exclude\": [\"*.tmp\", \"sub/deeper/d5.dat\"]}')")
check "prefix: the job succeeds" wait_state "$j" succeeded 240
check_eq "prefix: members are the selected objects, named relative to the prefix" \
	"$(q "SELECT count(*) || ' ' || count(*) FILTER (WHERE path = 'sub/deeper/d1.dat') || ' ' || count(*) FILTER (WHERE path LIKE '%.tmp' OR path = 'sub/deeper/d5.dat') FROM remora_result($j)")" \
	"1095 1 0"
check "prefix: the source was listed in several pages" \
	test "$(($(hits "$S3_PROXY" "list-type%3D2") - lists_before))" -ge 2
fetch_result "$j" "$T/out.$j"
rm -f "$SRCDIR"/*.tmp "$SRCDIR/sub/deeper/d5.dat"
check "prefix: the AWS CLI reads back every member intact" diff -r "$SRCDIR" "$T/out.$j"
check "prefix: the manifest's SHA-256 and root digest hold" manifest_ok "$j"
check_eq "prefix: remora_jobs shows members done and total" \
	"$(q "SELECT members_done || '/' || members_total FROM remora_jobs WHERE job_id = $j")" "1095/1095"
check_eq "prefix: source validators are recorded per member" \
	"$(q "SELECT count(*) FROM remora.members m JOIN remora.results r USING (attempt_id) WHERE r.job_id = $j AND m.source ->> 'etag' <> '' AND m.source ->> 'last_modified' <> ''")" "1095"

# --- one S3 object: its member path is its file name
o=$(q "SELECT remora_submit('s3://source/data/sub/s3.dat')")
check "object: the job succeeds" wait_state "$o" succeeded 60
check_eq "object: one member named by the key's last segment" \
	"$(q "SELECT path || ' ' || size FROM remora_result($o)")" "s3.dat 3000"
fetch_result "$o" "$T/out.$o"
check "object: the AWS CLI reads it back intact" cmp "$SRCDIR/sub/s3.dat" "$T/out.$o/s3.dat"
m=$(q "SELECT remora_submit('s3://source/data/no-such-object')")
check "object: a missing object fails" wait_state "$m" failed 60
check_eq "object: as a source error, not retried" \
	"$(q "SELECT (last_error ->> 'class') || ' ' || attempts_used FROM remora.jobs WHERE job_id = $m")" "source 1"

# --- a member whose key in the target would pass S3's 1,024 bytes is
# refused with the reason, never cut short (the source key itself fits)
long=$(printf 'k%.0s' $(seq 1 200))
longkey="long/$long/$long/$long/$long/$long.bin" # 1,013 bytes
head -c 100 /dev/urandom >"$T/long.bin"
aws_s3 s3 cp --quiet "$T/long.bin" "s3://source/$longkey"
l=$(q "SELECT remora_submit('s3://source/long/')")
check "a member key longer than 1,024 bytes fails the job" wait_state "$l" failed 60
check_eq "as a source error that names the limit, not retried" \
	"$(q "SELECT (last_error ->> 'class') || ' ' || (last_error ->> 'retryable') || ' ' || (last_error ->> 'message' LIKE '%longer than 1024 bytes%') FROM remora.jobs WHERE job_id = $l")" \
	"source false true"

# --- a registered source endpoint (the store itself, without the proxy)
q "SELECT remora.register_source_endpoint('direct', 'http://127.0.0.1:$S3_PORT', 'us-east-1', true, '$S3_ACCESS_KEY', '$S3_SECRET_KEY')" >/dev/null
check_eq "endpoint: the view shows it without its credentials" \
	"$(q "SELECT name || ' ' || has_credentials || ' ' || (row_to_json(e)::text LIKE '%$S3_SECRET_KEY%') FROM remora_source_endpoints e")" \
	"direct true false"
q "CREATE ROLE plain LOGIN; GRANT remora_user TO plain" >/dev/null
check_eq "endpoint: a remora_user cannot read the endpoints" \
	"$(psql -X -q -t -A -U plain -d postgres -c "SELECT * FROM remora.source_endpoints" 2>&1 | grep -c 'permission denied')" "1"
check_eq "endpoint: nor register one" \
	"$(psql -X -q -t -A -U plain -d postgres -c "SELECT remora.register_source_endpoint('x', 'http://127.0.0.1:1')" 2>&1 | grep -c 'permission denied')" "1"
check_eq "endpoint: a bad URL is refused" \
	"$(psql -X -q -t -A -d postgres -c "SELECT remora.register_source_endpoint('bad', 'http://user:pw@host')" 2>&1 | grep -c 'invalid endpoint url')" "1"
proxied=$(hits "$S3_PROXY" "GET%20/source/data/sub/s1.dat")
e=$(q "SELECT remora_submit('s3://source/data/sub/', options => '{\"endpoint\": \"direct\", \"exclude\": [\"deeper/*\"]}')")
check "endpoint: the job succeeds" wait_state "$e" succeeded 60
check_eq "endpoint: members came from the registered endpoint, not the target's" \
	"$(q "SELECT count(*) FROM remora_result($e)") $(($(hits "$S3_PROXY" "GET%20/source/data/sub/s1.dat") - proxied))" "10 0"

# --- a source object replaced during the copy is not published
aws_s3 s3 cp --quiet "$SRCDIR/sub/s1.dat" s3://source/moving/a.dat
aws_s3 s3 cp --quiet "$SRCDIR/sub/s2.dat" s3://source/moving/b.dat
rule "$S3_PROXY" "match=GET%20/source/moving/b.dat&action=hold&count=1"
c=$(q "SELECT remora_submit('s3://source/moving/')")
held() { [ "$(hits "$S3_PROXY" "GET%20/source/moving/b.dat")" -ge 1 ]; }
check "changed: the member's download is under way" wait_for 30 held
head -c 4321 /dev/urandom >"$T/b.new"
aws_s3 s3 cp --quiet "$T/b.new" s3://source/moving/b.dat
curl -s "http://127.0.0.1:$S3_PROXY/__release" >/dev/null
check "changed: the job succeeds in a later attempt" wait_state "$c" succeeded 90
check_eq "changed: the first attempt saw the change" \
	"$(q "SELECT count(*) FROM remora.attempts WHERE job_id = $c AND error ->> 'message' LIKE '%changed since it was listed%'")" "1"
fetch_result "$c" "$T/out.$c"
check "changed: the published member is the new content" cmp "$T/b.new" "$T/out.$c/b.dat"

# --- Hugging Face: the local hub
mk() { mkdir -p "$(dirname "$HUB/$1")"; head -c "$2" /dev/urandom >"$HUB/$1"; }
mk models/acme/tiny/README.md 700
mk models/acme/tiny/config.json 300
mk models/acme/tiny/weights/model.bin 3000000
mk models/acme/tiny/weights/extra.bin 1500000
mk models/acme/tiny/tokenizer/vocab.txt 5000
mk models/acme/tiny/notes.tmp 10
mk datasets/acme/corpus/train.jsonl 1200000
mk datasets/acme/corpus/test.jsonl 4000
mk models/acme/gated/model.bin 2000000
touch "$HUB/models/acme/gated/.gated"
mk models/acme/liar/model.bin 1100000
echo model.bin >"$HUB/models/acme/liar/.lie"
for n in 1 2 3; do mk "models/acme/evil$n/ok.txt" 10; done
echo '[{"type":"file","path":"../escape.bin","oid":"aa","size":1}]' >"$HUB/models/acme/evil1/.extra.json"
echo '[{"type":"file","path":"/etc/passwd","oid":"aa","size":1}]' >"$HUB/models/acme/evil2/.extra.json"
echo '[{"type":"file","path":"dir\\\\x.bin","oid":"aa","size":1}]' >"$HUB/models/acme/evil3/.extra.json"
for i in $(seq -w 1 24); do mk "models/acme/many/part$i.bin" 300000; done
start_hub "$HUB_PORT" "$CDN_PORT" "$HUB" "$TOKEN"
HUBCTL="http://127.0.0.1:$HUB_PORT"
q "ALTER SYSTEM SET remora.hf_endpoint = 'http://127.0.0.1:$HUB_PORT'" >/dev/null
check "the workers take the local hub's address" reload_workers

# a gated repository without a token: a clear, final error
g=$(q "SELECT remora_submit('hf://acme/gated')")
check "hf gated: without a token the job fails" wait_state "$g" failed 60
check_eq "hf gated: the error says what to set" \
	"$(q "SELECT (last_error ->> 'http_status') || ' ' || (last_error ->> 'message' LIKE '%remora.hf_token%') || ' ' || attempts_used FROM remora.jobs WHERE job_id = $g")" "401 true 1"
q "ALTER SYSTEM SET remora.hf_token = '$TOKEN'" >/dev/null
check "the workers take the token" reload_workers

curl -s "$HUBCTL/__rule?match=/tree/&status=429&retry_after=1&count=1" >/dev/null
h=$(q "SELECT remora_submit('hf://acme/tiny', options => '{\"exclude\": [\"*.tmp\"]}')")
check "hf branch: the snapshot succeeds (after a 429)" wait_state "$h" succeeded 90
sha=$(curl -s "$HUBCTL/api/models/acme/tiny/revision/main" | sed 's/.*"sha":"\([0-9a-f]*\)".*/\1/')
check_eq "hf branch: members are the repository's files" \
	"$(q "SELECT string_agg(path, ',' ORDER BY path) FROM remora_result($h)")" \
	"README.md,config.json,tokenizer/vocab.txt,weights/extra.bin,weights/model.bin"
fetch_result "$h" "$T/out.$h"
rm -f "$HUB/models/acme/tiny/notes.tmp"
check "hf branch: the AWS CLI reads back every file intact" diff -r "$HUB/models/acme/tiny" "$T/out.$h"
check "hf branch: the manifest's SHA-256 and root digest hold" manifest_ok "$h"
check_eq "hf branch: the manifest pins the commit" \
	"$(head -1 "$T/manifest.$h" | grep "^{\"remora_manifest\":1," | grep -c "\"commit\":\"$sha\"}$")" "1"
check "hf branch: the listing took several pages and a 429" \
	test "$(curl -s "$HUBCTL/__hits?match=/api/models/acme/tiny/tree/")" -ge 3
check "hf branch: LFS files came from the second host" \
	test "$(curl -s "$HUBCTL/__hits?match=cdn%20/cdn/models/acme/tiny")" -ge 2
check_eq "hf branch: the second host never saw the token" "$(curl -s "$HUBCTL/__cdn_auth")" "0"
check_eq "hf branch: LFS members are recorded with their SHA-256 as the source" \
	"$(q "SELECT count(*) FROM remora.members m JOIN remora.results r USING (attempt_id) WHERE r.job_id = $h AND m.source ->> 'lfs' = 'true' AND m.source ->> 'oid' = m.sha256")" "2"

s=$(q "SELECT remora_submit('hf://acme/tiny@$sha', options => '{\"include\": [\"weights/*\"]}')")
check "hf sha: a revision given as a commit succeeds" wait_state "$s" succeeded 60
check_eq "hf sha: the same files, selected by include" \
	"$(q "SELECT string_agg(path || ':' || sha256, ',' ORDER BY path) FROM remora_result($s)")" \
	"$(q "SELECT string_agg(path || ':' || sha256, ',' ORDER BY path) FROM remora_result($h) WHERE path LIKE 'weights/%'")"
d=$(q "SELECT remora_submit('hf://datasets/acme/corpus@v1.0')")
check "hf dataset: a dataset at a tag succeeds" wait_state "$d" succeeded 60
fetch_result "$d" "$T/out.$d"
check "hf dataset: the AWS CLI reads it back intact" diff -r "$HUB/datasets/acme/corpus" "$T/out.$d"
gg=$(q "SELECT remora_submit('hf://acme/gated')")
check "hf gated: with remora.hf_token the job succeeds" wait_state "$gg" succeeded 60
check_eq "hf gated: the second host still never saw the token" "$(curl -s "$HUBCTL/__cdn_auth")" "0"
nf=$(q "SELECT remora_submit('hf://acme/tiny@no-such-branch')")
check "hf: an unknown revision fails" wait_state "$nf" failed 60
check_eq "hf: with a 404 that names the revision, not retried" \
	"$(q "SELECT (last_error ->> 'http_status') || ' ' || (last_error ->> 'message' LIKE '%no-such-branch%') || ' ' || attempts_used FROM remora.jobs WHERE job_id = $nf")" "404 true 1"

l=$(q "SELECT remora_submit('hf://acme/liar')")
check "hf LFS mismatch: the job fails" wait_state "$l" failed 60
check_eq "hf LFS mismatch: a checksum error, not retried, nothing published" \
	"$(q "SELECT (last_error ->> 'class') || ' ' || attempts_used || ' ' || (SELECT count(*) FROM remora_result($l)) FROM remora.jobs WHERE job_id = $l")" "checksum 1 0"
for n in 1 2 3; do
	v=$(q "SELECT remora_submit('hf://acme/evil$n')")
	check "hf traversal $n: the job fails" wait_state "$v" failed 60
	check_eq "hf traversal $n: a source error that names the path, nothing published" \
		"$(q "SELECT (last_error ->> 'class') || ' ' || (last_error ->> 'message' LIKE '%cannot be used safely%') || ' ' || (SELECT count(*) FROM remora_result($v)) FROM remora.jobs WHERE job_id = $v")" "source true 0"
done

# --- a crash mid-snapshot: the replacement reuses what was recorded
curl -s "$HUBCTL/__rate?bps=150000" >/dev/null
k=$(q "SELECT remora_submit('hf://acme/many')")
recorded() { [ "$(q "SELECT coalesce(members_done, 0) FROM remora_jobs WHERE job_id = $k")" -ge 8 ]; }
check "crash: members are recorded as they complete" wait_for 60 recorded
# the worker is stopped before the count is taken, so that neither a
# request it starts nor one of its replacement's (which starts as soon as
# the server is back) falls on the wrong side of it
wpid=$(worker_of "$k")
katt=$(q "SELECT current_attempt FROM remora.jobs WHERE job_id = $k")
kill -STOP "$wpid"
hub_hits() { curl -s "$HUBCTL/__hits?match=/acme/many/resolve/"; }
steady() { local a; a=$(hub_hits); sleep 0.3; [ "$(hub_hits)" = "$a" ]; }
check "crash: the stopped worker's requests have all reached the Hub" wait_for 10 steady
before=$(hub_hits)
kill_worker "$wpid"
# the killed attempt's members: those the replacement must reuse (on a
# busy machine its lease may lapse while it is stopped, and another worker
# may start the replacement, whose reused members are recorded again,
# before this count)
done_before=$(q "SELECT count(*) FROM remora.members WHERE attempt_id = '$katt'")
curl -s "$HUBCTL/__rate?bps=0" >/dev/null
check "crash: the replacement attempt succeeds" wait_state "$k" succeeded 120
after=$(hub_hits)
check_eq "crash: it reused the $done_before recorded members and fetched only the rest" \
	"$(q "SELECT (descriptor ->> 'members_reused') || ' ' || members FROM remora.results WHERE job_id = $k") $((after - before))" \
	"$done_before 24 $((24 - done_before))"
fetch_result "$k" "$T/out.$k"
check "crash: the AWS CLI reads back every file intact" diff -r "$HUB/models/acme/many" "$T/out.$k"
check "crash: the manifest's SHA-256 and root digest hold" manifest_ok "$k"

check_eq "the Hub token never appears in the server log (nor a remora-worker's)" "$(worker_logs | grep -c "$TOKEN" || true)" "0"
check_eq "nor in any view or the ledger" \
	"$(q "SELECT count(*) FROM remora.attempts a WHERE a::text LIKE '%$TOKEN%'") $(q "SELECT count(*) FROM remora_jobs j WHERE j::text LIKE '%$TOKEN%'")" "0 0"

e2e_finish
