# What Remora needs on Debian 12, one list of package names for everyone
# (source this file, then call one of the functions).  Idempotent:
# apt-get runs only when a package is missing.
#
#   install_runtime_deps   what the quick start runs: PostgreSQL and its
#                          build headers, the libraries the extension links,
#                          Node.js for the test S3 server, nginx for the
#                          sample (the README's list)
#   install_deps           that and the whole test toolchain (./test/run)

REMORA_DEB_RUNTIME="build-essential pkg-config postgresql-15 postgresql-client-15
postgresql-server-dev-15 libcurl4-openssl-dev libssl-dev libxml2-dev
libmicrohttpd-dev libpq-dev nginx curl ca-certificates bc openssl"
REMORA_DEB_PACKAGES="$REMORA_DEB_RUNTIME postgresql-15-cron libipc-run-perl
awscli tinyproxy clang clang-format cppcheck libclang-rt-14-dev valgrind jq
chromium spin sqlsmith faketime iproute2 python3 nftables
debhelper postgresql-server-dev-all"
# Ceph's RADOS Gateway and OpenStack Swift (its proxy carries the S3 API),
# the second and third target stores of the end-to-end tests
# (test/lib/rgw.sh, test/lib/swift.sh), without what their packages only
# recommend (ceph-mgr's dependencies, systemd units' helpers...)
# and Patroni with etcd (test/e2e/patroni.sh), and Prometheus for its
# promtool (test/e2e/metrics.sh: ~96 MB installed, no server is started)
REMORA_DEB_PACKAGES_NORECS="ceph-mon ceph-osd radosgw ceph-common
swift swift-proxy swift-account swift-container swift-object memcached
patroni etcd-server prometheus"

# deps_missing PACKAGE...: print those not installed
deps_missing() {
	local p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
			printf ' %s' "$p"
	done
}

# deps_apt [APT-OPTION...] -- PACKAGE...: install those missing (apt-get
# update once per shell, before the first install)
deps_apt() {
	local opts=() missing
	while [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	missing=$(deps_missing "$@")
	[ -n "$missing" ] || return 0
	echo "installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	if [ -z "${REMORA_APT_UPDATED:-}" ]; then
		apt-get update -q >/dev/null
		REMORA_APT_UPDATED=1
	fi
	# shellcheck disable=SC2086
	apt-get install -y -q "${opts[@]}" $missing >/dev/null
}

# Node.js runs the test S3 server; Debian's own only where none is
# installed (an installed Node brings its own npm, which Debian's npm
# package would conflict with)
deps_node() { command -v node >/dev/null || echo "nodejs npm"; }

# The quick start takes Debian's nodejs without Debian's npm, whose 335
# node-* packages were most of its apt time on a fresh machine: npm's own
# release from the npm registry instead (the registry npm ci reads anyway),
# pinned by version and checked against the registry's SHA-512 before use.
REMORA_NPM_VERSION=10.8.2
REMORA_NPM_SHA512=x/AIjFIKRllrhcb48dqUNAAZl0ig9+qMuN91RpZo3Cb2+zuibfh+KISl6+kVVyktDz230JKc208UkQwwMqyB+w==
REMORA_NPM_DIR=${REMORA_NPM_DIR:-/var/cache/remora/npm-$REMORA_NPM_VERSION}
deps_npm() {
	local tgz=$REMORA_NPM_DIR.tgz sum
	command -v npm >/dev/null && return 0
	if [ ! -f "$REMORA_NPM_DIR/bin/npm-cli.js" ]; then
		echo "installing: npm $REMORA_NPM_VERSION (from the npm registry)"
		mkdir -p "$REMORA_NPM_DIR"
		curl -fsSL -o "$tgz" "https://registry.npmjs.org/npm/-/npm-$REMORA_NPM_VERSION.tgz" || return 1
		sum=$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)
		if [ "$sum" != "$REMORA_NPM_SHA512" ]; then
			echo "npm-$REMORA_NPM_VERSION.tgz does not have its pinned SHA-512" >&2
			rm -f "$tgz"
			return 1
		fi
		tar -xzf "$tgz" -C "$REMORA_NPM_DIR" --strip-components=1 && rm -f "$tgz" || return 1
	fi
	# shellcheck disable=SC2317
	npm() { node "$REMORA_NPM_DIR/bin/npm-cli.js" "$@"; }
	export -f npm
	export REMORA_NPM_DIR
}

# PGXS's pg_config must be the one of PostgreSQL 15.  REMORA_PGBIN points
# at a private copy of that installation instead, so that several
# checkouts can install and test side by side.
deps_path() { export PATH="${REMORA_PGBIN:-/usr/lib/postgresql/15/bin}:$PATH"; }

install_runtime_deps() {
	local node=
	command -v node >/dev/null || node=nodejs
	# shellcheck disable=SC2086
	deps_apt --no-install-recommends -- $node $REMORA_DEB_RUNTIME
	deps_npm
	deps_path
}

install_deps() {
	# shellcheck disable=SC2046,SC2086
	deps_apt -- $(deps_node) $REMORA_DEB_PACKAGES
	# shellcheck disable=SC2086
	deps_apt --no-install-recommends -- $REMORA_DEB_PACKAGES_NORECS
	deps_path
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
