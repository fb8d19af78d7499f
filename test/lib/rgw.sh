# A throwaway Ceph RADOS Gateway, a production S3 implementation, for
# end-to-end tests (source after deps.sh and services.sh).  One monitor,
# one OSD and radosgw run as plain processes from Debian's packages (no
# systemd, no mgr, no cephx), on 127.0.0.1 only, with all their state
# under one directory.  The settings that are not obvious, and why:
#   - no cephx (auth ... = none), so radosgw must talk to the monitor in
#     crc mode (ms mon client mode = crc): its default, secure, cannot work
#     without cephx, and it would retry for ever without opening its port;
#   - paxos propose interval = 0.05: with the 1 s default the start takes
#     some 12 s, as radosgw creates its 7 pools one proposal at a time;
#   - pools of one copy on one OSD (pool default size and min size 1, mon
#     allow pool size one, osd crush chooseleaf type 0), msgr2 only, every
#     daemon and the S3 port (beast) on 127.0.0.1.
# Stop with SIGKILL when the directory is thrown away: memstore writes all
# its data out on SIGTERM.  RGW's S3 dialect (empty ETags in
# CompleteMultipartUpload answers, unquoted CopyObject ETags, copy-source
# conditions ignored...) is in doc/operator-guide.md, "Object stores".
#
#   start_rgw DIR PORT ACCESS_KEY SECRET BUCKET...
#
# starts it with S3 on http://127.0.0.1:PORT, a user whose key is
# ACCESS_KEY/SECRET and the buckets, and records the daemons in
# $SERVICES_DIR/pids so that stop_services kills them (SIGKILL: memstore
# and bluestore would write their state out on SIGTERM, for a directory
# that is about to be thrown away).  A watchdog also kills them if the
# shell that started them dies without running its traps.
#
# REMORA_RGW_OSD chooses the OSD's object store: bluestore (the default:
# data on a sparse file under DIR, memory bounded by its cache, so the
# tests' objects of tens of MiB stay safe) or memstore (all data in the
# OSD's memory, ~1.5-2x the bytes stored; a little faster to start).

RGW_UID=remora
RGW_KMS_KEY_ID=remora-test-key # the one key of KMS's testing backend

# rgw_admin DIR ARGS...: radosgw-admin against the cluster in DIR
rgw_admin() {
	local dir=$1
	shift
	radosgw-admin -c "$dir/ceph.conf" -n client.rgw.a "$@"
}

# rgw_add_key DIR ACCESS_KEY SECRET: a second S3 key for the test user
rgw_add_key() {
	rgw_admin "$1" key create --uid "$RGW_UID" --key-type s3 \
		--access-key "$2" --secret-key "$3" >>"$1/admin.log" 2>&1
}

