/*-------------------------------------------------------------------------
 *
 * api_events.c
 *	  /api/events: Server-Sent Events of the jobs the role may see.
 *
 * A stream holds its libmicrohttpd thread for as long as it lasts: once a
 * second it takes a connection of the role's pool, looks at the jobs worth
 * looking at (EVENTS_SQL), gives the connection back, and writes an event
 * "job" for each that changed since the last look, or a keepalive comment.
 * It ends with an event "signed-out" when its session ends or its Basic
 * credentials stop signing in, and at once when the server stops.
 *
 *-------------------------------------------------------------------------
 */
#include "http/api.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#define SSE_POLL_MS     1000
#define SSE_KEEPALIVE_S 5

/*
 * How often a stream opened with HTTP Basic asks again whether its
 * credentials still sign in, and how long it may go on without a yes.
 * remora_http_login takes a password the server accepted less than a
 * minute ago without asking the server, so a revoked LOGIN or a changed
 * password ends the stream within SSE_VERIFY_MAX_S + SSE_VERIFY_S.
 */
#define SSE_VERIFY_S     10
#define SSE_VERIFY_MAX_S 60

#define Max(a, b) ((a) > (b) ? (a) : (b))
#define Min(a, b) ((a) < (b) ? (a) : (b))
typedef struct SeenJob
{
	long long id;
	uint64_t  hash;
} SeenJob;

typedef struct Sse
{
	RemoraPool *pool;
	bool        by_session;
	char        session_id[REMORA_SESSION_ID_LEN + 1];
	RemoraBuf   pending;
	size_t      off;
	time_t      last_write;
	SeenJob    *seen; /* the jobs of the last look worth another */
	int         nseen;
	long long   max_id; /* the highest job id at the last look; -1: none */
	bool        ended;

	/* HTTP Basic: the credentials, checked again while the stream lasts */
	char  *user;
	char  *password; /* wiped when the stream ends */
	char   address[64];
	time_t verified_at; /* they last signed in */
	time_t checked_at;  /* they were last checked */
} Sse;

/*
 * The jobs an event stream looks at each second, without scanning a long
 * history: running and retrying ones (a partial index), the newest queued
 * ones, the ones created since the last look ($1: the highest id then,
 * less a margin for transactions that commit late), and the ones the
 * last look kept ($2).  "keep": still worth looking at next time (active,
 * or ended less than a minute ago).
 */
static const char *EVENTS_SQL =
	"SELECT job_id, pg_catalog.json_build_object('job_id', job_id, "
	"'state', state, "
	"'source', source, 'label', label, 'bytes_done', bytes_done, "
	"'bytes_total', bytes_total, 'bytes_per_second', bytes_per_second, "
	"'cancel_requested', cancel_requested, 'attempts_used', attempts_used, "
	"'max_attempts', max_attempts, 'restarted_from_zero', "
	"restarted_from_zero, 'last_error', last_error, 'finished_at', "
	"finished_at)" TEXT ", "
	"state" EQ "ANY (ARRAY['queued', 'running', 'retrying']) "
	"OR finished_at" GT "(pg_catalog.now()" MINUS
	"'60 seconds'::pg_catalog.interval) "
	"FROM @extschema@.remora_jobs WHERE job_id" EQ "ANY ("
	"SELECT job_id FROM remora.jobs "
	"WHERE state" EQ "ANY (ARRAY['running', 'retrying']) "
	"UNION ALL (SELECT job_id FROM remora.jobs WHERE state" EQ "'queued' "
	"ORDER BY job_id DESC LIMIT 100) "
	"UNION ALL SELECT job_id FROM remora.jobs "
	"WHERE job_id" GT "($1" INT8 MINUS "100) "
	"UNION ALL SELECT pg_catalog.unnest($2::pg_catalog.int8[])) "
	"ORDER BY job_id DESC LIMIT 1000";

static const char *EVENTS_MAX_SQL =
	"SELECT coalesce(pg_catalog.max(job_id), 0) FROM remora.jobs";

