# Throwaway PostgreSQL clusters for tests (source this file).
#
# PostgreSQL refuses to run as root: the cluster is owned by the postgres OS
# user, listens on 127.0.0.1 and a private socket directory, and is stopped
# by cluster_stop (call it from a trap so it also runs on failure).

# (on a fresh machine the quick start sources this before it installs
# PostgreSQL: then the path the packages will use)
. "$(dirname "${BASH_SOURCE[0]}")/wait.sh"

PGBIN=${PGBIN:-$(pg_config --bindir 2>/dev/null || echo "${REMORA_PGBIN:-/usr/lib/postgresql/15/bin}")}

# cluster_initdb DATA LOG: initdb DATA as cluster_init's clusters are made
# (its parent must be the postgres user's to write)
cluster_initdb() {
	runuser -u postgres -- "$PGBIN/initdb" -D "$1" -U postgres \
		--auth=trust -E UTF8 --locale=C.UTF-8 >"$2" 2>&1 ||
		{ cat "$2"; return 1; }
}

# cluster_init DIR PORT: create DIR/data with remora preloaded (or what
# CLUSTER_PRELOAD names, "" for nothing).  Extra postgresql.conf lines are
# read from standard input.  With REMORA_INITDB_TEMPLATE naming a data
# directory of cluster_initdb's, DIR/data is a copy of it, as PostgreSQL's
# own test suites do: here initdb costs a second of CPU, a copy a tenth
# (test/run makes one for its scripts).  Copies share a system identifier,
# as a standby and its primary do; nothing here tells clusters apart by it.
cluster_init() {
	local dir=$1 port=$2
	mkdir -p "$dir"
	chown postgres: "$dir"
	chmod 700 "$dir"
	if [ -f "${REMORA_INITDB_TEMPLATE:-/nonexistent}/PG_VERSION" ]; then
		# (DATA may exist already: a file system mounted there)
		mkdir -p "$dir/data"
		cp -a "$REMORA_INITDB_TEMPLATE/." "$dir/data/" || return 1
		chown postgres: "$dir/data"
		chmod 700 "$dir/data"
	else
		cluster_initdb "$dir/data" "$dir/initdb.log" || return 1
	fi
	{
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $port"
		echo "unix_socket_directories = '$dir'"
		echo "fsync = off"
		echo "shared_preload_libraries = '${CLUSTER_PRELOAD-remora}'"
		echo "max_worker_processes = 32"
		echo "log_line_prefix = '%m [%p] %b '"
		cat
	} >>"$dir/data/postgresql.conf"
}

cluster_start() {
	local dir=$1
	runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" \
		-w -t 60 start >/dev/null ||
		{ tail -n 30 "$dir/server.log"; return 1; }
}

