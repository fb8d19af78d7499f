#!/usr/bin/env bash
#
# Webhooks end to end (doc/user-guide.md, "Webhooks"): a job with
# options.notify_url is POSTed to it when it ends, by whichever worker runs
# it, signed with its owner's secret.  A receiver (python3's http.server,
# writing every request to a file) answers 500 to the first try on one path,
# 200 otherwise:
#   - the webhook is delivered again under the same webhook-id, and every
#     delivery's signature verifies with its owner's secret (and not with
#     another's);
#   - another user's job never reaches alice's receiver path;
#   - remora_webhook_deliveries shows alice her tries, and not bob's;
#   - a notify_url to the metadata address is refused at submit (RM001);
#   - a host name is judged when the worker connects: once loopback is no
#     longer allowed, a webhook to localhost is refused then, recorded as
#     a try, not repeated, and never reaches the receiver;
#   - one user's slow receivers do not hold up another's webhooks: at most
#     remora.webhook_max_in_flight_per_role of a user's tries at once, each
#     cut at remora.webhook_timeout;
#   - remora-worker (the same runner over libpq) delivers them as well.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin webhooks

stack_up

RECV=$(free_port)
HOOKS=$T/hooks.jsonl
cat >"$T/receiver.py" <<'PY'
import http.server, json, sys, threading
port, out = int(sys.argv[1]), sys.argv[2]
failed = set()
slow = {"now": 0, "most": 0}
lock = threading.Lock()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # /most-slow: the most /slow tries seen at once
        data = str(slow["most"]).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if self.path.endswith("/slow"):  # never answers; counts open tries
            with lock:
                slow["now"] += 1
                slow["most"] = max(slow["most"], slow["now"])
            # until the worker hangs up (EOF), or 60 s
            self.connection.settimeout(60)
            try:
                self.connection.recv(1)
            except OSError:
                pass
            with lock:
                slow["now"] -= 1
            return
        first = self.path.endswith("/fail-once") and self.path not in failed
        with open(out, "a") as f:
            f.write(json.dumps({"path": self.path,
                                "id": self.headers.get("webhook-id"),
                                "timestamp": self.headers.get("webhook-timestamp"),
                                "signature": self.headers.get("webhook-signature"),
                                "type": self.headers.get("content-type"),
                                "status": 500 if first else 200,
                                "body": body.decode()}) + "\n")
        failed.add(self.path)
        self.send_response(500 if first else 200)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
PY
python3 "$T/receiver.py" "$RECV" "$HOOKS" &
RECV_PID=$!
e2e_at_exit "kill $RECV_PID"
wait_port "$RECV" || { not_ok "the receiver starts"; exit 1; }

# the receiver's port is one a source could use too
cluster_stop "$T/pg" fast
cat >>"$T/pg/data/postgresql.conf" <<CONF
remora.allow_ports = '$NGINX_PORT,$RECV'
remora.webhook_timeout = '3s'
CONF
cluster_start "$T/pg"
q "CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN;
   GRANT remora_user TO alice, bob" >/dev/null
as() { local who=$1; shift; PGUSER=$who q "$@"; }

make_file hooked.bin 200000
ja=$(as alice "SELECT remora_submit('$SRC/hooked.bin', options => '{\"notify_url\": \"http://127.0.0.1:$RECV/alice/fail-once\"}')")
jb=$(as bob "SELECT remora_submit('$SRC/hooked.bin', options => '{\"notify_url\": \"http://127.0.0.1:$RECV/bob\"}')")
check "alice's job succeeds" wait_state "$ja" succeeded 60
check "bob's job succeeds" wait_state "$jb" succeeded 60

lines() { [ -f "$HOOKS" ] && [ "$(wc -l <"$HOOKS")" -ge "$1" ]; }
check "three deliveries arrive: alice's twice (500, then 200), bob's once" wait_for 60 lines 3
delivered() { [ "$(as alice "SELECT count(*) FROM remora_webhook_deliveries WHERE delivered")" = 1 ]; }
check "alice's delivery is recorded" wait_for 30 delivered

# every delivery, checked with its owner's secret (and the other's)
SA=$(as alice "SELECT remora_webhook_secret()")
SB=$(as bob "SELECT remora_webhook_secret()")
MANIFEST=$(q "SELECT manifest_sha256 FROM remora.results WHERE job_id = $ja")
cat >"$T/verify.py" <<'PY'
import base64, hashlib, hmac, json, sys
hooks, sa, sb, ja, jb, manifest = sys.argv[1:7]
key = lambda s: base64.b64decode(s[len("whsec_"):])
def verifies(h, secret):
    mac = hmac.new(key(secret), f"{h['id']}.{h['timestamp']}.{h['body']}".encode(),
                   hashlib.sha256).digest()
    return hmac.compare_digest(h["signature"], "v1," + base64.b64encode(mac).decode())
