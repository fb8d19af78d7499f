# Install what the build and the tests need on Debian 12 (source this file,
# then call install_deps).  Idempotent: apt-get runs only when a package is
# missing.  The list is also the README's list of build dependencies.

REMORA_DEB_PACKAGES="build-essential pkg-config postgresql-15 postgresql-client-15
postgresql-server-dev-15 libcurl4-openssl-dev libssl-dev libxml2-dev
libmicrohttpd-dev postgresql-15-cron nginx libipc-run-perl awscli curl
ca-certificates bc openssl tinyproxy
clang clang-format cppcheck libclang-rt-14-dev valgrind
libpq-dev jq chromium spin sqlsmith faketime iproute2 python3 nftables"
# Ceph's RADOS Gateway, the second target store of the end-to-end tests
# (test/lib/rgw.sh), without what its packages only recommend (ceph-mgr's
# dependencies, systemd units' helpers...)
# and Patroni with etcd (test/e2e/patroni.sh), and Prometheus for its
# promtool (test/e2e/metrics.sh: ~96 MB installed, no server is started)
REMORA_DEB_PACKAGES_NORECS="ceph-mon ceph-osd radosgw ceph-common
patroni etcd-server prometheus"

install_deps() {
	local missing="" p
	# Node.js runs the test S3 server; Debian's own only where none is
	# installed (an installed Node brings its own npm, which Debian's npm
	# package would conflict with)
	command -v node >/dev/null || missing="nodejs npm"
	local norecs="" updated=""
	for p in $REMORA_DEB_PACKAGES; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			missing="$missing $p"
	done
	for p in $REMORA_DEB_PACKAGES_NORECS; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			norecs="$norecs $p"
	done
	export DEBIAN_FRONTEND=noninteractive
	if [ -n "$missing" ]; then
		echo "installing:$missing"
		apt-get update -q >/dev/null
		updated=1
		# shellcheck disable=SC2086
		apt-get install -y -q $missing >/dev/null
	fi
	if [ -n "$norecs" ]; then
		echo "installing:$norecs"
		[ -n "$updated" ] || apt-get update -q >/dev/null
		# shellcheck disable=SC2086
		apt-get install -y -q --no-install-recommends $norecs >/dev/null
	fi
	# PGXS's pg_config must be the one of PostgreSQL 15.  REMORA_PGBIN
	# points at a private copy of that installation instead, so that
	# several checkouts can install and test side by side.
	export PATH="${REMORA_PGBIN:-/usr/lib/postgresql/15/bin}:$PATH"
}

# free_port: print a TCP port on 127.0.0.1 that nothing listens on.
# Below the kernel's ephemeral range, where an outgoing connection (Ceph's
# daemons open many while they start) could take the port between this
# choice and the server's bind.
free_port() {
	local p lo=32768 lanes=${REMORA_PORT_LANES:-1} lane=${REMORA_PORT_LANE:-0} width
	read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
	[ "$lo" -gt 20000 ] 2>/dev/null || lo=32768
	# scripts run side by side (test/run's lanes) each take ports from a
	# range of their own
	width=$(((lo - 10000) / lanes))
	while :; do
		p=$((10000 + lane * width + RANDOM % width))
		(echo >"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
	done
}
