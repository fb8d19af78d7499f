/*-------------------------------------------------------------------------
 *
 * api.c
 *	  The JSON API of the remora HTTP server (DESIGN §6).
 *
 * Each endpoint is one call of the SQL contract (remora_submit,
 * remora_cancel, remora_delete, remora_result, remora_presign, the views)
 * on a connection of the signed-in role, so that grants and row-level
 * security decide, exactly as in psql.  Parameters travel as query
 * parameters, never spliced into SQL; JSON answers are built by
 * PostgreSQL (to_json of the views' rows), so a job's label or source
 * reaches the client as a JSON string, whatever it contains.
 *
 * Errors: {"error", "sqlstate", "detail"?, "hint"?, "field"?} with the
 * status of the SQLSTATE: class 22 and 23502/23514 -> 400 (22023 names the
 * field), 23505 and 55000 (an export not in a state to resolve) -> 409,
 * 42501 and RM001 -> 403, P0002 -> 404, class 28 -> 401, 53xxx, 57xxx and
 * 08xxx -> 503, anything else 500.
 *
 *-------------------------------------------------------------------------
 */
#include "http/request.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/json.h"

#include <openssl/crypto.h>

#define SSE_POLL_MS     1000
#define SSE_KEEPALIVE_S 5
#define SSE_MAX_JOBS    1000
#define LIST_MAX_LIMIT  1000
#define LIST_DEFAULT    50

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

/*
 * The SQL below names every object by schema, so that nothing resolves
 * through a schema a user could write to (the sessions also run with
 * search_path = pg_catalog, pg_temp; session.c): built-in functions, types
 * and operators by pg_catalog, Remora's tables and protocol by remora, and
 * the views and functions of the extension's schema (public by default,
 * chosen at CREATE EXTENSION) by @extschema@, which exec_sql replaces with
 * that schema as the connections found it.  An operator written
 * OPERATOR(...) binds as any operator but the common ones do: mind the
 * parentheses.
 */
#define EQ       " OPERATOR(pg_catalog.=) "
#define LT       " OPERATOR(pg_catalog.<) "
#define GT       " OPERATOR(pg_catalog.>) "
#define MINUS    " OPERATOR(pg_catalog.-) "
#define CONCAT   " OPERATOR(pg_catalog.||) "
#define ARROW    " OPERATOR(pg_catalog.->) "
#define ARROWTXT " OPERATOR(pg_catalog.->>) "
#define MATCHES  " OPERATOR(pg_catalog.~) "
#define INT4     "::pg_catalog.int4"
#define INT8     "::pg_catalog.int8"
#define TEXT     "::pg_catalog.text"
#define JSONB    "::pg_catalog.jsonb"

/* --- errors and queries -------------------------------------------------- */

static int
status_for(const char *sqlstate)
{
	if (sqlstate == NULL)
		return 500;
	if (strcmp(sqlstate, "23505") == 0 || strcmp(sqlstate, "55000") == 0)
		return 409;
	if (strcmp(sqlstate, "42501") == 0 || strcmp(sqlstate, "RM001") == 0)
		return 403;
	if (strcmp(sqlstate, "P0002") == 0)
		return 404;
	if (strncmp(sqlstate, "22", 2) == 0 || strcmp(sqlstate, "23502") == 0 ||
		strcmp(sqlstate, "23514") == 0)
		return 400;
	if (strncmp(sqlstate, "28", 2) == 0)
		return 401;
	if (strncmp(sqlstate, "53", 2) == 0 || strncmp(sqlstate, "57", 2) == 0 ||
		strncmp(sqlstate, "08", 2) == 0)
		return 503;
	return 500;
}

/*
 * The request field a 22023 message names: 'invalid option "priority"' ->
 * options.priority, 'invalid source' -> source.
 */
static void
field_of(const char *message, char *field, size_t len)
{
	const char *q;

	field[0] = '\0';
	if (message == NULL)
		return;
	if ((strncmp(message, "invalid option \"", 16) == 0 ||
		 strncmp(message, "unknown option \"", 16) == 0) &&
		(q = strchr(message + 16, '"')) != NULL)
	{
		snprintf(field, len, "options.%.*s", (int) (q - message - 16),
				 message + 16);
		return;
	}
	if (strncmp(message, "invalid ", 8) == 0)
	{
		const char *w = message + 8;
		size_t      n = strspn(w, "abcdefghijklmnopqrstuvwxyz_");

		if (n > 0 && w[n] == '\0')
			snprintf(field, len, "%.*s", (int) n, w);
	}
}

static void
respond_pg_error(RemoraRequest *req, const PGresult *res, PGconn *conn)
{
	const char *sqlstate =
		res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	const char *message =
		res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char field[80] = "";

	if (sqlstate == NULL)
	{
		/* no answer from the server: the connection was lost */
		remora_respond_error(req, 503, "08006",
							 "the database connection was lost", NULL, NULL,
							 NULL);
		return;
	}
	if (strcmp(sqlstate, "22023") == 0)
		field_of(message, field, sizeof(field));
	remora_respond_error(
		req, status_for(sqlstate), sqlstate, message ? message : "error",
		PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL),
		PQresultErrorField(res, PG_DIAG_MESSAGE_HINT), field[0] ? field : NULL);
}

