/*-------------------------------------------------------------------------
 *
 * request.h
 *	  One HTTP request as the server (server.c) hands it to the API (api.c).
 *
 * The server has read the whole body (at most remora.http_max_body bytes)
 * and decided who the caller is: req->pool is the signed-in role's
 * connection pool (NULL: nobody signed in), and a state-changing request
 * by session cookie has shown its CSRF token.  The API answers with one
 * of the respond functions, exactly once.
 *
 *-------------------------------------------------------------------------
 */
#ifndef REMORA_HTTP_REQUEST_H
#define REMORA_HTTP_REQUEST_H

#include "http/http.h"

#include <microhttpd.h>

typedef struct RemoraRequest
{
	struct MHD_Connection *conn;
	const char            *method;
	char                  *path;        /* decoded, without the query */
	char                   address[64]; /* the client's */
	RemoraBuf              body;
	bool                   too_large;
	size_t                 dropped; /* bytes of a too large body, unkept */
	bool                   tls;

	/* who asks */
	RemoraPool *pool;
	bool        by_session;
	char        session_id[REMORA_SESSION_ID_LEN + 1];
	PGconn     *db; /* lent by the pool for this request, or NULL */

	bool answered;
	bool close;       /* the answer closes the connection */
	int  retry_after; /* seconds for a 429's or 503's Retry-After; 0: 5 */
} RemoraRequest;

/* respond.c: answers, and what the request carries */
extern const char *remora_req_arg(RemoraRequest *req, const char *name);
extern const char *remora_req_header(RemoraRequest *req, const char *name);
extern void remora_respond(RemoraRequest *req, int status, const char *type,
						   const char *body, size_t len, const char *etag,
						   const char *set_cookie, const char *location);
extern void remora_respond_json(RemoraRequest *req, int status,
								const RemoraBuf *body);
extern void remora_respond_error(RemoraRequest *req, int status,
								 const char *sqlstate, const char *message,
								 const char *detail, const char *hint,
								 const char *field);
extern void remora_respond_response(RemoraRequest *req, int status,
									struct MHD_Response *response);
extern void remora_add_security_headers(RemoraRequest       *req,
										struct MHD_Response *response,
										bool                 html);
extern void remora_session_cookie(RemoraRequest *req, char *out, size_t len,
								  const char *id);

/* auth.c: who asks */
extern bool remora_http_authenticate(RemoraRequest *req);
extern bool remora_req_basic(RemoraRequest *req, char *user, size_t ulen,
							 char *password, size_t plen);

/* api.c */
extern void remora_api_dispatch(RemoraRequest *req);

/* api_admin.c: GET /metrics, outside /api/ where scrapers look for it */
extern void remora_api_metrics(RemoraRequest *req);

#endif /* REMORA_HTTP_REQUEST_H */
