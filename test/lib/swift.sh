# A throwaway OpenStack Swift with its S3 API (the s3api middleware), a
# production store of another lineage than RGW, for end-to-end tests
# (source after deps.sh and services.sh).  memcached, the account,
# container and object servers and the proxy run as plain processes from
# Debian's packages, each in one process (workers = 0), on 127.0.0.1
# only, with their configuration, rings and data under one directory.
# Nothing under /etc/swift is written: every server reads its rings from
# DIR/etc (swift_dir); the one file Swift reads from a fixed path,
# /etc/swift/swift.conf (hash prefix and suffix, storage policy 0), is
# used as the package installs it.  The settings that are not obvious:
#   - rings of one replica on one device each, built by one Python
#     process (nine swift-ring-builder runs take ~1 s each);
#   - mount_check = false (the device is a directory), the servers run as
#     the user who starts them (user = ...);
#   - the proxy's pipeline has s3api before tempauth (s3api turns a
#     signed S3 request into one tempauth checks), and slo after it
#     (multipart uploads are completed as SLO manifests); tempauth keeps
#     its tokens in memcached;
#   - logs go to the console (-v), in DIR/NAME.out; log_address names no
#     socket, so Swift's syslog handler falls back to UDP on localhost
#     (unheard where no syslog listens) instead of the host's /dev/log;
#   - each server and the proxy get 120 s to answer: a Python server
#     takes ~1.5 s of CPU to start, tens of seconds on busy cores.
# Its S3 dialect (conditional copies of multipart objects refused, 1,000
# parts at most, If-None-Match: * not implemented...) is in
# doc/operator-guide.md, "Object stores", as test/e2e/store.sh observes it.
#
#   start_swift DIR PORT ACCESS_KEY SECRET BUCKET...
#
# starts it with S3 on http://127.0.0.1:PORT (taking at most
# SWIFT_MAX_UPLOAD_PARTS parts in one upload, if set: s3api's
# max_upload_part_num, 1,000 by default), a tempauth user whose S3
# key is ACCESS_KEY ("account:user", tempauth's form) with SECRET (and a
# second user of the same account, SWIFT_SECOND_KEY with
# SWIFT_SECOND_SECRET, if they are set: tempauth reads its users only
# when it starts), and the buckets; records the processes in
# $SERVICES_DIR/pids so that stop_services kills them, and starts a watchdog that kills them if the
# shell that started them dies without running its traps (the servers
# leave its process group: they call setsid).

# _swift_user ACCESS_KEY SECRET: tempauth's line for an S3 key
# "account:user", an administrator of its account
_swift_user() { echo "user_${1%%:*}_${1#*:} = $2 .admin"; }