/* The request's connection, from its role's pool; NULL: answered. */
static PGconn *
db(RemoraRequest *req)
{
	bool refused;

	if (req->db)
		return req->db;
	req->db = remora_pool_acquire(req->pool, &refused);
	if (req->db == NULL)
	{
		if (refused)
			remora_respond_error(req, 401, "28P01",
								 "the database no longer accepts the "
								 "credentials of this session",
								 NULL, "Sign in again.", NULL);
		else
			remora_respond_error(req, 503, "53300",
								 "no database connection is available", NULL,
								 "Try again later.", NULL);
	}
	return req->db;
}

/*
 * Run sql, with @extschema@ standing for the extension's schema, on conn
 * with text parameters (NULL entries are SQL NULLs).  The result, to
 * clear; a failed one (no SQLSTATE) when the statement could not be made.
 */
static PGresult *
exec_sql(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
	static const char marker[] = "@extschema@";
	char              schema[160];
	RemoraBuf         b = {0};
	PGresult         *res;

	if (!remora_http_ext_schema(schema, sizeof(schema)))
		return PQmakeEmptyPGresult(conn, PGRES_FATAL_ERROR);
	for (const char *at; (at = strstr(sql, marker)) != NULL;
		 sql = at + sizeof(marker) - 1)
	{
		remora_buf_printf(&b, "%.*s", (int) (at - sql), sql);
		remora_buf_puts(&b, schema);
	}
	remora_buf_puts(&b, sql);
	if (b.failed)
		res = PQmakeEmptyPGresult(conn, PGRES_FATAL_ERROR);
	else
		res = PQexecParams(conn, b.data, nparams, NULL, params, NULL, NULL, 0);
	remora_buf_free(&b);
	return res;
}

/*
 * Run sql (see exec_sql) with text parameters.  Returns the
 * result (the caller clears it), or NULL when the request has been
 * answered with the error.  A read whose connection turns out to be dead
 * (the server restarted) is tried once more on a new one.
 */
static PGresult *
query(RemoraRequest *req, const char *sql, int nparams,
	  const char *const *params)
{
	for (int round = 0; round < 2; round++)
	{
		PGconn        *conn = db(req);
		PGresult      *res;
		ExecStatusType st;

		if (conn == NULL)
			return NULL;
		res = exec_sql(conn, sql, nparams, params);
		st = PQresultStatus(res);
		if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
			return res;
		if (PQstatus(conn) != CONNECTION_OK && round == 0 &&
			strcmp(req->method, "GET") == 0)
		{
			PQclear(res);
			remora_pool_release(req->pool, conn);
			req->db = NULL;
			continue;
		}
		respond_pg_error(req, res, conn);
		PQclear(res);
		return NULL;
	}
	return NULL;
}

/* Answer with the first column of the only row (SQL-built JSON). */
static void
respond_value(RemoraRequest *req, int status, PGresult *res,
			  const char *missing)
{
	RemoraBuf b = {0};

	if (PQntuples(res) < 1 || PQgetisnull(res, 0, 0))
	{
		remora_respond_error(req, 404, "P0002", missing, NULL, NULL, NULL);
		PQclear(res);
		return;
	}
	remora_buf_puts(&b, PQgetvalue(res, 0, 0));
	PQclear(res);
	remora_respond_json(req, status, &b);
	remora_buf_free(&b);
}

static void
not_signed_in(RemoraRequest *req)
{
	remora_respond_error(req, 401, "28000", "not signed in", NULL,
						 "Sign in with POST /api/session, or send HTTP Basic "
						 "credentials.",
						 NULL);
}

static void
method_not_allowed(RemoraRequest *req, const char *allow)
{
	RemoraBuf            b = {0};
	struct MHD_Response *response;

	remora_buf_puts(&b, "{\"error\":\"method not allowed\",\"sqlstate\":"
						"\"0A000\"}");
	response =
		MHD_create_response_from_buffer(b.len, b.data, MHD_RESPMEM_MUST_COPY);
	remora_buf_free(&b);
	if (response == NULL)
		return;
	MHD_add_response_header(response, "Allow", allow);
	MHD_add_response_header(response, "Content-Type",
							"application/json; charset=utf-8");
	remora_add_security_headers(req, response, false);
	remora_respond_response(req, 405, response);
}

static void
bad_request(RemoraRequest *req, const char *sqlstate, const char *message,
			const char *field)
{
	remora_respond_error(req, 400, sqlstate, message, NULL, NULL, field);
}

/* The body as a JSON object; NULL: answered 400. */
static RemoraJson *
json_body(RemoraRequest *req)
{
	char        err[128];
	RemoraJson *v;

	if (req->body.len == 0)
	{
		bad_request(req, "22P02", "a JSON object is expected as the body",
					NULL);
		return NULL;
	}
	v = remora_json_parse(req->body.data, req->body.len, err, sizeof(err));
	if (v == NULL)
	{
		remora_respond_error(req, 400, "22P02", "invalid JSON in the body", err,
							 NULL, NULL);
		return NULL;
	}
	if (v->type != RJ_OBJECT)
	{
		remora_json_free(v);
		bad_request(req, "22P02", "a JSON object is expected as the body",
					NULL);
		return NULL;
	}
	return v;
}

static bool
is_admin(RemoraRequest *req, bool *admin)
{
	PGresult *res = query(req,
						  "SELECT pg_catalog.pg_has_role('remora_admin', "
						  "'MEMBER')",
						  0, NULL);

	if (res == NULL)
		return false;
	*admin = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return true;
}

/* --- sessions ----------------------------------------------------------------
 */

