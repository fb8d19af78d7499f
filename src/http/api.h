/*-------------------------------------------------------------------------
 *
 * api.h
 *	  What the files of the JSON API share: the route of each resource,
 *	  and running SQL for a request (api_query.c).
 *
 * api.c routes a request to one resource's file (api_session.c,
 * api_jobs.c, api_exports.c, api_events.c, api_admin.c); each of those
 * runs its SQL through api_query.c, which answers SQL errors in the API's
 * shape.  Calls go that way only: api.c -> a resource -> api_query.c ->
 * respond.c, session.c.  (api_jobs.c also hands POST
 * /api/jobs/{id}/export to api_exports.c.)
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_HTTP_API_H
#define REMORA_HTTP_API_H

#include "http/request.h"

#include "engine/common/json.h"

#define LIST_MAX_LIMIT 1000
#define LIST_DEFAULT   50

/*
 * The API's SQL names every object by schema, so that nothing resolves
 * through a schema a user could write to (the sessions also run with
 * search_path = pg_catalog, pg_temp; session.c): built-in functions, types
 * and operators by pg_catalog, Remora's tables and protocol by remora, and
 * the views and functions of the extension's schema (public by default,
 * chosen at CREATE EXTENSION) by @extschema@, which remora_api_exec_sql
 * replaces with that schema as the connections found it.  An operator written
 * OPERATOR(...) binds as any operator but the common ones do: mind the
 * parentheses.
 */
#define EQ       " OPERATOR(pg_catalog.=) "
#define LT       " OPERATOR(pg_catalog.<) "
#define GT       " OPERATOR(pg_catalog.>) "
#define NE       " OPERATOR(pg_catalog.<>) "
#define MINUS    " OPERATOR(pg_catalog.-) "
#define CONCAT   " OPERATOR(pg_catalog.||) "
#define ARROW    " OPERATOR(pg_catalog.->) "
#define ARROWTXT " OPERATOR(pg_catalog.->>) "
#define MATCHES  " OPERATOR(pg_catalog.~) "
#define INT4     "::pg_catalog.int4"
#define INT8     "::pg_catalog.int8"
#define TEXT     "::pg_catalog.text"
#define JSONB    "::pg_catalog.jsonb"

/* the body's options (b): a JSON null or none at all is no option */
#define OPTIONS                                                                \
	"CASE WHEN pg_catalog.jsonb_typeof(b" ARROW "'options')" EQ "'object' "    \
	"THEN b" ARROW "'options' ELSE '{}'" JSONB " END"

/* api_query.c */
extern PGresult *remora_api_exec_sql(PGconn *conn, const char *sql, int nparams,
									 const char *const *params);
extern PGresult *remora_api_query(RemoraRequest *req, const char *sql,
								  int nparams, const char *const *params);
extern void      remora_api_respond_value(RemoraRequest *req, int status,
										  PGresult *res, const char *missing);
extern void      remora_api_not_signed_in(RemoraRequest *req);
extern void      remora_api_method_not_allowed(RemoraRequest *req,
											   const char    *allow);
extern void remora_api_bad_request(RemoraRequest *req, const char *sqlstate,
								   const char *message, const char *field);
extern RemoraJson *remora_api_json_body(RemoraRequest *req);
extern bool remora_api_check_fields(RemoraRequest *req, const RemoraJson *v,
									const char *const *allowed,
									const char        *list);
extern bool remora_api_idempotency_key(RemoraRequest    *req,
									   const RemoraJson *body,
									   const char      **key);
extern bool remora_api_is_admin(RemoraRequest *req, bool *admin);

/* the resources: each answers its paths, any method */
extern void remora_api_session(RemoraRequest *req); /* api_session.c */
extern void remora_api_jobs(RemoraRequest *req);    /* api_jobs.c */
extern void remora_api_throughput(RemoraRequest *req);
extern void remora_api_job(RemoraRequest *req, const char *id,
						   const char *rest);
extern void remora_api_exports(RemoraRequest *req); /* api_exports.c */
extern void remora_api_export(RemoraRequest *req, const char *id,
							  const char *rest);
extern void remora_api_export_job(RemoraRequest *req, const char *id);
extern void remora_api_events(RemoraRequest *req); /* api_events.c */
extern void remora_api_stats(RemoraRequest *req);  /* api_admin.c */
extern void remora_api_workers(RemoraRequest *req);
extern void remora_api_grants(RemoraRequest *req);
extern void remora_api_role_limits(RemoraRequest *req);
extern void remora_api_role_limit(RemoraRequest *req, const char *role);

#endif /* REMORA_HTTP_API_H */
