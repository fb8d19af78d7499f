/*-------------------------------------------------------------------------
 *
 * api_admin.c
 *	  /api/stats, /api/workers, /api/admin/grants (also granting and
 *	  revoking), /api/admin/role-limits:
 *	  views and settings for remora_admin; and /metrics, the same figures
 *	  for Prometheus.
 *
 * Each view is read as the signed-in role, after asking PostgreSQL
 * whether the role is a member of remora_admin (403 otherwise); the views
 * themselves are granted to remora_admin only (remora_role_limits shows a
 * user their own row), so the check only makes the refusal clear.  The
 * limits of a role are changed by remora.set_role_limits and
 * remora.reset_role_limits as the signed-in role: their grants and checks
 * decide (42501 -> 403, 22023 -> 400, 42704 -> 404), not this file.
 * /metrics answers the text of remora.metrics_text() (the Prometheus text
 * format, built and escaped in SQL), also for remora_admin only; its
 * errors are the API's JSON ones (401 not signed in, 403 not an admin).
 *
 *-------------------------------------------------------------------------
 */
#include "http/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * May the caller read what remora_admin reads, with this method?  False:
 * answered (405, 401, 403, or the error of the check).
 */
static bool
admin_get(RemoraRequest *req)
{
	bool admin;

	if (strcmp(req->method, "GET") != 0)
	{
		remora_api_method_not_allowed(req, "GET");
		return false;
	}
	if (req->pool == NULL)
	{
		remora_api_not_signed_in(req);
		return false;
	}
	if (!remora_api_is_admin(req, &admin))
		return false;
	if (!admin)
	{
		remora_respond_error(req, 403, "42501",
							 "permission denied: remora_admin only", NULL,
							 "GRANT remora_admin to the role.", NULL);
		return false;
	}
	return true;
}

static void
admin_view(RemoraRequest *req, const char *sql)
{
	PGresult *res;

	if (admin_get(req) && (res = remora_api_query(req, sql, 0, NULL)) != NULL)
		remora_api_respond_value(req, 200, res, "nothing");
}

/* GET /metrics: the Prometheus text format, version 0.0.4 */
void
remora_api_metrics(RemoraRequest *req)
{
	PGresult   *res;
	const char *text;

	if (!admin_get(req) ||
		(res = remora_api_query(req, "SELECT remora.metrics_text()", 0,
								NULL)) == NULL)
		return;
	text = PQntuples(res) == 1 ? PQgetvalue(res, 0, 0) : "";
	remora_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", text,
				   strlen(text), NULL, NULL, NULL);
	PQclear(res);
}

void
remora_api_stats(RemoraRequest *req)
{
	admin_view(req, "SELECT pg_catalog.to_jsonb(s)" CONCAT
					"pg_catalog.jsonb_build_object('checkpoints', "
					"(SELECT pg_catalog.to_jsonb(c) "
					"FROM @extschema@.remora_checkpoint_stats c)) "
					"FROM @extschema@.remora_stats s");
}

void
remora_api_workers(RemoraRequest *req)
{
	admin_view(req, "SELECT pg_catalog.json_build_object('workers', "
					"coalesce(pg_catalog.json_agg(pg_catalog.to_json(w) "
					"ORDER BY w.started_at DESC), '[]')) "
					"FROM (SELECT * FROM @extschema@.remora_workers "
					"ORDER BY started_at DESC LIMIT 200) w");
}

static const char *const GRANT_KEYS[] = {"kind",   "role",     "bucket",
										 "prefix", "endpoint", NULL};

/*
 * POST /api/admin/grants {"kind","role","bucket","prefix"?,"endpoint"?}:
 * remora.grant_target or remora.grant_source (204); DELETE with the same
 * fields in the query string: their revoke (204, or 404 when there was no
 * such grant).  The functions judge the caller (42501 -> 403) and the
 * values; kind is "target" or "source", an endpoint only a source's.
 */
