/*-------------------------------------------------------------------------
 *
 * api_session.c
 *	  /api/session: sign in (POST), who is signed in (GET), sign out
 *	  (DELETE).
 *
 * A sign-in always makes a new session (an id known before sign-in is
 * worthless) and answers its CSRF token in the body; the cookie carries
 * the id only (HttpOnly, SameSite=Strict, Secure over TLS).  GET answers
 * the token again to the session's own cookie, so that a reloaded page
 * can go on; signing out ends the session and clears the cookie.
 *
 *-------------------------------------------------------------------------
 */
#include "http/api.h"

#include <stdio.h>
#include <string.h>

static void
session_info(RemoraRequest *req, int status, const char *csrf,
			 const char *set_cookie)
{
	RemoraBuf b = {0};
	bool      admin;
	PGresult *res;

	if (!remora_api_is_admin(req, &admin))
		return;
	/* where a job goes when its form names no bucket or prefix */
	res = remora_api_query(
		req,
		"SELECT coalesce(pg_catalog.current_setting('remora.default_bucket', "
		"true), ''), pg_catalog.rtrim(coalesce(pg_catalog.current_setting("
		"'remora.default_prefix', true), ''), '/')",
		0, NULL);
	if (res == NULL)
		return;
	remora_buf_puts(&b, "{\"user\":");
	remora_buf_json_string_html(&b, remora_pool_role(req->pool));
	remora_buf_printf(&b, ",\"admin\":%s", admin ? "true" : "false");
	remora_buf_puts(&b, ",\"default_bucket\":");
	remora_buf_json_string_html(&b, PQgetvalue(res, 0, 0));
	remora_buf_puts(&b, ",\"default_prefix\":");
	remora_buf_json_string_html(&b, PQgetvalue(res, 0, 1));
	PQclear(res);
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
	RemoraJson      *v = remora_api_json_body(req);
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
		remora_api_bad_request(req, "22023",
							   "\"user\" and \"password\" are required",
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

void
remora_api_session(RemoraRequest *req)
{
	char cookie[256];

	if (strcmp(req->method, "POST") == 0)
	{
		sign_in(req);
		return;
	}
	if (req->pool == NULL)
	{
		remora_api_not_signed_in(req);
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
		remora_api_method_not_allowed(req, "GET, POST, DELETE");
}
