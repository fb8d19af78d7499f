/*-------------------------------------------------------------------------
 *
 * http.h
 *	  The web client and JSON API of remora: the part that runs in threads.
 *
 * The background worker "remora http" (src/pg/httpd.c: no file of this
 * folder includes PostgreSQL's server headers) reads the settings, fills
 * a RemoraHttpConfig and starts the server (server.c).  From then
 * on, libmicrohttpd's threads serve requests with plain C: they never
 * call a function of the PostgreSQL server (no palloc, no ereport, no
 * SPI), and reach the database only through libpq connections made as
 * the signed-in role (session.c), so that grants and row-level security
 * decide what a request sees.  Memory is malloc'd and freed on every path.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_HTTP_H
#define REMORA_HTTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <time.h>

#include <libpq-fe.h>

#include "engine/common/util.h" /* RemoraBuf */

/*
 * What the server needs to know, copied out of the GUCs by the worker
 * before any thread starts.  The atomics may change while it runs (a
 * configuration reload); the rest is fixed for the life of the server.
 */
typedef struct RemoraHttpConfig
{
	struct sockaddr_storage addr; /* where to listen */
	socklen_t               addrlen;
	char                   *tls_cert_pem; /* both NULL: plain HTTP */
	char                   *tls_key_pem;
	char                   *pg_host;     /* socket directory (or address) */
	int                     pg_port;     /* the server's port */
	char                   *database;    /* remora.database */
	char                   *places_file; /* the sign-in throttle's known
										  * places, kept across restarts;
										  * NULL: not kept */
	int        pool_size;                /* connections per role */
	int        client_timeout_s;         /* idle connection */
	int        max_connections;
	atomic_int session_idle_s;
	atomic_int session_max_age_s;
	atomic_int max_body;       /* bytes */
	atomic_int login_failures; /* before a lockout */
	atomic_int login_lockout_s;
} RemoraHttpConfig;

extern RemoraHttpConfig remora_http_config;

/* config.c: the listening address, the stop signal */
extern bool remora_http_parse_listen(const char *listen, RemoraHttpConfig *cfg,
									 bool *loopback, char *err, size_t errlen);
extern void remora_http_set_stopping(bool stop);
extern bool remora_http_stopping(void);
extern void remora_http_sleep(int ms);

/* server.c: what the worker drives */
extern bool remora_http_start(char *err, size_t errlen);
extern void remora_http_stop(void);
extern void remora_http_tick(void);

/* forwarded.c: the client's address (X-Forwarded-For of trusted proxies) */
extern bool remora_http_set_trusted_proxies(const char *text, char *err,
											size_t errlen);
extern void remora_http_client_address(const struct sockaddr *peer,
									   const char *forwarded, char *out,
									   size_t outlen);

/* session.c: connection pools per role, sessions, sign-in */
typedef struct RemoraPool RemoraPool;

typedef enum RemoraAuthResult
{
	REMORA_AUTH_OK,
	REMORA_AUTH_REFUSED,     /* wrong credentials, or pg_hba said no */
	REMORA_AUTH_NO_PASSWORD, /* the server did not ask for the password */
	REMORA_AUTH_THROTTLED,   /* too many failures: try later */
	REMORA_AUTH_UNAVAILABLE  /* the database cannot be reached */
} RemoraAuthResult;

extern RemoraAuthResult remora_http_login(const char  *user,
										  const char  *password,
										  const char  *address,
										  RemoraPool **pool, int *retry_after,
										  char *err, size_t errlen);
extern void             remora_pool_unref(RemoraPool *pool);
extern const char      *remora_pool_role(const RemoraPool *pool);
extern PGconn          *remora_pool_acquire(RemoraPool *pool, bool *refused);
extern void             remora_pool_release(RemoraPool *pool, PGconn *conn);
extern bool             remora_http_ext_schema(char *out, size_t len);

#define REMORA_SESSION_ID_LEN    64  /* hex characters */
#define REMORA_SESSIONS_PER_ROLE 100 /* the oldest of a role goes first */

extern bool remora_session_create(RemoraPool *pool, char *id, char *csrf);
extern RemoraPool *remora_session_lookup(const char *id, bool touch,
										 char *csrf);
extern void        remora_session_delete(const char *id);
extern void        remora_sessions_tick(void);
extern void        remora_sessions_shutdown(void);
extern bool        remora_equal_secret(const char *a, const char *b);

/* signin_throttle.c: how often sign-in may be tried */
extern int  remora_signin_admit(const char *user, const char *address,
								time_t now);
extern void remora_signin_done(const char *user, const char *address,
							   RemoraAuthResult r, time_t now);
extern void remora_signin_load(time_t now);
extern void remora_signin_save(void);

/* assets.c (generated from web/ by src/http/embed.sh) */
typedef struct RemoraAsset
{
	const char          *path;
	const char          *type;
	const unsigned char *data;
	size_t               len;
} RemoraAsset;

extern const RemoraAsset remora_assets[];

#endif /* REMORA_HTTP_H */
