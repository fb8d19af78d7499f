/*-------------------------------------------------------------------------
 *
 * api_admin.c
 *	  /api/stats, /api/workers, /api/admin/grants: views for remora_admin.
 *
 * Each is one view read as the signed-in role, after asking PostgreSQL
 * whether the role is a member of remora_admin (403 otherwise); the views
 * themselves are granted to remora_admin only, so the check only makes
 * the refusal clear.
 *
 *-------------------------------------------------------------------------
 */
#include "http/api.h"

#include <string.h>

static void
admin_view(RemoraRequest *req, const char *sql)
{
	bool      admin;
	PGresult *res;

	if (strcmp(req->method, "GET") != 0)
	{
		remora_api_method_not_allowed(req, "GET");
		return;
	}
	if (!remora_api_is_admin(req, &admin))
		return;
	if (!admin)
	{
		remora_respond_error(req, 403, "42501",
							 "permission denied: remora_admin only", NULL,
							 "GRANT remora_admin to the role.", NULL);
		return;
	}
	if ((res = remora_api_query(req, sql, 0, NULL)) != NULL)
		remora_api_respond_value(req, 200, res, "nothing");
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

void
remora_api_grants(RemoraRequest *req)
{
	admin_view(req, "SELECT pg_catalog.json_build_object('targets', (SELECT "
					"coalesce(pg_catalog.json_agg(pg_catalog.to_json(t) "
					"ORDER BY t.role, t.bucket, t.prefix_pattern), '[]') "
					"FROM @extschema@.remora_target_grants t), "
					"'sources', (SELECT coalesce(pg_catalog.json_agg("
					"pg_catalog.to_json(s) ORDER BY s.role, s.bucket, "
					"s.prefix_pattern, s.endpoint), '[]') "
					"FROM @extschema@.remora_source_grants s))");
}
