/*-------------------------------------------------------------------------
 *
 * conn.c
 *	  remora-worker's one connection to PostgreSQL: connecting (again),
 *	  the pinned session, LISTEN, and one statement at a time with a
 *	  deadline.
 *
 * The connection string is handed to libpq as it is (PG* environment
 * variables apply; a multi-host string with target_session_attrs=read-write
 * finds the primary after a failover); application_name is always
 * remora-worker, so that pg_stat_activity shows it.  After it connects the
 * session is pinned as the background workers pin theirs: search_path
 * pg_catalog, pg_temp (every statement names its objects by schema too),
 * lock_timeout a tenth of the lease, statement_timeout a fifth of it.
 *
 * Every statement is its own transaction (autocommit) and waits for its
 * answer at most remora_conn_call_timeout_ms(), a quarter of the lease:
 * a server that does not answer in time (paused, the network cut) costs
 * the connection, not the lease of the attempts, which the caller fences
 * on its own clock.  A connection that is lost is made again with
 * exponential backoff (REMORA_CONN_BACKOFF_MIN_MS doubling up to
 * REMORA_CONN_BACKOFF_MAX_MS); generation tells the caller it is a new
 * session.
 *
 * The settings a worker reads carry the target store's secret key, the Hub
 * token and proxy credentials: every connection, the first and each one
 * made again (a multi-host string may land on another host), is checked
 * before anything is sent on it.  It must be a Unix socket, TCP to a
 * loopback address, or TLS; anything else is closed, unless the operator
 * said --allow-plaintext, and the worker exits (main.c).
 *
 *-------------------------------------------------------------------------
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/conn.h"
#include "worker/log.h"

#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* the answer to one statement must come within this */
int
remora_conn_call_timeout_ms(const RemoraConn *c)
{
	return MAX(c->lease_ms / 4, 500);
}

static bool pin_session(RemoraConn *c);

/* A new lease: new timeouts, for this session too. */
void
remora_conn_set_lease(RemoraConn *c, int lease_ms)
{
	c->lease_ms = lease_ms;
	if (c->pg && !c->connecting)
		(void) pin_session(c);
}

/* The message of a failed libpq call, on one line, without its newline. */
static const char *
pg_message(PGconn *pg, const PGresult *res)
{
	static char buf[512];
	const char *m = res ? PQresultErrorMessage(res) : PQerrorMessage(pg);
	size_t      n;

	snprintf(buf, sizeof(buf), "%s", m && m[0] ? m : "no message");
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return buf;
}

/* A notice or warning from the server, as one line of the log. */
static void
log_notice(void *arg, const char *message)
{
	char   line[512];
	size_t n;

	snprintf(line, sizeof(line), "%s", message);
	n = strlen(line);
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ' '))
		line[--n] = '\0';
	remora_wlog("server: %s", line);
}

void
remora_conn_drop(RemoraConn *c, const char *why)
{
	if (c->pg == NULL)
		return;
	remora_wlog("connection to the server lost: %s", why);
	PQfinish(c->pg);
	c->pg = NULL;
	c->connecting = false;
	if (c->down_since_ms == 0)
		c->down_since_ms = remora_clock_ms();
	c->next_try_ms = remora_clock_ms() + c->backoff_ms;
	if (c->backoff_ms == 0)
		c->backoff_ms = REMORA_CONN_BACKOFF_MIN_MS;
}

/* Pin the session and LISTEN; false (connection dropped) if that fails. */
static bool
pin_session(RemoraConn *c)
{
	char        lock[32], stmt[32];
	const char *params[2] = {lock, stmt};
	PGresult   *res;

	snprintf(lock, sizeof(lock), "%d", MAX(c->lease_ms / 10, 100));
	snprintf(stmt, sizeof(stmt), "%d", MAX(c->lease_ms / 5, 300));
	res = remora_conn_exec(
		c, "pinning the session",
		"SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', "
		"false), pg_catalog.set_config('lock_timeout', $1, false), "
		"pg_catalog.set_config('statement_timeout', $2, false)",
		2, params);
	if (res == NULL)
		return false;
	PQclear(res);
	if (!c->listen)
		return true;
	res = remora_conn_exec(c, "listening", "LISTEN remora_jobs", 0, NULL);
	if (res == NULL)
		return false;
	PQclear(res);
	return true;
}