static void
session_info(RemoraRequest *req, int status, const char *csrf,
			 const char *set_cookie)
{
	RemoraBuf b = {0};
	bool      admin;

	if (!is_admin(req, &admin))
		return;
	remora_buf_puts(&b, "{\"user\":");
	remora_buf_json_string_html(&b, remora_pool_role(req->pool));
	remora_buf_printf(&b, ",\"admin\":%s", admin ? "true" : "false");
	if (csrf)
	{
		remora_buf_puts(&b, ",\"csrf\":");
		remora_buf_json_string_html(&b, csrf);
	}
	remora_buf_printf(&b, ",\"idle_timeout\":%d,\"max_age\":%d}",
					  atomic_load(&remora_http_config.session_idle_s),
					  atomic_load(&remora_http_config.session_max_age_s));
	if (b.failed)
		remora_respond_error(req, 500, "53200", "out of memory", NULL, NULL,
							 NULL);
	else
		remora_respond(req, status, "application/json; charset=utf-8", b.data,
					   b.len, NULL, set_cookie, NULL);
	remora_buf_free(&b);
}

static void
sign_in(RemoraRequest *req)
{
	RemoraJson      *v = json_body(req);
	const char      *user, *password;
	RemoraPool      *pool = NULL;
	RemoraAuthResult r;
	int              retry_after = 0;
	char             err[256];
	char             id[REMORA_SESSION_ID_LEN + 1];
	char             csrf[REMORA_SESSION_ID_LEN + 1];
	char             cookie[256];

	if (v == NULL)
		return;
	user = remora_json_string(v, "user");
	password = remora_json_string(v, "password");
	if (user == NULL || password == NULL)
	{
		remora_json_free(v);
		bad_request(req, "22023", "\"user\" and \"password\" are required",
					user == NULL ? "user" : "password");
		return;
	}
	r = remora_http_login(user, password, req->address, &pool, &retry_after,
						  err, sizeof(err));
	remora_json_free(v);
	if (r != REMORA_AUTH_OK)
	{
		req->retry_after = retry_after;
		remora_respond_error(req,
							 r == REMORA_AUTH_THROTTLED     ? 429
							 : r == REMORA_AUTH_UNAVAILABLE ? 503
															: 401,
							 r == REMORA_AUTH_UNAVAILABLE ? "57P03" : "28P01",
							 err, NULL, NULL, NULL);
		return;
	}
	/* a fresh session every time: an id known before sign-in is worthless */
	if (req->by_session)
		remora_session_delete(req->session_id);
	if (!remora_session_create(pool, id, csrf))
	{
		remora_pool_unref(pool);
		remora_respond_error(req, 500, "53200", "could not create a session",
							 NULL, NULL, NULL);
		return;
	}
	/* the request now speaks for the new session */
	if (req->db)
	{
		remora_pool_release(req->pool, req->db);
		req->db = NULL;
	}
	remora_pool_unref(req->pool);
	req->pool = remora_session_lookup(id, true, NULL);
	if (req->pool == NULL)
	{
		remora_respond_error(req, 500, "XX000", "session vanished", NULL, NULL,
							 NULL);
		return;
	}
	remora_session_cookie(req, cookie, sizeof(cookie), id);
	session_info(req, 200, csrf, cookie);
}

static void
api_session(RemoraRequest *req)
{
	char cookie[256];

	if (strcmp(req->method, "POST") == 0)
	{
		sign_in(req);
		return;
	}
	if (req->pool == NULL)
	{
		not_signed_in(req);
		return;
	}
	if (strcmp(req->method, "GET") == 0)
	{
		char        csrf[REMORA_SESSION_ID_LEN + 1];
		RemoraPool *p = req->by_session ? remora_session_lookup(req->session_id,
																false, csrf)
										: NULL;

		remora_pool_unref(p);
		session_info(req, 200, p ? csrf : NULL, NULL);
	}
	else if (strcmp(req->method, "DELETE") == 0)
	{
		if (req->by_session)
			remora_session_delete(req->session_id);
		remora_session_cookie(req, cookie, sizeof(cookie), NULL);
		remora_respond(req, 200, "application/json; charset=utf-8", "{}", 2,
					   NULL, cookie, NULL);
	}
	else
		method_not_allowed(req, "GET, POST, DELETE");
}

/* --- jobs ------------------------------------------------------------------
 */

/*
 * The page's job ids come from remora.jobs itself (row-level security
 * applies there as in the view), walking its primary key backwards, and
 * only the page's rows go through the view: the first page and the
 * thousandth cost the same on a long history.
 */
#define LIST_FILTER                                                            \
	"WHERE deleted_at IS NULL "                                                \
	"AND ($1" TEXT " IS NULL OR state" EQ "ANY "                               \
	"(pg_catalog.string_to_array($1" TEXT ", ','))) "                          \
	"AND ($2" TEXT " IS NULL "                                                 \
	"OR pg_catalog.strpos(pg_catalog.lower(source), "                          \
	"pg_catalog.lower($2" TEXT "))" GT "0 "                                    \
	"OR pg_catalog.strpos(pg_catalog.lower(coalesce(label, '')), "             \
	"pg_catalog.lower($2" TEXT "))" GT "0 "                                    \
	"OR job_id" TEXT EQ "$2" TEXT ") "

static const char *LIST_SQL =
	"WITH page AS (SELECT job_id FROM remora.jobs " LIST_FILTER "AND ($3" INT8
	" IS NULL OR job_id" LT "$3" INT8 ") "
	"ORDER BY job_id DESC LIMIT $4" INT4 ") "
	"SELECT pg_catalog.json_build_object('jobs', "
	"coalesce((SELECT pg_catalog.json_agg(pg_catalog.to_json(j) "
	"ORDER BY j.job_id DESC) "
	"FROM @extschema@.remora_jobs j "
	"WHERE j.job_id" EQ "ANY (SELECT job_id FROM page)), "
	"'[]'), 'next', (SELECT CASE WHEN pg_catalog.count(*)" EQ "$4" INT4 " "
	"THEN pg_catalog.min(job_id) END FROM page))";