_swift_fail() {	# _swift_fail DIR MESSAGE: say why, with the logs' last lines
	local dir=$1 f
	echo "start_swift: $2" >&2
	for f in "$dir"/*.out; do
		[ -s "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }
	done
	return 1
}
_swift_port_free() { ! (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
_swift_listening() { (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
_swift_healthy() {
	[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1/healthcheck")" = 200 ]
}
_swift_started() {	# _swift_started DIR PID MARK: a process to SIGKILL at the end
	service_pid "$2" KILL
	echo "$2 $3" >>"$1/daemons"
	disown "$2"
}

# _swift_rings DIR ACCOUNT_PORT CONTAINER_PORT OBJECT_PORT: the three
# rings, one replica on device d1 each
_swift_rings() {
	/usr/bin/python3 - "$@" <<'PY'
import sys
from swift.common.ring import RingBuilder
d, ports = sys.argv[1], dict(zip(("account", "container", "object"), sys.argv[2:5]))
for name, port in ports.items():
    b = RingBuilder(6, 1, 1)
    b.add_dev({"region": 1, "zone": 1, "ip": "127.0.0.1", "port": int(port),
               "device": "d1", "weight": 100})
    b.rebalance()
    b.save("%s/etc/%s.builder" % (d, name))
    b.get_ring().save("%s/etc/%s.ring.gz" % (d, name))
PY
}

# _swift_server_conf DIR NAME PORT: DIR/etc/NAME-server.conf for the
# account, container or object server on PORT
_swift_server_conf() {
	local dir=$1 name=$2 port=$3
	cat >"$dir/etc/$name-server.conf" <<CONF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $port
workers = 0
user = $(id -un)
swift_dir = $dir/etc
devices = $dir/srv
mount_check = false
log_address = $dir/no-syslog
log_name = $name-server

[pipeline:main]
pipeline = $name-server

[app:$name-server]
use = egg:swift#$name

[${name}-replicator]
[${name}-updater]
[${name}-auditor]
CONF
}

_swift_proxy_conf() {
	local dir=$1 port=$2 memcached=$3
	cat >"$dir/etc/proxy-server.conf" <<CONF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $port
workers = 0
user = $(id -un)
swift_dir = $dir/etc
log_address = $dir/no-syslog
log_name = proxy-server

[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server

[app:proxy-server]
use = egg:swift#proxy
account_autocreate = true

[filter:s3api]
use = egg:swift#s3api
location = us-east-1
max_upload_part_num = ${SWIFT_MAX_UPLOAD_PARTS:-1000}

[filter:tempauth]
use = egg:swift#tempauth
$(cat "$dir/etc/users.conf")

[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$memcached

[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
CONF
}

# _swift_run DIR NAME MARK COMMAND...: start one process in the
# background, its output in DIR/NAME.out; MARK is a word of its command
# line a recycled pid's would not hold.  Sets SWIFT_PID.
_swift_run() {
	local dir=$1 name=$2 mark=$3
	shift 3
	"$@" >"$dir/$name.out" 2>&1 </dev/null &
	SWIFT_PID=$!
	_swift_started "$dir" "$SWIFT_PID" "$mark"
}

start_swift() {
	local dir=$1 port=$2 key=$3 secret=$4
	shift 4
	local t0 p name b memcached account container object
	local -A pids
	t0=$(date +%s%N)
	[ -n "$SERVICES_DIR" ] || { echo "start_swift: SERVICES_DIR is not set" >&2; return 1; }
	# five distinct ports; another server answering on one would look ready
	memcached=$(free_port)
	account=$(free_port)
	container=$(free_port)
	object=$(free_port)
	for p in "$port" "$memcached" "$account" "$container" "$object"; do
		_swift_port_free "$p" || { echo "start_swift: port $p is in use" >&2; return 1; }
	done
	if [ "$(printf '%s\n' "$port" "$memcached" "$account" "$container" "$object" | sort -u | wc -l)" != 5 ]; then
		echo "start_swift: free_port chose one port twice" >&2
		return 1
	fi
	mkdir -p "$dir/etc" "$dir/srv/d1"
	_swift_user "$key" "$secret" >"$dir/etc/users.conf"
	[ -z "${SWIFT_SECOND_KEY:-}" ] ||
		_swift_user "$SWIFT_SECOND_KEY" "$SWIFT_SECOND_SECRET" >>"$dir/etc/users.conf"
	_swift_rings "$dir" "$account" "$container" "$object" >"$dir/rings.out" 2>&1 ||
		{ _swift_fail "$dir" "the rings could not be built"; return 1; }
	_swift_watchdog "$dir"
	_swift_run "$dir" memcached "-p $memcached " memcached -l 127.0.0.1 -p "$memcached" -U 0 -m 16 -u "$(id -un)"
	pids[$memcached]=$SWIFT_PID
	_swift_server_conf "$dir" account "$account"
	_swift_server_conf "$dir" container "$container"
	_swift_server_conf "$dir" object "$object"
	for name in account container object; do
		_swift_run "$dir" "$name" "$dir/etc/" "swift-$name-server" "$dir/etc/$name-server.conf" -v
		pids[${!name}]=$SWIFT_PID
	done
	# (a Python server takes ~1.5 s of CPU to start: tens of seconds when
	# the machine's cores are busy)
	for p in "$account" "$container" "$object" "$memcached"; do
		wait_alive 120 "${pids[$p]}" _swift_listening "$p" ||
			{ _swift_fail "$dir" "nothing listens on port $p"; return 1; }
	done
	_swift_proxy_conf "$dir" "$port" "$memcached"
	_swift_run "$dir" proxy "$dir/etc/" swift-proxy-server "$dir/etc/proxy-server.conf" -v
	wait_alive 120 "$SWIFT_PID" _swift_healthy "$port" ||
		{ _swift_fail "$dir" "the proxy does not answer on port $port"; return 1; }
	# the answer was this proxy's, not another's that took the port
	kill -0 "$SWIFT_PID" 2>/dev/null ||
		{ _swift_fail "$dir" "the proxy exited after it answered"; return 1; }
	b=$(store_buckets "$port" "$key" "$secret" "$dir/admin.log" "$@") ||
		{ _swift_fail "$dir" "bucket $b could not be created"; return 1; }
	SWIFT_STARTUP_MS=$((($(date +%s%N) - t0) / 1000000))
	echo "# Swift on 127.0.0.1:$port ready in $SWIFT_STARTUP_MS ms"
}

# _swift_watchdog DIR: kill the processes (listed in DIR/daemons) once the
# shell that started them is gone, however it ended
_swift_watchdog() {
	local dir=$1 shell=$$
	(
		trap '' TERM HUP INT
		tail --pid="$shell" -f /dev/null
		[ -f "$dir/daemons" ] || exit 0
		# (only this Swift's processes: a recycled pid is left alone)
		while read -r p mark; do
			tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$mark" &&
				kill -KILL "$p"
		done <"$dir/daemons"
	) </dev/null >/dev/null 2>&1 &
}

# swift_orphan_segments BUCKET: the segments of the target store (started
# by start_store) that no open upload and no object's manifest names, one
# a line, then "segments N" (test/lib/swift_segments.py)
swift_orphan_segments() {
	/usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/swift_segments.py" \
		"$S3_PORT" "$S3_ACCESS_KEY" "$S3_SECRET_KEY" "$1"
}