static void
change_grant(RemoraRequest *req, bool grant)
{
	RemoraJson *v = NULL;
	const char *f[5];
	PGresult   *res;
	char        sql[256];
	bool        source;

	if (grant)
	{
		if ((v = remora_api_json_body(req)) == NULL)
			return;
		if (!remora_api_check_fields(req, v, GRANT_KEYS,
									 "The fields are kind, role, bucket, "
									 "prefix and endpoint."))
		{
			remora_json_free(v);
			return;
		}
	}
	for (int i = 0; i < 5; i++)
		f[i] = grant ? remora_json_string(v, GRANT_KEYS[i])
					 : remora_req_arg(req, GRANT_KEYS[i]);
	source = f[0] && strcmp(f[0], "source") == 0;
	if (!source && (f[0] == NULL || strcmp(f[0], "target") != 0))
		remora_respond_error(req, 400, "22023", "invalid kind",
							 "kind is \"target\" or \"source\".", NULL, "kind");
	else if (!source && f[4])
		remora_respond_error(req, 400, "22023", "invalid endpoint",
							 "A target grant names no endpoint.", NULL,
							 "endpoint");
	else
	{
		snprintf(sql, sizeof(sql),
				 "SELECT remora.%s_%s($1::pg_catalog.name, $2" TEXT
				 ", coalesce($3" TEXT ", '*')%s)",
				 grant ? "grant" : "revoke", source ? "source" : "target",
				 source ? ", $4" TEXT : "");
		res = remora_api_query(req, sql, source ? 4 : 3,
							   (const char *[]){f[1], f[2], f[3], f[4]});
		if (res != NULL && !grant && strcmp(PQgetvalue(res, 0, 0), "f") == 0)
			remora_respond_error(req, 404, "P0002", "no such grant", NULL, NULL,
								 NULL);
		else if (res != NULL)
			remora_respond(req, 204, NULL, "", 0, NULL, NULL, NULL);
		if (res)
			PQclear(res);
	}
	remora_json_free(v);
}

void
remora_api_grants(RemoraRequest *req)
{
	if (strcmp(req->method, "POST") == 0 || strcmp(req->method, "DELETE") == 0)
	{
		if (req->pool == NULL)
			remora_api_not_signed_in(req);
		else
			change_grant(req, req->method[0] == 'P');
		return;
	}
	if (strcmp(req->method, "GET") != 0)
	{
		remora_api_method_not_allowed(req, "GET, POST, DELETE");
		return;
	}
	admin_view(req, "SELECT pg_catalog.json_build_object('targets', (SELECT "
					"coalesce(pg_catalog.json_agg(pg_catalog.to_json(t) "
					"ORDER BY t.role, t.bucket, t.prefix_pattern), '[]') "
					"FROM @extschema@.remora_target_grants t), "
					"'sources', (SELECT coalesce(pg_catalog.json_agg("
					"pg_catalog.to_json(s) ORDER BY s.role, s.bucket, "
					"s.prefix_pattern, s.endpoint), '[]') "
					"FROM @extschema@.remora_source_grants s))");
}

void
remora_api_role_limits(RemoraRequest *req)
{
	admin_view(req, "SELECT pg_catalog.json_build_object('role_limits', "
					"coalesce(pg_catalog.json_agg(pg_catalog.to_json(l) "
					"ORDER BY l.role), '[]')) "
					"FROM @extschema@.remora_role_limits l");
}

/* The fields of PUT /api/admin/role-limits/{role}, in the order of
 * remora.set_role_limits' arguments; the last one is a bigint. */
static const char *const LIMIT_KEYS[] = {"weight", "max_running", "max_queued",
										 "max_bytes_per_second", NULL};

/*
 * A JSON number written as an integer (no fraction, no exponent) that fits
 * the field's SQL type: -?[0-9]{1,18}, and within int4 unless bigint.  The
 * SQL function judges the range that makes sense (a weight of 0, a
 * negative limit).
 */