/*
 * The other orders (?sort=&dir=), each walking an index so that a page
 * costs the same wherever it is: by job id forwards (the oldest first),
 * or by (priority, job_id) either way (jobs_priority_idx).  The cursor of
 * a priority order is "priority:job_id", the last row of the page.
 */
#define LIST_SORTED_SQL(KEYCOND, ORDER, BACK, NEXT)                            \
	"WITH page AS (SELECT job_id, priority FROM remora.jobs " LIST_FILTER      \
	"AND ($3" TEXT " IS NULL OR " KEYCOND ") "                                 \
	"ORDER BY " ORDER " LIMIT $4" INT4 ") "                                    \
	"SELECT pg_catalog.json_build_object('jobs', "                             \
	"coalesce((SELECT pg_catalog.json_agg(pg_catalog.to_json(j) "              \
	"ORDER BY " ORDER ") FROM @extschema@.remora_jobs j "                      \
	"WHERE j.job_id" EQ "ANY (SELECT job_id FROM page)), '[]'), "              \
	"'next', CASE WHEN (SELECT pg_catalog.count(*) FROM page)" EQ "$4" INT4    \
	" THEN (SELECT " NEXT " FROM page ORDER BY " BACK " LIMIT 1) END)"

#define PRIORITY_KEY                                                           \
	"ROW(pg_catalog.split_part($3" TEXT ", ':', 1)" INT4 ", "                  \
	"pg_catalog.split_part($3" TEXT ", ':', 2)" INT8 ")"
#define PRIORITY_CURSOR "priority" TEXT CONCAT "':'" CONCAT "job_id" TEXT

static const char *LIST_OLDEST_SQL = LIST_SORTED_SQL(
	"job_id" GT "$3" TEXT INT8, "job_id", "job_id DESC", "job_id");
static const char *LIST_PRIORITY_DESC_SQL = LIST_SORTED_SQL(
	"ROW(priority, job_id)" LT PRIORITY_KEY, "priority DESC, job_id DESC",
	"priority, job_id", PRIORITY_CURSOR);
static const char *LIST_PRIORITY_ASC_SQL =
	LIST_SORTED_SQL("ROW(priority, job_id)" GT PRIORITY_KEY, "priority, job_id",
					"priority DESC, job_id DESC", PRIORITY_CURSOR);

/* Is s "priority:job_id" (a cursor of the priority order)? */
static bool
priority_cursor(const char *s)
{
	char *end;
	long  v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end != ':' || errno != 0 || v < INT32_MIN || v > INT32_MAX)
		return false;
	s = end + 1;
	if (*s == '-' || *s == '+')
		return false;
	(void) strtoll(s, &end, 10);
	return end != s && *end == '\0' && errno == 0;
}

static void
list_jobs(RemoraRequest *req)
{
	const char *state = remora_req_arg(req, "state");
	const char *q = remora_req_arg(req, "q");
	const char *after = remora_req_arg(req, "after");
	const char *limit = remora_req_arg(req, "limit");
	const char *sort = remora_req_arg(req, "sort");
	const char *dir = remora_req_arg(req, "dir");
	const char *sql = LIST_SQL;
	bool        by_priority = sort && strcmp(sort, "priority") == 0;
	bool        asc = dir && strcmp(dir, "asc") == 0;
	char        lim[16];
	const char *params[4];
	PGresult   *res;
	long        n = LIST_DEFAULT;

	if (sort && sort[0] && strcmp(sort, "submitted") != 0 && !by_priority)
	{
		remora_respond_error(req, 400, "22023", "invalid sort",
							 "The sort is \"submitted\" or \"priority\".", NULL,
							 "sort");
		return;
	}
	if (dir && dir[0] && strcmp(dir, "desc") != 0 && !asc)
	{
		remora_respond_error(req, 400, "22023", "invalid dir",
							 "The direction is \"desc\" or \"asc\".", NULL,
							 "dir");
		return;
	}
	if (by_priority && after && after[0] && !priority_cursor(after))
	{
		remora_respond_error(req, 400, "22023", "invalid after",
							 "With sort=priority, after is the \"next\" of the "
							 "previous page (priority:job_id).",
							 NULL, "after");
		return;
	}
	if (by_priority)
		sql = asc ? LIST_PRIORITY_ASC_SQL : LIST_PRIORITY_DESC_SQL;
	else if (asc)
		sql = LIST_OLDEST_SQL;

	if (limit && limit[0])
	{
		char *end;

		n = strtol(limit, &end, 10);
		if (*end != '\0' || n < 1 || n > LIST_MAX_LIMIT)
		{
			remora_respond_error(req, 400, "22023", "invalid limit",
								 "The limit must be an integer from 1 to "
								 "1000.",
								 NULL, "limit");
			return;
		}
	}
	snprintf(lim, sizeof(lim), "%ld", n);
	params[0] = state && state[0] ? state : NULL;
	params[1] = q && q[0] ? q : NULL;
	params[2] = after && after[0] ? after : NULL;
	params[3] = lim;
	res = query(req, sql, 4, params);
	if (res)
		respond_value(req, 200, res, "no jobs");
}