static uint64_t
fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
	{
		h ^= (unsigned char) *s;
		h *= 1099511628211ULL;
	}
	return h;
}

/* One look at the jobs: an event for each that changed since the last. */
static bool
sse_poll(Sse *s)
{
	bool        refused;
	PGconn     *conn = remora_pool_acquire(s->pool, &refused);
	PGresult   *res;
	SeenJob    *now_seen;
	int         n, kept = 0;
	char        max_id[24];
	long long   next_max = s->max_id;
	RemoraBuf   ids = {0};
	const char *params[2];

	if (conn == NULL)
		return !refused; /* busy: try again next time */
	res = PQexec(conn, EVENTS_MAX_SQL);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		next_max = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	if (s->max_id < 0)
		s->max_id = next_max; /* the first look starts from now */
	snprintf(max_id, sizeof(max_id), "%lld", s->max_id);
	remora_buf_puts(&ids, "{");
	for (int k = 0; k < s->nseen; k++)
		remora_buf_printf(&ids, "%s%lld", k ? "," : "", s->seen[k].id);
	remora_buf_puts(&ids, "}");
	params[0] = max_id;
	params[1] = ids.failed ? "{}" : ids.data;
	res = remora_api_exec_sql(conn, EVENTS_SQL, 2, params);
	remora_buf_free(&ids);
	remora_pool_release(s->pool, conn);
	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		PQclear(res);
		return true;
	}
	s->max_id = next_max;
	n = PQntuples(res);
	now_seen = calloc(n > 0 ? n : 1, sizeof(SeenJob));
	if (now_seen == NULL)
	{
		PQclear(res);
		return false;
	}
	for (int i = 0; i < n; i++)
	{
		const char *json = PQgetvalue(res, i, 1);
		long long   id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		uint64_t    hash = fnv1a(json);
		bool        same = false;

		for (int k = 0; k < s->nseen && !same; k++)
			same = s->seen[k].id == id && s->seen[k].hash == hash;
		if (!same)
		{
			remora_buf_puts(&s->pending, "event: job\ndata: ");
			remora_buf_puts(&s->pending, json);
			remora_buf_puts(&s->pending, "\n\n");
		}
		if (strcmp(PQgetvalue(res, i, 2), "t") == 0)
		{
			now_seen[kept].id = id;
			now_seen[kept].hash = hash;
			kept++;
		}
	}
	PQclear(res);
	free(s->seen);
	s->seen = now_seen;
	s->nseen = kept;
	return !s->pending.failed;
}

/*
 * May a stream opened with HTTP Basic go on?  Its user and password are
 * signed in again (through the pool's recent check, or by the server);
 * a refusal ends the stream at once, and so does a minute without a
 * sign-in that worked (the server unreachable, sign-in throttled).
 */
static bool
sse_credentials_valid(Sse *s, time_t now)
{
	RemoraAuthResult r;
	RemoraPool      *p = NULL;
	int              retry_after;
	char             err[256];

	if (now - s->checked_at < SSE_VERIFY_S)
		return true;
	s->checked_at = now;
	r = remora_http_login(s->user, s->password, s->address, &p, &retry_after,
						  err, sizeof(err));
	remora_pool_unref(p);
	if (r == REMORA_AUTH_OK)
	{
		s->verified_at = now;
		return true;
	}
	if (r == REMORA_AUTH_REFUSED || r == REMORA_AUTH_NO_PASSWORD)
		return false;
	return now - s->verified_at < SSE_VERIFY_MAX_S;
}