/* A connection attempt failed: try again after the backoff, doubled. */
static void
connect_failed(RemoraConn *c, const char *why)
{
	if (c->backoff_ms == 0)
		c->backoff_ms = REMORA_CONN_BACKOFF_MIN_MS;
	remora_wlog("could not connect to the server (next try in %d ms): %s",
				c->backoff_ms, why);
	PQfinish(c->pg);
	c->pg = NULL;
	c->connecting = false;
	c->next_try_ms = remora_clock_ms() + c->backoff_ms;
	c->backoff_ms = c->backoff_ms * 2 > REMORA_CONN_BACKOFF_MAX_MS
						? REMORA_CONN_BACKOFF_MAX_MS
						: c->backoff_ms * 2;
}

/*
 * Is the host of a connection string on this machine: a Unix socket
 * directory (or abstract socket), none (libpq's default socket),
 * "localhost", or a literal loopback address?  A name is not resolved
 * here: anything else may cross a network.
 */
static bool
host_is_local(const char *h, size_t len)
{
	char                    lit[INET6_ADDRSTRLEN];
	struct sockaddr_storage ss;

	if (len == 0 || h[0] == '/' || h[0] == '@')
		return true;
	if (len >= sizeof(lit))
		return false;
	memcpy(lit, h, len);
	lit[len] = '\0';
	if (strcmp(lit, "localhost") == 0)
		return true;
	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, lit, &((struct sockaddr_in *) &ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, lit,
					   &((struct sockaddr_in6 *) &ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	else
		return false;
	return remora_conn_peer_is_local((struct sockaddr *) &ss);
}

/* the value of keyword in opts (PQconninfoParse's or PQconndefaults') */
static const char *
option(const PQconninfoOption *opts, const char *keyword)
{
	for (; opts && opts->keyword; opts++)
		if (strcmp(opts->keyword, keyword) == 0)
			return opts->val && opts->val[0] ? opts->val : NULL;
	return NULL;
}

/*
 * May this connection string reach another host without encryption?
 * Decided before connecting, from the string and libpq's defaults (the
 * PG* environment): by the time a connection is up, the startup packet
 * and the authentication have crossed the network, and with sslmode
 * "prefer" (libpq's default) a man in the middle who answers "no SSL"
 * gets a clear-text password or relays the SCRAM exchange, then reads
 * the settings over its own TLS connection to the server.  So a host not
 * on this machine needs sslmode require, verify-ca or verify-full (or
 * gssencmode require).  On refusal, names the host in host (of hlen).
 */
static bool
conninfo_plain_to_remote(const char *conninfo, char *host, size_t hlen)
{
	PQconninfoOption *given = NULL, *defaults = PQconndefaults();
	const char       *hosts, *sslmode, *gssenc;
	bool              plain = false;

	host[0] = '\0';
	if (conninfo)
		given = PQconninfoParse(conninfo, NULL);
	/* the address connected to is hostaddr when given, else host */
	hosts = option(given, "hostaddr");
	if (hosts == NULL)
		hosts = option(given, "host");
	if (hosts == NULL)
		hosts = option(defaults, "hostaddr");
	if (hosts == NULL)
		hosts = option(defaults, "host");
	sslmode = option(given, "sslmode");
	if (sslmode == NULL)
		sslmode = option(defaults, "sslmode");
	gssenc = option(given, "gssencmode");
	if (gssenc == NULL)
		gssenc = option(defaults, "gssencmode");
	if (!(sslmode && (strcmp(sslmode, "require") == 0 ||
					  strncmp(sslmode, "verify-", 7) == 0)) &&
		!(gssenc && strcmp(gssenc, "require") == 0))
	{
		const char *h = hosts ? hosts : "";

		for (;;)
		{
			size_t len = strcspn(h, ",");

			if (!host_is_local(h, len))
			{
				snprintf(host, hlen, "%.*s", (int) len, h);
				plain = true;
				break;
			}
			if (h[len] == '\0')
				break;
			h += len + 1;
		}
	}
	PQconninfoFree(given);
	PQconninfoFree(defaults);
	return plain;
}

/* Start connecting, without waiting (libpq's non-blocking connect). */
static void
connect_start(RemoraConn *c)
{
	/* defaults first: the user's connection string overrides them */
	const char *keys[] = {"keepalives_idle",  "keepalives_interval",
						  "keepalives_count", "dbname",
						  "application_name", NULL};
	const char *values[] = {"10", "5", "3", c->conninfo, "remora-worker", NULL};

	if (c->conninfo == NULL)
	{
		/* no string: only the environment and the defaults */
		keys[3] = "application_name";
		values[3] = "remora-worker";
		keys[4] = NULL;
	}
	if (!c->allow_plaintext)
	{
		char host[256];

		if (conninfo_plain_to_remote(c->conninfo, host, sizeof(host)))
		{
			remora_wlog("refusing the connection to %s: it is not on this "
						"host, and without sslmode=require (or verify-ca, "
						"verify-full) the sign-in and the worker's settings, "
						"which carry the target store's credentials, may "
						"cross the network in clear text; connect with "
						"sslmode=verify-full, or run with --allow-plaintext "
						"on a network you trust",
						host);
			c->plaintext_refused = true;
			return;
		}
	}
	c->pg = PQconnectStartParams(keys, values, 1);
	if (c->pg == NULL || PQstatus(c->pg) == CONNECTION_BAD)
	{
		connect_failed(c, c->pg ? pg_message(c->pg, NULL) : "out of memory");
		return;
	}
	c->connecting = true;
	c->polling = PGRES_POLLING_WRITING;
	c->connect_deadline_ms = remora_clock_ms() + REMORA_CONNECT_TIMEOUT_MS;
}

/* Is the connecting socket ready for what libpq waits for? */
static bool
connect_ready(const RemoraConn *c)
{
	struct pollfd p = {PQsocket(c->pg),
					   c->polling == PGRES_POLLING_READING ? POLLIN : POLLOUT,
					   0};

	return p.fd < 0 || poll(&p, 1, 0) != 0;
}

/*
 * Is addr (a peer, as getpeername gives it) on this host: a Unix socket,
 * 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104?  Traffic to it never crosses
 * a network.
 */
bool
remora_conn_peer_is_local(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_UNIX)
		return true;
	if (addr->sa_family == AF_INET)
	{
		const struct sockaddr_in *in = (const struct sockaddr_in *) addr;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (addr->sa_family == AF_INET6)
	{
		const struct in6_addr *a =
			&((const struct sockaddr_in6 *) addr)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
			   (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/*
 * May the settings' secrets cross the new connection?  The peer is the
 * address libpq actually connected to (not a name that might resolve
 * differently), and TLS is what the connection uses, not what sslmode
 * asked for: "prefer", libpq's default, falls back to clear text.
 */
static bool
transport_ok(RemoraConn *c)
{
	struct sockaddr_storage peer;
	socklen_t               len = sizeof(peer);
	char                    addr[INET6_ADDRSTRLEN] = "unknown";

	if (PQsslInUse(c->pg) || PQgssEncInUse(c->pg) || c->allow_plaintext)
		return true;
	memset(&peer, 0, sizeof(peer));
	if (getpeername(PQsocket(c->pg), (struct sockaddr *) &peer, &len) == 0 &&
		remora_conn_peer_is_local((struct sockaddr *) &peer))
		return true;
	if (peer.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *) &peer)->sin_addr, addr,
				  sizeof(addr));
	else if (peer.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *) &peer)->sin6_addr, addr,
				  sizeof(addr));
	remora_wlog(
		"refusing the connection to %s (address %s, port %s): it does "
		"not use TLS, and the worker's settings carry the target "
		"store's credentials; connect with sslmode=verify-full (or "
		"require), or run with --allow-plaintext on a network you trust",
		PQhost(c->pg), addr, PQport(c->pg));
	return false;
}

/*
 * Connected, or connected now?  Never waits for the network: a
 * connection attempt advances a step when its socket is ready (the caller
 * waits on remora_conn_wait_events), and a new attempt starts only when the
 * backoff allows.  False while there is no connection.
 */
bool
remora_conn_ensure(RemoraConn *c)
{
	int64_t now = remora_clock_ms();

	if (c->pg && !c->connecting && PQstatus(c->pg) == CONNECTION_OK)
		return true;
	if (c->pg && !c->connecting)
		remora_conn_drop(c, pg_message(c->pg, NULL));
	if (c->down_since_ms == 0)
		c->down_since_ms = now;
	if (!c->connecting)
	{
		if (now < c->next_try_ms)
			return false;
		connect_start(c);
		if (!c->connecting)
			return false;
	}
	if (now >= c->connect_deadline_ms)
	{
		connect_failed(c, "timeout expired");
		return false;
	}
	if (!connect_ready(c))
		return false;
	c->polling = PQconnectPoll(c->pg);
	if (c->polling == PGRES_POLLING_FAILED)
	{
		connect_failed(c, pg_message(c->pg, NULL));
		return false;
	}
	if (c->polling != PGRES_POLLING_OK)
		return false;

	c->connecting = false;
	if (!transport_ok(c))
	{
		/*
		 * No statement has been sent on it (the sign-in has: the check
		 * before connecting is the one that keeps that off the network):
		 * close it, and the caller stops
		 */
		PQfinish(c->pg);
		c->pg = NULL;
		c->plaintext_refused = true;
		return false;
	}
	PQsetNoticeProcessor(c->pg, log_notice, NULL);
	if (!pin_session(c))
		return false;
	c->generation++;
	c->down_since_ms = 0;
	c->backoff_ms = 0;
	c->woken = true; /* jobs may have been queued meanwhile */
	remora_wlog("connected to %s:%s as %s (server %d)", PQhost(c->pg),
				PQport(c->pg), PQuser(c->pg), PQserverVersion(c->pg));
	return true;
}

/*
 * The socket to wait on and for what (POLLIN, or POLLOUT while a
 * connection attempt waits to write); -1 for none.
 */
int
remora_conn_wait_events(const RemoraConn *c, short *events)
{
	*events = POLLIN;
	if (c->pg == NULL)
		return -1;
	if (c->connecting)
	{
		*events = c->polling == PGRES_POLLING_READING ? POLLIN : POLLOUT;
		return PQsocket(c->pg);
	}
	return c->listen ? PQsocket(c->pg) : -1;
}

/* Take in what the server sent (notifications) without waiting. */
void
remora_conn_read_notifies(RemoraConn *c)
{
	PGnotify *n;

	if (c->pg == NULL || c->connecting)
		return;
	if (!PQconsumeInput(c->pg))
	{
		remora_conn_drop(c, pg_message(c->pg, NULL));
		return;
	}
	while ((n = PQnotifies(c->pg)) != NULL)
	{
		if (strcmp(n->extra, "cancel") == 0)
			c->cancelled = true;
		else
			c->woken = true;
		PQfreemem(n);
	}
}

/* Wait until the socket is readable or the deadline passes. */
static bool
wait_readable(PGconn *pg, int64_t deadline)
{
	for (;;)
	{
		struct pollfd p = {PQsocket(pg), POLLIN, 0};
		int64_t       left = deadline - remora_clock_ms();
		int           rc;

		if (left <= 0)
			return false;
		rc = poll(&p, 1, (int) left);
		if (rc > 0)
			return true;
		if (rc < 0 && errno != EINTR)
			return false;
	}
}

/*
 * Run one statement (parameters as text) and wait for its answer until
 * the call's deadline.  The result (tuples or command ok; the caller
 * PQclears it), or NULL when it failed: logged, with what ("renewing
 * the lease"); a connection that broke or did not answer in time is
 * dropped.
 */
PGresult *
remora_conn_exec(RemoraConn *c, const char *what, const char *sql, int nparams,
				 const char *const *params)
{
	int64_t   deadline = remora_clock_ms() + remora_conn_call_timeout_ms(c);
	PGresult *last = NULL;
	PGresult *res;

	if (c->pg == NULL || c->connecting)
		return NULL;
	if (!PQsendQueryParams(c->pg, sql, nparams, NULL, params, NULL, NULL, 0))
	{
		remora_conn_drop(c, pg_message(c->pg, NULL));
		return NULL;
	}
	for (;;)
	{
		while (PQisBusy(c->pg))
		{
			if (!wait_readable(c->pg, deadline))
			{
				remora_wlog("%s: no answer from the server within %d ms", what,
							remora_conn_call_timeout_ms(c));
				remora_conn_drop(c, "the server did not answer in time");
				PQclear(last);
				return NULL;
			}
			if (!PQconsumeInput(c->pg))
			{
				remora_conn_drop(c, pg_message(c->pg, NULL));
				PQclear(last);
				return NULL;
			}
		}
		res = PQgetResult(c->pg);
		if (res == NULL)
			break;
		PQclear(last);
		last = res;
	}
	if (last == NULL || (PQresultStatus(last) != PGRES_TUPLES_OK &&
						 PQresultStatus(last) != PGRES_COMMAND_OK))
	{
		const char *state =
			last ? PQresultErrorField(last, PG_DIAG_SQLSTATE) : NULL;

		remora_wlog("%s failed: %s (SQLSTATE %s)", what,
					pg_message(c->pg, last), state ? state : "none");
		PQclear(last);
		if (PQstatus(c->pg) != CONNECTION_OK)
			remora_conn_drop(c, pg_message(c->pg, NULL));
		return NULL;
	}
	remora_conn_read_notifies(c);
	return last;
}
