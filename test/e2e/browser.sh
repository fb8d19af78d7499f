#!/usr/bin/env bash
#
# The web client in a real browser (Debian's chromium, headless, driven
# over the DevTools protocol by test/browser/run.js, with no npm package)
# against the real stack: sign-in with a wrong and a right password,
# SQL's validation message beside its field, a download submitted from the
# form that finishes on its page without a reload, its member fetched
# through the presigned link with the right SHA-256, a label with markup
# shown as text, a slow download's progress bar moving live, cancel, the
# list and its state filter, two users who do not see each other's jobs,
# the admin page, a confirmed hard delete, sign-out.
# REMORA_SCREENSHOTS=DIR keeps screenshots of the main pages there (the
# user guide shows the ones in doc/screenshots/).
#
set -Euo pipefail
cd "$(dirname "$0")/../.."
. test/lib/deps.sh
. test/lib/cluster.sh
. test/lib/e2e.sh
. test/lib/services.sh
. test/lib/stack.sh
. test/lib/http.sh

CHROMIUM=$(command -v chromium || true)
if [ -z "$CHROMIUM" ]; then
	not_ok "chromium is installed (test/lib/deps.sh installs it)"
	exit 1
fi
stack_up browser
http_up </dev/null
make_file web.bin 2000000
make_file webslow.bin 30000000
mkdir -p "${REMORA_SCREENSHOTS:-$T/shots}"
H=$H SRC=$SRC WWW=$WWW CHROMIUM=$CHROMIUM SHOTS=${REMORA_SCREENSHOTS:-$T/shots} \
	timeout 300 node --experimental-websocket --no-warnings test/browser/run.js ||
	E2E_FAILED=1
e2e_finish
