# Services for end-to-end tests (source after deps.sh): nginx serving
# files, the signature-checking S3 server, the fault-injecting proxy.
# Each start_* function records what it started in $SERVICES_DIR so that
# stop_services stops it, also on failure (call it from a trap).

SERVICES_DIR=${SERVICES_DIR:-}

# ensure_node_modules: the pinned test packages (npm ci; idempotent)
ensure_node_modules() {
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	if [ ! -d "$root/test/s3/node_modules/@20minutes/s3rver" ]; then
		(cd "$root/test/s3" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
	fi
}

# start_nginx DIR PORT: serve DIR/www; /redirect/NAME -> /NAME, /slow/NAME
# at 1 MB/s, /to-denied -> http://127.0.0.2:PORT/small.bin.  DIR must be world-readable (nginx workers run as nobody).
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
	echo $! >>"$SERVICES_DIR/pids"
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
	echo $! >>"$SERVICES_DIR/pids"
	wait_port "$port"
}

# start_faults PORT UPSTREAM_PORT: the fault-injecting proxy
start_faults() {
	local port=$1 upstream=$2
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	node "$root/test/faults/proxy.js" "$port" "$upstream" >"$SERVICES_DIR/faults.log" 2>&1 &
	echo $! >>"$SERVICES_DIR/pids"
	wait_port "$port"
}

# start_hub HUB_PORT CDN_PORT ROOT TOKEN: the local Hugging Face Hub
start_hub() {
	local root
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
	node "$root/test/hub/server.js" "$@" >"$SERVICES_DIR/hub.log" 2>&1 &
	echo $! >>"$SERVICES_DIR/pids"
	wait_port "$1"
	wait_port "$2"
}

wait_port() {
	local port=$1 i
	for i in $(seq 1 100); do
		(echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "nothing listens on port $port" >&2
	return 1
}

stop_services() {
	[ -n "$SERVICES_DIR" ] && [ -f "$SERVICES_DIR/pids" ] || return 0
	while read -r pid; do
		kill "$pid" 2>/dev/null || true
	done <"$SERVICES_DIR/pids"
	rm -f "$SERVICES_DIR/pids"
}

# aws ARGS...: the real AWS CLI from Debian against the test S3 server
aws_s3() {
	AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1 \
		AWS_EC2_METADATA_DISABLED=true /usr/bin/aws --endpoint-url "http://127.0.0.1:$S3_PORT" \
		--no-cli-pager "$@"
}
