#!/usr/bin/env bash
# shellcheck disable=SC1091  # test/lib sourced at run time
#
# The Debian package, as a DBA installs it: `make deb` builds
# postgresql-15-remora (debian/, PostgreSQL's pg_buildext); with the
# build's installation taken away (`make uninstall`), `dpkg -i` alone
# gives a working extension: a cluster with it preloaded runs a job to
# success against the test S3 server, and remora-worker runs from the
# package's path.  `dpkg -r` then `--purge` leave none of its files.
#
# It works on the system's PostgreSQL 15 (/usr/lib/postgresql/15), where
# ./test/run installs the build: what was installed there is kept in a
# tarball first and put back when the script exits, also on failure.
# test/run runs it alone, before the other end-to-end scripts, which use
# that installation.
#
SYSPG=/usr/lib/postgresql/15
export PGBIN=$SYSPG/bin # the throwaway cluster runs the system's server
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin package

PKG=postgresql-15-remora
SYS_CONFIG=$SYSPG/bin/pg_config
VERSION=$(sed -n "s/^default_version = '\(.*\)'$/\1/p" remora.control)
PREVIOUS=$(sed -n 's/^PREVIOUS = //p' Makefile)

# the system's remora files now (the build's installation)
system_files() {
	find "$SYSPG/bin/remora-worker" "$SYSPG/lib" -maxdepth 1 \( -name 'remora*' -o -name 'remora-worker' \) 2>/dev/null
	find "$SYSPG/lib/bitcode" -maxdepth 1 -name 'remora*' 2>/dev/null
	find /usr/share/postgresql/15/extension -maxdepth 1 -name 'remora*' 2>/dev/null
}
system_files >"$T/system-files"
tar -cpPf "$T/system.tar" -T "$T/system-files"
# a checksum of every file, to see at the end that all is as it was
sums() {
	[ -s "$T/system-files" ] || return 0
	xargs -d '\n' -I{} find {} -type f <"$T/system-files" 2>/dev/null | sort | xargs -d '\n' -r sha256sum
}
sums >"$T/system.sums"

restore_system() {
	cluster_stop "$T/pg" immediate
	dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q installed &&
		dpkg --purge "$PKG" >"$T/purge-at-exit.log" 2>&1
	tar -xpf "$T/system.tar" -P
	if [ "$(sums)" = "$(cat "$T/system.sums")" ]; then
		ok "the system's installation is restored as it was ($(wc -l <"$T/system.sums") files)"
	else
		not_ok "the system's installation is restored as it was"
	fi
}
e2e_at_exit restore_system

# make deb, outside the tree
if make -s deb DEB_BUILD_DIR="$T/deb" >"$T/deb.out" 2>&1; then
	ok "make deb builds the package"
else
	not_ok "make deb builds the package"
	tail -40 "$T/deb.out"
	exit 1
fi
DEB=$T/deb/${PKG}_${VERSION}_$(dpkg --print-architecture).deb
check "it is named ${PKG}_${VERSION}_ARCH.deb" test -f "$DEB"
check_eq "its version is remora.control's" "$(dpkg-deb -f "$DEB" Version)" "$VERSION"
depends=$(dpkg-deb -f "$DEB" Depends)
missing=""
for lib in postgresql-15 libcurl4 libssl3 libxml2 libmicrohttpd12 libpq5; do
	grep -qE "(^|, )$lib( |,|$)" <<<"$depends" || missing="$missing $lib"
done
check_eq "Depends names PostgreSQL 15 and every library it links (from dpkg-shlibdeps)" "$missing" ""
contents=$(dpkg-deb -c "$DEB" | awk '{print $6}')
for f in "$SYSPG/lib/remora.so" "$SYSPG/bin/remora-worker" \
	"/usr/share/postgresql/15/extension/remora.control" \
	"/usr/share/postgresql/15/extension/remora--$VERSION.sql" \
	"/usr/share/postgresql/15/extension/remora--$PREVIOUS--$VERSION.sql"; do
	grep -qxF ".$f" <<<"$contents" || not_ok "the package holds $f"
