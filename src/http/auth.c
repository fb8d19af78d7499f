/*-------------------------------------------------------------------------
 *
 * auth.c
 *	  Who asks: the session cookie and its CSRF token, HTTP Basic, and the
 *	  Origin of a state-changing request.
 *
 *	  - the session cookie "remora_session", if it names a live session;
 *		then every method but GET and HEAD must carry the session's CSRF
 *		token in the header X-CSRF-Token (403 otherwise);
 *	  - else, on /api/ and /metrics only, HTTP Basic credentials (what a
 *		Prometheus scraper sends), checked like a
 *		sign-in (and throttled the same way).  No answer ever asks for Basic
 *		(no WWW-Authenticate: Basic), so a browser never stores such
 *		credentials for a page to reuse.
 *	  - a state-changing request whose Origin header names another site is
 *		refused whatever it carries.
 *
 * Calls session.c (sessions, sign-in) and respond.c (the refusals).
 *
 *-------------------------------------------------------------------------
 */
#include "http/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

static bool
state_changing(const char *method)
{
	return strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0 &&
		   strcmp(method, "OPTIONS") != 0;
}

/*
 * Does the Origin header, if any, name this server?  Browsers send it with
 * every cross-site state-changing request.
 */
static bool
same_origin(RemoraRequest *req)
{
	const char *origin = remora_req_header(req, "Origin");
	const char *host = remora_req_header(req, "Host");
	const char *rest;

	if (origin == NULL)
		return true;
	if (host == NULL)
		return false;
	if (strncmp(origin, "http://", 7) == 0 && !req->tls)
		rest = origin + 7;
	else if (strncmp(origin, "https://", 8) == 0 && req->tls)
		rest = origin + 8;
	else
		return false;
	return strcmp(rest, host) == 0;
}

/* Basic credentials from the Authorization header: user and password. */
static bool
basic_credentials(RemoraRequest *req, char *user, size_t ulen, char *password,
				  size_t plen)
{
	const char   *h = remora_req_header(req, "Authorization");
	unsigned char decoded[1200];
	size_t        inlen;
	int           n;
	char         *colon;

	if (h == NULL || strncasecmp(h, "Basic ", 6) != 0)
		return false;
	h += 6;
	while (*h == ' ')
		h++;
	inlen = strlen(h);
	if (inlen == 0 || inlen % 4 != 0 || inlen / 4 * 3 >= sizeof(decoded))
		return false;
	n = EVP_DecodeBlock(decoded, (const unsigned char *) h, (int) inlen);
	if (n < 0)
		return false;
	/* EVP_DecodeBlock counts the padding as zero bytes */
	if (inlen >= 1 && h[inlen - 1] == '=')
		n--;
	if (inlen >= 2 && h[inlen - 2] == '=')
		n--;
	decoded[n] = '\0';
	colon = strchr((char *) decoded, ':');
	if (strlen((char *) decoded) != (size_t) n || /* a NUL inside */
		colon == NULL || (size_t) (colon - (char *) decoded) >= ulen ||
		strlen(colon + 1) >= plen)
	{
		OPENSSL_cleanse(decoded, sizeof(decoded)); /* a password, maybe */
		return false;
	}
	*colon = '\0';
	/* both fit: their lengths were checked above */
	memcpy(user, decoded, colon - (char *) decoded + 1);
	memcpy(password, colon + 1, strlen(colon + 1) + 1);
	OPENSSL_cleanse(decoded, sizeof(decoded));
	return true;
}

/*
 * The request's HTTP Basic credentials (see basic_credentials), for an
 * event stream that checks them again while it lasts.  The caller wipes
 * the password when done.
 */
bool
remora_req_basic(RemoraRequest *req, char *user, size_t ulen, char *password,
				 size_t plen)
{
	return basic_credentials(req, user, ulen, password, plen);
}

/*
 * Decide who the caller is (req->pool); false when the request has been
 * answered already (refused).
 */
bool
remora_http_authenticate(RemoraRequest *req)
{
	const char *cookie = MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND,
													 "remora_session");
	char        user[128], password[1100];
	bool        api = strncmp(req->path, "/api/", 5) == 0 ||
			   strcmp(req->path, "/metrics") == 0;

	if (api && state_changing(req->method) && !same_origin(req))
	{
		remora_respond_error(req, 403, "42501", "cross-origin request refused",
							 NULL, NULL, NULL);
		return false;
	}
	if (cookie && cookie[0])
	{
		char csrf[REMORA_SESSION_ID_LEN + 1];

		req->pool = remora_session_lookup(cookie, true, csrf);
		if (req->pool)
		{
			const char *token = remora_req_header(req, "X-CSRF-Token");

			req->by_session = true;
			snprintf(req->session_id, sizeof(req->session_id), "%s", cookie);
			if (state_changing(req->method) &&
				!(token && remora_equal_secret(token, csrf)))
			{
				/* signing in again needs no token: a new session is made */
				if (!(strcmp(req->path, "/api/session") == 0 &&
					  strcmp(req->method, "POST") == 0))
				{
					remora_respond_error(
						req, 403, "42501", "missing or wrong CSRF token",
						"Every request that changes something must carry the "
						"session's token in the X-CSRF-Token header.",
						"Sign in again to get a new token.", NULL);
					return false;
				}
			}
			return true;
		}
	}
	if (api &&
		basic_credentials(req, user, sizeof(user), password, sizeof(password)))
	{
		RemoraAuthResult r;
		int              retry_after;
		char             err[256];

		r = remora_http_login(user, password, req->address, &req->pool,
							  &retry_after, err, sizeof(err));
		OPENSSL_cleanse(password, sizeof(password));
		if (r != REMORA_AUTH_OK)
		{
			req->retry_after = retry_after;
			remora_respond_error(req,
								 r == REMORA_AUTH_THROTTLED     ? 429
								 : r == REMORA_AUTH_UNAVAILABLE ? 503
																: 401,
								 r == REMORA_AUTH_UNAVAILABLE ? "57P03"
															  : "28P01",
								 err, NULL, NULL, NULL);
			return false;
		}
	}
	return true;
}