_rgw_port_free() { ! (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
_rgw_osd_up() {
	ceph -c "$1/ceph.conf" --connect-timeout 5 osd dump 2>/dev/null | grep -qE '^osd\.0 up +in '
}
_rgw_http_ok() {
	[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://127.0.0.1:$1/")" = 200 ]
}
_rgw_fail() {	# _rgw_fail DIR MESSAGE: say why, with the logs' last lines
	local dir=$1 f
	echo "start_rgw: $2" >&2
	for f in "$dir"/log/*.log "$dir"/*.out; do
		[ -s "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }
	done
	return 1
}
_rgw_started() {	# _rgw_started DIR PID: a Ceph daemon to SIGKILL at the end
	service_pid "$2" KILL
	echo "$2" >>"$1/daemons"
	disown "$2"	# (no "Killed" notice from the shell when it is stopped)
}

start_rgw() {
	local dir=$1 port=$2 key=$3 secret=$4
	shift 4
	local t0 mon_port fsid uuid store=${REMORA_RGW_OSD:-bluestore} b pid
	t0=$(date +%s%N)
	[ -n "$SERVICES_DIR" ] || { echo "start_rgw: SERVICES_DIR is not set" >&2; return 1; }
	mon_port=$(free_port)
	while [ "$mon_port" = "$port" ]; do mon_port=$(free_port); done
	# another radosgw answering on the port would look ready
	_rgw_port_free "$port" || { echo "start_rgw: port $port is in use" >&2; return 1; }
	_rgw_port_free "$mon_port" || { echo "start_rgw: port $mon_port is in use" >&2; return 1; }
	mkdir -p "$dir"/{log,run,mon,osd/osd.0,rgw}
	fsid=$(cat /proc/sys/kernel/random/uuid)
	uuid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$dir/ceph.conf" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
mon initial members = a
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind msgr1 = false
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
run dir = $dir/run
admin socket = $dir/run/\$name.asok
log file = $dir/log/\$name.log
pid file = $dir/run/\$name.pid
keyring = $dir/keyring
mon data = $dir/mon/\$name
osd data = $dir/osd/\$name
[client]
ms mon client mode = crc
log file = $dir/log/\$name.log
[mon]
paxos propose interval = 0.05
mon data avail warn = 1
mon data avail crit = 0
[osd]
osd objectstore = $store
osd memory target = 939524096
memstore device bytes = 1073741824
bluestore block size = 8589934592
bluestore block create = true
bluestore cache autotune = false
bluestore cache size = 134217728
bluestore fsck on mkfs = false
osd max object size = 134217728
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$port
rgw data = $dir/rgw
rgw enable usage log = false
rgw dns name = 127.0.0.1
# STS (roles, with sessions as short as a test needs), KMS's testing
# backend with one key, SSE-C over plain HTTP: test/e2e/cloud.sh
rgw s3 auth use sts = true
rgw sts key = remora-sts-key16
rgw sts min session duration = 1
rgw crypt require ssl = false
rgw crypt s3 kms backend = testing
rgw crypt s3 kms encryption keys = $RGW_KMS_KEY_ID=$(printf 'remora-rgw-kms-test-key-32bytes!' | base64)
CONF
	ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' \
		>"$dir/setup.out" 2>&1 &&
		monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" \
			"$dir/monmap" >>"$dir/setup.out" 2>&1 &&
		ceph-mon -c "$dir/ceph.conf" --mkfs -i a --monmap "$dir/monmap" \
			--keyring "$dir/keyring" >>"$dir/setup.out" 2>&1 ||
		{ _rgw_fail "$dir" "the monitor's store could not be made"; return 1; }
	ceph-mon -c "$dir/ceph.conf" -i a -f >"$dir/mon.out" 2>&1 &
	pid=$!
	_rgw_started "$dir" "$pid"
	_rgw_watchdog "$dir"
	ceph -c "$dir/ceph.conf" --connect-timeout 20 osd new "$uuid" >>"$dir/setup.out" 2>&1 ||
		{ _rgw_fail "$dir" "the monitor did not register the OSD"; return 1; }
	ceph-osd -c "$dir/ceph.conf" -i 0 --mkfs --osd-uuid "$uuid" >>"$dir/setup.out" 2>&1 ||
		{ _rgw_fail "$dir" "the OSD's store could not be made"; return 1; }
	ceph-osd -c "$dir/ceph.conf" -i 0 -f >"$dir/osd.out" 2>&1 &
	pid=$!
	_rgw_started "$dir" "$pid"
	wait_alive 60 "$pid" _rgw_osd_up "$dir" ||
		{ _rgw_fail "$dir" "osd.0 is not up and in"; return 1; }
	radosgw -c "$dir/ceph.conf" -n client.rgw.a -f >"$dir/rgw.out" 2>&1 &
	pid=$!
	_rgw_started "$dir" "$pid"
	wait_alive 90 "$pid" _rgw_http_ok "$port" ||
		{ _rgw_fail "$dir" "radosgw does not answer on port $port"; return 1; }
	# the answer was this radosgw's, not another's that took the port
	kill -0 "$pid" 2>/dev/null ||
		{ _rgw_fail "$dir" "radosgw exited after it answered"; return 1; }
	rgw_admin "$dir" user create --uid "$RGW_UID" --display-name "Remora tests" \
		--access-key "$key" --secret-key "$secret" >"$dir/admin.log" 2>&1 ||
		{ _rgw_fail "$dir" "radosgw-admin could not create the user"; return 1; }
	b=$(store_buckets "$port" "$key" "$secret" "$dir/admin.log" "$@") ||
		{ _rgw_fail "$dir" "bucket $b could not be created"; return 1; }
	RGW_STARTUP_MS=$((($(date +%s%N) - t0) / 1000000))
	echo "# RGW ($store) on 127.0.0.1:$port ready in $RGW_STARTUP_MS ms"
}

# _rgw_watchdog DIR: kill the daemons (listed in DIR/daemons) once the
# shell that started them is gone, however it ended
_rgw_watchdog() {
	local dir=$1 shell=$$
	(
		trap '' TERM HUP INT
		tail --pid="$shell" -f /dev/null
		[ -f "$dir/daemons" ] || exit 0
		# (only this cluster's daemons: a recycled pid is left alone)
		while read -r p; do
			grep -qF "$dir/ceph.conf" "/proc/$p/cmdline" 2>/dev/null && kill -KILL "$p"
		done <"$dir/daemons"
	) </dev/null >/dev/null 2>&1 &
}
