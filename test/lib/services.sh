# Services for end-to-end tests (source after deps.sh): nginx serving
# files, the target store (the signature-checking S3 server, or Ceph's
# RADOS Gateway: start_store), the fault-injecting proxy.
# Each start_* function records what it started in $SERVICES_DIR so that
# stop_services stops it, also on failure (call it from a trap).

SERVICES_DIR=${SERVICES_DIR:-}
. "$(dirname "${BASH_SOURCE[0]}")/wait.sh"
. "$(dirname "${BASH_SOURCE[0]}")/rgw.sh"
. "$(dirname "${BASH_SOURCE[0]}")/swift.sh"

# ensure_node_modules [s3]: the pinned test packages (npm ci; idempotent):
# test/s3's S3 server, test/openapi's validators (not with "s3": the quick
# start runs only the server)
ensure_node_modules() {
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	if [ ! -d "$root/test/s3/node_modules/@20minutes/s3rver" ]; then
		(cd "$root/test/s3" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	fi
	[ "${1:-}" = s3 ] && return 0
	# the OpenAPI validator and Ajv (test/openapi/check.js)
	if [ ! -d "$root/test/openapi/node_modules/@seriousme/openapi-schema-validator" ]; then
		(cd "$root/test/openapi" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	fi
}

# start_nginx DIR PORT: serve DIR/www; /redirect/NAME -> /NAME, /slow/NAME
# at 1 MB/s, /slower/NAME at 256 KB/s, /to-denied -> http://127.0.0.2:PORT/small.bin.  DIR must be world-readable (nginx workers run as nobody).
start_nginx() {
	local dir=$1 port=$2
	mkdir -p "$dir/www" "$dir/tmp"
	chmod 755 "$dir" "$dir/www"
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 256; }
http {
	access_log $dir/access.log;
	client_body_temp_path $dir/tmp/body;
	proxy_temp_path $dir/tmp/proxy;
	fastcgi_temp_path $dir/tmp/fastcgi;
	uwsgi_temp_path $dir/tmp/uwsgi;
	scgi_temp_path $dir/tmp/scgi;
	sendfile on;
	server {
		listen 127.0.0.1:$port;
		root $dir/www;
		location /redirect/ { rewrite ^/redirect/(.*)\$ /\$1 redirect; }
		location /slow/ { alias $dir/www/; limit_rate 1m; }
		location /slower/ { alias $dir/www/; limit_rate 256k; }
		# a redirect to an address the policy denies (127.0.0.2)
		location = /to-denied { return 302 http://127.0.0.2:$port/small.bin; }
		# hostile redirects
		location = /to-metadata { return 302 http://169.254.169.254/latest/meta-data/iam; }
		location = /to-loopback6 { return 302 http://[::1]:$port/small.bin; }
		location = /to-file { return 302 file:///etc/passwd; }
		location = /to-gopher { return 302 gopher://127.0.0.1:$port/_x; }
		location = /to-userinfo { return 302 http://user:pass@127.0.0.1:$port/small.bin; }
		location = /loop { return 302 /loop; }
	}
}
CONF
	nginx -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' >"$dir/nginx.out" 2>&1 &
	service_pid $!
	wait_port "$port"
}

# start_s3 DIR PORT BUCKET...: @20minutes/s3rver (checks signatures)
start_s3() {
	local dir=$1 port=$2
	shift 2
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	ensure_node_modules
	mkdir -p "$dir"
	(cd "$root/test/s3" && exec node --openssl-legacy-provider server.js "$dir" "$port" "$@") \
		>"$dir.log" 2>&1 &
	service_pid $!
	wait_port "$port"
}

# start_store DIR PORT BUCKET...: the target store chosen by REMORA_STORE,
# s3rver (the default: the signature-checking test server), rgw (Ceph's
# RADOS Gateway, test/lib/rgw.sh) or swift (OpenStack Swift's S3 API,
# test/lib/swift.sh).  Sets S3_ACCESS_KEY and S3_SECRET_KEY to its key
# (aws_s3 uses them), and adds a second key, S3_SECOND_KEY, with the secret
# in REMORA_TEST_SECRET, if that is set: REMORAKEY, or remora:REMORAKEY on
# Swift, whose tempauth keys are "account:user".
start_store() {
	local dir=$1 port=$2
	shift 2
	S3_SECOND_KEY=REMORAKEY
	case ${REMORA_STORE:-s3rver} in
	s3rver)
		S3_ACCESS_KEY=S3RVER S3_SECRET_KEY=S3RVER
		start_s3 "$dir" "$port" "$@"
		;;
	rgw)
		S3_ACCESS_KEY=REMORARGW S3_SECRET_KEY="rgw-secret-$RANDOM$RANDOM$RANDOM"
		start_rgw "$dir" "$port" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" "$@" || return 1
		if [ -n "${REMORA_TEST_SECRET:-}" ]; then
			rgw_add_key "$dir" REMORAKEY "$REMORA_TEST_SECRET"
		fi
		;;
	swift)
		S3_ACCESS_KEY=remora:tester S3_SECRET_KEY="swift-secret-$RANDOM$RANDOM$RANDOM"
		S3_SECOND_KEY=remora:REMORAKEY
		SWIFT_SECOND_KEY=${REMORA_TEST_SECRET:+$S3_SECOND_KEY} \
			SWIFT_SECOND_SECRET=${REMORA_TEST_SECRET:-} \
			start_swift "$dir" "$port" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" "$@" || return 1
		;;
	*)
		echo "REMORA_STORE must be s3rver, rgw or swift, not '$REMORA_STORE'" >&2
		return 1
		;;
	esac
}

# store_lists_uploads: the target store has ListMultipartUploads (and
# AbortMultipartUpload): RGW and Swift do, the test server does not
store_lists_uploads() { [ "${REMORA_STORE:-s3rver}" != s3rver ]; }

# start_faults PORT UPSTREAM_PORT [NAME]: the fault-injecting proxy
# (test/faults/proxy.js; its log NAME.log, "faults" by default; the
# environment's KEEPALIVE_MS reaches it)
start_faults() {
	local port=$1 upstream=$2 name=${3:-faults}
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	node "$root/test/faults/proxy.js" "$port" "$upstream" >"$SERVICES_DIR/$name.log" 2>&1 &
	service_pid $!
	wait_port "$port"
}

# start_hub HUB_PORT CDN_PORT ROOT TOKEN: the local Hugging Face Hub
start_hub() {
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	node "$root/test/hub/server.js" "$@" >"$SERVICES_DIR/hub.log" 2>&1 &
	service_pid $!
	wait_port "$1"
	wait_port "$2"
}

wait_port() {
	local port=$1 t0=$EPOCHSECONDS
	until (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		if [ "$EPOCHSECONDS" -ge $((t0 + 20)) ]; then
			echo "nothing listens on port $port" >&2
			return 1
		fi
		poll_pause "$t0"
	done
}

# pid_start PID: when the process PID started (field 22 of its
# /proc/PID/stat, past the command name, which may hold spaces); fails
# if there is no such process
pid_start() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	# shellcheck disable=SC2086
	set -- $stat
	echo "${20}"
}

# kill_if_same SIGNAL PID START: signal PID only while it is the process
# that started at START.  A pid freed minutes ago may be another's by
# now: pids wrap within a suite run (pid_max 32768), and a cleanup's
# stale SIGKILL once killed a lane of test/run.
kill_if_same() {
	pid_is "$2" "$3" && kill -s "$1" "$2" 2>/dev/null
}

# pid_is PID START: PID is still the process that started at START
pid_is() {
	[ -n "$2" ] && [ "$(pid_start "$1")" = "$2" ]
}

# service_pid PID [SIGNAL]: record a process for stop_services, with the
# signal that stops it (SIGTERM unless named) and its start
service_pid() {
	echo "$1 ${2:-TERM} $(pid_start "$1")" >>"$SERVICES_DIR/pids"
}

# stop_services: stop what service_pid recorded, if it still runs: one
# "PID SIGNAL START" a line
stop_services() {
	[ -n "$SERVICES_DIR" ] && [ -f "$SERVICES_DIR/pids" ] || return 0
	local pid sig start
	while read -r pid sig start; do
		kill_if_same "${sig:-TERM}" "$pid" "${start:-}" || true
	done <"$SERVICES_DIR/pids"
	rm -f "$SERVICES_DIR/pids"
}

# store_buckets PORT KEY SECRET LOG BUCKET...: the buckets created with the
# AWS CLI on a store just started on PORT (its output appended to LOG);
# on failure, prints the bucket that could not be created
store_buckets() {
	local port=$1 key=$2 secret=$3 log=$4 b
	shift 4
	for b in "$@"; do
		AWS_ACCESS_KEY_ID=$key AWS_SECRET_ACCESS_KEY=$secret AWS_DEFAULT_REGION=us-east-1 \
			AWS_EC2_METADATA_DISABLED=true /usr/bin/aws --endpoint-url "http://127.0.0.1:$port" \
			s3api create-bucket --bucket "$b" >>"$log" 2>&1 || { echo "$b"; return 1; }
	done
}

# aws ARGS...: the real AWS CLI from Debian against the target store on
# $S3_PORT, with its key ($S3_ACCESS_KEY/$S3_SECRET_KEY, s3rver's by default)
aws_s3() {
	AWS_ACCESS_KEY_ID=${S3_ACCESS_KEY:-S3RVER} AWS_SECRET_ACCESS_KEY=${S3_SECRET_KEY:-S3RVER} \
		AWS_DEFAULT_REGION=us-east-1 \
		AWS_EC2_METADATA_DISABLED=true /usr/bin/aws --endpoint-url "http://127.0.0.1:$S3_PORT" \
		--no-cli-pager "$@"
}

# s3_status s3://BUCKET/KEY: the HTTP status of a GET of the object, read
# by curl from a URL the AWS CLI presigns with $S3_ACCESS_KEY and
# $S3_SECRET_KEY (set them for one call to try other keys).  For checks
# that expect an error: the AWS CLI 2.9 crashes on RGW's error answers
# (their <Message> is empty), so its exit status says nothing there.
s3_status() {
	curl -s -o /dev/null -w '%{http_code}' "$(aws_s3 s3 presign "$1")"
}

# make_ca DIR NAME: a throwaway certificate authority, DIR/NAME.pem and
# DIR/NAME.key (openssl)
make_ca() {
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=remora test CA $2" \
		-keyout "$1/$2.key" -out "$1/$2.pem" >/dev/null 2>&1
}

# make_cert DIR CA NAME [SAN [DAYS]]: a server certificate DIR/NAME.pem
# (key DIR/NAME.key) signed by DIR/CA.pem, for SAN (by default 127.0.0.1
# and localhost), valid for DAYS (2; -1 makes one that has expired)
make_cert() {
	local dir=$1 ca=$2 name=$3 san=${4:-IP:127.0.0.1,DNS:localhost} days=${5:-2}
	openssl req -newkey rsa:2048 -nodes -subj "/CN=$name" \
		-keyout "$dir/$name.key" -out "$dir/$name.csr" >/dev/null 2>&1
	printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$san" >"$dir/$name.ext"
	openssl x509 -req -in "$dir/$name.csr" -CA "$dir/$ca.pem" -CAkey "$dir/$ca.key" \
		-CAcreateserial -days "$days" -extfile "$dir/$name.ext" -out "$dir/$name.pem" >/dev/null 2>&1
}

# start_nginx_tls DIR PORT CERT KEY WHAT: nginx over TLS (1.2 and 1.3) on
# PORT with CERT and KEY, in front of WHAT: a directory it serves, or the
# port of a plain-HTTP server on 127.0.0.1 it passes every request to
# (the target store: the Host header is passed as the client signed it)
start_nginx_tls() {
	local dir=$1 port=$2 cert=$3 key=$4 what=$5 serve
	mkdir -p "$dir/tmp"
	chmod 755 "$dir"
	if [[ $what =~ ^[0-9]+$ ]]; then
		serve="location / {
			proxy_pass http://127.0.0.1:$what;
			proxy_set_header Host \$http_host;
			proxy_http_version 1.1;
			proxy_set_header Connection \"\";
			proxy_request_buffering off;
			proxy_buffering off;
			client_max_body_size 0;
		}"
	else
		serve="root $what;"
	fi
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 256; }
http {
	access_log $dir/access.log;
	client_body_temp_path $dir/tmp/body;
	proxy_temp_path $dir/tmp/proxy;
	fastcgi_temp_path $dir/tmp/fastcgi;
	uwsgi_temp_path $dir/tmp/uwsgi;
	scgi_temp_path $dir/tmp/scgi;
	server {
		listen 127.0.0.1:$port ssl;
		ssl_certificate $cert;
		ssl_certificate_key $key;
		ssl_protocols TLSv1.2 TLSv1.3;
		$serve
	}
}
CONF
	nginx -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' >"$dir/nginx.out" 2>&1 &
	service_pid $!
	wait_port "$port"
}

# start_tinyproxy DIR PORT [USER PASSWORD]: a forward proxy (Debian's
# tinyproxy) on 127.0.0.1:PORT, for clients on 127.0.0.1 only, with HTTP
# Basic authentication when USER is given; it logs every request it
# forwards (GET http://..., CONNECT host:port) to DIR/tinyproxy.log
start_tinyproxy() {
	local dir=$1 port=$2 user=${3:-} password=${4:-}
	mkdir -p "$dir"
	chmod 777 "$dir"	# it drops to nobody and writes its log there
	cat >"$dir/tinyproxy.conf" <<CONF
User nobody
Group nogroup
Port $port
Listen 127.0.0.1
Timeout 60
LogFile "$dir/tinyproxy.log"
LogLevel Connect
MaxClients 50
Allow 127.0.0.1
DisableViaHeader Yes
CONF
	[ -n "$user" ] && echo "BasicAuth $user $password" >>"$dir/tinyproxy.conf"
	tinyproxy -d -c "$dir/tinyproxy.conf" >"$dir/tinyproxy.out" 2>&1 &
	service_pid $!
	wait_port "$port"
}

# start_tcpproxy PORT UPSTREAM_PORT CONTROL_PORT [NAME]: the TCP proxy
# that cuts connections (test/faults/tcpproxy.js), e.g. between a worker
# and PostgreSQL; tcpproxy CONTROL_PORT ACTION drives it
start_tcpproxy() {
	local port=$1 upstream=$2 control=$3 name=${4:-tcpproxy}
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	node "$root/test/faults/tcpproxy.js" "$port" "$upstream" "$control" \
		>"$SERVICES_DIR/$name.log" 2>&1 &
	service_pid $!
	wait_port "$port" && wait_port "$control"
}

# tcpproxy CONTROL_PORT ACTION: drop, refuse, blackhole, allow,
# upstream?port=N, connections, accepted (see test/faults/tcpproxy.js)
tcpproxy() { curl -s "http://127.0.0.1:$1/$2"; }
