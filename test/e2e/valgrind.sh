#!/usr/bin/env bash
#
# The transfer engine under valgrind, on real transfers (nginx source, the
# signature-checking S3 server): a single PUT, a multi-segment object with
# its UploadPartCopy assembly, a 404 and a policy refusal.  Each run must
# report no memory error and no definitely lost block.  The engine is run
# by test/engine/fetch, the same code the worker links; PostgreSQL's own
# processes are not run under valgrind here.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin valgrind

NGINX_PORT=$(free_port)
S3_PORT=$(free_port)
start_nginx "$T/nginx" "$NGINX_PORT"
start_store "$T/store" "$S3_PORT" target || { not_ok "the target store (${REMORA_STORE:-s3rver}) starts"; exit 1; }
export REMORA_KEY=$S3_ACCESS_KEY REMORA_SECRET=$S3_SECRET_KEY
# valgrind is some 30 times slower: a TLS handshake that loads the system's
# CA bundle took over the engine's 5 s connect timeout on a busy machine,
# and the untrusted run then failed as class timeout, not tls
export REMORA_CONNECT_TIMEOUT_MS=60000 REMORA_STALL_TIMEOUT_MS=60000
# segments of 256 KiB; a production store refuses parts under 5 MiB
# (EntityTooSmall), which the test server accepts
PART=262144
[ "${REMORA_STORE:-s3rver}" = rgw ] && PART=5242880
head -c 100000 /dev/urandom >"$T/nginx/www/small.bin"
head -c $((4 * PART + 100000)) /dev/urandom >"$T/nginx/www/multi.bin"
chmod 644 "$T/nginx/www"/*.bin
make -s test/engine/fetch >/dev/null

run() {	# run NAME URL FILE EXPECT(0 success / 1 failure)
	local name=$1 url=$2 file=$3 expect=$4 rc
	valgrind --quiet --leak-check=full --errors-for-leak-kinds=definite \
		--error-exitcode=99 --log-file="$T/$name.vg" \
		./test/engine/fetch "http://127.0.0.1:$S3_PORT" target "vg/$name/" "$url" "$file" "$PART" \
		>"$T/$name.out" 2>&1
	rc=$?
	if [ "$rc" = 99 ]; then
		not_ok "valgrind: $name has memory errors or definite leaks"
		head -40 "$T/$name.vg"
	elif [ "$rc" != "$expect" ]; then
		not_ok "valgrind: $name ended with $rc, not $expect: $(cat "$T/$name.out")"
	else
		ok "valgrind: $name, no memory error, no definite leak"
	fi
}
run single "http://127.0.0.1:$NGINX_PORT/small.bin" small.bin 0
run segments "http://127.0.0.1:$NGINX_PORT/multi.bin" multi.bin 0
check "valgrind: the multi-segment result is intact" \
	test "$(aws_s3 s3 cp s3://target/vg/segments/data/multi.bin - 2>/dev/null | sha256sum | cut -d' ' -f1)" \
	= "$(sha256sum "$T/nginx/www/multi.bin" | cut -d' ' -f1)"
run missing "http://127.0.0.1:$NGINX_PORT/missing.bin" missing.bin 1
run denied "http://127.0.0.2:$NGINX_PORT/small.bin" small.bin 1
check "valgrind: the denied run was refused by policy" grep -q "class policy" "$T/denied.out"

# TLS with a private CA, and an egress proxy (test/e2e/tls.sh has the rest)
mkdir -p "$T/ca"
make_ca "$T/ca" ca
make_cert "$T/ca" ca server
HTTPS_PORT=$(free_port)
start_nginx_tls "$T/https" "$HTTPS_PORT" "$T/ca/server.pem" "$T/ca/server.key" "$T/nginx/www"
run untrusted "https://127.0.0.1:$HTTPS_PORT/small.bin" small.bin 1
check "valgrind: the untrusted certificate failed as class tls" grep -q "class tls" "$T/untrusted.out"
REMORA_CA_FILE=$T/ca/ca.pem run trusted "https://127.0.0.1:$HTTPS_PORT/multi.bin" multi.bin 0
PROXY_PORT=$(free_port)
start_tinyproxy "$T/proxy" "$PROXY_PORT" vg vg-proxy-pass
export REMORA_HTTP_PROXY="http://vg:vg-proxy-pass@127.0.0.1:$PROXY_PORT" REMORA_HTTPS_PROXY="http://vg:vg-proxy-pass@127.0.0.1:$PROXY_PORT"
REMORA_CA_FILE=$T/ca/ca.pem run proxied "https://127.0.0.1:$HTTPS_PORT/small.bin" small.bin 0
check "valgrind: the proxied run went through the proxy" grep -q "CONNECT 127.0.0.1:$HTTPS_PORT" "$T/proxy/tinyproxy.log"
run proxied-denied "http://127.0.0.2:$NGINX_PORT/small.bin" small.bin 1
check "valgrind: the proxied denied run was refused by policy" grep -q "class policy" "$T/proxied-denied.out"

e2e_finish
