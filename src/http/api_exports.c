/*-------------------------------------------------------------------------
 *
 * api_exports.c
 *	  /api/exports and /api/jobs/{id}/export: start an export, list them,
 *	  one export, resolve, cancel.
 *
 * Each is one call of the SQL contract (remora_export,
 * remora_export_resolve, remora_cancel, the views remora_exports and
 * remora_export_attempts); the fields of a body are checked by name and
 * JSON type first, naming the field in a 400.
 *
 *-------------------------------------------------------------------------
 */
#include "http/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const EXPORT_KEYS[] = {
	"bucket", "prefix", "if_exists", "options", "idempotency_key", NULL};

/*
 * POST /api/jobs/{id}/export: remora_export.  if_exists may come at the
 * top level (the form's field) or in options; remora._export judges it,
 * with every other option.  201 {"export_id"}, Location /api/exports/N.
 */
void
remora_api_export_job(RemoraRequest *req, const char *id)
{
	RemoraJson *v = remora_api_json_body(req);
	const char *params[3];
	const char *if_exists;
	const char *key;
	PGresult   *res;
	char        location[64];
	RemoraBuf   b = {0};

	if (v == NULL)
		return;
	if (!remora_api_check_fields(
			req, v, EXPORT_KEYS,
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
	if (!remora_api_idempotency_key(req, v, &key))
	{
		remora_json_free(v);
		return;
	}
	params[0] = id;
	params[1] = req->body.data;
	params[2] = key;
	res = remora_api_query(
		req,
		"SELECT @extschema@.remora_export($1" INT8 ", "
		"b" ARROWTXT "'bucket', b" ARROWTXT "'prefix', " OPTIONS CONCAT
		"CASE WHEN b" ARROWTXT "'if_exists' IS NULL "
		"THEN '{}'" JSONB " ELSE pg_catalog.jsonb_build_object("
		"'if_exists', b" ARROW "'if_exists') END, $3" TEXT ") "
		"FROM (SELECT $2" JSONB " AS b) s",
		3, params);
	remora_json_free(v); /* key points into it */
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
	if ((res = remora_api_query(req, EXPORTS_SQL, 4, params)) != NULL)
		remora_api_respond_value(req, 200, res, "no exports");
}

void
remora_api_exports(RemoraRequest *req)
{
	if (strcmp(req->method, "GET") == 0)
		list_exports(req);
	else
		remora_api_method_not_allowed(req, "GET");
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
 * DELETE /api/exports/{id}: remora_delete of the export (its published
 * keys stay: an export's objects are never deleted).  An export's id
 * names no row of remora_jobs: the view says whether the caller sees it.
 */
static const char *DELETE_EXPORT_SQL =
	"SELECT @extschema@.remora_delete(e.export_id) "
	"FROM @extschema@.remora_exports e WHERE e.export_id" EQ "$1" INT8;

static void
delete_export(RemoraRequest *req, const char *id, const char *missing)
{
	const char *params[1] = {id};
	PGresult   *res = remora_api_query(req, DELETE_EXPORT_SQL, 1, params);

	if (res == NULL)
		return;
	if (PQntuples(res) == 0)
		remora_respond_error(req, 404, "P0002", missing, NULL, NULL, NULL);
	else
		remora_respond(req, 204, NULL, "", 0, NULL, NULL, NULL);
	PQclear(res);
}

/*
 * GET /api/exports/{id}; POST /api/exports/{id}/resolve {"action"}:
 * remora_export_resolve (42501 -> 403 for a remora_user's retry or fail,
 * 55000 -> 409 for an export whose outcome is known);
 * POST /api/exports/{id}/cancel: remora_cancel, as for a job.
 */
void
remora_api_export(RemoraRequest *req, const char *id, const char *rest)
{
	const char *params[2] = {id, NULL};
	PGresult   *res;
	char        missing[64];

	snprintf(missing, sizeof(missing), "export %s does not exist", id);
	if (rest[0] == '\0' && strcmp(req->method, "DELETE") == 0)
		delete_export(req, id, missing);
	else if (rest[0] == '\0')
	{
		if (strcmp(req->method, "GET") != 0)
			remora_api_method_not_allowed(req, "GET, DELETE");
		else if ((res = remora_api_query(req, EXPORT_SQL, 1, params)) != NULL)
			remora_api_respond_value(req, 200, res, missing);
	}
	else if (strcmp(rest, "/resolve") == 0 || strcmp(rest, "/cancel") == 0)
	{
		bool resolve = rest[1] == 'r';

		if (strcmp(req->method, "POST") != 0)
		{
			remora_api_method_not_allowed(req, "POST");
			return;
		}
		if (resolve)
		{
			RemoraJson *v = remora_api_json_body(req);

			if (v == NULL)
				return;
			if (!remora_api_check_fields(req, v, RESOLVE_KEYS,
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
			res = remora_api_query(
				req,
				"SELECT pg_catalog.json_build_object('state', "
				"@extschema@.remora_export_resolve($1" INT8 ", "
				"$2" JSONB ARROWTXT "'action'))",
				2, params);
		}
		else
		{
			/* an export's id names no row of remora_jobs: ask the view */
			res =
				remora_api_query(req,
								 "SELECT pg_catalog.json_build_object('state', "
								 "@extschema@.remora_cancel(e.export_id)) "
								 "FROM @extschema@.remora_exports e "
								 "WHERE e.export_id" EQ "$1" INT8,
								 1, params);
		}
		if (res != NULL)
			remora_api_respond_value(req, 200, res, missing);
	}
	else
		remora_respond_error(req, 404, "P0002", "no such path", NULL, NULL,
							 NULL);
}