hs = [json.loads(l) for l in open(hooks)]
alice = [h for h in hs if h["path"] == "/alice/fail-once"]
bob = [h for h in hs if h["path"] == "/bob"]
body = json.loads(alice[-1]["body"])
print("alice_tries", len(alice), [h["status"] for h in alice])
print("same_id", len({h["id"] for h in alice}) == 1 and alice[0]["id"].startswith("msg_"))
print("alice_verify", all(verifies(h, sa) for h in alice),
      any(verifies(h, sb) for h in alice))
print("bob_verify", all(verifies(h, sb) for h in bob), any(verifies(h, sa) for h in bob))
print("alice_jobs", sorted({json.loads(h["body"])["job_id"] for h in alice}) == [int(ja)])
print("bob_jobs", sorted({json.loads(h["body"])["job_id"] for h in bob}) == [int(jb)])
print("body", sorted(body), body["state"], body["result_manifest_sha256"] == manifest,
      body["members"], body["bytes"], body["last_error"])
print("type", {h["type"] for h in hs})
PY
python3 "$T/verify.py" "$HOOKS" "$SA" "$SB" "$ja" "$jb" "$MANIFEST" >"$T/verify.out" 2>&1 || cat "$T/verify.out"
v() { sed -n "s/^$1 //p" "$T/verify.out"; }
check_eq "alice's webhook was tried twice: 500, then 200" "$(v alice_tries)" "2 [500, 200]"
check_eq "both tries carry the same webhook-id" "$(v same_id)" "True"
check_eq "alice's deliveries verify with her secret, not bob's" "$(v alice_verify)" "True False"
check_eq "bob's delivery verifies with his secret, not alice's" "$(v bob_verify)" "True False"
check_eq "alice's receiver got only alice's job" "$(v alice_jobs)" "True"
check_eq "bob's receiver got only bob's job" "$(v bob_jobs)" "True"
check_eq "the body: job_id, state, result_manifest_sha256, members, bytes, last_error" \
	"$(v body)" "['bytes', 'job_id', 'last_error', 'members', 'result_manifest_sha256', 'state'] succeeded True 1 200000 None"
check_eq "sent as JSON" "$(v type)" "{'application/json'}"

check_eq "remora_webhook_deliveries shows alice her two tries" \
	"$(as alice "SELECT string_agg(concat_ws(' ', job_id, attempt, http_status, delivered, next_try_at IS NOT NULL), ', ' ORDER BY attempt) FROM remora_webhook_deliveries")" \
	"$ja 1 500 f t, $ja 2 200 t f"
check_eq "and not bob's" \
	"$(as alice "SELECT count(*) FROM remora_webhook_deliveries WHERE job_id = $jb")" "0"
check_eq "a delivery changed no job" \
	"$(q "SELECT string_agg(state, ' ' ORDER BY job_id) FROM remora.jobs")" "succeeded succeeded"

# the metadata address: refused at submit, as a source would be
out=$(PGUSER=alice psql -X -A -t -q -v VERBOSITY=verbose -d postgres -c \
	"SELECT remora_submit('$SRC/hooked.bin', options => '{\"notify_url\": \"http://169.254.169.254/latest/meta-data/\"}')" 2>&1 || true)
case $out in
*RM001*"outbound-source policy"*) ok "a notify_url to the metadata address is refused at submit (RM001)" ;;
*) not_ok "a notify_url to the metadata address is refused at submit (got: $out)" ;;
esac
check_eq "and no job was recorded" "$(q "SELECT count(*) FROM remora.jobs")" "2"

# one user's slow receivers do not hold up another user's webhooks:
# twenty of alice's jobs notify a receiver that never answers (it counts
# the tries open at once); each try is cut at remora.webhook_timeout (3 s)
# and tried again, at most
# remora.webhook_max_in_flight_per_role (2) of alice's at once across both
# workers; bob's webhook is delivered meanwhile
for i in $(seq 20); do as alice "SELECT remora_submit('$SRC/hooked.bin', options => '{\"notify_url\": \"http://127.0.0.1:$RECV/alice/slow\"}')" >/dev/null; done
slow_tried() { [ "$(q "SELECT count(*) FROM remora.webhook_tries t JOIN remora.webhooks w USING (webhook_id) WHERE w.url LIKE '%/alice/slow'")" -ge 4 ]; }
check "alice's slow webhooks are tried" wait_for 120 slow_tried
jf=$(as bob "SELECT remora_submit('$SRC/hooked.bin', options => '{\"notify_url\": \"http://127.0.0.1:$RECV/bob/fair\"}')")
bob_fair() { grep -q '"/bob/fair"' "$HOOKS"; }
check "bob's webhook is delivered while alice's are tried" wait_for 60 bob_fair
check_eq "  and alice's are still waiting: none delivered" \
	"$(q "SELECT count(*) FROM remora.webhooks WHERE url LIKE '%/alice/slow' AND delivered_at IS NOT NULL")" 0
