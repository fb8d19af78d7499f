/*-------------------------------------------------------------------------
 *
 * api_jobs.c
 *	  /api/jobs and /api/jobs/{id}: list, submit, one job, cancel, retry,
 *	  delete, its result and presigned URLs; /api/throughput, the jobs of
 *	  the last hour minute by minute.
 *
 * GET /api/jobs walks an index whatever the order and the page (keyset
 * paging: "next" is the cursor of the following page); POST is
 * remora_submit with the body's fields, checked by name first;
 * /api/jobs/{id}/export belongs to the exports (api_exports.c).
 *
 *-------------------------------------------------------------------------
 */
#include "http/api.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The page's job ids come from remora.jobs itself (row-level security
 * applies there as in the view), walking its primary key backwards, and
 * only the page's rows go through the view: the first page and the
 * thousandth cost the same on a long history.  The filter leaves out
 * what the view does (exports, deleted jobs), so that a page is full
 * whenever more jobs follow.
 */
#define LIST_FILTER                                                            \
	"WHERE deleted_at IS NULL AND source_kind" NE "'export' "                  \
	"AND ($1" TEXT " IS NULL OR state" EQ "ANY "                               \
	"(pg_catalog.string_to_array($1" TEXT ", ','))) "                          \
	"AND ($2" TEXT " IS NULL "                                                 \
	"OR pg_catalog.strpos(pg_catalog.lower(source), "                          \
	"pg_catalog.lower($2" TEXT "))" GT "0 "                                    \
	"OR pg_catalog.strpos(pg_catalog.lower(coalesce(label, '')), "             \
	"pg_catalog.lower($2" TEXT "))" GT "0 "                                    \
	"OR job_id" TEXT EQ "$2" TEXT ") "                                         \
	"AND ($5" TEXT " IS NULL OR owner" EQ "pg_catalog.to_regrole($5" TEXT      \
	")) "

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
	const char *owner = remora_req_arg(req, "owner");
	const char *sql = LIST_SQL;
	bool        by_priority = sort && strcmp(sort, "priority") == 0;
	bool        asc = dir && strcmp(dir, "asc") == 0;
	char        lim[16];
	const char *params[5];
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
	params[4] = owner && owner[0] ? owner : NULL;
	res = remora_api_query(req, sql, 5, params);
	if (res)
		remora_api_respond_value(req, 200, res, "no jobs");
}

/* the body's options (b): a JSON null or none at all is no option */
static const char *ALLOWED_SUBMIT_KEYS[] = {
	"source", "bucket", "prefix", "options", "idempotency_key", NULL};