# cluster_stop DIR [mode]: stop if running; never fails.
cluster_stop() {
	local dir=$1 mode=${2:-fast} pid
	[ -f "$dir/data/postmaster.pid" ] || return 0
	# a postmaster killed by a test leaves its pid behind, which pg_ctl
	# would signal: by now it may be another process's (pids wrap within
	# a suite run).  A postmaster runs in its data directory.
	pid=$(head -n 1 "$dir/data/postmaster.pid")
	[ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$(readlink -f "$dir/data")" ] || return 0
	runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir/data" -m "$mode" -w -t 60 \
		stop >/dev/null 2>&1 || true
}

# ---- Streaming replication: a primary and its synchronous standby ----

# cluster_sql DIR SQL: one value from the cluster in DIR (as postgres, on
# its socket; the port is read from the running server's postmaster.pid)
cluster_sql() {
	local dir=$1 port
	port=$(sed -n 4p "$dir/data/postmaster.pid" 2>/dev/null)
	psql -X -A -t -q -v ON_ERROR_STOP=1 -h "$dir" -p "$port" -U postgres \
		-d postgres -c "$2"
}

# cluster_until SECONDS DIR SQL: poll until SQL answers "t" on the cluster
# in DIR, or fail when the deadline passes
cluster_until() {
	local t0=$EPOCHSECONDS dir=$2
	until [ "$(cluster_sql "$dir" "$3" 2>/dev/null)" = t ]; do
		[ "$EPOCHSECONDS" -lt $((t0 + $1)) ] || return 1
		poll_pause "$t0"
	done
}

# cluster_standby PRIMARY DIR PORT [NAME]: a streaming standby of the
# running cluster in PRIMARY, in DIR/data on PORT, made by pg_basebackup -R
# (so it has the primary's postgresql.conf, remora preloaded included) and
# started.  It connects as application_name NAME ("standby" by default),
# the name cluster_sync makes synchronous.  Extra postgresql.conf lines for
# the standby alone are read from standard input.
cluster_standby() {
	local primary=$1 dir=$2 port=$3 name=${4:-standby} pport
	pport=$(sed -n 4p "$primary/data/postmaster.pid")
	mkdir -p "$dir"
	chown postgres: "$dir"
	chmod 700 "$dir"
	runuser -u postgres -- "$PGBIN/pg_basebackup" -h 127.0.0.1 -p "$pport" \
		-U postgres -D "$dir/data" -R -X stream -c fast >"$dir/basebackup.log" 2>&1 ||
		{ cat "$dir/basebackup.log"; return 1; }
	{
		echo "# the standby's own"
		echo "port = $port"
		echo "unix_socket_directories = '$dir'"
		cat
	} >>"$dir/data/postgresql.conf"
	# after the line pg_basebackup -R wrote: the later setting wins
	echo "primary_conninfo = 'host=127.0.0.1 port=$pport user=postgres application_name=$name'" \
		>>"$dir/data/postgresql.auto.conf"
	chown postgres: "$dir/data/postgresql.conf" "$dir/data/postgresql.auto.conf"
	cluster_start "$dir" || return 1
	cluster_until 60 "$primary" "SELECT count(*) > 0 FROM pg_stat_replication
		WHERE application_name = '$name' AND state = 'streaming'"
}

# cluster_sync PRIMARY [NAME]: make the standby NAME synchronous
# (synchronous_commit = on, synchronous_standby_names = NAME) and wait
# until the primary reports it so.  Set on the primary only (ALTER SYSTEM,
# after the base backup): a promoted standby must not wait for a standby
# of its own that does not exist.
cluster_sync() {
	local primary=$1 name=${2:-standby}
	cluster_sql "$primary" "ALTER SYSTEM SET synchronous_commit = on" >/dev/null &&
		cluster_sql "$primary" "ALTER SYSTEM SET synchronous_standby_names = '$name'" >/dev/null &&
		cluster_sql "$primary" "SELECT pg_reload_conf()" >/dev/null &&
		cluster_until 60 "$primary" "SELECT count(*) > 0 FROM pg_stat_replication
			WHERE application_name = '$name' AND sync_state = 'sync'"
}

# cluster_promote PRIMARY STANDBY: fail over.  The primary is stopped at
# once (immediate: as a crash would), the standby promoted with pg_ctl
# promote; returns when it is out of recovery and takes writes.
cluster_promote() {
	local primary=$1 standby=$2
	cluster_stop "$primary" immediate
	runuser -u postgres -- "$PGBIN/pg_ctl" -D "$standby/data" -w -t 60 promote >/dev/null ||
		return 1
	cluster_until 60 "$standby" "SELECT NOT pg_is_in_recovery()
		AND pg_current_xact_id() IS NOT NULL"
}

# ---- A private installation ----

# cluster_private_install DIR: print the bindir of a copy of the PostgreSQL
# installation in DIR, for a test that must add files to the extension
# directory: that directory belongs to the whole installation, and a file
# left there (by a test killed before its exit trap) would be installed
# for every later cluster.  PostgreSQL finds its share and library
# directories relative to its own binary, so the copy is the binaries
# (hard links where possible) beside links to the real share entries and
# library directory; only the extension directory is a directory of its
# own, of links to the real files, where the test may add or replace one.
# With a second argument "lib", the library directory is one of its own
# too (links to the real files), where a test may install another
# remora.so.  The copy goes with DIR.
cluster_private_install() {
	local dir=$1 own=${2:-} bin share lib prefix entry
	bin=$("$PGBIN/pg_config" --bindir) || return 1
	share=$("$PGBIN/pg_config" --sharedir)
	lib=$("$PGBIN/pg_config" --pkglibdir)
	# the longest directory the three have in common: the copy keeps
	# their places relative to it, as the relocation requires
	prefix=$bin
	until [[ $share/ == "$prefix"/* && $lib/ == "$prefix"/* ]]; do
		prefix=${prefix%/*}
	done
	mkdir -p "$dir${share#"$prefix"}/extension" \
		"$(dirname "$dir${bin#"$prefix"}")" "$(dirname "$dir${lib#"$prefix"}")" || return 1
	cp -rl "$bin" "$dir${bin#"$prefix"}" 2>/dev/null || {
		rm -rf "$dir${bin#"$prefix"}"
		cp -r "$bin" "$dir${bin#"$prefix"}" || return 1
	}
	if [ "$own" = lib ]; then
		mkdir -p "$dir${lib#"$prefix"}"
		ln -s "$lib"/* "$dir${lib#"$prefix"}/"
	else
		ln -s "$lib" "$dir${lib#"$prefix"}"
	fi
	for entry in "$share"/*; do
		[ "${entry##*/}" = extension ] || ln -s "$entry" "$dir${share#"$prefix"}/"
	done
	ln -s "$share"/extension/* "$dir${share#"$prefix"}/extension/"
	echo "$dir${bin#"$prefix"}"
}