static ssize_t
sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	Sse   *s = cls;
	size_t n;

	while (s->off >= s->pending.len)
	{
		time_t now = time(NULL);

		s->pending.len = 0;
		s->off = 0;
		if (s->ended || remora_http_stopping())
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (s->by_session)
		{
			RemoraPool *p = remora_session_lookup(s->session_id, false, NULL);

			if (p == NULL)
			{
				/* signed out or expired: say so, then end */
				remora_buf_puts(&s->pending, "event: signed-out\ndata: {}\n\n");
				s->ended = true;
				break;
			}
			remora_pool_unref(p);
		}
		else if (!sse_credentials_valid(s, now))
		{
			/* the password no longer signs in: the same end */
			remora_buf_puts(&s->pending, "event: signed-out\ndata: {}\n\n");
			s->ended = true;
			break;
		}
		if (pos == 0 && s->last_write == 0)
			remora_buf_puts(&s->pending, "retry: 3000\n\n");
		if (!sse_poll(s))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		/* often enough for the connection not to look idle */
		if (s->pending.len == 0 &&
			now - s->last_write >=
				Max(1, Min(SSE_KEEPALIVE_S,
						   remora_http_config.client_timeout_s / 2)))
			remora_buf_puts(&s->pending, ": keepalive\n\n");
		if (s->pending.len == 0)
			remora_http_sleep(SSE_POLL_MS);
	}
	n = s->pending.len - s->off;
	if (n > max)
		n = max;
	memcpy(buf, s->pending.data + s->off, n);
	s->off += n;
	s->last_write = time(NULL);
	return (ssize_t) n;
}

static void
sse_free(void *cls)
{
	Sse *s = cls;

	remora_pool_unref(s->pool);
	remora_buf_free(&s->pending);
	free(s->seen);
	free(s->user);
	if (s->password)
	{
		OPENSSL_cleanse(s->password, strlen(s->password));
		free(s->password);
	}
	free(s);
}

/*
 * GET /api/events: the stream, with its own reference to the role's pool
 * (and, for HTTP Basic, the credentials to check again while it lasts).
 */
void
remora_api_events(RemoraRequest *req)
{
	Sse                 *s;
	struct MHD_Response *response;
	RemoraPool          *p;

	if (strcmp(req->method, "GET") != 0)
	{
		remora_api_method_not_allowed(req, "GET");
		return;
	}
	s = calloc(1, sizeof(Sse));
	if (s == NULL)
		return;
	/* the stream keeps its own reference to the role's pool */
	if (req->by_session)
	{
		p = remora_session_lookup(req->session_id, false, NULL);
		if (p == NULL)
		{
			/* signed out since the request was let in */
			sse_free(s);
			remora_api_not_signed_in(req);
			return;
		}
	}
	else
	{
		char user[128] = "", password[1100] = "";

		/*
		 * HTTP Basic: the stream keeps the credentials, to sign them in
		 * again while it lasts, and the request's reference to the pool.
		 */
		if (!remora_req_basic(req, user, sizeof(user), password,
							  sizeof(password)) ||
			(s->user = strdup(user)) == NULL ||
			(s->password = strdup(password)) == NULL)
		{
			OPENSSL_cleanse(password, sizeof(password));
			sse_free(s);
			remora_respond_error(req, 500, "53200", "out of memory", NULL, NULL,
								 NULL);
			return;
		}
		OPENSSL_cleanse(password, sizeof(password));
		snprintf(s->address, sizeof(s->address), "%s", req->address);
		s->verified_at = s->checked_at = time(NULL);
		p = req->pool;
		req->pool = NULL;
		if (req->db)
		{
			remora_pool_release(p, req->db);
			req->db = NULL;
		}
	}
	s->pool = p;
	s->max_id = -1;
	s->by_session = req->by_session;
	memcpy(s->session_id, req->session_id, sizeof(s->session_id));
	response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024,
												 sse_read, s, sse_free);
	if (response == NULL)
	{
		sse_free(s);
		return;
	}
	MHD_add_response_header(response, "Content-Type",
							"text/event-stream; charset=utf-8");
	MHD_add_response_header(response, "Cache-Control", "no-store");
	MHD_add_response_header(response, "X-Accel-Buffering", "no");
	remora_add_security_headers(req, response, false);
	remora_respond_response(req, 200, response);
}