most=$(curl -s "http://127.0.0.1:$RECV/most-slow")
check "at most 2 of alice's tries were in flight at once ($most)" test "$most" -ge 1 -a "$most" -le 2
check "a try the receiver did not answer in time is cut at remora.webhook_timeout" \
	grep -qi "timeout\|timed out" <<<"$(q "SELECT string_agg(t.error, ' ') FROM remora.webhook_tries t JOIN remora.webhooks w USING (webhook_id) WHERE w.url LIKE '%/alice/slow'")"
# (alice's slow webhooks end here, so that they take no turn of hers later)
q "UPDATE remora.webhooks SET ended_at = now() WHERE url LIKE '%/alice/slow'" >/dev/null

# a name passes at submit; the address it reaches is judged at connect
settled=$(grep -c "new settings in effect" "$LOG" || true)
q "ALTER SYSTEM SET remora.allow_networks = ''" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
both_took_it() { [ "$(grep -c "new settings in effect" "$LOG" || true)" -ge $((settled + 2)) ]; }
check "both workers take the narrower policy" wait_for 60 both_took_it
# (its source, a name too, is refused when the worker connects: the job
# fails, and a webhook is owed)
jc=$(as alice "SELECT remora_submit('http://localhost:$NGINX_PORT/never.bin', options => '{\"notify_url\": \"http://localhost:$RECV/denied\"}')")
check "the job fails on the same policy" wait_state "$jc" failed 60
tried() { [ "$(as alice "SELECT count(*) FROM remora_webhook_deliveries WHERE job_id = $jc")" = 1 ]; }
check "the webhook to localhost is tried once" wait_for 60 tried
check_eq "refused by the outbound policy at connect, not repeated, not delivered" \
	"$(as alice "SELECT concat_ws(' ', http_status IS NULL, error LIKE 'the outbound-source policy refused%', next_try_at IS NULL, delivered) FROM remora_webhook_deliveries WHERE job_id = $jc")" \
	"t t t f"
check_eq "the receiver never saw it" "$(grep -c '/denied' "$HOOKS" || true)" "0"

# --- remora-worker: PostgreSQL only coordinates
q "ALTER SYSTEM RESET remora.allow_networks" >/dev/null
q "ALTER SYSTEM SET remora.max_workers = 0" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
no_bgworker() { [ "$(q "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'remora worker'")" = 0 ]; }
check "no background worker runs" wait_for 30 no_bgworker
q "CREATE ROLE rw LOGIN; GRANT remora_worker TO rw" >/dev/null
start_remora_worker w1 --label webhooks "host=$T/pg port=$PG_PORT dbname=postgres user=rw"
jx=$(as alice "SELECT remora_submit('$SRC/hooked.bin', options => '{\"notify_url\": \"http://127.0.0.1:$RECV/alice/external\"}')")
check "remora-worker runs alice's job" wait_state "$jx" succeeded 60
external() { grep -q '"/alice/external"' "$HOOKS"; }
check "and delivers its webhook" wait_for 60 external
grep '"/alice/external"' "$HOOKS" >"$T/external.jsonl"
check_eq "signed with alice's secret, for that job" \
	"$(python3 - "$T/external.jsonl" "$SA" "$jx" <<'PY'
import base64, hashlib, hmac, json, sys
h = json.loads(open(sys.argv[1]).readline())
mac = hmac.new(base64.b64decode(sys.argv[2][6:]),
               f"{h['id']}.{h['timestamp']}.{h['body']}".encode(), hashlib.sha256).digest()
print(hmac.compare_digest(h["signature"], "v1," + base64.b64encode(mac).decode()),
      json.loads(h["body"])["job_id"] == int(sys.argv[3]))
PY
)" "True True"
recorded_x() { [ "$(as alice "SELECT count(*) FROM remora_webhook_deliveries WHERE job_id = $jx AND delivered")" = 1 ]; }
check "and records it" wait_for 30 recorded_x

e2e_finish
