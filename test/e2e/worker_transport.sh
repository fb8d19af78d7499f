#!/usr/bin/env bash
#
# remora.worker_settings() hands out the target store's secret, the Hub
# token and the proxy credentials: it answers over a Unix socket, from a
# loopback address and over SSL, and refuses a plain TCP connection from
# another host (28000), whatever libpq's sslmode would have allowed.
#
# "Another host" is a network namespace of the test's own: PostgreSQL runs
# in namespace S (listening on 127.0.0.1 and on its end of a veth pair,
# 10.88.0.1), the clients in namespace C (10.88.0.2).  Nothing is added to
# the host's own network; the namespaces go when the script ends.
#
. "$(dirname "$0")/../lib/e2e.sh"
e2e_begin worker_transport

if ! ip netns add "rwt-probe-$$" 2>/dev/null; then
	not_ok "network namespaces can be made here (ip netns add)"
	exit 1
fi
ip netns del "rwt-probe-$$"
NS_S=rwt-s-$$
NS_C=rwt-c-$$
e2e_at_exit "ip netns del $NS_S 2>/dev/null; ip netns del $NS_C 2>/dev/null"
ip netns add "$NS_S"
ip netns add "$NS_C"
ip -n "$NS_S" link set lo up
ip -n "$NS_C" link set lo up
ip -n "$NS_S" link add rwt-s type veth peer name rwt-c netns "$NS_C"
ip -n "$NS_S" addr add 10.88.0.1/24 dev rwt-s
ip -n "$NS_C" addr add 10.88.0.2/24 dev rwt-c
ip -n "$NS_S" link set rwt-s up
ip -n "$NS_C" link set rwt-c up

# a server certificate for 10.88.0.1 from a throwaway CA
CA=$T/ca
mkdir -p "$CA"
make_ca "$CA" ca
make_cert "$CA" ca server "IP:10.88.0.1"
cp "$CA/server.pem" "$CA/server.key" "$T/"
chown postgres: "$T/server.pem" "$T/server.key"
chmod 600 "$T/server.key"

SECRET=wt-secret-$RANDOM$RANDOM
# queries compare digests: a refused statement is logged with its text
SECRET_SHA=$(printf %s "$SECRET" | sha256sum | cut -d' ' -f1)
PG_PORT=$(free_port)
cluster_init "$T/pg" "$PG_PORT" <<CONF || { not_ok "PostgreSQL initializes"; exit 1; }
listen_addresses = '127.0.0.1, 10.88.0.1'
ssl = on
ssl_cert_file = '$T/server.pem'
ssl_key_file = '$T/server.key'
remora.max_workers = 0
remora.s3_access_key_id = 'AKIDWORKERTRANSPORT'
remora.s3_secret_access_key = '$SECRET'
CONF
echo "host all all 10.88.0.0/24 trust" >>"$T/pg/data/pg_hba.conf"
ip netns exec "$NS_S" runuser -u postgres -- "$PGBIN/pg_ctl" -D "$T/pg/data" \
	-l "$T/pg/server.log" -w -t 60 start >/dev/null ||
	{ not_ok "PostgreSQL starts in its namespace"; tail -n 20 "$T/pg/server.log"; exit 1; }
export PGHOST=$T/pg PGPORT=$PG_PORT PGUSER=postgres
q "CREATE EXTENSION remora" >/dev/null
q "CREATE ROLE wt_worker LOGIN IN ROLE remora_worker" >/dev/null

# settings NS CONNINFO: what psql prints asking for the settings (the
# secret compared, never printed), SQLSTATE included on an error
settings() {
	local ns=$1
	shift
	ip netns exec "$ns" psql -X -A -t -q -v VERBOSITY=verbose -d "$1" -c \
		"SELECT ssl, pg_catalog.encode(pg_catalog.sha256(s3_secret_access_key::bytea), 'hex') = '$SECRET_SHA'
		   FROM remora.worker_settings(), pg_catalog.pg_stat_ssl
		  WHERE pid = pg_catalog.pg_backend_pid()" 2>&1
}
DB="dbname=postgres user=wt_worker port=$PG_PORT connect_timeout=10"

check_eq "over the Unix socket the settings are answered" \
	"$(psql -X -A -t -q -d postgres -U wt_worker -c "SELECT pg_catalog.encode(pg_catalog.sha256(s3_secret_access_key::bytea), 'hex') = '$SECRET_SHA' FROM remora.worker_settings()")" "t"
check_eq "from a loopback address, without SSL, too" \
	"$(settings "$NS_S" "host=127.0.0.1 sslmode=disable $DB")" "f|t"
got=$(settings "$NS_C" "host=10.88.0.1 sslmode=disable $DB")
check "from another host over plain TCP: refused with 28000" \
	grep -q "^ERROR:  28000: the worker settings are not sent over an unencrypted connection" <<<"$got"
check "the refusal names the client address and says how to connect" \
	grep -q 'comes from host "10.88.0.2".*' <<<"$got"
check "and carries no secret" bash -c "! grep -q '$SECRET' <<<\"\$1\"" _ "$got"
check "the hint says sslmode=require" grep -q "^HINT:  Connect with sslmode=require" <<<"$got"
check_eq "from another host over SSL (sslmode=require) they are answered" \
	"$(settings "$NS_C" "host=10.88.0.1 sslmode=require $DB")" "t|t"
check_eq "libpq's default (prefer) negotiates SSL here and is answered" \
	"$(settings "$NS_C" "host=10.88.0.1 $DB")" "t|t"
check "the secret is in no server log line" bash -c "! grep -q '$SECRET' '$T/pg/server.log'"

e2e_finish