/* 201 {"job_id"} with its Location, for a query whose value is its id */
static void
respond_created_job(RemoraRequest *req, PGresult *res)
{
	char      location[64];
	RemoraBuf b = {0};

	remora_buf_printf(&b, "{\"job_id\":%s}", PQgetvalue(res, 0, 0));
	snprintf(location, sizeof(location), "/api/jobs/%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	if (!b.failed)
		remora_respond(req, 201, "application/json; charset=utf-8", b.data,
					   b.len, NULL, NULL, location);
	remora_buf_free(&b);
}

static void
submit_job(RemoraRequest *req)
{
	RemoraJson *v = remora_api_json_body(req);
	const char *params[2];
	const char *key;
	PGresult   *res;

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
	if (!remora_api_idempotency_key(req, v, &key))
	{
		remora_json_free(v);
		return;
	}
	params[0] = req->body.data;
	params[1] = key;
	res = remora_api_query(
		req,
		"SELECT @extschema@.remora_submit(b" ARROWTXT "'source', "
		"b" ARROWTXT "'bucket', b" ARROWTXT "'prefix', " OPTIONS ", "
		"$2" TEXT ") FROM (SELECT $1" JSONB " AS b) s",
		2, params);
	remora_json_free(v); /* key points into it */
	if (res != NULL)
		respond_created_job(req, res);
}

void
remora_api_jobs(RemoraRequest *req)
{
	if (strcmp(req->method, "GET") == 0)
		list_jobs(req);
	else if (strcmp(req->method, "POST") == 0)
		submit_job(req);
	else
		remora_api_method_not_allowed(req, "GET, POST");
}

static const char *JOB_SQL =
	"SELECT pg_catalog.to_jsonb(j)" CONCAT "pg_catalog.jsonb_build_object("
	"'attempts', (SELECT coalesce(pg_catalog.jsonb_agg("
	"pg_catalog.to_jsonb(a) ORDER BY a.attempt_no), '[]') "
	"FROM @extschema@.remora_attempts a WHERE a.job_id" EQ "j.job_id), "
	"'progress', (SELECT pg_catalog.to_jsonb(p) "
	"FROM @extschema@.remora_progress p "
	"WHERE p.job_id" EQ "j.job_id LIMIT 1), "
	/* a waiting job: its owner's limits, to say why it waits */
	"'owner_limits', CASE WHEN j.state" EQ "ANY (ARRAY['queued', 'retrying']) "
	"THEN (SELECT pg_catalog.to_jsonb(l) "
	"FROM @extschema@.remora_role_limits l WHERE l.role" EQ "j.owner) END) "
	"FROM @extschema@.remora_jobs j WHERE j.job_id" EQ "$1" INT8;

void
remora_api_job(RemoraRequest *req, const char *id, const char *rest)
{
	const char *params[3] = {id, NULL, NULL};
	PGresult   *res;
	char        missing[64];

	snprintf(missing, sizeof(missing), "job %s does not exist", id);
	if (rest[0] == '\0')
	{
		if (strcmp(req->method, "GET") == 0)
		{
			if ((res = remora_api_query(req, JOB_SQL, 1, params)) != NULL)
				remora_api_respond_value(req, 200, res, missing);
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
			if ((res = remora_api_query(
					 req,
					 "SELECT @extschema@.remora_delete($1" INT8 ", "
					 "$2::pg_catalog.bool)",
					 2, params)) != NULL)
			{
				PQclear(res);
				remora_respond(req, 204, NULL, "", 0, NULL, NULL, NULL);
			}
		}
		else
			remora_api_method_not_allowed(req, "GET, DELETE");
	}
	else if (strcmp(rest, "/cancel") == 0)
	{
		if (strcmp(req->method, "POST") != 0)
		{
			remora_api_method_not_allowed(req, "POST");
			return;
		}
		if ((res = remora_api_query(
				 req,
				 "SELECT pg_catalog.json_build_object('state', "
				 "@extschema@.remora_cancel($1" INT8 "))",
				 1, params)) != NULL)
			remora_api_respond_value(req, 200, res, missing);
	}
	else if (strcmp(rest, "/retry") == 0)
	{
		if (strcmp(req->method, "POST") != 0)
		{
			remora_api_method_not_allowed(req, "POST");
			return;
		}
		if ((res = remora_api_query(
				 req, "SELECT @extschema@.remora_retry($1" INT8 ")", 1,
				 params)) != NULL)
			respond_created_job(req, res);
	}
	else if (strcmp(rest, "/export") == 0)
	{
		if (strcmp(req->method, "POST") != 0)
		{
			remora_api_method_not_allowed(req, "POST");
			return;
		}
		remora_api_export_job(req, id);
	}
	else if (strcmp(rest, "/result") == 0)
	{
		if (strcmp(req->method, "GET") != 0)
		{
			remora_api_method_not_allowed(req, "GET");
			return;
		}
		if ((res = remora_api_query(
				 req,
				 "SELECT pg_catalog.json_build_object('members', "
				 "coalesce(pg_catalog.json_agg(pg_catalog.to_json(r) "
				 "ORDER BY r.path), '[]')) "
				 "FROM @extschema@.remora_result($1" INT8 ") r",
				 1, params)) != NULL)
			remora_api_respond_value(req, 200, res, missing);
	}
	else if (strcmp(rest, "/result/url") == 0)
	{
		const char *ttl = remora_req_arg(req, "ttl");

		if (strcmp(req->method, "GET") != 0)
		{
			remora_api_method_not_allowed(req, "GET");
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
		if ((res = remora_api_query(
				 req,
				 "SELECT pg_catalog.json_build_object('url', "
				 "@extschema@.remora_presign($1" INT8 ", $2" TEXT ", "
				 "CASE WHEN $3" TEXT " IS NULL "
				 "THEN '15 minutes'::pg_catalog.interval "
				 "WHEN $3" TEXT MATCHES "'^[0-9]+$' "
				 "THEN pg_catalog.make_interval(secs => "
				 "$3::pg_catalog.float8) "
				 "ELSE $3::pg_catalog.interval END))",
				 3, params)) != NULL)
			remora_api_respond_value(req, 200, res, missing);
	}
	else
		remora_respond_error(req, 404, "P0002", "no such path", NULL, NULL,
							 NULL);
}

/*
 * GET /api/throughput: the rows of remora_throughput, the last hour minute
 * by minute (the admin page's charts); row-level security leaves a user
 * their own jobs.
 */
void
remora_api_throughput(RemoraRequest *req)
{
	PGresult *res;

	if (strcmp(req->method, "GET") != 0)
	{
		remora_api_method_not_allowed(req, "GET");
		return;
	}
	res = remora_api_query(
		req,
		"SELECT pg_catalog.json_build_object('minutes', "
		"coalesce(pg_catalog.json_agg(pg_catalog.to_json(t) "
		"ORDER BY t.minute), '[]')) FROM @extschema@.remora_throughput t",
		0, NULL);
	if (res)
		remora_api_respond_value(req, 200, res, "nothing");
}
