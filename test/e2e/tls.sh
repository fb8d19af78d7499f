#!/usr/bin/env bash
#
# TLS trust and egress proxies (doc/operator-guide.md, "TLS and proxies").
# Certificates from throwaway CAs made here with openssl:
#   - an HTTPS source whose CA nobody trusts fails as class tls after one
#     attempt (no retries), and so do a plain-HTTP port asked for TLS and a
#     certificate for another host name; with remora.ca_file (ALTER SYSTEM
#     and a reload) the same source succeeds;
#   - the target store over HTTPS (nginx with TLS in front of the test
#     store) with a private CA; one whose CA is not trusted fails as tls;
#   - a registered source endpoint over HTTPS with its own CA
#     (remora.set_source_endpoint_ca), which no view shows;
#   - a forward proxy (Debian's tinyproxy, with a password, logging what it
#     forwards): downloads go through it, a redirect to a denied address is
#     refused before the proxy sees it, and its password appears in no log,
#     no view and no error.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin tls

stack_up

CA=$T/ca
mkdir -p "$CA"
chmod 755 "$CA"
make_ca "$CA" ca1
make_ca "$CA" ca2
make_cert "$CA" ca1 files
make_cert "$CA" ca1 other "DNS:other.example"
make_cert "$CA" ca1 expired "IP:127.0.0.1" -1
make_cert "$CA" ca1 store1
make_cert "$CA" ca2 store2
chmod 644 "$CA"/*
# each port is picked once the one before is bound: free_port only knows
# the ports in use, and two fronts on one port would go unnoticed
HTTPS_PORT=$(free_port)
start_nginx_tls "$T/https" "$HTTPS_PORT" "$CA/files.pem" "$CA/files.key" "$WWW"
OTHER_PORT=$(free_port)
start_nginx_tls "$T/other" "$OTHER_PORT" "$CA/other.pem" "$CA/other.key" "$WWW"
EXPIRED_PORT=$(free_port)
start_nginx_tls "$T/expired" "$EXPIRED_PORT" "$CA/expired.pem" "$CA/expired.key" "$WWW"
STORE1_PORT=$(free_port)
start_nginx_tls "$T/store1" "$STORE1_PORT" "$CA/store1.pem" "$CA/store1.key" "$S3_PORT"
STORE2_PORT=$(free_port)
start_nginx_tls "$T/store2" "$STORE2_PORT" "$CA/store2.pem" "$CA/store2.key" "$S3_PORT"
HTTPS="https://127.0.0.1:$HTTPS_PORT"

make_file small.bin 100000
make_file big.bin 12000000

# reload, and wait until both workers say the new settings are in effect
reload_workers() {
	local n
	n=$(grep -c "new settings in effect" "$LOG" || true)
	q "SELECT pg_reload_conf()" >/dev/null
	applied() { [ "$(grep -c "new settings in effect" "$LOG" || true)" -ge $((n + 2)) ]; }
	wait_for 30 applied
}
# how a failed job ended: "class retryable attempts"
ended() { q "SELECT (last_error ->> 'class') || ' ' || (last_error ->> 'retryable') || ' ' || attempts_used FROM remora.jobs WHERE job_id = $1"; }
message() { q "SELECT last_error ->> 'message' FROM remora.jobs WHERE job_id = $1"; }
says() { message "$1" | grep -q -- "$2"; }
fails_as_tls() {	# fails_as_tls JOB NAME HINT
	wait_state "$1" failed 60 || { not_ok "$2: the job fails"; return; }
	check_eq "$2: class tls, not retried, after one attempt" "$(ended "$1")" "tls false 1"
	check "$2: the message names the host and the setting ($3)" \
		bash -c "[[ \"\$1\" == *127.0.0.1* && \"\$1\" == *\"\$2\"* ]]" _ "$(message "$1")" "$3"
}

# --- an untrusted CA, a plain-HTTP port, another host's certificate
j=$(q "SELECT remora_submit('$HTTPS/small.bin')")
fails_as_tls "$j" "an HTTPS source signed by an unknown CA" remora.ca_file
check "the reason is curl's: the issuer is unknown" says "$j" "local issuer certificate"
j=$(q "SELECT remora_submit('https://127.0.0.1:$NGINX_PORT/small.bin')")
fails_as_tls "$j" "https:// to a plain-HTTP port (no TLS)" "did not answer in TLS"
check "  and it does not send the user to remora.ca_file" \
	bash -c "[[ \"\$1\" != *remora.ca_file* ]]" _ "$(message "$j")"

q "ALTER SYSTEM SET remora.ca_file = '$CA/ca1.pem'" >/dev/null
check "the workers take remora.ca_file" reload_workers
j=$(q "SELECT remora_submit('https://127.0.0.1:$OTHER_PORT/small.bin')")
fails_as_tls "$j" "a trusted CA's certificate for another host name" remora.ca_file
check "the reason says the name does not match" says "$j" "target host name"
j=$(q "SELECT remora_submit('https://127.0.0.1:$EXPIRED_PORT/small.bin')")
fails_as_tls "$j" "a trusted CA's certificate that has expired" remora.ca_file
check "the reason says it has expired" says "$j" "expired"

# --- remora.ca_file: the same source succeeds
j=$(q "SELECT remora_submit('$HTTPS/small.bin')")
check "with remora.ca_file the HTTPS source succeeds" wait_state "$j" succeeded 60
verify "$j" small.bin
j=$(q "SELECT remora_submit('$HTTPS/big.bin')")
check "a larger HTTPS source (several segments) succeeds" wait_state "$j" succeeded 90
verify "$j" big.bin

# --- the target store over HTTPS with a private CA
q "ALTER SYSTEM SET remora.s3_endpoint = 'https://127.0.0.1:$STORE1_PORT'" >/dev/null
check "the workers take the HTTPS target" reload_workers
j=$(q "SELECT remora_submit('$SRC/big.bin')")
check "a job into the HTTPS target store succeeds" wait_state "$j" succeeded 90
verify "$j" big.bin
check "the bytes went through the TLS front of the store" \
	grep -q "PUT /target/" "$T/store1/access.log"
q "ALTER SYSTEM SET remora.s3_endpoint = 'https://127.0.0.1:$STORE2_PORT'" >/dev/null
check "the workers take a target whose CA is not trusted" reload_workers
j=$(q "SELECT remora_submit('$SRC/small.bin')")
fails_as_tls "$j" "a target store whose CA is not trusted" remora.ca_file
q "ALTER SYSTEM SET remora.s3_endpoint = 'https://127.0.0.1:$STORE1_PORT'" >/dev/null
check "the workers take the HTTPS target again" reload_workers

# --- a registered source endpoint over HTTPS with its own CA
aws_s3 s3 cp "$WWW/small.bin" s3://target/private/obj.bin >/dev/null
q "SELECT remora.register_source_endpoint('private', 'https://127.0.0.1:$STORE2_PORT', 'us-east-1', true, '$S3_ACCESS_KEY', '$S3_SECRET_KEY')" >/dev/null
j=$(q "SELECT remora_submit('s3://target/private/obj.bin', options => '{\"endpoint\": \"private\"}')")
fails_as_tls "$j" "an endpoint whose CA is not trusted" remora.set_source_endpoint_ca
q "SELECT remora.set_source_endpoint_ca('private', \$pem\$$(cat "$CA/ca2.pem")\$pem\$)" >/dev/null
j=$(q "SELECT remora_submit('s3://target/private/obj.bin', options => '{\"endpoint\": \"private\"}')")
check "with the endpoint's own CA the job succeeds" wait_state "$j" succeeded 60
check_eq "and it has the object's bytes" "$(q "SELECT sha256 FROM remora_result($j)")" \
	"$(sha256sum "$WWW/small.bin" | cut -d' ' -f1)"
check_eq "no view shows the endpoint's CA" \
	"$(q "SELECT count(*) FROM pg_catalog.pg_attribute WHERE attrelid = 'remora_source_endpoints'::regclass AND attname = 'ca_pem'")" "0"
check "a PEM that is not one is refused (22023)" bash -c \
	"psql -X -q -v ON_ERROR_STOP=1 -c \"SELECT remora.set_source_endpoint_ca('private', 'junk')\" 2>&1 | grep -q 'invalid endpoint CA'"

# --- a forward proxy with a password
PROXY_PORT=$(free_port)
PROXY_PASS="prx$RANDOM$RANDOM-pass"
start_tinyproxy "$T/proxy" "$PROXY_PORT" remora "$PROXY_PASS"
PLOG=$T/proxy/tinyproxy.log
q "ALTER SYSTEM SET remora.http_proxy = 'http://remora:$PROXY_PASS@127.0.0.1:$PROXY_PORT'" >/dev/null
q "ALTER SYSTEM SET remora.https_proxy = 'http://remora:$PROXY_PASS@127.0.0.1:$PROXY_PORT'" >/dev/null
check "the workers take the proxies" reload_workers
cp "$WWW/small.bin" "$WWW/via-proxy.bin"
j=$(q "SELECT remora_submit('$SRC/via-proxy.bin')")
check "an http:// source through the proxy succeeds" wait_state "$j" succeeded 60
check "the proxy forwarded it" grep -q "GET http://127.0.0.1:$NGINX_PORT/via-proxy.bin" "$PLOG"
j=$(q "SELECT remora_submit('$HTTPS/big.bin')")
check "an https:// source through the proxy's tunnel succeeds" wait_state "$j" succeeded 90
verify "$j" big.bin
check "the proxy opened the tunnel" grep -q "CONNECT 127.0.0.1:$HTTPS_PORT" "$PLOG"
check "the target store is reached directly, not through the proxy" \
	bash -c "! grep -q ':$STORE1_PORT' '$PLOG'"

# the Hub's API and its CDN hops go through the proxy too
HUB=$T/hub
HUB_PORT=$(free_port)
CDN_PORT=$(free_port)
mkdir -p "$HUB/models/acme/tiny"
head -c 700 /dev/urandom >"$HUB/models/acme/tiny/README.md"
head -c 3000000 /dev/urandom >"$HUB/models/acme/tiny/model.bin"
start_hub "$HUB_PORT" "$CDN_PORT" "$HUB" "hf_tls_test_token"
q "ALTER SYSTEM SET remora.hf_endpoint = 'http://127.0.0.1:$HUB_PORT'" >/dev/null
check "the workers take the local hub" reload_workers
j=$(q "SELECT remora_submit('hf://acme/tiny')")
check "a Hub snapshot through the proxy succeeds" wait_state "$j" succeeded 90
check "the proxy forwarded the Hub's API calls" \
	grep -q "GET http://127.0.0.1:$HUB_PORT/api/models/acme/tiny" "$PLOG"
check "and the CDN hop of the large file" grep -q "GET http://127.0.0.1:$CDN_PORT/" "$PLOG"

j=$(q "SELECT remora_submit('$SRC/to-denied')")
wait_state "$j" failed 30 || not_ok "a redirect to a denied address: the job fails"
check_eq "a redirect to a denied address is refused by the policy" \
	"$(q "SELECT (last_error ->> 'class') || ' ' || (last_error ->> 'retryable') FROM remora.jobs WHERE job_id = $j")" "policy false"
check "the proxy saw the first hop" grep -q "GET http://127.0.0.1:$NGINX_PORT/to-denied" "$PLOG"
check "the denied address never reached the proxy" bash -c "! grep -q '127.0.0.2' '$PLOG'"
check "a denied literal address is refused at submit (RM001)" bash -c \
	"psql -X -q -v ON_ERROR_STOP=1 -c \"SELECT remora_submit('http://127.0.0.2:$NGINX_PORT/small.bin')\" 2>&1 | grep -q 'outbound-source policy'"

# a wrong password: the job fails, and says nothing of the password
WRONG="wrong$RANDOM$RANDOM-pass"
q "ALTER SYSTEM SET remora.http_proxy = 'http://remora:$WRONG@127.0.0.1:$PROXY_PORT'" >/dev/null
check "the workers take the wrong password" reload_workers
j=$(q "SELECT remora_submit('$SRC/small.bin', options => '{\"max_attempts\": 1}')")
check "with a wrong proxy password the job fails" wait_state "$j" failed 60
check "its error names the proxy" says "$j" "egress proxy"

q "CREATE ROLE alice LOGIN; GRANT remora_user TO alice" >/dev/null
check "a user cannot read the proxy setting" bash -c \
	"! psql -X -q -U alice -d postgres -c 'SHOW remora.https_proxy' >/dev/null 2>&1"
check_eq "nor see it in pg_settings" \
	"$(psql -X -A -t -q -U alice -d postgres -c "SELECT count(*) FROM pg_settings WHERE name IN ('remora.http_proxy', 'remora.https_proxy')")" "0"
# a mistyped proxy URL: refused without repeating it, and its statement
# is logged hidden
psql -X -q -c "ALTER SYSTEM SET remora.https_proxy = 'socks5://remora:$WRONG@127.0.0.1:1'" >/dev/null 2>&1
check "a mistyped proxy URL is refused, its statement logged hidden" \
	grep -q "egress proxy with credentials, hidden" "$LOG"
check_eq "the proxy passwords are in no error history" \
	"$(q "SELECT count(*) FROM remora.attempts WHERE error::text LIKE '%$PROXY_PASS%' OR error::text LIKE '%$WRONG%'")" "0"
check "the proxy passwords are in no server log line" \
	bash -c "! grep -q -e '$PROXY_PASS' -e '$WRONG' '$LOG'"

e2e_finish