static bool
integer_text(const char *s, bool bigint)
{
	const char *d = s[0] == '-' ? s + 1 : s;
	size_t      n = strspn(d, "0123456789");

	if (n == 0 || n > 18 || d[n] != '\0')
		return false;
	if (!bigint)
	{
		long long v = strtoll(s, NULL, 10);

		return v >= -2147483648LL && v <= 2147483647LL;
	}
	return true;
}

/*
 * The body's limits into params[1..4] (pointing into v; NULL: leave that
 * limit as it is).  False: answered 400 naming the field.
 */
static bool
limits_of(RemoraRequest *req, const RemoraJson *v, const char **params)
{
	for (const RemoraJson *m = v->child; m; m = m->next)
	{
		int  i = 0;
		char msg[128];

		while (LIMIT_KEYS[i] && strcmp(m->key, LIMIT_KEYS[i]) != 0)
			i++;
		if (LIMIT_KEYS[i] == NULL)
		{
			snprintf(msg, sizeof(msg), "unknown field \"%.64s\"", m->key);
			remora_respond_error(req, 400, "22023", msg,
								 "The fields are weight, max_running, "
								 "max_queued and max_bytes_per_second.",
								 NULL, NULL);
			return false;
		}
		if (m->type == RJ_NULL)
			continue;
		if (m->type != RJ_NUMBER || !integer_text(m->string, i == 3))
		{
			snprintf(msg, sizeof(msg), "invalid %s", LIMIT_KEYS[i]);
			remora_respond_error(req, 400, "22023", msg,
								 i == 3 ? "It must be a JSON integer of at "
										  "most 18 digits, or null."
										: "It must be a JSON integer that "
										  "fits 32 bits, or null.",
								 NULL, LIMIT_KEYS[i]);
			return false;
		}
		params[i + 1] = m->string;
	}
	return true;
}

static void
set_role_limits(RemoraRequest *req, const char *role)
{
	RemoraJson *v = remora_api_json_body(req);
	const char *params[5] = {role, NULL, NULL, NULL, NULL};
	PGresult   *res;

	if (v == NULL)
		return;
	if (!limits_of(req, v, params))
	{
		remora_json_free(v);
		return;
	}
	res = remora_api_query(req,
						   "SELECT remora.set_role_limits($1::pg_catalog.name, "
						   "$2" INT4 ", $3" INT4 ", $4" INT4 ", $5" INT8 ")",
						   5, params);
	remora_json_free(v);
	if (res == NULL)
		return;
	PQclear(res);
	remora_respond(req, 204, NULL, "", 0, NULL, NULL, NULL);
}

/*
 * /api/admin/role-limits/{role}: PUT sets some of the role's limits,
 * DELETE returns them all to the defaults; 204.  The role is the rest of
 * the decoded path, whatever it holds, and travels as a parameter; a name
 * longer than a role's (63 bytes) is refused here, as PostgreSQL would
 * cut it to another role's name.
 */
void
remora_api_role_limit(RemoraRequest *req, const char *role)
{
	size_t len = strlen(role);

	if (strcmp(req->method, "PUT") != 0 && strcmp(req->method, "DELETE") != 0)
	{
		remora_api_method_not_allowed(req, "PUT, DELETE");
		return;
	}
	if (len == 0 || len > 63)
	{
		remora_respond_error(req, 400, "22023", "invalid role",
							 "A role name is 1 to 63 bytes.", NULL, "role");
		return;
	}
	if (strcmp(req->method, "PUT") == 0)
		set_role_limits(req, role);
	else
	{
		const char *params[1] = {role};
		PGresult   *res = remora_api_query(
			  req, "SELECT remora.reset_role_limits($1::pg_catalog.name)", 1,
			  params);

		if (res == NULL)
			return;
		PQclear(res);
		remora_respond(req, 204, NULL, "", 0, NULL, NULL, NULL);
	}
}
