/*-------------------------------------------------------------------------
 *
 * session.c
 *	  Sign-in, cookie sessions and libpq connection pools of the HTTP
 *	  server.
 *
 * Sign-in is PostgreSQL's own: a libpq connection to the local server as
 * the role, with its password, which pg_hba.conf accepts or refuses.
 * Remora never reads pg_authid.  A connection the server opened without
 * asking for the password (trust, peer: the worker runs as the server's
 * OS user) proves nothing, so it does not sign anyone in.
 *
 * Each signed-in role has one pool of at most remora.http_pool_size
 * connections, shared by its sessions and its HTTP Basic requests; a
 * request waits a bounded time for one.  The pool keeps the password it
 * was opened with in memory (it needs it to open more connections), and
 * wipes it when the pool goes: once no session refers to it and it has
 * been idle for a minute.  A different password for the role must sign
 * in again, through the server.
 *
 * Sessions live in memory only (a restart of the worker signs everyone
 * out): a random id (256 bits) that the cookie carries, a random CSRF
 * token, and idle and absolute expiry.  A role holds at most
 * REMORA_SESSIONS_PER_ROLE sessions: its next sign-in ends its oldest one,
 * never another role's.  The whole table holds MAX_SESSIONS; when it is
 * full, a sign-in ends the oldest session of the role that holds the most
 * (possibly the role signing in), so a role with fewer sessions than some
 * other never loses one to make room.
 *
 * Every sign-in, by the form or by HTTP Basic, is admitted by the
 * throttle first (signin_throttle.c), and its outcome reported to it.
 *
 * One mutex guards the pools and the sessions; nothing waits on the
 * network while holding it.  Calls signin_throttle.c and config.c.
 *
 *-------------------------------------------------------------------------
 */
#include "http/http.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#define MAX_POOL_CONNECTIONS 64
#define MAX_SESSIONS         10000
#define POOL_IDLE_S          60
#define POOL_WAIT_S          10
#define REVERIFY_S           60

struct RemoraPool
{
	char          *role;
	char          *password;
	PGconn        *idle[MAX_POOL_CONNECTIONS];
	int            nidle;
	int            total; /* open connections, idle or lent */
	int            refs;  /* sessions and requests using it */
	time_t         last_used;
	time_t         verified_at; /* the server last took the password */
	int            nsessions;   /* sessions of the role */
	pthread_cond_t freed;
	RemoraPool    *next;
};

typedef struct Session
{
	char            id[REMORA_SESSION_ID_LEN + 1];
	char            csrf[REMORA_SESSION_ID_LEN + 1];
	RemoraPool     *pool;
	time_t          created;
	time_t          last_seen;
	struct Session *next;
} Session;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static RemoraPool     *pools = NULL;
static Session        *sessions = NULL;
static int             nsessions = 0;

/* Are the two secrets equal?  In time independent of where they differ. */
bool
remora_equal_secret(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la != lb)
		return false;
	return CRYPTO_memcmp(a, b, la) == 0;
}

