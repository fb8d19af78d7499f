#!/usr/bin/env bash
#
# The web client in a real browser (Debian's chromium, headless, driven
# over the DevTools protocol by test/browser/run.js, with no npm package)
# against the real stack: sign-in with a wrong and a right password,
# SQL's validation message beside its field, a download submitted from the
# form that finishes on its page without a reload, its member fetched
# through the presigned link with the right SHA-256, a label with markup
# shown as text, a slow download's progress bar moving live, cancel, the
# list and its state filter, its order (submitted, priority; both ways),
# an Export form on the succeeded job's page (SQL's message beside its
# field, the export's page with its reference, its label shown as text),
# an export left outcome_unknown by a copy answered 500 (Verify offered,
# retry and fail not, for a remora_user; Verify names the missing member),
# the exports list and its outcome_unknown filter, an admin's Retry,
# two users who do not see each other's jobs, the admin page with the
# source and target grants, alice's weight set to 3 in the admin page's
# limits form, shown in its table and reset (a weight of 0 refused
# beside its field), a keyboard-only sign-in with a visible focus,
# the charts (inline SVG: a job's transfer rate, its live rates while
# running; the admin page's last hour, jobs by state and bytes per second,
# with the jobs that ran), every page at 375 px wide (a phone) without horizontal scrolling and
# with an accessible name on every control, a confirmed hard delete,
# sign-out.
# REMORA_SCREENSHOTS=DIR keeps screenshots of the main pages there (the
# user guide shows the ones in doc/screenshots/).
#
. "$(dirname "$0")/../lib/e2e.sh"
. "$(dirname "$0")/../lib/http.sh"
e2e_begin browser

CHROMIUM=$(command -v chromium || true)
if [ -z "$CHROMIUM" ]; then
	not_ok "chromium is installed (test/lib/deps.sh installs it)"
	exit 1
fi
stack_up
http_up </dev/null
make_file web.bin 2000000
make_file webslow.bin 30000000
# an S3 object and prefix alice may read (in a bucket of their own: a
# prefix of the target bucket could hold jobs' areas), and a repository on
# a local hub
aws_s3 s3 mb s3://sources >/dev/null
aws_s3 s3 cp "$WWW/web.bin" s3://sources/one.bin >/dev/null
aws_s3 s3 cp "$WWW/web.bin" s3://sources/dir/a.bin >/dev/null
aws_s3 s3 cp "$WWW/web.bin" s3://sources/dir/b.bin >/dev/null
q "SELECT remora.grant_source('alice', 'sources')" >/dev/null
HUB=$T/hub
mkdir -p "$HUB/models/acme/tiny/weights"
head -c 1500000 /dev/urandom >"$HUB/models/acme/tiny/weights/model.bin"
echo '{"a": 1}' >"$HUB/models/acme/tiny/config.json"
HUB_PORT=$(free_port)
CDN_PORT=$(free_port)
start_hub "$HUB_PORT" "$CDN_PORT" "$HUB" hub-token
n=$(grep -c "new settings in effect" "$LOG" || true)
q "ALTER SYSTEM SET remora.hf_endpoint = 'http://127.0.0.1:$HUB_PORT'" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
applied() { [ "$(grep -c "new settings in effect" "$LOG" || true)" -ge $((n + 2)) ]; }
wait_for 30 applied || not_ok "the workers take the local hub's address"
mkdir -p "${REMORA_SCREENSHOTS:-$T/shots}"
# the export left outcome_unknown: its copy is answered 500 by the proxy
rule "$S3_PROXY" "match=PUT%20/target/webunknown/&method=PUT&action=status:500&count=1"
H=$H SRC=$SRC WWW=$WWW CHROMIUM=$CHROMIUM SHOTS=${REMORA_SCREENSHOTS:-$T/shots} \
	timeout 300 node --experimental-websocket --no-warnings test/browser/run.js ||
	E2E_FAILED=1
e2e_finish