done
check_eq "it holds the library, remora-worker, the control file and the install and upgrade scripts" \
	"$(grep -c '^\./usr/share/postgresql/15/extension/remora--.*\.sql$' <<<"$contents")" \
	"$(($(git ls-files 'sql/remora--*--*.sql' | wc -l) + 2))"

# the build's installation goes: what is there next is the package's alone
make -s uninstall PG_CONFIG="$SYS_CONFIG" >"$T/uninstall.log" 2>&1
check_eq "make uninstall leaves no remora.so, remora-worker nor remora.control" \
	"$(ls "$SYSPG/lib/remora.so" "$SYSPG/bin/remora-worker" /usr/share/postgresql/15/extension/remora.control 2>/dev/null)" ""

if dpkg -i "$DEB" >"$T/dpkg-i.log" 2>&1; then
	ok "dpkg -i installs it"
else
	not_ok "dpkg -i installs it"
	cat "$T/dpkg-i.log"
	exit 1
fi
check_eq "dpkg knows the library as the package's" \
	"$(dpkg -S "$SYSPG/lib/remora.so" 2>/dev/null | cut -d: -f1)" "$PKG"
dpkg -L "$PKG" >"$T/package-files"

"$SYSPG/bin/remora-worker" --help >"$T/worker-help.txt" 2>&1
check_eq "remora-worker --help runs from the package's path (exit 0, usage)" \
	"$? $(grep -c '^Usage:' "$T/worker-help.txt")" "0 1"

# a real job, with the package's library preloaded
NGINX_PORT=$(free_port)
S3_PORT=$(free_port)
start_nginx "$T/nginx" "$NGINX_PORT"
start_s3 "$T/store" "$S3_PORT" target
head -c 3000000 /dev/urandom >"$T/nginx/www/sample.bin"
chmod 644 "$T/nginx/www/sample.bin"
e2e_cluster <<CONF
remora.max_workers = 1
remora.s3_endpoint = 'http://127.0.0.1:$S3_PORT'
remora.s3_path_style = on
remora.s3_access_key_id = 'S3RVER'
remora.s3_secret_access_key = 'S3RVER'
remora.default_bucket = 'target'
remora.allow_networks = '127.0.0.1/32'
CONF
postmaster=$(head -1 "$T/pg/data/postmaster.pid")
check "the server has the package's library loaded" grep -qF "$SYSPG/lib/remora.so" "/proc/$postmaster/maps"
q "CREATE EXTENSION remora" >/dev/null
check_eq "CREATE EXTENSION makes version $VERSION" \
	"$(q "SELECT extversion FROM pg_extension WHERE extname = 'remora'")" "$VERSION"
job=$(q "SELECT remora_submit('http://127.0.0.1:$NGINX_PORT/sample.bin')")
succeeded() { [ "$(q "SELECT state FROM remora_jobs WHERE job_id = $job")" = succeeded ]; }
check "a job runs to success" wait_for 120 succeeded
check_eq "its result has the sample's SHA-256" \
	"$(q "SELECT sha256 FROM remora_result($job)")" "$(sha256sum "$T/nginx/www/sample.bin" | cut -d' ' -f1)"
cluster_stop "$T/pg" fast

# removal: no file of the package remains, nor a folder only it had
left() {
	local p
	while read -r p; do
		[ "$p" != /. ] || continue # dpkg -L's first line, the root
		[ -e "$p" ] || [ -L "$p" ] || continue
		if [ -d "$p" ] && [ ! -L "$p" ]; then
			dpkg -S "$p" >/dev/null 2>&1 || echo "$p"
		else
			echo "$p"
		fi
	done <"$T/package-files"
}
dpkg -r "$PKG" >"$T/dpkg-r.log" 2>&1
check_eq "dpkg -r leaves none of its files" "$(left | tr '\n' ' ')" ""
dpkg --purge "$PKG" >"$T/dpkg-purge.log" 2>&1
check_eq "dpkg --purge leaves nothing of it" "$(left | tr '\n' ' ')" ""
check_eq "and dpkg forgets it" "$(dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null)" ""

e2e_finish
