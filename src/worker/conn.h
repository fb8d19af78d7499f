/*-------------------------------------------------------------------------
 *
 * conn.h
 *	  remora-worker's one connection to PostgreSQL (conn.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_WORKER_CONN_H
#define REMORA_WORKER_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <sys/socket.h>

#include <libpq-fe.h>

#define REMORA_CONN_BACKOFF_MIN_MS 250
#define REMORA_CONN_BACKOFF_MAX_MS 10000
#define REMORA_CONNECT_TIMEOUT_MS  10000 /* one connection attempt */

typedef struct RemoraConn
{
	PGconn     *pg;          /* NULL while disconnected */
	const char *conninfo;    /* the user's, or NULL: PG* variables */
	bool        listen;      /* LISTEN remora_jobs (not --poll-only) */
	int         lease_ms;    /* timeouts derive from it */
	uint64_t    generation;  /* connections made so far */
	int64_t     next_try_ms; /* the next connection attempt, at the earliest */
	int         backoff_ms;  /* doubles with every failed attempt */
	int64_t     down_since_ms; /* 0 while connected */
	bool        woken;         /* a job was queued (NOTIFY ... 'claim') */
	bool        cancelled;     /* a job was cancelled (NOTIFY ... 'cancel') */
	bool        connecting;    /* a non-blocking connection attempt runs */
	PostgresPollingStatusType polling; /* what it waits for */
	int64_t                   connect_deadline_ms;
	bool allow_plaintext;   /* --allow-plaintext: TCP without TLS anywhere */
	bool plaintext_refused; /* a connection was refused for want of TLS */
} RemoraConn;

extern bool      remora_conn_ensure(RemoraConn *c);
extern void      remora_conn_drop(RemoraConn *c, const char *why);
extern void      remora_conn_set_lease(RemoraConn *c, int lease_ms);
extern PGresult *remora_conn_exec(RemoraConn *c, const char *what,
								  const char *sql, int nparams,
								  const char *const *params);
extern int       remora_conn_wait_events(const RemoraConn *c, short *events);
extern void      remora_conn_read_notifies(RemoraConn *c);
extern int       remora_conn_call_timeout_ms(const RemoraConn *c);
extern bool      remora_conn_peer_is_local(const struct sockaddr *addr);

#endif /* REMORA_WORKER_CONN_H */
