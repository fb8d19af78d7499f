/*-------------------------------------------------------------------------
 *
 * api_query.c
 *	  SQL for a request of the JSON API, and the answers every resource
 *	  shares (errors, 401, 405, a JSON body).
 *
 * A request's SQL runs on a connection lent by the role's pool for the
 * request (given back when it ends), with @extschema@ standing for the
 * extension's schema, and text parameters only.  A read whose connection
 * died (the server restarted) is tried once more on a new connection.
 *
 * Errors: {"error", "sqlstate", "detail"?, "hint"?, "field"?} with the
 * status of the SQLSTATE: class 22 and 23502/23514 -> 400 (22023 and
 * 22004 name the field), 23505 and 55000 (an export not in a state to
 * resolve) -> 409,
 * 42501 and RM001 -> 403, P0002 and 42704 (an unknown role) -> 404,
 * class 28 -> 401, 53400 (a role at
 * its max_queued) -> 429, other 53xxx, 57xxx and 08xxx -> 503, anything
 * else 500.
 *
 * Calls respond.c and session.c (the pools); the resources call it.
 *-------------------------------------------------------------------------
 */
#include "http/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	if (strcmp(sqlstate, "P0002") == 0 || strcmp(sqlstate, "42704") == 0)
		return 404;
	if (strncmp(sqlstate, "22", 2) == 0 || strcmp(sqlstate, "23502") == 0 ||
		strcmp(sqlstate, "23514") == 0)
		return 400;
	if (strncmp(sqlstate, "28", 2) == 0)
		return 401;
	/* the caller's own limit, not the server's trouble: try later */
	if (strcmp(sqlstate, "53400") == 0)
		return 429;
	if (strncmp(sqlstate, "53", 2) == 0 || strncmp(sqlstate, "57", 2) == 0 ||
		strncmp(sqlstate, "08", 2) == 0)
		return 503;
	return 500;
}

/*
 * The request field a 22023 or 22004 message names: 'invalid option
 * "priority"' -> options.priority, 'invalid source' -> source, 'invalid
 * weight: 0' -> weight, 'prefix must not be null' -> prefix.
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

		if (n > 0 && (w[n] == '\0' || w[n] == ':'))
			snprintf(field, len, "%.*s", (int) n, w);
	}
	else
	{
		size_t n = strspn(message, "abcdefghijklmnopqrstuvwxyz_");

		if (n > 0 && strcmp(message + n, " must not be null") == 0)
			snprintf(field, len, "%.*s", (int) n, message);
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
	if (strcmp(sqlstate, "22023") == 0 || strcmp(sqlstate, "22004") == 0)
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
PGresult *
remora_api_exec_sql(PGconn *conn, const char *sql, int nparams,
					const char *const *params)
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
 * Run sql (see remora_api_exec_sql) with text parameters.  Returns the
 * result (the caller clears it), or NULL when the request has been
 * answered with the error.  A read whose connection turns out to be dead
 * (the server restarted) is tried once more on a new one.
 */
PGresult *
remora_api_query(RemoraRequest *req, const char *sql, int nparams,
				 const char *const *params)
{
	for (int round = 0; round < 2; round++)
	{
		PGconn        *conn = db(req);
		PGresult      *res;
		ExecStatusType st;

		if (conn == NULL)
			return NULL;
		res = remora_api_exec_sql(conn, sql, nparams, params);
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
void
remora_api_respond_value(RemoraRequest *req, int status, PGresult *res,
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

void
remora_api_not_signed_in(RemoraRequest *req)
{
	remora_respond_error(req, 401, "28000", "not signed in", NULL,
						 "Sign in with POST /api/session, or send HTTP Basic "
						 "credentials.",
						 NULL);
}

void
remora_api_method_not_allowed(RemoraRequest *req, const char *allow)
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

void
remora_api_bad_request(RemoraRequest *req, const char *sqlstate,
					   const char *message, const char *field)
{
	remora_respond_error(req, 400, sqlstate, message, NULL, NULL, field);
}

/* The body as a JSON object; NULL: answered 400. */
RemoraJson *
remora_api_json_body(RemoraRequest *req)
{
	char        err[128];
	RemoraJson *v;

	if (req->body.len == 0)
	{
		remora_api_bad_request(req, "22P02",
							   "a JSON object is expected as the body", NULL);
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
		remora_api_bad_request(req, "22P02",
							   "a JSON object is expected as the body", NULL);
		return NULL;
	}
	return v;
}

bool
remora_api_is_admin(RemoraRequest *req, bool *admin)
{
	PGresult *res =
		remora_api_query(req,
						 "SELECT pg_catalog.pg_has_role('remora_admin', "
						 "'MEMBER')",
						 0, NULL);

	if (res == NULL)
		return false;
	*admin = PQntuples(res) == 1 && strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return true;
}

/*
 * The idempotency key of a POST that creates: the body's
 * "idempotency_key", else the Idempotency-Key header (NULL: none).  Both,
 * and different: false, answered 400.
 */
bool
remora_api_idempotency_key(RemoraRequest *req, const RemoraJson *body,
						   const char **key)
{
	const char *given = remora_json_string(body, "idempotency_key");
	const char *header = remora_req_header(req, "Idempotency-Key");

	*key = given ? given : header;
	if (given && header && strcmp(given, header) != 0)
	{
		remora_respond_error(req, 400, "22023", "invalid idempotency_key",
							 "The body's idempotency_key and the "
							 "Idempotency-Key header differ.",
							 NULL, "idempotency_key");
		return false;
	}
	return true;
}

/*
 * Check the body's fields: each one of allowed (NULL-terminated), "options"
 * a JSON object or null, every other a JSON string or null.  False: answered
 * 400 (22023) naming the field.
 */
bool
remora_api_check_fields(RemoraRequest *req, const RemoraJson *v,
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
