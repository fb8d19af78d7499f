# Throwaway PostgreSQL clusters for tests (source this file).
#
# PostgreSQL refuses to run as root: the cluster is owned by the postgres OS
# user, listens on 127.0.0.1 and a private socket directory, and is stopped
# by cluster_stop (call it from a trap so it also runs on failure).

PGBIN=${PGBIN:-$(pg_config --bindir)}

# cluster_init DIR PORT: create DIR/data with remora preloaded (or what
# CLUSTER_PRELOAD names, "" for nothing).  Extra postgresql.conf lines are
# read from standard input.
cluster_init() {
	local dir=$1 port=$2
	mkdir -p "$dir"
	chown postgres: "$dir"
	chmod 700 "$dir"
	runuser -u postgres -- "$PGBIN/initdb" -D "$dir/data" -U postgres \
		--auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log"; return 1; }
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
	local dir=$1 mode=${2:-fast}
	[ -f "$dir/data/postmaster.pid" ] || return 0
	runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir/data" -m "$mode" -w -t 60 \
		stop >/dev/null 2>&1 || true
}
