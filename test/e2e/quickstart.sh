#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib sourced at run time
#
# The README's first command, as a new user runs it: ./quickstart with no
# argument downloads its 64 MB sample and shows the job succeed, the
# result's SHA-256 is the sample's, and what it leaves running answers as
# the last lines say (psql, the web client with the demo password);
# ./quickstart worker --label second adds a remora-worker that
# remora_workers shows and that takes jobs; ./quickstart stop stops every
# process it started.  --help and a word that is no URL start nothing.
# It runs in a directory of its own (REMORA_QS), on free ports.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin quickstart

export REMORA_QS=$T/qs
# (a user's cluster is made by initdb, not copied from test/run's)
unset REMORA_INITDB_TEMPLATE
e2e_at_exit "./quickstart stop >/dev/null 2>&1"

check_eq "--help prints the usage and exits 0" \
	"$(./quickstart --help >"$T/help.txt" 2>&1; echo $?) $(grep -c './quickstart stop' "$T/help.txt")" "0 1"
check_eq "a word that is no URL is refused (exit 2) and starts nothing" \
	"$(./quickstart bogus >/dev/null 2>&1; echo $?) $([ -e "$REMORA_QS" ] && echo started || echo nothing)" \
	"2 nothing"

timeout 600 ./quickstart >"$T/qs.log" 2>&1
rc=$?
check_eq "./quickstart finishes (exit 0)" "$rc" "0"
[ "$rc" = 0 ] || tail -30 "$T/qs.log"
shown() { tr '\r' '\n' <"$T/qs.log" | grep -q "^  succeeded *100.0%" &&
	grep -A3 "^== the result" "$T/qs.log" | grep -q " sample.bin "; }
check "it shows the job succeed, then the result's member" shown

PGHOST=$REMORA_QS/pg
PGPORT=$(sed -n 4p "$REMORA_QS/pg/data/postmaster.pid")
export PGHOST PGPORT PGUSER=postgres
sample=$(find "$REMORA_QS/services" -name sample.bin | head -1)
check_eq "the result's SHA-256 is the sample's" \
	"$(q "SELECT sha256 FROM remora_result(1)")" "$(sha256sum "$sample" | cut -d' ' -f1)"
check_eq "and its size" "$(q "SELECT size FROM remora_result(1)")" "$(stat -c %s "$sample")"

pw=$(cat "$REMORA_QS/demo-password")
web=$(grep -oP 'http://127\.0\.0\.1:\d+/(?= *$)' "$T/qs.log" | head -1)
check "the printed psql command connects" \
	psql -X -q -h "$PGHOST" -p "$PGPORT" -U postgres -c "SELECT 1" -o /dev/null
check_eq "the web client at the printed address signs demo in with the printed password" \
	"$(curl -s -o /dev/null -w '%{http_code}' -u "demo:$pw" "${web}api/jobs")" "200"
check_eq "and refuses a wrong password" \
	"$(curl -s -o /dev/null -w '%{http_code}' -u "demo:wrong$pw" "${web}api/jobs")" "401"
check_eq "demo finds the sample's job there, theirs" \
	"$(curl -s -u "demo:$pw" "${web}api/jobs" | jq -r '[.jobs[] | select(.job_id == 1) | .owner + " " + .state] | join(",")')" "demo succeeded"

./quickstart worker --label second >"$T/worker.log" 2>&1
check_eq "./quickstart worker --label second starts" "$?" "0"
registered() { [ "$(q "SELECT count(*) FROM remora_workers WHERE label = 'second' AND stopped_at IS NULL")" = 1 ]; }
check "remora_workers shows it, with its label" wait_for 30 registered
# the background workers stop taking jobs, so the next one is the new worker's
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
no_bgworker() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 0 ]; }
wait_for 30 no_bgworker || true
url=$(q "SELECT source FROM remora_jobs WHERE job_id = 1")
j=$(q "SELECT remora_submit('$url')")
done_second() { [ "$(q "SELECT state FROM remora_jobs WHERE job_id = $j")" = succeeded ]; }
check "it takes a job and finishes it" wait_for 60 done_second
check_eq "that job ran on the external worker" \
	"$(q "SELECT w.label FROM remora_attempts a JOIN remora_workers w USING (incarnation) WHERE a.job_id = $j")" \
	"second"

pids="$(cut -d" " -f1 "$REMORA_QS/worker-pids") $(head -1 "$REMORA_QS/pg/data/postmaster.pid")"
./quickstart stop >"$T/stop.log" 2>&1
check_eq "./quickstart stop exits 0" "$?" "0"
alive() { for p in $pids; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
gone() { ! alive; }
check "and the server and the worker are gone" wait_for 30 gone

# --- on a machine with Node.js but no npm (Debian's nodejs alone, as the
# quick start installs it), npm's own release is fetched from the npm
# registry, used only if it has its pinned SHA-512, and runs npm ci
mkdir -p "$T/bin" "$T/s3"
for b in node curl openssl base64 tar gzip mkdir rm cat dirname head ls; do
	ln -sf "$(command -v "$b")" "$T/bin/$b"
done
cp test/s3/package.json test/s3/package-lock.json "$T/s3/"
npm_alone() { env PATH="$T/bin" REMORA_NPM_DIR="$T/npm" /bin/bash -c \
	". test/lib/deps.sh && deps_npm && cd '$T/s3' && npm ci --no-audit --no-fund --loglevel=error >/dev/null && echo \"\$(type -t npm) \$(npm --version)\""; }
check_eq "no npm: deps_npm brings npm $(. test/lib/deps.sh && echo "$REMORA_NPM_VERSION"), and npm ci installs the S3 server" \
	"$(npm_alone 2>&1 | tail -1) $([ -d "$T/s3/node_modules/@20minutes/s3rver" ] && echo installed)" \
	"function $(. test/lib/deps.sh && echo "$REMORA_NPM_VERSION") installed"
npm_tampered() { env PATH="$T/bin" REMORA_NPM_DIR="$T/npm2" /bin/bash -c \
	'. test/lib/deps.sh; REMORA_NPM_SHA512=wrong; deps_npm' 2>&1; }
check "  a tarball without the pinned SHA-512 is refused, and not kept" \
	bash -c "$(declare -f npm_tampered); T='$T'; npm_tampered | grep -q 'does not have its pinned SHA-512' && [ ! -e '$T/npm2.tgz' ] && [ ! -e '$T/npm2/bin/npm-cli.js' ]"
e2e_finish
