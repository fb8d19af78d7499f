# The web server "remora http" on the stack of stack_up (source after
# e2e.sh).  http_up turns it on at a free port ($HTTP_PORT, base URL $H),
# with extra postgresql.conf lines from standard input; pg_hba.conf then
# asks every role but postgres (and "trusty", to show that a role let in
# without a password cannot sign in) for its password (scram-sha-256).
# Roles, each with the password "<name>-pw": alice and bob (remora_user,
# with a target grant), carol (remora_admin), dave (no Remora role), erin
# (remora_user), trusty (remora_user, trusted by pg_hba).

http_pid() { q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'remora http'"; }
http_running() { [ -n "$(http_pid)" ]; }
http_serving() { curl -s -o /dev/null --max-time 5 "$H/"; }

http_up() {
	HTTP_PORT=$(free_port)
	H="http://127.0.0.1:$HTTP_PORT"
	{
		echo "remora.http_listen = '127.0.0.1:$HTTP_PORT'"
		cat
	} >>"$T/pg/data/postgresql.conf"
	cat >"$T/pg/data/pg_hba.conf" <<HBA
local all postgres trust
local all trusty trust
local all all scram-sha-256
host all postgres 127.0.0.1/32 trust
host all all 127.0.0.1/32 scram-sha-256
HBA
	cluster_stop "$T/pg" fast
	cluster_start "$T/pg" || { not_ok "PostgreSQL restarts with remora.http_listen"; exit 1; }
	q "CREATE ROLE alice LOGIN PASSWORD 'alice-pw'; GRANT remora_user TO alice;
	   CREATE ROLE bob LOGIN PASSWORD 'bob-pw'; GRANT remora_user TO bob;
	   CREATE ROLE carol LOGIN PASSWORD 'carol-pw'; GRANT remora_admin TO carol;
	   CREATE ROLE dave LOGIN PASSWORD 'dave-pw';
	   CREATE ROLE erin LOGIN PASSWORD 'erin-pw'; GRANT remora_user TO erin;
	   CREATE ROLE trusty LOGIN PASSWORD 'trusty-pw'; GRANT remora_user TO trusty;
	   SELECT remora.grant_target('alice', 'target', '*');
	   SELECT remora.grant_target('bob', 'target', '*');" >/dev/null
	wait_for 30 http_serving || { not_ok "remora http serves on $H"; exit 1; }
}
