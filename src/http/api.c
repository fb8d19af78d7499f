/*-------------------------------------------------------------------------
 *
 * api.c
 *	  The JSON API of the remora HTTP server: which resource answers a
 *	  path (src/http/README.md has the table of routes).
 *
 * Each endpoint is one call of the SQL contract (remora_submit,
 * remora_cancel, remora_delete, remora_result, remora_presign, the views)
 * on a connection of the signed-in role, so that grants and row-level
 * security decide, exactly as in psql.  Parameters travel as query
 * parameters, never spliced into SQL; JSON answers are built by
 * PostgreSQL (to_json of the views' rows), so a job's label or source
 * reaches the client as a JSON string, whatever it contains.  Every path
 * but /api/session and /api/openapi.json needs a signed-in caller (401
 * otherwise).  The OpenAPI document of these routes is a file of the web
 * client, web/api/openapi.json, compiled in with the others (embed.sh):
 * it is reviewed as data, and served to anyone, as it holds no secret.
 *
 * Calls the resources' files (api.h); server.c calls it.
 *
 *-------------------------------------------------------------------------
 */
#include "http/api.h"

#include <stdio.h>
#include <string.h>

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

/*
 * GET /api/openapi.json: the document compiled in from web/api/ (the
 * static files never answer under /api/, so this is its only path).
 */
static void
openapi_document(RemoraRequest *req)
{
	if (strcmp(req->method, "GET") != 0)
	{
		remora_api_method_not_allowed(req, "GET");
		return;
	}
	for (const RemoraAsset *a = remora_assets; a->path; a++)
	{
		if (strcmp(a->path, req->path) == 0)
		{
			RemoraBuf b = {.data = (char *) a->data, .len = a->len};

			remora_respond_json(req, 200, &b);
			return;
		}
	}
	remora_respond_error(req, 404, "P0002", "no such path", NULL, NULL, NULL);
}

/* --- routing ---------------------------------------------------------------
 */

void
remora_api_dispatch(RemoraRequest *req)
{
	const char *path = req->path;

	if (strcmp(path, "/api/session") == 0)
	{
		remora_api_session(req);
		return;
	}
	if (strcmp(path, "/api/openapi.json") == 0)
	{
		openapi_document(req);
		return;
	}
	if (req->pool == NULL)
	{
		remora_api_not_signed_in(req);
		return;
	}
	if (strcmp(path, "/api/jobs") == 0)
		remora_api_jobs(req);
	else if (strncmp(path, "/api/jobs/", 10) == 0)
	{
		char        id[24];
		const char *rest = path_id(req, path + 10, id, "invalid job id",
								   "A job id is a positive integer.", "job_id");

		if (rest)
			remora_api_job(req, id, rest);
	}
	else if (strcmp(path, "/api/exports") == 0)
		remora_api_exports(req);
	else if (strncmp(path, "/api/exports/", 13) == 0)
	{
		char        id[24];
		const char *rest =
			path_id(req, path + 13, id, "invalid export id",
					"An export id is a positive integer.", "export_id");

		if (rest)
			remora_api_export(req, id, rest);
	}
	else if (strcmp(path, "/api/events") == 0)
		remora_api_events(req);
	else if (strcmp(path, "/api/throughput") == 0)
		remora_api_throughput(req);
	else if (strcmp(path, "/api/stats") == 0)
		remora_api_stats(req);
	else if (strcmp(path, "/api/workers") == 0)
		remora_api_workers(req);
	else if (strcmp(path, "/api/admin/grants") == 0)
		remora_api_grants(req);
	else if (strcmp(path, "/api/admin/role-limits") == 0)
		remora_api_role_limits(req);
	else if (strncmp(path, "/api/admin/role-limits/", 23) == 0)
		remora_api_role_limit(req, path + 23);
	else
		remora_respond_error(req, 404, "P0002", "no such path", NULL, NULL,
							 NULL);
}
