#!/usr/bin/env bash
#
# remora-worker sends nothing over a TCP connection without TLS to another
# host: the settings it reads carry the target store's credentials.  The
# server runs in a network namespace of this test's own, listening on
# 127.0.0.1 and on 10.254.0.1 (an address of that namespace, not
# loopback), with SSL on.  The worker, in the same namespace:
#   - refuses 10.254.0.1 with sslmode=disable: exit 4, a log line that
#     says why, and the server never sees a statement from it;
#   - refuses it as the second host of a multi-host string whose first
#     host is down;
#   - connects to it over TLS (sslmode=require), or in clear text with
#     --allow-plaintext;
#   - connects in clear text to 127.0.0.1 and over the Unix socket.
# --help documents --allow-plaintext and exit status 4.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin worker_tls
WORKER=$(pg_config --bindir)/remora-worker
ADDR=10.254.0.1

"$WORKER" --help >"$T/help.out" 2>&1
check "--help documents --allow-plaintext" grep -q -- "--allow-plaintext" "$T/help.out"
check "--help names exit status 4" grep -q "4 the connection was not TLS" <<<"$(tr '\n' ' ' <"$T/help.out" | tr -s ' ')"

NS=remora-e2e-$$
ip netns add "$NS" || { not_ok "a network namespace can be made (ip netns add)"; exit 1; }
e2e_at_exit "ip netns del $NS"
ip -n "$NS" link set lo up
ip -n "$NS" addr add "$ADDR/32" dev lo

PG_PORT=$(free_port)
cluster_init "$T/pg" "$PG_PORT" <<CONF || { not_ok "PostgreSQL initializes"; exit 1; }
listen_addresses = '127.0.0.1, $ADDR'
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
log_statement = 'all'
log_connections = on
remora.max_workers = 0
CONF
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$ADDR" \
	-keyout "$T/pg/data/server.key" -out "$T/pg/data/server.crt" >/dev/null 2>&1
chown postgres: "$T/pg/data/server.key" "$T/pg/data/server.crt"
chmod 600 "$T/pg/data/server.key"
echo "host all all $ADDR/32 trust" >>"$T/pg/data/pg_hba.conf"
# the server in the namespace (its processes stay there)
ip netns exec "$NS" runuser -u postgres -- "$PGBIN/pg_ctl" -D "$T/pg/data" \
	-l "$T/pg/server.log" -w -t 60 start >/dev/null ||
	{ tail -n 30 "$T/pg/server.log"; not_ok "PostgreSQL starts in the namespace"; exit 1; }
export PGHOST=$T/pg PGPORT=$PG_PORT PGUSER=postgres
q "CREATE EXTENSION remora; CREATE ROLE rw LOGIN; GRANT remora_worker TO rw" >/dev/null

# run_worker NAME [ARGS...]: remora-worker in the namespace, stopped after
# 20 s at most; its exit status in $T/NAME.rc, its log in $T/NAME.log
run_worker() {
	local name=$1
	shift
	set +e
	ip netns exec "$NS" timeout -s INT 20 "$WORKER" "$@" >"$T/$name.log" 2>&1
	echo $? >"$T/$name.rc"
	set -e
}
# connected_then_stop NAME [ARGS...]: remora-worker in the namespace,
# until it says it connected (then SIGINT); true if it did
connected_then_stop() {
	local name=$1 pid
	shift
	ip netns exec "$NS" "$WORKER" "$@" >"$T/$name.log" 2>&1 &
	pid=$!
	service_pid "$pid" KILL
	said() { grep -q "connected to " "$T/$name.log"; }
	wait_for 20 said
	local rc=$?
	kill -INT "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	! grep -q "refusing the connection" "$T/$name.log" && [ "$rc" = 0 ]
}

before=$(grep -c "execute <unnamed>: SELECT pg_catalog.set_config('search_path'" "$T/pg/server.log" || true)
run_worker plain "host=$ADDR port=$PG_PORT dbname=postgres user=rw sslmode=disable"
check_eq "TCP without TLS to $ADDR: exit 4" "$(cat "$T/plain.rc")" 4
check "  saying why, before connecting" grep -q "refusing the connection to $ADDR: it is not on this host" "$T/plain.log"
check_eq "  and the server saw no statement from it (no worker_settings)" \
	"$(grep -c "execute <unnamed>: SELECT pg_catalog.set_config('search_path'" "$T/pg/server.log" || true)/$(grep -c "worker_settings" "$T/pg/server.log" || true)" "$before/0"
# libpq's default sslmode (prefer) falls back to clear text when the
# other side says "no SSL", as a man in the middle would: refused too,
# before the sign-in crosses the network; so is PGSSLMODE=prefer
run_worker prefer "host=$ADDR port=$PG_PORT dbname=postgres user=rw"
check_eq "no sslmode (libpq's prefer) to $ADDR: exit 4" "$(cat "$T/prefer.rc")" 4
check "  saying why" grep -q "refusing the connection to $ADDR: it is not on this host" "$T/prefer.log"
PGSSLMODE=prefer run_worker envprefer "host=$ADDR port=$PG_PORT dbname=postgres user=rw"
check_eq "PGSSLMODE=prefer to $ADDR: exit 4" "$(cat "$T/envprefer.rc")" 4
check_eq "  and the server saw no sign-in from either" \
	"$(grep -c 'connection authorized: user=rw' "$T/pg/server.log" || true)" "0"
DEAD=$(free_port)
run_worker multi "host=127.0.0.1,$ADDR port=$DEAD,$PG_PORT dbname=postgres user=rw sslmode=disable"
check_eq "the second host of a multi-host string, the first down: exit 4" "$(cat "$T/multi.rc")" 4
check "  naming the other host" grep -q "refusing the connection to $ADDR" "$T/multi.log"
check "TLS (sslmode=require) to $ADDR: connected" \
	connected_then_stop tls "host=$ADDR port=$PG_PORT dbname=postgres user=rw sslmode=require"
check "  (its sign-in is in the server's log, where the refused ones are not)" \
	grep -q 'connection authorized: user=rw' "$T/pg/server.log"
check "--allow-plaintext, sslmode=disable to $ADDR: connected" \
	connected_then_stop allowed --allow-plaintext "host=$ADDR port=$PG_PORT dbname=postgres user=rw sslmode=disable"
check "sslmode=disable to 127.0.0.1: connected" \
	connected_then_stop loopback "host=127.0.0.1 port=$PG_PORT dbname=postgres user=rw sslmode=disable"
check "the Unix socket: connected" \
	connected_then_stop unix "host=$T/pg port=$PG_PORT dbname=postgres user=rw"

e2e_finish