/* the body's options (b): a JSON null or none at all is no option */
#define OPTIONS                                                                \
	"CASE WHEN pg_catalog.jsonb_typeof(b" ARROW "'options')" EQ "'object' "    \
	"THEN b" ARROW "'options' ELSE '{}'" JSONB " END"

static const char *ALLOWED_SUBMIT_KEYS[] = {
	"source", "bucket", "prefix", "options", "idempotency_key", NULL};

static void
submit_job(RemoraRequest *req)
{
	RemoraJson *v = json_body(req);
	const char *params[1];
	PGresult   *res;
	char        location[64];
	RemoraBuf   b = {0};

	if (v == NULL)
		return;
	for (const RemoraJson *m = v->child; m; m = m->next)
	{
		bool known = false;

		for (int i = 0; ALLOWED_SUBMIT_KEYS[i]; i++)
			known = known || strcmp(m->key, ALLOWED_SUBMIT_KEYS[i]) == 0;
		if (!known)
		{
			char msg[128];

			snprintf(msg, sizeof(msg), "unknown field \"%.64s\"", m->key);
			remora_json_free(v);
			remora_respond_error(req, 400, "22023", msg,
								 "The fields are source, bucket, prefix, "
								 "options and idempotency_key.",
								 NULL, NULL);
			return;
		}
		if (strcmp(m->key, "options") == 0
				? (m->type != RJ_OBJECT && m->type != RJ_NULL)
				: (m->type != RJ_STRING &&
				   (m->type != RJ_NULL || strcmp(m->key, "source") == 0)))
		{
			char msg[128];

			snprintf(msg, sizeof(msg), "invalid %.64s", m->key);
			remora_respond_error(req, 400, "22023", msg,
								 strcmp(m->key, "options") == 0
									 ? "It must be a JSON object."
									 : "It must be a JSON string.",
								 NULL, m->key);
			remora_json_free(v);
			return;
		}
	}
	if (remora_json_string(v, "source") == NULL)
	{
		remora_json_free(v);
		remora_respond_error(req, 400, "22023", "invalid source",
							 "The field \"source\" is required.", NULL,
							 "source");
		return;
	}
	remora_json_free(v);
	params[0] = req->body.data;
	res = query(req,
				"SELECT @extschema@.remora_submit(b" ARROWTXT "'source', "
				"b" ARROWTXT "'bucket', b" ARROWTXT "'prefix', " OPTIONS ", "
				"b" ARROWTXT "'idempotency_key') "
				"FROM (SELECT $1" JSONB " AS b) s",
				1, params);
	if (res == NULL)
		return;
	remora_buf_printf(&b, "{\"job_id\":%s}", PQgetvalue(res, 0, 0));
	snprintf(location, sizeof(location), "/api/jobs/%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	if (!b.failed)
		remora_respond(req, 201, "application/json; charset=utf-8", b.data,
					   b.len, NULL, NULL, location);
	remora_buf_free(&b);
}

/* --- exports ----------------------------------------------------------------
 */

/*
 * Check the body's fields: each one of allowed (NULL-terminated), "options"
 * a JSON object or null, every other a JSON string or null.  False: answered
 * 400 (22023) naming the field.
 */
static bool
check_fields(RemoraRequest *req, const RemoraJson *v,
			 const char *const *allowed, const char *list)
{
	for (const RemoraJson *m = v->child; m; m = m->next)
	{
		bool known = false;
		bool object = strcmp(m->key, "options") == 0;
		char msg[128];

		for (int i = 0; allowed[i]; i++)
			known = known || strcmp(m->key, allowed[i]) == 0;
		if (!known)
		{
			snprintf(msg, sizeof(msg), "unknown field \"%.64s\"", m->key);
			remora_respond_error(req, 400, "22023", msg, list, NULL, NULL);
			return false;
		}
		if (m->type != RJ_NULL && m->type != (object ? RJ_OBJECT : RJ_STRING))
		{
			snprintf(msg, sizeof(msg), "invalid %.64s", m->key);
			remora_respond_error(req, 400, "22023", msg,
								 object ? "It must be a JSON object."
										: "It must be a JSON string.",
								 NULL, m->key);
			return false;
		}
	}
	return true;
}

static const char *const EXPORT_KEYS[] = {
	"bucket", "prefix", "if_exists", "options", "idempotency_key", NULL};

/*
 * POST /api/jobs/{id}/export: remora_export.  if_exists may come at the
 * top level (the form's field) or in options; remora._export judges it,
 * with every other option.  201 {"export_id"}, Location /api/exports/N.
 */
static void
export_job(RemoraRequest *req, const char *id)
{
	RemoraJson *v = json_body(req);
	const char *params[2];
	const char *if_exists;
	PGresult   *res;
	char        location[64];
	RemoraBuf   b = {0};

	if (v == NULL)
		return;
	if (!check_fields(req, v, EXPORT_KEYS,
					  "The fields are bucket, prefix, if_exists, options "
					  "and idempotency_key."))
	{
		remora_json_free(v);
		return;
	}
	if_exists = remora_json_string(v, "if_exists");
	if (if_exists && strcmp(if_exists, "fail") != 0 &&
		strcmp(if_exists, "overwrite") != 0 &&
		strcmp(if_exists, "skip_identical") != 0)
	{
		remora_json_free(v);
		remora_respond_error(req, 400, "22023", "invalid if_exists",
							 "if_exists is \"fail\", \"overwrite\" or "
							 "\"skip_identical\".",
							 NULL, "if_exists");
		return;
	}
	remora_json_free(v);
	params[0] = id;
	params[1] = req->body.data;
	res = query(req,
				"SELECT @extschema@.remora_export($1" INT8 ", "
				"b" ARROWTXT "'bucket', b" ARROWTXT "'prefix', " OPTIONS CONCAT
				"CASE WHEN b" ARROWTXT "'if_exists' IS NULL "
				"THEN '{}'" JSONB " ELSE pg_catalog.jsonb_build_object("
				"'if_exists', b" ARROW "'if_exists') END, "
				"b" ARROWTXT "'idempotency_key') "
				"FROM (SELECT $2" JSONB " AS b) s",
				2, params);
	if (res == NULL)
		return;
	remora_buf_printf(&b, "{\"export_id\":%s}", PQgetvalue(res, 0, 0));
	snprintf(location, sizeof(location), "/api/exports/%s",
			 PQgetvalue(res, 0, 0));
	PQclear(res);
	if (!b.failed)
		remora_respond(req, 201, "application/json; charset=utf-8", b.data,
					   b.len, NULL, NULL, location);
	remora_buf_free(&b);
}

/*
 * GET /api/exports?state=&job=&limit=&after=: remora_exports rows the role
 * sees, newest first.  As for jobs, the page's ids come from remora.jobs
 * (row-level security applies there) walking its primary key backwards,
 * and only the page's rows go through the view.
 */
static const char *EXPORTS_SQL =
	"WITH page AS (SELECT job_id FROM remora.jobs "
	"WHERE deleted_at IS NULL AND source_kind" EQ "'export' "
	"AND ($1" TEXT " IS NULL OR state" EQ "ANY "
	"(pg_catalog.string_to_array($1" TEXT ", ','))) "
	"AND ($2" INT8 " IS NULL OR job_id" EQ "ANY (SELECT x.export_id "
	"FROM remora.exports x WHERE x.job_id" EQ "$2" INT8 ")) "
	"AND ($3" INT8 " IS NULL OR job_id" LT "$3" INT8 ") "
	"ORDER BY job_id DESC LIMIT $4" INT4 ") "
	"SELECT pg_catalog.json_build_object('exports', "
	"coalesce((SELECT pg_catalog.json_agg(pg_catalog.to_json(e) "
	"ORDER BY e.export_id DESC) FROM @extschema@.remora_exports e "
	"WHERE e.export_id" EQ "ANY (SELECT job_id FROM page)), "
	"'[]'), 'next', (SELECT CASE WHEN pg_catalog.count(*)" EQ "$4" INT4 " "
	"THEN pg_catalog.min(job_id) END FROM page))";

/* Is s empty, or a positive integer that fits a bigint? */
static bool
id_arg(const char *s)
{
	size_t n;

	if (s == NULL || s[0] == '\0')
		return true;
	n = strspn(s, "0123456789");
	return n > 0 && n <= 18 && s[n] == '\0';
}

static void
list_exports(RemoraRequest *req)
{
	const char *state = remora_req_arg(req, "state");
	const char *job = remora_req_arg(req, "job");
	const char *after = remora_req_arg(req, "after");
	const char *limit = remora_req_arg(req, "limit");
	const char *params[4];
	PGresult   *res;
	char        lim[16];
	long        n = LIST_DEFAULT;

	if (!id_arg(job) || !id_arg(after))
	{
		bool bad_job = !id_arg(job);

		remora_respond_error(req, 400, "22023",
							 bad_job ? "invalid job" : "invalid after",
							 bad_job ? "job is a job id."
									 : "after is the \"next\" of the "
									   "previous page.",
							 NULL, bad_job ? "job" : "after");
		return;
	}
	if (limit && limit[0])
	{
		char *end;

		n = strtol(limit, &end, 10);
		if (*end != '\0' || n < 1 || n > LIST_MAX_LIMIT)
		{
			remora_respond_error(req, 400, "22023", "invalid limit",
								 "The limit must be an integer from 1 to "
								 "1000.",
								 NULL, "limit");
			return;
		}
	}
	snprintf(lim, sizeof(lim), "%ld", n);
	params[0] = state && state[0] ? state : NULL;
	params[1] = job && job[0] ? job : NULL;
	params[2] = after && after[0] ? after : NULL;
	params[3] = lim;
	if ((res = query(req, EXPORTS_SQL, 4, params)) != NULL)
		respond_value(req, 200, res, "no exports");
}

static const char *EXPORT_SQL =
	"SELECT pg_catalog.to_jsonb(e)" CONCAT
	"pg_catalog.jsonb_build_object('attempts', "
	"(SELECT coalesce(pg_catalog.jsonb_agg(pg_catalog.to_jsonb(a) "
	"ORDER BY a.attempt_no), '[]') "
	"FROM @extschema@.remora_export_attempts a "
	"WHERE a.export_id" EQ "e.export_id)) "
	"FROM @extschema@.remora_exports e WHERE e.export_id" EQ "$1" INT8;

static const char *const RESOLVE_KEYS[] = {"action", NULL};

/*
 * GET /api/exports/{id}; POST /api/exports/{id}/resolve {"action"}:
 * remora_export_resolve (42501 -> 403 for a remora_user's retry or fail,
 * 55000 -> 409 for an export whose outcome is known);
 * POST /api/exports/{id}/cancel: remora_cancel, as for a job.
 */
static void
one_export(RemoraRequest *req, const char *id, const char *rest)
{
	const char *params[2] = {id, NULL};
	PGresult   *res;
	char        missing[64];

	snprintf(missing, sizeof(missing), "export %s does not exist", id);
	if (rest[0] == '\0')
	{
		if (strcmp(req->method, "GET") != 0)
			method_not_allowed(req, "GET");
		else if ((res = query(req, EXPORT_SQL, 1, params)) != NULL)
			respond_value(req, 200, res, missing);
	}
	else if (strcmp(rest, "/resolve") == 0 || strcmp(rest, "/cancel") == 0)
	{
		bool resolve = rest[1] == 'r';

		if (strcmp(req->method, "POST") != 0)
		{
			method_not_allowed(req, "POST");
			return;
		}
		if (resolve)
		{
			RemoraJson *v = json_body(req);

			if (v == NULL)
				return;
			if (!check_fields(req, v, RESOLVE_KEYS,
							  "The only field is action."))
			{
				remora_json_free(v);
				return;
			}
			if (remora_json_string(v, "action") == NULL)
			{
				remora_json_free(v);
				remora_respond_error(req, 400, "22023", "invalid action",
									 "action is \"verify\", \"retry\" or "
									 "\"fail\".",
									 NULL, "action");
				return;
			}
			remora_json_free(v);
			params[1] = req->body.data;
			res = query(req,
						"SELECT pg_catalog.json_build_object('state', "
						"@extschema@.remora_export_resolve($1" INT8 ", "
						"$2" JSONB ARROWTXT "'action'))",
						2, params);
		}
		else
		{
			/* an export's id names no row of remora_jobs: ask the view */
			res = query(req,
						"SELECT pg_catalog.json_build_object('state', "
						"@extschema@.remora_cancel(e.export_id)) "
						"FROM @extschema@.remora_exports e "
						"WHERE e.export_id" EQ "$1" INT8,
						1, params);
		}
		if (res != NULL)
			respond_value(req, 200, res, missing);
	}
	else
		remora_respond_error(req, 404, "P0002", "no such path", NULL, NULL,
							 NULL);
}

static const char *JOB_SQL =
	"SELECT pg_catalog.to_jsonb(j)" CONCAT "pg_catalog.jsonb_build_object("
	"'attempts', (SELECT coalesce(pg_catalog.jsonb_agg("
	"pg_catalog.to_jsonb(a) ORDER BY a.attempt_no), '[]') "
	"FROM @extschema@.remora_attempts a WHERE a.job_id" EQ "j.job_id), "
	"'progress', (SELECT pg_catalog.to_jsonb(p) "
	"FROM @extschema@.remora_progress p "
	"WHERE p.job_id" EQ "j.job_id LIMIT 1)) "
	"FROM @extschema@.remora_jobs j WHERE j.job_id" EQ "$1" INT8;

static void
one_job(RemoraRequest *req, const char *id, const char *rest)
{
	const char *params[3] = {id, NULL, NULL};
	PGresult   *res;
	char        missing[64];

	snprintf(missing, sizeof(missing), "job %s does not exist", id);
	if (rest[0] == '\0')
	{
		if (strcmp(req->method, "GET") == 0)
		{
			if ((res = query(req, JOB_SQL, 1, params)) != NULL)
				respond_value(req, 200, res, missing);
		}
		else if (strcmp(req->method, "DELETE") == 0)
		{
			const char *hard = remora_req_arg(req, "hard");

			if (hard && strcmp(hard, "true") != 0 && strcmp(hard, "false") != 0)
			{
				remora_respond_error(req, 400, "22023", "invalid hard",
									 "hard is true or false.", NULL, "hard");
				return;
			}
			params[1] = hard ? hard : "false";
			if ((res = query(req,
							 "SELECT @extschema@.remora_delete($1" INT8 ", "
							 "$2::pg_catalog.bool)",
							 2, params)) != NULL)
			{
				PQclear(res);
				remora_respond(req, 204, NULL, "", 0, NULL, NULL, NULL);
			}
		}
		else
			method_not_allowed(req, "GET, DELETE");
	}
	else if (strcmp(rest, "/cancel") == 0)
	{
		if (strcmp(req->method, "POST") != 0)
		{
			method_not_allowed(req, "POST");
			return;
		}
		if ((res = query(req,
						 "SELECT pg_catalog.json_build_object('state', "
						 "@extschema@.remora_cancel($1" INT8 "))",
						 1, params)) != NULL)
			respond_value(req, 200, res, missing);
	}
	else if (strcmp(rest, "/export") == 0)
	{
		if (strcmp(req->method, "POST") != 0)
		{
			method_not_allowed(req, "POST");
			return;
		}
		export_job(req, id);
	}
	else if (strcmp(rest, "/result") == 0)
	{
		if (strcmp(req->method, "GET") != 0)
		{
			method_not_allowed(req, "GET");
			return;
		}
		if ((res = query(req,
						 "SELECT pg_catalog.json_build_object('members', "
						 "coalesce(pg_catalog.json_agg(pg_catalog.to_json(r) "
						 "ORDER BY r.path), '[]')) "
						 "FROM @extschema@.remora_result($1" INT8 ") r",
						 1, params)) != NULL)
			respond_value(req, 200, res, missing);
	}
	else if (strcmp(rest, "/result/url") == 0)
	{
		const char *ttl = remora_req_arg(req, "ttl");

		if (strcmp(req->method, "GET") != 0)
		{
			method_not_allowed(req, "GET");
			return;
		}
		params[1] = remora_req_arg(req, "path");
		if (params[1] == NULL || params[1][0] == '\0')
		{
			remora_respond_error(req, 400, "22023", "invalid path",
								 "The query parameter path names a member of "
								 "the result.",
								 NULL, "path");
			return;
		}
		params[2] = ttl && ttl[0] ? ttl : NULL;
		if ((res = query(req,
						 "SELECT pg_catalog.json_build_object('url', "
						 "@extschema@.remora_presign($1" INT8 ", $2" TEXT ", "
						 "CASE WHEN $3" TEXT " IS NULL "
						 "THEN '15 minutes'::pg_catalog.interval "
						 "WHEN $3" TEXT MATCHES "'^[0-9]+$' "
						 "THEN pg_catalog.make_interval(secs => "
						 "$3::pg_catalog.float8) "
						 "ELSE $3::pg_catalog.interval END))",
						 3, params)) != NULL)
			respond_value(req, 200, res, missing);
	}
	else
		remora_respond_error(req, 404, "P0002", "no such path", NULL, NULL,
							 NULL);
}

/* --- administration --------------------------------------------------------
 */

static void
admin_view(RemoraRequest *req, const char *sql)
{
	bool      admin;
	PGresult *res;

	if (strcmp(req->method, "GET") != 0)
	{
		method_not_allowed(req, "GET");
		return;
	}
	if (!is_admin(req, &admin))
		return;
	if (!admin)
	{
		remora_respond_error(req, 403, "42501",
							 "permission denied: remora_admin only", NULL,
							 "GRANT remora_admin to the role.", NULL);
		return;
	}
	if ((res = query(req, sql, 0, NULL)) != NULL)
		respond_value(req, 200, res, "nothing");
}

/* --- Server-Sent Events ----------------------------------------------------
 */

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
	res = exec_sql(conn, EVENTS_SQL, 2, params);
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
 * The id at the start of p ("42" of "42/cancel") copied into id (24
 * bytes); the rest of the path, or NULL after answering 400 naming FIELD.
 */
static const char *
path_id(RemoraRequest *req, const char *p, char *id, const char *message,
		const char *detail, const char *field)
{
	size_t n = strspn(p, "0123456789");

	if (n == 0 || n > 18 || (p[n] != '\0' && p[n] != '/'))
	{
		remora_respond_error(req, 400, "22023", message, detail, NULL, field);
		return NULL;
	}
	memcpy(id, p, n);
	id[n] = '\0';
	return p + n;
}

static void
events(RemoraRequest *req)
{
	Sse                 *s;
	struct MHD_Response *response;
	RemoraPool          *p;

	if (strcmp(req->method, "GET") != 0)
	{
		method_not_allowed(req, "GET");
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
			not_signed_in(req);
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

/* --- routing ---------------------------------------------------------------
 */

void
remora_api_dispatch(RemoraRequest *req)
{
	const char *path = req->path;

	if (strcmp(path, "/api/session") == 0)
	{
		api_session(req);
		return;
	}
	if (req->pool == NULL)
	{
		not_signed_in(req);
		return;
	}
	if (strcmp(path, "/api/jobs") == 0)
	{
		if (strcmp(req->method, "GET") == 0)
			list_jobs(req);
		else if (strcmp(req->method, "POST") == 0)
			submit_job(req);
		else
			method_not_allowed(req, "GET, POST");
	}
	else if (strncmp(path, "/api/jobs/", 10) == 0)
	{
		char        id[24];
		const char *rest = path_id(req, path + 10, id, "invalid job id",
								   "A job id is a positive integer.", "job_id");

		if (rest)
			one_job(req, id, rest);
	}
	else if (strcmp(path, "/api/exports") == 0)
	{
		if (strcmp(req->method, "GET") == 0)
			list_exports(req);
		else
			method_not_allowed(req, "GET");
	}
	else if (strncmp(path, "/api/exports/", 13) == 0)
	{
		char        id[24];
		const char *rest =
			path_id(req, path + 13, id, "invalid export id",
					"An export id is a positive integer.", "export_id");

		if (rest)
			one_export(req, id, rest);
	}
	else if (strcmp(path, "/api/events") == 0)
		events(req);
	else if (strcmp(path, "/api/stats") == 0)
		admin_view(req, "SELECT pg_catalog.to_jsonb(s)" CONCAT
						"pg_catalog.jsonb_build_object('checkpoints', "
						"(SELECT pg_catalog.to_jsonb(c) "
						"FROM @extschema@.remora_checkpoint_stats c)) "
						"FROM @extschema@.remora_stats s");
	else if (strcmp(path, "/api/workers") == 0)
		admin_view(req, "SELECT pg_catalog.json_build_object('workers', "
						"coalesce(pg_catalog.json_agg(pg_catalog.to_json(w) "
						"ORDER BY w.started_at DESC), '[]')) "
						"FROM (SELECT * FROM @extschema@.remora_workers "
						"ORDER BY started_at DESC LIMIT 200) w");
	else if (strcmp(path, "/api/admin/grants") == 0)
		admin_view(req,
				   "SELECT pg_catalog.json_build_object('targets', (SELECT "
				   "coalesce(pg_catalog.json_agg(pg_catalog.to_json(t) "
				   "ORDER BY t.role, t.bucket, t.prefix_pattern), '[]') "
				   "FROM @extschema@.remora_target_grants t), "
				   "'sources', (SELECT coalesce(pg_catalog.json_agg("
				   "pg_catalog.to_json(s) ORDER BY s.role, s.bucket, "
				   "s.prefix_pattern, s.endpoint), '[]') "
				   "FROM @extschema@.remora_source_grants s))");
	else
		remora_respond_error(req, 404, "P0002", "no such path", NULL, NULL,
							 NULL);
}