static void
wipe_free(char *s)
{
	if (s)
	{
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

static bool
random_hex(char *out)
{
	unsigned char raw[REMORA_SESSION_ID_LEN / 2];

	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return false;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return true;
}

/*
 * The extension's schema, quoted (quote_ident), as the last connection
 * found it; api_query.c names Remora's functions and views with it.  The
 * extension is not relocatable, so every connection finds the same one
 * unless it was dropped and created again elsewhere meanwhile.
 */
static pthread_mutex_t schema_lock = PTHREAD_MUTEX_INITIALIZER;
static char            ext_schema[2 * 64 + 3];

/* Copy the extension's schema (quoted) into out; false if none is known. */
bool
remora_http_ext_schema(char *out, size_t len)
{
	bool known;

	pthread_mutex_lock(&schema_lock);
	known = ext_schema[0] != '\0' && strlen(ext_schema) < len;
	if (known)
		memcpy(out, ext_schema, strlen(ext_schema) + 1);
	pthread_mutex_unlock(&schema_lock);
	return known;
}

/*
 * Open a connection as user with password.
 *
 * The session runs with search_path = pg_catalog, pg_temp from its start
 * (the startup packet's options), so that no name the HTTP server sends
 * resolves through a schema a user could write to: a function planted
 * in the extension's schema (public by default) with an exact-type match,
 * such as public.to_json(public.remora_jobs), would otherwise run with the
 * rights of whoever lists jobs, an administrator included.  The API names
 * every object by schema as well.
 *
 * Only the password given is ever used: an empty one is refused here,
 * because libpq ignores an empty parameter and would fall back to the
 * server's own PGPASSWORD, password file or service file, signing in a
 * role named there without its password.  The password file is pointed
 * at a path that cannot exist for the same reason (src/pg/httpd.c also clears
 * libpq's environment at start).
 */
static RemoraAuthResult
connect_as(const char *user, const char *password, PGconn **out, char *err,
		   size_t errlen)
{
	RemoraHttpConfig *cfg = &remora_http_config;
	char              port[16];
	const char       *keys[] = {"host",
								"port",
								"dbname",
								"user",
								"password",
								"passfile",
								"application_name",
								"connect_timeout",
								"client_encoding",
								"options",
								NULL};
	const char       *vals[11];
	PGconn           *conn;
	PGresult         *res;

	*out = NULL;
	if (password == NULL || password[0] == '\0')
	{
		snprintf(err, errlen, "invalid user name or password");
		return REMORA_AUTH_REFUSED;
	}
	snprintf(port, sizeof(port), "%d", cfg->pg_port);
	vals[0] = cfg->pg_host;
	vals[1] = port;
	vals[2] = cfg->database;
	vals[3] = user;
	vals[4] = password;
	vals[5] = "/nonexistent/remora-http/no-passfile";
	vals[6] = "remora http";
	vals[7] = "10";
	vals[8] = "UTF8";
	vals[9] = "-c statement_timeout=30s -c search_path=pg_catalog,pg_temp";
	vals[10] = NULL;
	conn = PQconnectdbParams(keys, vals, 0);
	if (conn == NULL)
	{
		snprintf(err, errlen, "out of memory");
		return REMORA_AUTH_UNAVAILABLE;
	}
	if (PQstatus(conn) != CONNECTION_OK)
	{
		PGPing ping;

		PQfinish(conn);
		/* a server that answers refused these credentials */
		vals[3] = NULL;
		vals[4] = NULL;
		keys[3] = NULL;
		ping = PQpingParams(keys, vals, 0);
		snprintf(err, errlen, "%s",
				 ping == PQPING_OK ? "invalid user name or password"
								   : "the database server is not available");
		return ping == PQPING_OK ? REMORA_AUTH_REFUSED
								 : REMORA_AUTH_UNAVAILABLE;
	}
	if (!PQconnectionUsedPassword(conn))
	{
		PQfinish(conn);
		snprintf(err, errlen,
				 "the database server did not ask for a password: "
				 "pg_hba.conf must require password authentication "
				 "(scram-sha-256) for sign-in");
		return REMORA_AUTH_NO_PASSWORD;
	}
	res = PQexec(conn, "SELECT pg_catalog.quote_ident(n.nspname) "
					   "FROM pg_catalog.pg_extension e "
					   "JOIN pg_catalog.pg_namespace n "
					   "ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
					   "WHERE e.extname OPERATOR(pg_catalog.=) 'remora'");
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1 ||
		strlen(PQgetvalue(res, 0, 0)) >= sizeof(ext_schema))
	{
		PQclear(res);
		PQfinish(conn);
		snprintf(err, errlen,
				 "extension \"remora\" is not installed in "
				 "database \"%s\"",
				 cfg->database);
		return REMORA_AUTH_UNAVAILABLE;
	}
	pthread_mutex_lock(&schema_lock);
	snprintf(ext_schema, sizeof(ext_schema), "%s", PQgetvalue(res, 0, 0));
	pthread_mutex_unlock(&schema_lock);
	PQclear(res);
	*out = conn;
	return REMORA_AUTH_OK;
}

/* --- pools --------------------------------------------------------------- */

/* the pool of role, with one more reference; lock held */
static RemoraPool *
pool_find(const char *role)
{
	for (RemoraPool *p = pools; p; p = p->next)
		if (strcmp(p->role, role) == 0)
			return p;
	return NULL;
}

/*
 * Sign in as user with password: reuse the role's pool when the password
 * is the one it was opened with, else ask the server.  On success *pool
 * has one more reference, for the caller to give back.
 */
RemoraAuthResult
remora_http_login(const char *user, const char *password, const char *address,
				  RemoraPool **pool, int *retry_after, char *err, size_t errlen)
{
	time_t           now = time(NULL);
	int              wait;
	RemoraPool      *p;
	PGconn          *conn = NULL;
	RemoraAuthResult r;
	bool             have_password;

	*pool = NULL;
	*retry_after = 0;
	if (user[0] == '\0' || strlen(user) > 63 || strlen(password) > 1024)
	{
		snprintf(err, errlen, "invalid user name or password");
		return REMORA_AUTH_REFUSED;
	}
	if (address == NULL)
		address = "";
	/*
	 * The throttle comes first, also for the password a pool holds: a
	 * locked-out caller must not learn whether a guess matches it.
	 */
	wait = remora_signin_admit(user, address, now);
	if (wait > 0)
	{
		*retry_after = wait;
		snprintf(err, errlen, "too many failed sign-ins: try again later");
		return REMORA_AUTH_THROTTLED;
	}

	/*
	 * The password the pool was opened with, checked by the server less
	 * than a minute ago, is taken without asking again: a changed password
	 * or a revoked LOGIN stops HTTP Basic within a minute however often a
	 * script calls.
	 */
	pthread_mutex_lock(&lock);
	p = pool_find(user);
	if (p && p->password && remora_equal_secret(p->password, password) &&
		now - p->verified_at < REVERIFY_S)
	{
		p->refs++;
		p->last_used = now;
		pthread_mutex_unlock(&lock);
		remora_signin_done(user, address, REMORA_AUTH_OK, now);
		*pool = p;
		return REMORA_AUTH_OK;
	}
	pthread_mutex_unlock(&lock);

	r = connect_as(user, password, &conn, err, errlen);

	now = time(NULL);
	remora_signin_done(user, address, r, now);
	if (r != REMORA_AUTH_OK)
		return r;
	pthread_mutex_lock(&lock);
	p = pool_find(user);
	if (p == NULL)
	{
		p = calloc(1, sizeof(RemoraPool));
		if (p == NULL || (p->role = strdup(user)) == NULL)
		{
			free(p);
			pthread_mutex_unlock(&lock);
			PQfinish(conn);
			snprintf(err, errlen, "out of memory");
			return REMORA_AUTH_UNAVAILABLE;
		}
		pthread_cond_init(&p->freed, NULL);
		p->next = pools;
		pools = p;
	}
	/* the password that worked last opens the connections from now on */
	{
		char *copy = strdup(password);

		if (copy)
		{
			wipe_free(p->password);
			p->password = copy;
		}
	}
	have_password = p->password != NULL;
	p->refs++;
	p->last_used = now;
	p->verified_at = now;
	if (p->nidle < MAX_POOL_CONNECTIONS &&
		p->total < remora_http_config.pool_size)
	{
		p->idle[p->nidle++] = conn;
		p->total++;
		conn = NULL;
		pthread_cond_signal(&p->freed);
	}
	pthread_mutex_unlock(&lock);
	if (conn)
		PQfinish(conn);
	*pool = p;
	return have_password ? REMORA_AUTH_OK : REMORA_AUTH_UNAVAILABLE;
}

void
remora_pool_unref(RemoraPool *pool)
{
	if (pool == NULL)
		return;
	pthread_mutex_lock(&lock);
	pool->refs--;
	pool->last_used = time(NULL);
	pthread_mutex_unlock(&lock);
}

const char *
remora_pool_role(const RemoraPool *pool)
{
	return pool->role;
}

/*
 * A connection of the pool, waiting at most POOL_WAIT_S for one; NULL if
 * none could be had (*refused: the server no longer takes the password).
 * An idle connection whose server went away is dropped, not lent.
 */
PGconn *
remora_pool_acquire(RemoraPool *pool, bool *refused)
{
	struct timespec deadline;
	char           *password;
	PGconn         *conn = NULL;
	char            err[256];

	*refused = false;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += POOL_WAIT_S;
	pthread_mutex_lock(&lock);
	for (;;)
	{
		while (pool->nidle > 0)
		{
			conn = pool->idle[--pool->nidle];
			if (PQconsumeInput(conn) && PQstatus(conn) == CONNECTION_OK &&
				PQtransactionStatus(conn) == PQTRANS_IDLE)
			{
				pool->last_used = time(NULL);
				pthread_mutex_unlock(&lock);
				return conn;
			}
			PQfinish(conn);
			conn = NULL;
			pool->total--;
		}
		if (pool->total < remora_http_config.pool_size)
			break;
		if (remora_http_stopping() ||
			pthread_cond_timedwait(&pool->freed, &lock, &deadline) == ETIMEDOUT)
		{
			pthread_mutex_unlock(&lock);
			return NULL;
		}
	}
	pool->total++;
	password = pool->password ? strdup(pool->password) : NULL;
	pthread_mutex_unlock(&lock);

	if (password == NULL || connect_as(pool->role, password, &conn, err,
									   sizeof(err)) != REMORA_AUTH_OK)
	{
		*refused = password != NULL && strstr(err, "invalid user") != NULL;
		conn = NULL;
	}
	wipe_free(password);
	if (conn == NULL)
	{
		pthread_mutex_lock(&lock);
		pool->total--;
		pthread_cond_signal(&pool->freed);
		pthread_mutex_unlock(&lock);
	}
	return conn;
}

/* Give back a connection; one that is not clean and idle is closed. */
void
remora_pool_release(RemoraPool *pool, PGconn *conn)
{
	bool keep = PQstatus(conn) == CONNECTION_OK &&
				PQtransactionStatus(conn) == PQTRANS_IDLE;

	pthread_mutex_lock(&lock);
	if (keep && pool->nidle < MAX_POOL_CONNECTIONS)
	{
		pool->idle[pool->nidle++] = conn;
		conn = NULL;
	}
	else
		pool->total--;
	pool->last_used = time(NULL);
	pthread_cond_signal(&pool->freed);
	pthread_mutex_unlock(&lock);
	if (conn)
		PQfinish(conn);
}

/* --- sessions ------------------------------------------------------------ */

/* Unlink *pp from the table and free it; lock held. */
static void
session_end(Session **pp)
{
	Session *s = *pp;

	*pp = s->next;
	s->pool->refs--;
	s->pool->nsessions--;
	nsessions--;
	OPENSSL_cleanse(s, sizeof(*s));
	free(s);
}

/* End the oldest session of pool's role; lock held. */
static void
end_oldest_of(const RemoraPool *pool)
{
	Session **oldest = NULL;

	for (Session **pp = &sessions; *pp; pp = &(*pp)->next)
		if ((*pp)->pool == pool &&
			(!oldest || (*pp)->created <= (*oldest)->created))
			oldest = pp;
	if (oldest)
		session_end(oldest);
}

/*
 * A new session for the pool's role (it takes over one reference).  To
 * make room, only sessions of the role signing in, or of the role holding
 * the most sessions, end: see the file header.
 */
bool
remora_session_create(RemoraPool *pool, char *id, char *csrf)
{
	Session *s = calloc(1, sizeof(Session));

	if (s == NULL || !random_hex(s->id) || !random_hex(s->csrf))
	{
		free(s);
		return false;
	}
	s->pool = pool;
	s->created = s->last_seen = time(NULL);
	memcpy(id, s->id, sizeof(s->id));
	memcpy(csrf, s->csrf, sizeof(s->csrf));
	pthread_mutex_lock(&lock);
	if (pool->nsessions >= REMORA_SESSIONS_PER_ROLE)
		end_oldest_of(pool);
	else if (nsessions >= MAX_SESSIONS)
	{
		const RemoraPool *most = pool;

		for (const RemoraPool *p = pools; p; p = p->next)
			if (p->nsessions > most->nsessions)
				most = p;
		end_oldest_of(most);
	}
	s->next = sessions;
	sessions = s;
	nsessions++;
	pool->nsessions++;
	pthread_mutex_unlock(&lock);
	return true;
}

static bool
expired(const Session *s, time_t now)
{
	return now - s->last_seen >=
			   atomic_load(&remora_http_config.session_idle_s) ||
		   now - s->created >=
			   atomic_load(&remora_http_config.session_max_age_s);
}

/*
 * The pool of a live session (one more reference, for the caller to give
 * back), and its CSRF token; NULL if there is no such session or it has
 * expired.  touch: the request counts as activity.
 */
RemoraPool *
remora_session_lookup(const char *id, bool touch, char *csrf)
{
	RemoraPool *pool = NULL;
	time_t      now = time(NULL);

	if (strlen(id) != REMORA_SESSION_ID_LEN)
		return NULL;
	pthread_mutex_lock(&lock);
	for (Session *s = sessions; s; s = s->next)
	{
		if (!remora_equal_secret(s->id, id))
			continue;
		if (expired(s, now))
			break;
		if (touch)
			s->last_seen = now;
		pool = s->pool;
		pool->refs++;
		pool->last_used = now;
		if (csrf)
			memcpy(csrf, s->csrf, sizeof(s->csrf));
		break;
	}
	pthread_mutex_unlock(&lock);
	return pool;
}

void
remora_session_delete(const char *id)
{
	pthread_mutex_lock(&lock);
	for (Session **pp = &sessions; *pp; pp = &(*pp)->next)
	{
		Session *s = *pp;

		if (remora_equal_secret(s->id, id))
		{
			session_end(pp);
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

static void
pool_free(RemoraPool *p)
{
	for (int i = 0; i < p->nidle; i++)
		PQfinish(p->idle[i]);
	wipe_free(p->password);
	free(p->role);
	pthread_cond_destroy(&p->freed);
	free(p);
}

/*
 * Once a second: end expired sessions, drop the pools nobody uses (with
 * their passwords), and close connections idle for a while.
 */
void
remora_sessions_tick(void)
{
	time_t      now = time(NULL);
	RemoraPool *dead = NULL;

	pthread_mutex_lock(&lock);
	for (Session **pp = &sessions; *pp;)
	{
		Session *s = *pp;

		if (expired(s, now))
			session_end(pp);
		else
			pp = &s->next;
	}
	for (RemoraPool **pp = &pools; *pp;)
	{
		RemoraPool *p = *pp;

		if (p->refs <= 0 && p->total == p->nidle &&
			now - p->last_used >= POOL_IDLE_S)
		{
			*pp = p->next;
			p->next = dead;
			dead = p;
		}
		else
			pp = &p->next;
	}
	pthread_mutex_unlock(&lock);
	while (dead)
	{
		RemoraPool *next = dead->next;

		pool_free(dead);
		dead = next;
	}
}

/* The server has stopped: every session ends, every connection closes. */
void
remora_sessions_shutdown(void)
{
	pthread_mutex_lock(&lock);
	while (sessions)
	{
		Session *s = sessions;

		sessions = s->next;
		OPENSSL_cleanse(s, sizeof(*s));
		free(s);
	}
	nsessions = 0;
	while (pools)
	{
		RemoraPool *p = pools;

		pools = p->next;
		pool_free(p);
	}
	pthread_mutex_unlock(&lock);
}
